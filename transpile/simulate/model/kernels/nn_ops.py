"""Losses, softmax, embeddings, conv2d / pool2d."""
from __future__ import annotations

import numpy as np

from ..values import LazyTable, SelectedRows, SimError, dense
from .registry import kernel


def _softmax(x, axis=-1):
    z = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


@kernel("softmax")
def softmax(ctx):
    x = dense(ctx.x("X"))
    ctx.set("Out", _softmax(x, ctx.attr("axis", -1)), lod=ctx.lod("X"))


@kernel("softmax_grad")
def softmax_grad(ctx):
    o, d = dense(ctx.x("Out")), dense(ctx.x("Out@GRAD"))
    axis = ctx.attr("axis", -1)
    ctx.set("X@GRAD", o * (d - np.sum(d * o, axis=axis, keepdims=True)))


def _hard_labels(label, n_class, ignore):
    lab = np.asarray(label).astype(np.int64)
    ok = lab != ignore
    if np.any((lab[ok] < 0) | (lab[ok] >= n_class)):
        raise SimError("label out of range [0, %d)" % n_class)
    return lab, ok


def _swce_last(ctx, *arrays):
    """The arrays with the op's `axis` moved last (and that axis)."""
    nd = arrays[0].ndim
    axis = ctx.attr("axis", -1) % nd
    if axis == nd - 1:
        return axis, arrays
    return axis, tuple(np.moveaxis(a, axis, -1) if a.ndim == nd else a for a in arrays)


def _swce_back(axis, nd, a):
    return a if axis == nd - 1 else np.moveaxis(a, -1, axis)


@kernel("softmax_with_cross_entropy")
def softmax_with_cross_entropy(ctx):
    logits0 = dense(ctx.x("Logits"))
    axis, (logits, label) = _swce_last(ctx, logits0, dense(ctx.x("Label")))
    # use_softmax=False: Logits already are probabilities (Paddle's cross_entropy(use_softmax=False))
    sm = _softmax(logits, -1) if ctx.attr("use_softmax", True) else logits
    if ctx.attr("soft_label", False):
        loss = -np.sum(label * np.log(np.maximum(sm, 1e-300)), axis=-1, keepdims=True)
    else:
        lab, ok = _hard_labels(label, logits.shape[-1], ctx.attr("ignore_index", -100))
        idx = np.where(ok, lab, 0)
        picked = np.take_along_axis(sm, idx.reshape(sm.shape[:-1] + (1,)), axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.where(ok.reshape(picked.shape), -np.log(picked), 0.0)
    nd = logits0.ndim
    ctx.set("Softmax", _swce_back(axis, nd, sm), lod=ctx.lod("Logits"))
    ctx.set("Loss", _swce_back(axis, nd, loss.astype(logits.dtype)), lod=ctx.lod("Logits"))


@kernel("softmax_with_cross_entropy_grad")
def softmax_with_cross_entropy_grad(ctx):
    sm0 = dense(ctx.x("Softmax"))
    axis, (sm, label, d) = _swce_last(ctx, sm0, dense(ctx.x("Label")),
                                      dense(ctx.x("Loss@GRAD")))
    if ctx.attr("soft_label", False):
        g = (sm - label) * d
    else:
        lab, ok = _hard_labels(label, sm.shape[-1], ctx.attr("ignore_index", -100))
        onehot = np.zeros_like(sm)
        idx = np.where(ok, lab, 0).reshape(sm.shape[:-1] + (1,))
        np.put_along_axis(onehot, idx, 1.0, axis=-1)
        if ctx.attr("use_softmax", True):
            g = (sm - onehot) * d
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                g = np.where(onehot > 0, -d / sm, 0.0)
        g = g * ok.reshape(sm.shape[:-1] + (1,))
    ctx.set("Logits@GRAD", _swce_back(axis, sm0.ndim, g))


@kernel("cross_entropy", "cross_entropy2")
def cross_entropy(ctx):
    x = dense(ctx.x("X"))
    label = dense(ctx.x("Label"))
    if ctx.attr("soft_label", False):
        y = -np.sum(label * np.log(x), axis=-1, keepdims=True)
        ctx.set("Y", y)
        return
    lab, ok = _hard_labels(label, x.shape[-1], ctx.attr("ignore_index", -100))
    idx = np.where(ok, lab, 0).reshape(x.shape[:-1] + (1,))
    match = np.take_along_axis(x, idx, axis=-1)
    y = np.where(ok.reshape(match.shape), -np.log(match), 0.0)
    ctx.set("Y", y.astype(x.dtype), lod=ctx.lod("X"))
    if ctx.wants("MatchX"):
        ctx.set("MatchX", match)
    if ctx.wants("XShape"):
        # Paddle 2.6 declares cross_entropy2's XShape as X's dims then a 0
        ctx.set("XShape", np.zeros(x.shape + (0,)))


@kernel("cross_entropy_grad", "cross_entropy_grad2")
def cross_entropy_grad(ctx):
    d = dense(ctx.x("Y@GRAD"))
    label = dense(ctx.x("Label"))
    if ctx.op.type == "cross_entropy_grad2":
        match = dense(ctx.x("MatchX"))
        xs = np.shape(ctx.x("XShape"))
        shape = xs[:-1] if xs[-1] == 0 else xs[1:]
        g = np.zeros(shape)
        lab, ok = _hard_labels(label, shape[-1], ctx.attr("ignore_index", -100))
        idx = np.where(ok, lab, 0).reshape(tuple(shape[:-1]) + (1,))
        np.put_along_axis(g, idx, np.where(ok.reshape(idx.shape), -d / match, 0.0), axis=-1)
        ctx.set("X@GRAD", g)
        return
    x = dense(ctx.x("X"))
    if ctx.attr("soft_label", False):
        ctx.set("X@GRAD", -label / x * d)
        return
    lab, ok = _hard_labels(label, x.shape[-1], ctx.attr("ignore_index", -100))
    idx = np.where(ok, lab, 0).reshape(x.shape[:-1] + (1,))
    match = np.take_along_axis(x, idx, axis=-1)
    g = np.zeros_like(x)
    np.put_along_axis(g, idx, np.where(ok.reshape(idx.shape), -d / match, 0.0), axis=-1)
    ctx.set("X@GRAD", g, lod=ctx.lod("X"))


def _sce_mask(ctx, label):
    ignore = ctx.attr("ignore_index", -100)
    ok = label != ignore
    norm = max(int(ok.sum()), 1) if ctx.attr("normalize", False) else 1
    return ok, norm


@kernel("sigmoid_cross_entropy_with_logits")
def sigmoid_cross_entropy_with_logits(ctx):
    x, label = dense(ctx.x("X")), dense(ctx.x("Label"))
    ok, norm = _sce_mask(ctx, label)
    loss = np.maximum(x, 0) - x * label + np.log1p(np.exp(-np.abs(x)))
    ctx.set("Out", np.where(ok, loss, 0.0) / norm, lod=ctx.lod("X"))


@kernel("sigmoid_cross_entropy_with_logits_grad")
def sigmoid_cross_entropy_with_logits_grad(ctx):
    x, label = dense(ctx.x("X")), dense(ctx.x("Label"))
    d = dense(ctx.x("Out@GRAD"))
    ok, norm = _sce_mask(ctx, label)
    g = (1.0 / (1.0 + np.exp(-x)) - label) * d
    ctx.set("X@GRAD", np.where(ok, g, 0.0) / norm, lod=ctx.lod("X"))


# --- embeddings -------------------------------------------------------------------------
def _ids(ctx):
    ids = np.asarray(dense(ctx.x("Ids"))).astype(np.int64)
    if ctx.op.type.startswith("lookup_table_v2") or ctx.op.type == "lookup_table_grad":
        # (lookup_table's grad kernel reads the ids flat, whatever their last dim)
        return ids, ids.shape
    if ids.shape[-1] != 1:
        raise SimError("lookup_table: Ids must end in a dim of 1, got %s" % (ids.shape,))
    return ids, ids.shape[:-1]


@kernel("lookup_table", "lookup_table_v2")
def lookup_table(ctx):
    w = ctx.x("W")
    ids, lead = _ids(ctx)
    flat = ids.reshape(-1)
    if isinstance(w, SelectedRows):
        out = _rows_by_id(ctx, w, flat)
        ctx.set("Out", out.reshape(tuple(lead) + w.value.shape[1:]), lod=ctx.lod("Ids"))
        return
    if flat.size and (flat.min() < 0 or flat.max() >= w.shape[0]):
        raise SimError("%s: id %d outside the %d rows of %s"
                       % (ctx.op.type, int(flat.max()), w.shape[0], ctx.op.input("W")[0]))
    out = w.get(flat) if isinstance(w, LazyTable) else w[flat]
    pad = ctx.attr("padding_idx", -1)
    if pad is not None and pad != -1:
        out = np.where((flat == pad)[:, None], 0.0, out)
    ctx.set("Out", out.reshape(tuple(lead) + w.shape[1:]), lod=ctx.lod("Ids"))


def _rows_by_id(ctx, w: SelectedRows, flat):
    """A lookup in a SelectedRows W (Paddle's sparse-weight kernels): each id's row is the
    value of its first place in W's rows; an id W lacks is an error, a padding id zeros."""
    first: dict = {}
    for j, r in enumerate(w.rows.tolist()):
        first.setdefault(int(r), j)
    pad = ctx.attr("padding_idx", -1)
    pad = -1 if pad is None else int(pad)
    out = np.zeros((flat.size,) + w.value.shape[1:], dtype=w.value.dtype)
    for k, i in enumerate(flat.tolist()):
        if i == pad and pad != -1:
            continue
        if i not in first:
            raise SimError("%s: id %d is not in the rows of the SelectedRows %s (Paddle: "
                           "\"Input id is not in current rows table\")"
                           % (ctx.op.type, i, ctx.op.input("W")[0]))
        out[k] = w.value[first[i]]
    return out


@kernel("lookup_table_grad", "lookup_table_v2_grad")
def lookup_table_grad(ctx):
    wshape = ctx.shape("W")      # only the dims: W may be a fake_init'ed table
    height, width = wshape[0], wshape[1:]
    ids, _ = _ids(ctx)
    flat = ids.reshape(-1)
    d = dense(ctx.x("Out@GRAD")).reshape((flat.size,) + tuple(width))
    pad = ctx.attr("padding_idx", -1)
    if ctx.attr("is_sparse", False):
        # Paddle 2.6.2's sparse grad keeps the padding id's rows (only the dense grad zeroes
        # them): with is_sparse the optimizer moves the padding row, whose output stays 0
        ctx.set("W@GRAD", SelectedRows(flat, d, height))
    else:
        if pad is not None and pad != -1:
            d = np.where((flat == pad)[:, None], 0.0, d)
        g = np.zeros((height,) + tuple(width), dtype=d.dtype)
        np.add.at(g, flat, d)
        ctx.set("W@GRAD", g)


# --- conv2d / pool2d --------------------------------------------------------------------
def _pads(ctx, ksize, in_hw, strides, dil):
    algo = ctx.attr("padding_algorithm", "EXPLICIT")
    p = list(ctx.attr("paddings", [0, 0]))
    if algo == "VALID":
        return [0, 0, 0, 0]
    if algo == "SAME":
        out = []
        for i in range(2):
            o = -(-in_hw[i] // strides[i])
            need = max((o - 1) * strides[i] + (ksize[i] - 1) * dil[i] + 1 - in_hw[i], 0)
            out += [need // 2, need - need // 2]
        return out
    if len(p) == 2:
        return [p[0], p[0], p[1], p[1]]
    return p


def _windows(x, kh, kw, sh, sw, dh, dw):
    """x [N,C,H,W] (already padded) -> [N,C,OH,OW,kh,kw]."""
    n, c, h, w = x.shape
    oh = (h - (dh * (kh - 1) + 1)) // sh + 1
    ow = (w - (dw * (kw - 1) + 1)) // sw + 1
    out = np.empty((n, c, oh, ow, kh, kw), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            out[..., i, j] = x[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                               j * dw:j * dw + sw * (ow - 1) + 1:sw]
    return out


def _nhwc(ctx, attr="data_format"):
    fmt = ctx.attr(attr, "NCHW") or "NCHW"
    if fmt not in ("NCHW", "NHWC", "AnyLayout"):
        raise SimError("%s: data format %s is not simulated" % (ctx.op.type, fmt))
    return fmt == "NHWC"


def _to_nchw(a, nhwc):
    return np.transpose(a, (0, 3, 1, 2)) if nhwc else a


def _from_nchw(a, nhwc):
    return np.transpose(a, (0, 2, 3, 1)) if nhwc else a


def _conv_setup(ctx):
    nhwc = _nhwc(ctx)
    x, w = _to_nchw(dense(ctx.x("Input")), nhwc), dense(ctx.x("Filter"))
    s = list(ctx.attr("strides", [1, 1]))
    d = list(ctx.attr("dilations", [1, 1]))
    if ctx.attr("padding_algorithm", "EXPLICIT") == "SAME":
        d = [1, 1]          # Paddle ignores the dilations under SAME padding
    g = ctx.attr("groups", 1) or 1
    p = _pads(ctx, w.shape[2:], x.shape[2:], s, d)
    return x, w, s, d, g, p, nhwc


@kernel("conv2d", "depthwise_conv2d")
def conv2d(ctx):
    x, w, s, d, g, p, nhwc = _conv_setup(ctx)
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[1]), (p[2], p[3])))
    win = _windows(xp, w.shape[2], w.shape[3], s[0], s[1], d[0], d[1])
    c = x.shape[1]
    oc = w.shape[0]
    cg, og = c // g, oc // g
    if w.shape[1] != cg:
        raise SimError("%s: Filter %s for %d input channels in %d groups"
                       % (ctx.op.type, list(w.shape), c, g))
    outs = []
    for gi in range(g):
        wi = win[:, gi * cg:(gi + 1) * cg]
        outs.append(np.einsum("nchwij,ocij->nohw", wi, w[gi * og:(gi + 1) * og]))
    ctx.set("Output", _from_nchw(np.concatenate(outs, axis=1), nhwc))


@kernel("conv2d_grad", "depthwise_conv2d_grad")
def conv2d_grad(ctx):
    x, w, s, d, g, p, nhwc = _conv_setup(ctx)
    dout = _to_nchw(dense(ctx.x("Output@GRAD")), nhwc)
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[1]), (p[2], p[3])))
    kh, kw = w.shape[2:]
    win = _windows(xp, kh, kw, s[0], s[1], d[0], d[1])
    c, oc = x.shape[1], w.shape[0]
    cg, og = c // g, oc // g
    oh, ow = dout.shape[2:]
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    for gi in range(g):
        dg = dout[:, gi * og:(gi + 1) * og]
        wg = w[gi * og:(gi + 1) * og]
        dw[gi * og:(gi + 1) * og] = np.einsum("nchwij,nohw->ocij", win[:, gi * cg:(gi + 1) * cg], dg)
        dwin = np.einsum("nohw,ocij->nchwij", dg, wg)
        for i in range(kh):
            for j in range(kw):
                dxp[:, gi * cg:(gi + 1) * cg, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                    j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]] += dwin[..., i, j]
    if ctx.wants("Input@GRAD"):
        ctx.set("Input@GRAD", _from_nchw(dxp[:, :, p[0]:xp.shape[2] - p[1],
                                             p[2]:xp.shape[3] - p[3]], nhwc))
    if ctx.wants("Filter@GRAD"):
        ctx.set("Filter@GRAD", dw)


def _pool_setup(ctx):
    """(x as NCHW, ksize, strides, pads [top, bottom, left, right], extra bottom/right padding
    that ceil_mode adds, whether NHWC)."""
    nhwc = _nhwc(ctx, "data_format")
    x = _to_nchw(dense(ctx.x("X")), nhwc)
    k = list(ctx.attr("ksize", [1, 1]))
    s = list(ctx.attr("strides", [1, 1]))
    if ctx.attr("global_pooling", False):
        k, s, p = list(x.shape[2:]), [1, 1], [0, 0, 0, 0]
    else:
        p = _pads(ctx, k, x.shape[2:], s, [1, 1])
    extra = [0, 0]
    if ctx.attr("ceil_mode", False) and not ctx.attr("global_pooling", False):
        for i in range(2):
            span = x.shape[2 + i] + p[2 * i] + p[2 * i + 1] - k[i]
            o = -(-span // s[i]) + 1
            extra[i] = max((o - 1) * s[i] + k[i] - (x.shape[2 + i] + p[2 * i] + p[2 * i + 1]), 0)
    return x, k, s, p, extra, nhwc


def _adaptive_bins(n, o):
    return [(i * n // o, -(-(i + 1) * n // o)) for i in range(o)]


def _adaptive_pool(ctx, x):
    oh, ow = (list(ctx.attr("ksize", [1, 1])) * 2)[:2]
    kind = ctx.attr("pooling_type", "max")
    out = np.empty(x.shape[:2] + (oh, ow), dtype=x.dtype)
    for i, (a, b) in enumerate(_adaptive_bins(x.shape[2], oh)):
        for j, (c, d) in enumerate(_adaptive_bins(x.shape[3], ow)):
            seg = x[:, :, a:b, c:d]
            out[:, :, i, j] = seg.max(axis=(2, 3)) if kind == "max" else seg.mean(axis=(2, 3))
    return out


def _pool_div(ctx, x, k, s, p, extra):
    """Each window's divisor for avg pooling: its count of real elements (exclusive) or of
    elements within the explicit padding (Paddle clips a ceil_mode window to it)."""
    h, w = x.shape[2:]
    real = np.pad(np.ones((h, w)), ((p[0], p[1] + extra[0]), (p[2], p[3] + extra[1])))
    if not ctx.attr("exclusive", True):
        real = np.pad(np.ones((h + p[0] + p[1], w + p[2] + p[3])), ((0, extra[0]), (0, extra[1])))
    return _windows(real[None, None], k[0], k[1], s[0], s[1], 1, 1).sum(axis=(-1, -2))


@kernel("pool2d")
def pool2d(ctx):
    x, k, s, p, extra, nhwc = _pool_setup(ctx)
    if ctx.attr("adaptive", False):
        ctx.set("Out", _from_nchw(_adaptive_pool(ctx, x), nhwc))
        return
    kind = ctx.attr("pooling_type", "max")
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[1] + extra[0]), (p[2], p[3] + extra[1])),
                constant_values=fill)
    win = _windows(xp, k[0], k[1], s[0], s[1], 1, 1)
    if kind == "max":
        out = win.max(axis=(-1, -2))
    else:
        out = win.sum(axis=(-1, -2)) / _pool_div(ctx, x, k, s, p, extra)
    ctx.set("Out", _from_nchw(out, nhwc))


@kernel("pool2d_grad")
def pool2d_grad(ctx):
    x, k, s, p, extra, nhwc = _pool_setup(ctx)
    kind = ctx.attr("pooling_type", "max")
    dout = _to_nchw(dense(ctx.x("Out@GRAD")), nhwc)
    if ctx.attr("adaptive", False):
        g = np.zeros_like(x)
        oh, ow = dout.shape[2:]
        for i, (a, b) in enumerate(_adaptive_bins(x.shape[2], oh)):
            for j, (c, d) in enumerate(_adaptive_bins(x.shape[3], ow)):
                seg = x[:, :, a:b, c:d]
                if kind == "max":
                    flat = seg.reshape(seg.shape[:2] + (-1,))
                    first = np.zeros_like(flat)
                    np.put_along_axis(first, flat.argmax(axis=-1)[..., None], 1.0, axis=-1)
                    g[:, :, a:b, c:d] += first.reshape(seg.shape) \
                        * dout[:, :, i, j][..., None, None]
                else:
                    g[:, :, a:b, c:d] += dout[:, :, i, j][..., None, None] / seg[0, 0].size
        ctx.set("X@GRAD", _from_nchw(g, nhwc))
        return
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[1] + extra[0]), (p[2], p[3] + extra[1])),
                constant_values=fill)
    win = _windows(xp, k[0], k[1], s[0], s[1], 1, 1)
    oh, ow = dout.shape[2:]
    if kind == "max":
        m = win == win.max(axis=(-1, -2), keepdims=True)
        # Paddle routes the gradient to the first maximum only
        flat = m.reshape(m.shape[:4] + (-1,))
        first = np.zeros_like(flat)
        np.put_along_axis(first, flat.argmax(axis=-1)[..., None], True, axis=-1)
        dwin = first.reshape(m.shape) * dout[..., None, None]
    else:
        div = _pool_div(ctx, x, k, s, p, extra)
        dwin = np.broadcast_to((dout / div)[..., None, None], win.shape)
    dxp = np.zeros(xp.shape)
    for i in range(k[0]):
        for j in range(k[1]):
            dxp[:, :, i:i + s[0] * (oh - 1) + 1:s[0], j:j + s[1] * (ow - 1) + 1:s[1]] += dwin[..., i, j]
    ctx.set("X@GRAD", _from_nchw(dxp[:, :, p[0]:p[0] + x.shape[2], p[2]:p[2] + x.shape[3]], nhwc))
