"""Elementwise (with Paddle's broadcast `axis`), activations, matmul, reductions."""
from __future__ import annotations

import numpy as np

from ..values import LazyTable, SelectedRows, SimError, dense, np_dtype
from .registry import kernel


def bcast_y(x, y, axis):
    """y reshaped so numpy broadcasting matches Paddle's elementwise `axis` rule."""
    if x.ndim == y.ndim:
        return y
    if y.ndim > x.ndim:
        raise SimError("elementwise: Y has more dims %s than X %s" % (y.shape, x.shape))
    yshape = list(y.shape)
    if axis < 0:
        axis = x.ndim - len(yshape)
    # Paddle trims Y's trailing 1-sized dims when Y would not fit at `axis`
    while len(yshape) > 1 and yshape[-1] == 1 and axis + len(yshape) > x.ndim:
        yshape.pop()
    if axis + len(yshape) > x.ndim:
        raise SimError("elementwise: cannot broadcast Y %s into X %s at axis %d"
                       % (y.shape, x.shape, axis))
    for i, d in enumerate(yshape):
        # either side may be 1 (Paddle broadcasts both ways: X (4,) and Y (4, 1) give (4, 4))
        if d not in (1, x.shape[axis + i]) and x.shape[axis + i] != 1:
            raise SimError("elementwise: Y %s does not match X %s at axis %d"
                           % (y.shape, x.shape, axis))
    return y.reshape([1] * axis + yshape + [1] * (x.ndim - axis - len(yshape)))


def _operands(ctx):
    """(x, y) broadcast-ready by Paddle's rule, and the shapes each grad must be summed back to
    before it takes its input's own shape (the lower-rank operand's dims placed at `axis`)."""
    x = dense(ctx.x("X"))
    y = dense(ctx.x("Y"))
    axis = ctx.attr("axis", -1)
    if axis is None:
        axis = -1
    if y.ndim > x.ndim:
        xb = bcast_y(y, x, axis)
        return xb, y, xb.shape, y.shape, x.shape, y.shape
    yb = bcast_y(x, y, axis)
    return x, yb, x.shape, yb.shape, x.shape, y.shape


def _floordiv(x, y):
    if x.dtype.kind in "iu" and y.dtype.kind in "iu":
        return np.floor_divide(x, y)
    return np.floor(x / y)


def _mod(x, y):
    # Paddle's remainder takes the divisor's sign (Python's %), for ints and floats
    return np.mod(x, y)


_FWD = {
    "elementwise_add": np.add, "elementwise_sub": np.subtract, "elementwise_mul": np.multiply,
    "elementwise_div": np.divide, "elementwise_pow": np.power,
    "elementwise_max": np.maximum, "elementwise_min": np.minimum,
    "elementwise_fmax": np.fmax, "elementwise_fmin": np.fmin,
    "elementwise_mod": _mod, "elementwise_floordiv": _floordiv,
}
_NO_GRAD = ("elementwise_mod", "elementwise_floordiv")


@kernel(*_FWD)
def elementwise(ctx):
    sx = ctx.x("X")
    if isinstance(sx, SelectedRows) and ctx.op.type == "elementwise_mul":
        # a sparse gradient scaled (a global-norm clip): the rows stay rows
        y = np.asarray(dense(ctx.x("Y")))
        if y.size != 1:
            raise SimError("elementwise_mul: X is SelectedRows and Y %s is not a scalar"
                           % list(y.shape))
        ctx.set("Out", SelectedRows(sx.rows, sx.value * y.reshape(()), sx.height))
        return
    x, y = _operands(ctx)[:2]
    out = _FWD[ctx.op.type](x, y)
    if ctx.op.type == "elementwise_pow" and x.dtype.kind in "iu" and y.dtype.kind in "iu":
        out = out.astype(x.dtype)
    ctx.set("Out", out, lod=ctx.lod("X"))


def _reduce_to(g, shape):
    """Sum a broadcast gradient back to `shape` (numpy's rule: leading dims, then 1-sized)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    nd = g.ndim - len(shape)
    if nd < 0:
        return g.reshape(shape)
    g = g.sum(axis=tuple(range(nd))) if nd else g
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


@kernel(*[k + "_grad" for k in _FWD if k not in _NO_GRAD])
def elementwise_grad(ctx):
    typ = ctx.op.type[:-5]
    x, y, xb_shape, yb_shape, x_shape, y_shape = _operands(ctx)
    dout = dense(ctx.x("Out@GRAD"))
    if typ == "elementwise_add":
        dx, dy = dout, dout
    elif typ == "elementwise_sub":
        dx, dy = dout, -dout
    elif typ == "elementwise_mul":
        dx, dy = dout * y, dout * x
    elif typ == "elementwise_div":
        dx, dy = dout / y, -dout * x / (y * y)
    elif typ == "elementwise_pow":
        dx = dout * y * np.power(x, y - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            dy = dout * np.power(x, y) * np.log(np.where(x > 0, x, 1))
    elif typ in ("elementwise_max", "elementwise_fmax"):
        mx = x > y
        dx, dy = dout * mx, dout * ~mx
    else:
        mn = x < y
        dx, dy = dout * mn, dout * ~mn
    dx = np.broadcast_to(dx, dout.shape)
    dy = np.broadcast_to(dy, dout.shape)
    # sum back to the operand as broadcast (its dims at `axis`), then to its own shape
    if ctx.wants("X@GRAD"):
        ctx.set("X@GRAD", _reduce_to(dx, xb_shape).reshape(x_shape), lod=ctx.lod("X"))
    if ctx.wants("Y@GRAD"):
        ctx.set("Y@GRAD", _reduce_to(dy, yb_shape).reshape(y_shape))


# --- matmul -----------------------------------------------------------------------------
def _flat2(a, k):
    return a.reshape(int(np.prod(a.shape[:k])), int(np.prod(a.shape[k:])))


@kernel("mul")
def mul(ctx):
    x, y = dense(ctx.x("X")), dense(ctx.x("Y"))
    xk, yk = ctx.attr("x_num_col_dims", 1), ctx.attr("y_num_col_dims", 1)
    x2, y2 = _flat2(x, xk), _flat2(y, yk)
    if x2.shape[1] != y2.shape[0]:
        raise SimError("mul: X %s and Y %s do not multiply" % (x.shape, y.shape))
    out = x2 @ y2
    ctx.set("Out", out.reshape(tuple(x.shape[:xk]) + tuple(y.shape[yk:])), lod=ctx.lod("X"))


@kernel("mul_grad")
def mul_grad(ctx):
    x, y = dense(ctx.x("X")), dense(ctx.x("Y"))
    xk, yk = ctx.attr("x_num_col_dims", 1), ctx.attr("y_num_col_dims", 1)
    x2, y2 = _flat2(x, xk), _flat2(y, yk)
    d2 = dense(ctx.x("Out@GRAD")).reshape(x2.shape[0], y2.shape[1])
    if ctx.wants("X@GRAD"):
        ctx.set("X@GRAD", (d2 @ y2.T).reshape(x.shape), lod=ctx.lod("X"))
    if ctx.wants("Y@GRAD"):
        ctx.set("Y@GRAD", (x2.T @ d2).reshape(y.shape))


def _mm_args(ctx):
    x, y = dense(ctx.x("X")), dense(ctx.x("Y"))
    if ctx.op.type.startswith("matmul_v2"):
        tx, ty = ctx.attr("trans_x", False), ctx.attr("trans_y", False)
        alpha = 1.0
    else:
        tx, ty = ctx.attr("transpose_X", False), ctx.attr("transpose_Y", False)
        alpha = ctx.attr("alpha", 1.0)
    return x, y, tx, ty, alpha


def _t(a):
    return np.swapaxes(a, -1, -2) if a.ndim >= 2 else a


def _matmul(x, y, tx, ty):
    xv = x[None, :] if x.ndim == 1 else x
    yv = y[:, None] if y.ndim == 1 else y
    out = np.matmul(_t(xv) if tx else xv, _t(yv) if ty else yv)
    if x.ndim == 1:
        out = out[..., 0, :]
    if y.ndim == 1:
        out = out[..., 0]
    return out


@kernel("matmul", "matmul_v2")
def matmul(ctx):
    x, y, tx, ty, alpha = _mm_args(ctx)
    out = _matmul(x, y, tx, ty)
    ctx.set("Out", out * alpha if alpha != 1.0 else out, lod=ctx.lod("X"))


@kernel("matmul_grad", "matmul_v2_grad", "bmm_grad")
def matmul_grad(ctx):
    if ctx.op.type == "bmm_grad":
        x, y, tx, ty, alpha = dense(ctx.x("X")), dense(ctx.x("Y")), False, False, 1.0
    else:
        x, y, tx, ty, alpha = _mm_args(ctx)
    # 1-D operands as Paddle (and numpy) promote them: x a row, y a column, dropped after
    xv = x[None, :] if x.ndim == 1 else x
    yv = y[:, None] if y.ndim == 1 else y
    d = np.asarray(dense(ctx.x("Out@GRAD"))) * alpha
    if x.ndim == 1:
        d = np.expand_dims(d, -2 if y.ndim > 1 else -1)
    if y.ndim == 1:
        d = np.expand_dims(d, -1)
    xm = _t(xv) if tx and x.ndim > 1 else xv
    ym = _t(yv) if ty and y.ndim > 1 else yv
    dxm = np.matmul(d, _t(ym))
    dym = np.matmul(_t(xm), d)
    dx = _t(dxm) if tx and x.ndim > 1 else dxm
    dy = _t(dym) if ty and y.ndim > 1 else dym
    if ctx.wants("X@GRAD"):
        ctx.set("X@GRAD", _reduce_to(dx, xv.shape).reshape(x.shape), lod=ctx.lod("X"))
    if ctx.wants("Y@GRAD"):
        ctx.set("Y@GRAD", _reduce_to(dy, yv.shape).reshape(y.shape))


@kernel("bmm")
def bmm(ctx):
    x, y = dense(ctx.x("X")), dense(ctx.x("Y"))
    if x.ndim != 3 or y.ndim != 3 or x.shape[0] != y.shape[0] or x.shape[2] != y.shape[1]:
        raise SimError("bmm: X %s and Y %s do not multiply batch by batch" % (x.shape, y.shape))
    ctx.set("Out", np.matmul(x, y))


# --- einsum ---------------------------------------------------------------------------------
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_parse(eq, ops):
    """Explicit subscripts: ([one string per operand], output string), '...' replaced by
    letters (right-aligned across operands, numpy's broadcast) and an implicit output made
    explicit (ellipsis dims first, then the labels seen once, sorted)."""
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ops):
        raise SimError("einsum: equation %r has %d operands, %d given" % (eq, len(terms), len(ops)))
    used = set(c for c in eq if c.isalpha())
    free = [c for c in _LETTERS if c not in used]
    ell_n = 0
    for t, op in zip(terms, ops):
        if "..." in t:
            ell_n = max(ell_n, op.ndim - (len(t) - 3))
    ell = "".join(free[:ell_n])
    subs = []
    for t, op in zip(terms, ops):
        if "..." in t:
            k = op.ndim - (len(t) - 3)
            t = t.replace("...", ell[ell_n - k:] if k else "")
        if len(t) != op.ndim:
            raise SimError("einsum: subscripts %r for an operand of rank %d" % (t, op.ndim))
        subs.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = {}
        for t in subs:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    for t in subs:
        if len(set(t)) != len(t):
            raise SimError("einsum: a repeated subscript in one operand (%r) is not simulated" % t)
    return subs, out


def _einsum_sizes(subs, ops):
    sizes = {}
    for t, op in zip(subs, ops):
        for c, d in zip(t, op.shape):
            if d != 1 or c not in sizes:
                if c in sizes and sizes[c] != 1 and d != sizes[c]:
                    raise SimError("einsum: subscript %s is %d and %d" % (c, sizes[c], d))
                sizes[c] = d if c not in sizes or sizes[c] == 1 else sizes[c]
    return sizes


@kernel("einsum")
def einsum(ctx):
    ops = [dense(v) for v in ctx.xs("Operands")]
    subs, out = _einsum_parse(ctx.attr("equation", ""), ops)
    sizes = _einsum_sizes(subs, ops)
    full = [np.broadcast_to(o, [sizes[c] for c in t]) for t, o in zip(subs, ops)]
    ctx.set("Out", np.einsum(",".join(subs) + "->" + out, *full))
    # Paddle's XShape outputs of einsum hold the operands themselves: its grad op reads them
    # (slot x_shape) and not Operands. InnerCache (its transposed intermediates) is not kept.
    for i, name in enumerate(ctx.out_names("XShape")):
        if name and name != "@EMPTY@" and i < len(ops):
            ctx.set("XShape", np.array(ops[i], copy=True), idx=i)


@kernel("einsum_grad")
def einsum_grad(ctx):
    """The grad of operand k: Out@GRAD contracted with the other operands onto k's subscripts;
    a label of k found nowhere else (summed away in the forward) is broadcast back, and a dim
    that was broadcast from 1 is summed back to 1."""
    ops = [dense(v) for v in ctx.xs("x_shape" if ctx.has("x_shape") else "Operands")]
    subs, out = _einsum_parse(ctx.attr("equation", ""), ops)
    sizes = _einsum_sizes(subs, ops)
    full = [np.broadcast_to(o, [sizes[c] for c in t]) for t, o in zip(subs, ops)]
    d = dense(ctx.x("Out@GRAD")).reshape([sizes[c] for c in out])
    for k, name in enumerate(ctx.out_names("Operands@GRAD")):
        if not name or name == "@EMPTY@":
            continue
        others = [subs[j] for j in range(len(ops)) if j != k]
        seen = set(out).union(*others) if others else set(out)
        keep = "".join(c for c in subs[k] if c in seen)
        g = np.einsum(",".join([out] + others) + "->" + keep, d,
                      *[full[j] for j in range(len(ops)) if j != k])
        g = g.reshape([sizes[c] if c in seen else 1 for c in subs[k]])
        g = np.broadcast_to(g, [sizes[c] for c in subs[k]])
        axes = tuple(i for i, dim in enumerate(ops[k].shape) if dim == 1 and g.shape[i] != 1)
        if axes:
            g = g.sum(axis=axes, keepdims=True)
        ctx.set("Operands@GRAD", np.array(g, dtype=ops[k].dtype), idx=k)


# --- reductions -------------------------------------------------------------------------
def _axes(ctx, ndim):
    if ctx.attr("reduce_all", False):
        return tuple(range(ndim))
    dims = ctx.attr("dim", None)
    if dims is None:
        dims = ctx.attr("axis", [])
    if isinstance(dims, int):
        dims = [dims]
    if not dims:
        return tuple(range(ndim))
    return tuple(sorted(d % ndim for d in dims)) if ndim else ()


_REDUCE = {"reduce_mean": np.mean, "mean": np.mean, "reduce_sum": np.sum, "reduce_max": np.max,
           "reduce_min": np.min, "reduce_prod": np.prod, "reduce_amax": np.max,
           "reduce_amin": np.min, "reduce_all": np.all, "reduce_any": np.any}


@kernel(*_REDUCE)
def reduce(ctx):
    x = dense(ctx.x("X"))
    axes = tuple(range(x.ndim)) if ctx.op.type == "mean" else _axes(ctx, x.ndim)
    keep = ctx.attr("keep_dim", False) and ctx.op.type != "mean"
    out = np.asarray(_REDUCE[ctx.op.type](x, axis=axes, keepdims=keep))
    if ctx.op.type == "mean":
        out = np.reshape(out, ())
    odt = ctx.attr("out_dtype", -1)
    if ctx.op.type in ("reduce_all", "reduce_any"):
        out = out.astype(bool)
    elif odt not in (-1, None):
        out = out.astype(np_dtype(odt, ctx.fdt))
    elif x.dtype == np.bool_ and ctx.op.type == "reduce_sum":
        out = out.astype(np.int64)
    else:
        out = out.astype(x.dtype)
    ctx.set("Out", out)


def _reduce_grad_shape(ctx, x):
    axes = tuple(range(x.ndim)) if ctx.op.type == "mean_grad" else _axes(ctx, x.ndim)
    return axes, [1 if i in axes else s for i, s in enumerate(x.shape)]


@kernel("reduce_mean_grad", "reduce_sum_grad", "mean_grad")
def reduce_grad(ctx):
    shape = ctx.shape("X")
    d = np.asarray(dense(ctx.x("Out@GRAD")))
    axes = tuple(range(len(shape))) if ctx.op.type == "mean_grad" else _axes(ctx, len(shape))
    kshape = [1 if i in axes else s for i, s in enumerate(shape)]
    g = np.broadcast_to(d.reshape(kshape), shape).astype(d.dtype)
    if ctx.op.type != "reduce_sum_grad":
        n = int(np.prod([shape[i] for i in axes])) if axes else 1
        g = g / n
    ctx.set("X@GRAD", g, lod=ctx.lod("X") if ctx.has("X") else None)


@kernel("reduce_max_grad", "reduce_min_grad", "reduce_amax_grad", "reduce_amin_grad",
        "reduce_prod_grad")
def reduce_minmax_grad(ctx):
    x = dense(ctx.x("X"))
    axes, kshape = _reduce_grad_shape(ctx, x)
    out = np.asarray(dense(ctx.x("Out"))).reshape(kshape) if ctx.has("Out") else \
        np.asarray(_REDUCE[ctx.op.type[:-5]](x, axis=axes, keepdims=True))
    d = np.asarray(dense(ctx.x("Out@GRAD"))).reshape(kshape)
    if ctx.op.type == "reduce_prod_grad":
        g = d * out / x
    elif ctx.op.type in ("reduce_amax_grad", "reduce_amin_grad"):
        eq = x == out
        g = d * eq / eq.sum(axis=axes, keepdims=True)       # ties share the gradient
    else:
        g = d * (x == out)                                    # every tied element gets it
    ctx.set("X@GRAD", np.asarray(g, dtype=x.dtype))


@kernel("sum")
def sum_(ctx):
    xs = [v for v in ctx.xs("X")]
    if any(isinstance(v, LazyTable) for v in xs):
        if isinstance(xs[0], LazyTable) and all(isinstance(v, SelectedRows) for v in xs[1:]):
            # a big table plus sparse rows (a geo pserver adding a delta): only those rows
            m = SelectedRows(np.concatenate([v.rows for v in xs[1:]]),
                             np.concatenate([v.value for v in xs[1:]]), xs[0].height).merged()
            out = xs[0].copy()
            out.set(m.rows, out.get(m.rows) + m.value.reshape((len(m.rows),) + out.row_shape))
            ctx.set("Out", out)
            return
        names = ctx.op.input("X")
        xs = [ctx.ex.densify(n, v, "sum") if isinstance(v, LazyTable) else v
              for n, v in zip(names, xs)]
    if all(isinstance(v, SelectedRows) for v in xs):
        # Paddle's sum of SelectedRows is a MergeAdd: one row per id, sorted; an empty input
        # (no op wrote it) is skipped, and only empty inputs give an empty output
        full = [v for v in xs if not v.no_memory]
        if not full:
            ctx.set("Out", xs[0])
            return
        xs = full
        h = xs[0].height
        ctx.set("Out", SelectedRows(np.concatenate([v.rows for v in xs]),
                                    np.concatenate([v.value for v in xs]), h).merged())
        return
    out = None
    first = True
    for v in xs:
        v = dense(v)
        if out is None:
            out = np.asarray(v)
        else:
            if np.shape(v) != out.shape:
                raise SimError("sum: inputs of shapes %s and %s" % (out.shape, np.shape(v)))
            if first or np.result_type(out, v) != out.dtype:
                out = out + v           # a new array (never written into an input)
                first = False
            else:
                out += v                # into the sum's own array: the same additions
    ctx.set("Out", np.array(out, copy=True) if first else out, lod=ctx.lod("X"))


@kernel("scale")
def scale(ctx):
    x = ctx.x("X")
    s = ctx.attr("scale", 1.0)
    if ctx.has("ScaleTensor"):
        s = float(np.asarray(dense(ctx.x("ScaleTensor"))).reshape(-1)[0])
    b = ctx.attr("bias", 0.0)
    after = ctx.attr("bias_after_scale", True)
    if isinstance(x, SelectedRows):
        ctx.set("Out", SelectedRows(x.rows, x.value * s + b if after else (x.value + b) * s,
                                    x.height))
        return
    x = np.asarray(x)
    if after and ctx.owned("X", "Out", held=1) and x.dtype.kind == "f" \
            and np.result_type(x, s, b) == x.dtype:
        # Out is X, held by this scope alone: in place (the same arithmetic, the same bits;
        # a pserver's 1/trainers scale of a merged gradient of a big table)
        x *= s
        x += b
        ctx.set("Out", x, lod=ctx.lod("X"))
        return
    out = x * s + b if after else (x + b) * s
    ctx.set("Out", np.asarray(out).astype(x.dtype, copy=False), lod=ctx.lod("X"))


@kernel("clip")
def clip(ctx):
    """Clip to [min, max]; a SelectedRows X is merged first (repeated rows added up) and
    stays SelectedRows, as Paddle's sparse clip kernel does."""
    x = ctx.x("X")
    lo = ctx.attr("min", 0.0)
    hi = ctx.attr("max", 0.0)
    if ctx.has("Min"):
        lo = float(np.asarray(ctx.x("Min")).reshape(-1)[0])
    if ctx.has("Max"):
        hi = float(np.asarray(ctx.x("Max")).reshape(-1)[0])
    if isinstance(x, SelectedRows):
        m = x.merged()
        ctx.set("Out", SelectedRows(m.rows, np.clip(m.value, lo, hi), m.height))
        return
    ctx.set("Out", np.clip(dense(x), lo, hi), lod=ctx.lod("X"))


@kernel("clip_grad")
def clip_grad(ctx):
    x = dense(ctx.x("X"))
    lo, hi = ctx.attr("min", 0.0), ctx.attr("max", 0.0)
    d = dense(ctx.x("Out@GRAD"))
    ctx.set("X@GRAD", d * ((x > lo) & (x < hi)), lod=ctx.lod("X"))
