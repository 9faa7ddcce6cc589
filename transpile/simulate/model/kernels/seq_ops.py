"""Sequence (LoD) ops: sequence_pool (of one or two LoD levels), sequence_softmax,
sequence_concat, sequence_expand(_as), sequence_pad / unpad, sequence_conv, sequence_mask; and
the dense ops dropout and log_softmax."""
from __future__ import annotations


import numpy as np

from ..values import SimError, dense, np_dtype
from .registry import kernel


def _spans(off):
    """(sequence i, its first row, the row after its last) of LoD offsets `off`."""
    return ((i, a, b) for i, (a, b) in enumerate(zip(off[:-1], off[1:])))


def _grad_of_x(ctx, lod_slot: str):
    """(the offsets of `lod_slot`'s LoD, Out@GRAD, zeros like X in Out@GRAD's dtype): what a
    grad that scatters Out@GRAD back over X's rows starts from."""
    d = dense(ctx.x("Out@GRAD"))
    return _offsets(ctx, lod_slot), d, np.zeros_like(dense(ctx.x("X")), dtype=d.dtype)


def _offsets(ctx, slot, i=0):
    lod = ctx.lod(slot, i)
    if not lod:
        raise SimError("%s: %s has no LoD (sequence info)"
                       % (ctx.op.type, ctx.op.input(slot)[i]))
    return [int(v) for v in lod[-1]]


def _seq_softmax(x, off):
    out = np.empty_like(x)
    for a, b in zip(off[:-1], off[1:]):
        if b > a:
            z = x[a:b] - x[a:b].max()
            e = np.exp(z)
            out[a:b] = e / e.sum()
    return out


@kernel("sequence_softmax")
def sequence_softmax(ctx):
    """Softmax over the rows of each sequence (X is [total] or [total, 1])."""
    x = dense(ctx.x("X"))
    off = _offsets(ctx, "X")
    if off[-1] != x.shape[0] or x.size != x.shape[0]:
        raise SimError("sequence_softmax: X %s for a LoD ending at %d" % (x.shape, off[-1]))
    ctx.set("Out", _seq_softmax(x.reshape(-1), off).reshape(x.shape), lod=ctx.lod("X"))


@kernel("sequence_softmax_grad")
def sequence_softmax_grad(ctx):
    o = dense(ctx.x("Out"))
    d = dense(ctx.x("Out@GRAD"))
    lod = ctx.lod("Out") or ctx.lod("X")
    if not lod:
        raise SimError("sequence_softmax_grad: no LoD")
    off = [int(v) for v in lod[-1]]
    of, df = o.reshape(-1), d.reshape(-1)
    g = np.zeros_like(of)
    for a, b in zip(off[:-1], off[1:]):
        g[a:b] = of[a:b] * (df[a:b] - (df[a:b] * of[a:b]).sum())
    ctx.set("X@GRAD", g.reshape(o.shape), lod=lod)


@kernel("sequence_concat")
def sequence_concat(ctx):
    """Sequence i of the output is sequence i of each input, one after the other."""
    xs = [dense(v) for v in ctx.xs("X")]
    offs = [_offsets(ctx, "X", i) for i in range(len(xs))]
    n = len(offs[0]) - 1
    if any(len(o) - 1 != n for o in offs):
        raise SimError("sequence_concat: inputs with different numbers of sequences")
    parts, lod = [], [0]
    for s in range(n):
        for x, o in zip(xs, offs):
            parts.append(x[o[s]:o[s + 1]])
        lod.append(lod[-1] + sum(o[s + 1] - o[s] for o in offs))
    ctx.set("Out", np.concatenate(parts, axis=0), lod=[lod])


@kernel("sequence_concat_grad")
def sequence_concat_grad(ctx):
    xs = [dense(v) for v in ctx.xs("X")]
    offs = [_offsets(ctx, "X", i) for i in range(len(xs))]
    d = dense(ctx.x("Out@GRAD"))
    grads = [np.zeros_like(x) for x in xs]
    pos = 0
    for s in range(len(offs[0]) - 1):
        for g, o in zip(grads, offs):
            n = o[s + 1] - o[s]
            g[o[s]:o[s + 1]] = d[pos:pos + n]
            pos += n
    ctx.set_each("X@GRAD", grads, lod_of="X")


@kernel("sequence_expand_as")
def sequence_expand_as(ctx):
    """Row i of X repeated as many times as sequence i of Y is long; the output takes Y's LoD."""
    x = dense(ctx.x("X"))
    off = _offsets(ctx, "Y")
    if len(off) - 1 != x.shape[0]:
        raise SimError("sequence_expand_as: %d rows of X for %d sequences of Y"
                       % (x.shape[0], len(off) - 1))
    reps = np.diff(off)
    ctx.set("Out", np.repeat(x, reps, axis=0), lod=[off])


@kernel("sequence_expand_as_grad")
def sequence_expand_as_grad(ctx):
    off, d, g = _grad_of_x(ctx, "Y")
    for i, a, b in _spans(off):
        g[i] = d[a:b].sum(axis=0)
    ctx.set("X@GRAD", g)


@kernel("sequence_mask")
def sequence_mask(ctx):
    x = np.asarray(dense(ctx.x("X"))).astype(np.int64)
    maxlen = ctx.attr("maxlen", -1)
    if ctx.has("MaxLenTensor"):
        maxlen = int(np.asarray(dense(ctx.x("MaxLenTensor"))).reshape(-1)[0])
    if maxlen is None or maxlen < 0:
        maxlen = int(x.max()) if x.size else 0
    out = np.arange(maxlen) < x[..., None]
    ctx.set("Y", out.astype(np_dtype(ctx.attr("out_dtype", 3), ctx.fdt)))


# --- dropout / log_softmax ------------------------------------------------------------------
@kernel("dropout")
def dropout(ctx):
    """Training: each element kept with probability 1 - p (Mask 1) or zeroed;
    `downgrade_in_infer` leaves the kept values, `upscale_in_train` divides them by 1 - p.
    is_test: downgrade_in_infer scales by 1 - p, upscale_in_train passes X.

    The mask is keyed (OpCtx.keyed_uniform): by the seeds, the op's output, how often the op
    ran (unless fix_seed) and each sample's row in the global batch, so a trainer's shard
    gets the rows of the original's mask for the same samples."""
    x = dense(ctx.x("X"))
    p = float(ctx.attr("dropout_prob", 0.5))
    upscale = ctx.attr("dropout_implementation", "downgrade_in_infer") == "upscale_in_train"
    if ctx.attr("is_test", False):
        ctx.set("Out", x if upscale else x * (1.0 - p), lod=ctx.lod("X"))
        return
    seed = int(np.asarray(dense(ctx.x("Seed"))).reshape(-1)[0]) if ctx.has("Seed") else 0
    fixed = bool(ctx.attr("fix_seed", False))
    keep = ctx.keyed_uniform(x.shape, seed=(seed or ctx.attr("seed", 0) or 0),
                             fixed=fixed) >= p
    if upscale:
        out = x * keep / (1.0 - p) if p < 1 else np.zeros_like(x)
    else:
        out = x * keep
    ctx.set("Out", out.astype(x.dtype, copy=False), lod=ctx.lod("X"))
    ctx.set("Mask", keep.astype(np.uint8))


@kernel("dropout_grad")
def dropout_grad(ctx):
    d = dense(ctx.x("Out@GRAD"))
    p = float(ctx.attr("dropout_prob", 0.5))
    upscale = ctx.attr("dropout_implementation", "downgrade_in_infer") == "upscale_in_train"
    if ctx.attr("is_test", False):
        ctx.set("X@GRAD", d if upscale else d * (1.0 - p))
        return
    m = np.asarray(dense(ctx.x("Mask"))).astype(d.dtype)
    if upscale:
        g = d * m / (1.0 - p) if p < 1 else np.zeros_like(d)
    else:
        g = d * m
    ctx.set("X@GRAD", g, lod=ctx.lod("Out@GRAD"))


@kernel("log_softmax")
def log_softmax(ctx):
    x = dense(ctx.x("X"))
    axis = ctx.attr("axis", -1)
    z = x - x.max(axis=axis, keepdims=True)
    ctx.set("Out", z - np.log(np.exp(z).sum(axis=axis, keepdims=True)), lod=ctx.lod("X"))


@kernel("log_softmax_grad")
def log_softmax_grad(ctx):
    o, d = dense(ctx.x("Out")), dense(ctx.x("Out@GRAD"))
    axis = ctx.attr("axis", -1)
    ctx.set("X@GRAD", d - np.exp(o) * d.sum(axis=axis, keepdims=True))


# --- sequence_expand / sequence_pad / sequence_unpad ----------------------------------------
def _expand_plan(ctx):
    """(X's sequence offsets, repeats of each X sequence) for sequence_expand."""
    x = dense(ctx.x("X"))
    ylod = ctx.lod("Y")
    if not ylod:
        raise SimError("sequence_expand: Y %s has no LoD" % ctx.op.input("Y")[0])
    level = ctx.attr("ref_level", -1)
    ref = [int(v) for v in ylod[level]]
    xlod = ctx.lod("X")
    xoff = [int(v) for v in xlod[-1]] if xlod else list(range(x.shape[0] + 1))
    if len(xoff) != len(ref):
        raise SimError("sequence_expand: X has %d sequences, Y's ref level %d"
                       % (len(xoff) - 1, len(ref) - 1))
    return x, xoff, np.diff(ref), bool(xlod)


@kernel("sequence_expand")
def sequence_expand(ctx):
    """Sequence i of X (row i when X has no LoD) repeated as many times as sequence i of Y's
    ref_level has elements."""
    x, xoff, reps, has_lod = _expand_plan(ctx)
    parts, lens = [], []
    for i, r in enumerate(reps):
        seg = x[xoff[i]:xoff[i + 1]]
        for _ in range(int(r)):
            parts.append(seg)
            lens.append(seg.shape[0])
    out = np.concatenate(parts, axis=0) if parts else np.zeros((0,) + x.shape[1:], x.dtype)
    lod = [list(np.concatenate([[0], np.cumsum(lens)]).astype(int))] if has_lod else None
    ctx.set("Out", out, lod=lod)


@kernel("sequence_expand_grad")
def sequence_expand_grad(ctx):
    x, xoff, reps, _ = _expand_plan(ctx)
    d = dense(ctx.x("Out@GRAD"))
    g = np.zeros_like(x, dtype=d.dtype)
    pos = 0
    for i, r in enumerate(reps):
        n = xoff[i + 1] - xoff[i]
        for _ in range(int(r)):
            g[xoff[i]:xoff[i + 1]] += d[pos:pos + n]
            pos += n
    ctx.set("X@GRAD", g, lod=ctx.lod("X"))


@kernel("sequence_pad")
def sequence_pad(ctx):
    """[total, ...] with LoD -> [sequences, padded_length, ...] filled with PadValue, and the
    lengths."""
    x = dense(ctx.x("X"))
    off = _offsets(ctx, "X")
    lens = np.diff(off)
    plen = ctx.attr("padded_length", -1)
    if plen is None or plen < 0:
        plen = int(lens.max()) if lens.size else 0
    if lens.size and lens.max() > plen:
        raise SimError("sequence_pad: a sequence of %d is longer than padded_length %d"
                       % (int(lens.max()), plen))
    pad = np.asarray(dense(ctx.x("PadValue")))
    out = np.empty((len(lens), plen) + x.shape[1:], dtype=x.dtype)
    out[...] = pad.reshape(pad.shape if pad.size > 1 else ())
    for i, a, b in _spans(off):
        out[i, :b - a] = x[a:b]
    ctx.set("Out", out)
    ctx.set("Length", lens.astype(np.int64))


@kernel("sequence_pad_grad")
def sequence_pad_grad(ctx):
    off, d, g = _grad_of_x(ctx, "X")
    for i, a, b in _spans(off):
        g[a:b] = d[i, :b - a]
    ctx.set("X@GRAD", g, lod=ctx.lod("X"))


@kernel("sequence_unpad")
def sequence_unpad(ctx):
    x = dense(ctx.x("X"))
    lens = np.asarray(dense(ctx.x("Length"))).reshape(-1).astype(np.int64)
    parts = [x[i, :int(n)] for i, n in enumerate(lens)]
    out = np.concatenate(parts, axis=0) if parts else np.zeros((0,) + x.shape[2:], x.dtype)
    ctx.set("Out", out, lod=[[int(v) for v in np.concatenate([[0], np.cumsum(lens)])]])


@kernel("sequence_unpad_grad")
def sequence_unpad_grad(ctx):
    shape = ctx.shape("X")
    # Paddle's grad op gets X and Out@GRAD only: the lengths come from Out@GRAD's LoD
    if ctx.has("Length"):
        lens = np.asarray(dense(ctx.x("Length"))).reshape(-1).astype(np.int64)
    elif ctx.lod("Out@GRAD"):
        lens = np.diff(ctx.lod("Out@GRAD")[-1]).astype(np.int64)
    else:
        raise SimError("sequence_unpad_grad: neither Length nor a LoD on Out@GRAD")
    d = dense(ctx.x("Out@GRAD"))
    g = np.zeros(shape, dtype=d.dtype)
    pos = 0
    for i, n in enumerate(lens):
        g[i, :n] = d[pos:pos + n]
        pos += int(n)
    ctx.set("X@GRAD", g)


# --- sequence_conv --------------------------------------------------------------------------
def _context_index(ctx, off, rows):
    """For each row t and context slot j: the row of X that lands there (-1: outside t's
    sequence, a zero pad)."""
    start = int(ctx.attr("contextStart", 0) or 0)
    length = int(ctx.attr("contextLength", 1) or 1)
    if int(ctx.attr("contextStride", 1) or 1) != 1:
        raise SimError("sequence_conv: contextStride %s (Paddle supports 1 only)"
                       % ctx.attr("contextStride"))
    if ctx.attr("paddingTrainable", False):
        raise SimError("sequence_conv: paddingTrainable (a trained PaddingData) is not "
                       "simulated")
    idx = np.full((rows, length), -1, dtype=np.int64)
    for a, b in zip(off[:-1], off[1:]):
        for t in range(a, b):
            src = t + start + np.arange(length)
            ok = (src >= a) & (src < b)
            idx[t, ok] = src[ok]
    return idx


@kernel("sequence_conv")
def sequence_conv(ctx):
    """Out[t] = [X[t + contextStart + j] for j < contextLength] (rows outside t's sequence
    are 0) @ Filter: X [T, D] with a LoD, Filter [contextLength * D, M]."""
    x = dense(ctx.x("X"))
    w = dense(ctx.x("Filter"))
    off = _offsets(ctx, "X")
    idx = _context_index(ctx, off, x.shape[0])
    col = np.where((idx >= 0)[..., None], x[np.maximum(idx, 0)], 0.0)
    col = col.reshape(x.shape[0], -1)
    if col.shape[1] != w.shape[0]:
        raise SimError("sequence_conv: contextLength x width %d but Filter has %d rows"
                       % (col.shape[1], w.shape[0]))
    ctx.set("Out", col @ w, lod=ctx.lod("X"))


@kernel("sequence_conv_grad")
def sequence_conv_grad(ctx):
    x = dense(ctx.x("X"))
    w = dense(ctx.x("Filter"))
    d = dense(ctx.x("Out@GRAD"))
    off = _offsets(ctx, "X")
    idx = _context_index(ctx, off, x.shape[0])
    if ctx.wants("Filter@GRAD"):
        col = np.where((idx >= 0)[..., None], x[np.maximum(idx, 0)], 0.0)
        ctx.set("Filter@GRAD", col.reshape(x.shape[0], -1).T @ d)
    if ctx.wants("X@GRAD"):
        dcol = (d @ w.T).reshape(idx.shape + x.shape[1:])
        g = np.zeros_like(x, dtype=dcol.dtype)
        ok = idx >= 0
        np.add.at(g, idx[ok], dcol[ok])
        ctx.set("X@GRAD", g, lod=ctx.lod("X"))


# --- sequence_pool ----------------------------------------------------------------------
def _pool_offsets(ctx, slot):
    lod = ctx.lod(slot)
    if not lod:
        raise SimError("%s: %s has no LoD (sequence info)" % (ctx.op.type, ctx.op.input(slot)[0]))
    if len(lod) > 2:
        raise SimError("%s: %s has %d LoD levels (Paddle's kernel takes at most 2)"
                       % (ctx.op.type, ctx.op.input(slot)[0], len(lod)))
    if len(lod) == 2 and lod[0][-1] != len(lod[1]) - 1:
        raise SimError("%s: %s's LoD is illegal: its first level ends at %d, its second has "
                       "%d sequences" % (ctx.op.type, ctx.op.input(slot)[0], lod[0][-1],
                                         len(lod[1]) - 1))
    return list(lod[-1])


@kernel("sequence_pool")
def sequence_pool(ctx):
    x = dense(ctx.x("X"))
    off = _pool_offsets(ctx, "X")
    if off[-1] != x.shape[0]:
        raise SimError("sequence_pool: LoD ends at %d but X has %d rows" % (off[-1], x.shape[0]))
    kind = ctx.attr("pooltype", "AVERAGE").upper()
    pad = ctx.attr("pad_value", 0.0)
    outs, maxidx = [], []
    for a, b in zip(off[:-1], off[1:]):
        seg = x[a:b]
        if b == a:
            outs.append(np.full(x.shape[1:], pad, dtype=x.dtype))
            maxidx.append(np.zeros(x.shape[1:], dtype=np.int64))
            continue
        if kind == "AVERAGE":
            outs.append(seg.mean(axis=0))
        elif kind == "SUM":
            outs.append(seg.sum(axis=0))
        elif kind == "SQRT":
            outs.append(seg.sum(axis=0) / np.sqrt(b - a))
        elif kind == "MAX":
            i = seg.argmax(axis=0)
            maxidx.append(i + a)
            outs.append(seg.max(axis=0))
        elif kind == "LAST":
            outs.append(seg[-1])
        elif kind == "FIRST":
            outs.append(seg[0])
        else:
            raise SimError("sequence_pool: pooltype %s is not simulated" % kind)
    # Paddle's kernel: an input of two LoD levels is pooled at its last, the output keeps the
    # first (a node's neighbours' neighbours pooled to one row per neighbour)
    lod = ctx.lod("X")
    ctx.set("Out", np.stack(outs) if outs else np.zeros((0,) + x.shape[1:], dtype=x.dtype),
            lod=[list(lod[0])] if len(lod) > 1 else None)
    if ctx.wants("MaxIndex"):
        ctx.set("MaxIndex", np.stack(maxidx) if kind == "MAX" and maxidx
                else np.zeros((len(outs),) + x.shape[1:], dtype=np.int64))


@kernel("sequence_pool_grad")
def sequence_pool_grad(ctx):
    x = dense(ctx.x("X"))
    off = _pool_offsets(ctx, "X")
    d = dense(ctx.x("Out@GRAD"))
    kind = ctx.attr("pooltype", "AVERAGE").upper()
    g = np.zeros_like(x)
    for i, (a, b) in enumerate(zip(off[:-1], off[1:])):
        n = b - a
        if not n:
            continue
        if kind == "AVERAGE":
            g[a:b] = d[i] / n
        elif kind == "SUM":
            g[a:b] = d[i]
        elif kind == "SQRT":
            g[a:b] = d[i] / np.sqrt(n)
        elif kind == "LAST":
            g[b - 1] = d[i]
        elif kind == "FIRST":
            g[a] = d[i]
        elif kind == "MAX":
            mi = np.asarray(ctx.x("MaxIndex"))[i]
            flat_g = g.reshape(g.shape[0], -1)
            flat_g[mi.reshape(-1), np.arange(flat_g.shape[1])] += d[i].reshape(-1)
        else:
            raise SimError("sequence_pool_grad: pooltype %s is not simulated" % kind)
    ctx.set("X@GRAD", g, lod=ctx.lod("X"))
