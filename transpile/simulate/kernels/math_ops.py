"""Elementwise (with Paddle's broadcast `axis`), activations, matmul, reductions."""
from __future__ import annotations

import numpy as np

from ..values import SelectedRows, SimError, dense
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
        if d not in (1, x.shape[axis + i]):
            raise SimError("elementwise: Y %s does not match X %s at axis %d"
                           % (y.shape, x.shape, axis))
    return y.reshape([1] * axis + yshape + [1] * (x.ndim - axis - len(yshape)))


def _operands(ctx):
    x = dense(ctx.x("X"))
    y = dense(ctx.x("Y"))
    axis = ctx.attr("axis", -1)
    swapped = False
    if y.ndim > x.ndim:
        x, y, swapped = y, x, True
    yb = bcast_y(x, y, axis)
    return (yb, x, swapped) if swapped else (x, yb, swapped)


_FWD = {
    "elementwise_add": np.add, "elementwise_sub": np.subtract, "elementwise_mul": np.multiply,
    "elementwise_div": np.divide, "elementwise_pow": np.power,
    "elementwise_max": np.maximum, "elementwise_min": np.minimum,
}


@kernel(*_FWD)
def elementwise(ctx):
    x, y, _ = _operands(ctx)
    out = _FWD[ctx.op.type](x, y)
    ctx.set("Out", out, lod=ctx.lod("X"))


def _reduce_to(g, shape):
    """Sum a broadcast gradient back to `shape`."""
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


@kernel(*[k + "_grad" for k in _FWD])
def elementwise_grad(ctx):
    typ = ctx.op.type[:-5]
    x0 = dense(ctx.x("X"))
    y0 = dense(ctx.x("Y"))
    x, y, swapped = _operands(ctx)
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
    else:
        mx = (x > y) if typ == "elementwise_max" else (x < y)
        dx, dy = dout * mx, dout * ~mx
    dx = np.broadcast_to(dx, dout.shape)
    dy = np.broadcast_to(dy, dout.shape)
    if ctx.wants("X@GRAD"):
        ctx.set("X@GRAD", _reduce_to(dx, x0.shape), lod=ctx.lod("X"))
    if ctx.wants("Y@GRAD"):
        ctx.set("Y@GRAD", _reduce_to(dy, y0.shape))


# --- activations ------------------------------------------------------------------------
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


_ACT = {
    "relu": lambda x, c: np.maximum(x, 0),
    "tanh": lambda x, c: np.tanh(x),
    "sigmoid": lambda x, c: _sigmoid(x),
    "square": lambda x, c: x * x,
    "sqrt": lambda x, c: np.sqrt(x),
    "exp": lambda x, c: np.exp(x),
    "abs": lambda x, c: np.abs(x),
    "floor": lambda x, c: np.floor(x),
    "ceil": lambda x, c: np.ceil(x),
    "log": lambda x, c: np.log(x),
    "leaky_relu": lambda x, c: np.where(x > 0, x, x * c.attr("alpha", 0.02)),
}
# d(out)/d(x), from x and out
_ACT_GRAD = {
    "relu": lambda x, o, c: (o > 0).astype(o.dtype),
    "tanh": lambda x, o, c: 1 - o * o,
    "sigmoid": lambda x, o, c: o * (1 - o),
    "square": lambda x, o, c: 2 * x,
    "sqrt": lambda x, o, c: 0.5 / o,
    "exp": lambda x, o, c: o,
    "abs": lambda x, o, c: np.sign(x),
    "log": lambda x, o, c: 1.0 / x,
    "leaky_relu": lambda x, o, c: np.where(x > 0, 1.0, c.attr("alpha", 0.02)),
}


@kernel(*_ACT)
def activation(ctx):
    x = dense(ctx.x("X"))
    ctx.set("Out", _ACT[ctx.op.type](x, ctx).astype(x.dtype, copy=False), lod=ctx.lod("X"))


@kernel(*[k + "_grad" for k in _ACT_GRAD])
def activation_grad(ctx):
    typ = ctx.op.type[:-5]
    dout = dense(ctx.x("Out@GRAD"))
    x = dense(ctx.x("X")) if ctx.has("X") else None
    o = dense(ctx.x("Out")) if ctx.has("Out") else None
    if o is None and x is not None:
        o = _ACT[typ](x, ctx)
    if x is None and typ in ("square", "abs", "log", "leaky_relu"):
        raise SimError("%s needs X" % ctx.op.type)
    ctx.set("X@GRAD", dout * _ACT_GRAD[typ](x, o, ctx), lod=ctx.lod("Out@GRAD"))


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


@kernel("matmul_grad", "matmul_v2_grad")
def matmul_grad(ctx):
    x, y, tx, ty, alpha = _mm_args(ctx)
    if x.ndim < 2 or y.ndim < 2:
        raise SimError("%s: 1-D operands are not simulated" % ctx.op.type)
    d = dense(ctx.x("Out@GRAD")) * alpha
    xm = _t(x) if tx else x
    ym = _t(y) if ty else y
    dxm = np.matmul(d, _t(ym))
    dym = np.matmul(_t(xm), d)
    dx = _t(dxm) if tx else dxm
    dy = _t(dym) if ty else dym
    if ctx.wants("X@GRAD"):
        ctx.set("X@GRAD", _reduce_to(dx, x.shape), lod=ctx.lod("X"))
    if ctx.wants("Y@GRAD"):
        ctx.set("Y@GRAD", _reduce_to(dy, y.shape))


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


@kernel("reduce_mean", "reduce_sum", "mean", "reduce_max", "reduce_min")
def reduce(ctx):
    x = dense(ctx.x("X"))
    axes = tuple(range(x.ndim)) if ctx.op.type == "mean" else _axes(ctx, x.ndim)
    keep = ctx.attr("keep_dim", False) and ctx.op.type != "mean"
    fn = {"reduce_mean": np.mean, "mean": np.mean, "reduce_sum": np.sum,
          "reduce_max": np.max, "reduce_min": np.min}[ctx.op.type]
    out = fn(x, axis=axes, keepdims=keep)
    if ctx.op.type == "mean":
        out = np.reshape(out, ())
    ctx.set("Out", np.asarray(out, dtype=x.dtype))


@kernel("reduce_mean_grad", "reduce_sum_grad", "mean_grad")
def reduce_grad(ctx):
    x = dense(ctx.x("X"))
    d = np.asarray(dense(ctx.x("Out@GRAD")))
    axes = tuple(range(x.ndim)) if ctx.op.type == "mean_grad" else _axes(ctx, x.ndim)
    shape = [1 if i in axes else s for i, s in enumerate(x.shape)]
    g = np.broadcast_to(d.reshape(shape), x.shape).astype(x.dtype)
    if ctx.op.type != "reduce_sum_grad":
        n = int(np.prod([x.shape[i] for i in axes])) if axes else 1
        g = g / n
    ctx.set("X@GRAD", g, lod=ctx.lod("X"))


@kernel("sum")
def sum_(ctx):
    xs = [v for v in ctx.xs("X")]
    if all(isinstance(v, SelectedRows) for v in xs):
        # Paddle's sum of SelectedRows is a MergeAdd: one row per id, sorted
        h = xs[0].height
        ctx.set("Out", SelectedRows(np.concatenate([v.rows for v in xs]),
                                    np.concatenate([v.value for v in xs]), h).merged())
        return
    out = None
    for v in xs:
        v = dense(v)
        if out is None:
            out = np.array(v, copy=True)
        else:
            if np.shape(v) != out.shape:
                raise SimError("sum: inputs of shapes %s and %s" % (out.shape, np.shape(v)))
            out = out + v
    ctx.set("Out", out, lod=ctx.lod("X"))


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
    out = x * s + b if after else (x + b) * s
    ctx.set("Out", np.asarray(out).astype(x.dtype, copy=False), lod=ctx.lod("X"))


@kernel("clip")
def clip(ctx):
    x = dense(ctx.x("X"))
    lo = ctx.attr("min", 0.0)
    hi = ctx.attr("max", 0.0)
    if ctx.has("Min"):
        lo = float(np.asarray(ctx.x("Min")).reshape(-1)[0])
    if ctx.has("Max"):
        hi = float(np.asarray(ctx.x("Max")).reshape(-1)[0])
    ctx.set("Out", np.clip(x, lo, hi), lod=ctx.lod("X"))


@kernel("clip_grad")
def clip_grad(ctx):
    x = dense(ctx.x("X"))
    lo, hi = ctx.attr("min", 0.0), ctx.attr("max", 0.0)
    d = dense(ctx.x("Out@GRAD"))
    ctx.set("X@GRAD", d * ((x > lo) & (x < hi)), lod=ctx.lod("X"))
