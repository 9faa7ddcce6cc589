"""Normalisations: batch_norm (training and inference), layer_norm, p_norm, norm (l2_normalize),
clip_by_norm; with their grads."""
from __future__ import annotations

import numpy as np

from ..values import SelectedRows, SimError, dense
from .registry import kernel


# --- batch_norm -----------------------------------------------------------------------------
def _bn_layout(ctx, x):
    """(channel axis, reduce axes, broadcast shape of a [C] vector)."""
    layout = ctx.attr("data_layout", "NCHW") or "NCHW"
    if x.ndim < 2:
        raise SimError("batch_norm: X of rank %d" % x.ndim)
    c = x.ndim - 1 if layout == "NHWC" else 1
    axes = tuple(i for i in range(x.ndim) if i != c)
    bshape = [1] * x.ndim
    bshape[c] = x.shape[c]
    return c, axes, bshape


def _bn_batch_stats(ctx):
    """Whether this run normalises by the batch's own statistics (training mode)."""
    if ctx.attr("use_global_stats", False):
        return False
    return not ctx.attr("is_test", False) or ctx.attr("trainable_statistics", False)


def _bn_scale_bias(ctx, x, c):
    scale = dense(ctx.x("Scale")) if ctx.has("Scale") else np.ones(x.shape[c], dtype=x.dtype)
    bias = dense(ctx.x("Bias")) if ctx.has("Bias") else np.zeros(x.shape[c], dtype=x.dtype)
    return scale, bias


@kernel("batch_norm")
def batch_norm(ctx):
    """Y = (X - mean) / sqrt(var + eps) * Scale + Bias per channel.

    Training: mean and var are the batch's (biased var, over N and the spatial dims);
    MeanOut = Mean * momentum + mean * (1 - momentum), likewise VarianceOut with the biased
    batch var; SavedMean = mean, SavedVariance = 1 / sqrt(var + eps) (the inverse std).
    Inference (is_test or use_global_stats): Mean and Variance normalise, and pass through."""
    x = dense(ctx.x("X"))
    c, axes, bshape = _bn_layout(ctx, x)
    eps = ctx.attr("epsilon", 1e-5)
    mom = ctx.attr("momentum", 0.9)
    if ctx.has("MomentumTensor"):
        mom = float(np.asarray(dense(ctx.x("MomentumTensor"))).reshape(-1)[0])
    scale, bias = _bn_scale_bias(ctx, x, c)
    run_mean, run_var = dense(ctx.x("Mean")), dense(ctx.x("Variance"))
    if _bn_batch_stats(ctx):
        mean = x.mean(axis=axes)
        var = ((x - mean.reshape(bshape)) ** 2).mean(axis=axes)
        mean_out = run_mean * mom + mean * (1 - mom)
        var_out = run_var * mom + var * (1 - mom)
    else:
        mean, var = run_mean, run_var
        mean_out, var_out = run_mean, run_var
    inv = 1.0 / np.sqrt(var + eps)
    y = (x - mean.reshape(bshape)) * (inv * scale).reshape(bshape) + bias.reshape(bshape)
    ctx.set("Y", y.astype(x.dtype, copy=False), lod=ctx.lod("X"))
    ctx.set("MeanOut", np.asarray(mean_out).reshape(run_mean.shape))
    ctx.set("VarianceOut", np.asarray(var_out).reshape(run_var.shape))
    ctx.set("SavedMean", np.asarray(mean if _bn_batch_stats(ctx) else np.zeros_like(mean)))
    ctx.set("SavedVariance", np.asarray(inv if _bn_batch_stats(ctx) else np.zeros_like(inv)))
    if ctx.wants("ReserveSpace"):
        ctx.set("ReserveSpace", np.zeros((0,), dtype=x.dtype))


@kernel("batch_norm_grad")
def batch_norm_grad(ctx):
    x = dense(ctx.x("X"))
    dy = dense(ctx.x("Y@GRAD"))
    c, axes, bshape = _bn_layout(ctx, x)
    eps = ctx.attr("epsilon", 1e-5)
    scale, _ = _bn_scale_bias(ctx, x, c)
    if ctx.attr("use_global_stats", False) or (ctx.attr("is_test", False)
                                               and not ctx.attr("trainable_statistics", False)):
        mean = dense(ctx.x("Mean"))
        inv = 1.0 / np.sqrt(dense(ctx.x("Variance")) + eps)
        global_stats = True
    else:
        mean = dense(ctx.x("SavedMean"))
        inv = dense(ctx.x("SavedVariance"))
        global_stats = False
    xhat = (x - mean.reshape(bshape)) * inv.reshape(bshape)
    dbias = dy.sum(axis=axes)
    dscale = (dy * xhat).sum(axis=axes)
    if global_stats:
        dx = dy * (scale * inv).reshape(bshape)
    else:
        m = x.size // x.shape[c]
        dx = (scale * inv).reshape(bshape) / m * (
            m * dy - dbias.reshape(bshape) - xhat * dscale.reshape(bshape))
    if ctx.wants("X@GRAD"):
        ctx.set("X@GRAD", dx.astype(x.dtype, copy=False), lod=ctx.lod("X"))
    if ctx.wants("Scale@GRAD"):
        ctx.set("Scale@GRAD", dscale.reshape(ctx.shape("Scale")))
    if ctx.wants("Bias@GRAD"):
        ctx.set("Bias@GRAD", dbias.reshape(ctx.shape("Bias")))


# --- layer_norm -----------------------------------------------------------------------------
def _ln_split(ctx, x):
    k = ctx.attr("begin_norm_axis", 1)
    k = k % x.ndim if x.ndim else 0
    left = int(np.prod(x.shape[:k]))
    return x.reshape(left, -1), k


@kernel("layer_norm")
def layer_norm(ctx):
    """Y = (X - mean) / sqrt(var + eps) * Scale + Bias, the statistics over the dims from
    begin_norm_axis on (biased var); Mean and Variance ([left]) hold mean and var."""
    x = dense(ctx.x("X"))
    x2, _ = _ln_split(ctx, x)
    eps = ctx.attr("epsilon", 1e-5)
    mean = x2.mean(axis=1)
    var = ((x2 - mean[:, None]) ** 2).mean(axis=1)
    y = (x2 - mean[:, None]) / np.sqrt(var + eps)[:, None]
    if ctx.has("Scale"):
        y = y * dense(ctx.x("Scale")).reshape(1, -1)
    if ctx.has("Bias"):
        y = y + dense(ctx.x("Bias")).reshape(1, -1)
    ctx.set("Y", y.reshape(x.shape).astype(x.dtype, copy=False), lod=ctx.lod("X"))
    _, k = _ln_split(ctx, x)
    ctx.set("Mean", mean.reshape(x.shape[:k]))
    ctx.set("Variance", var.reshape(x.shape[:k]))


@kernel("layer_norm_grad")
def layer_norm_grad(ctx):
    x = dense(ctx.x("X"))
    x2, _ = _ln_split(ctx, x)
    dy = dense(ctx.x("Y@GRAD")).reshape(x2.shape)
    eps = ctx.attr("epsilon", 1e-5)
    mean = dense(ctx.x("Mean")).reshape(-1)
    var = dense(ctx.x("Variance")).reshape(-1)
    inv = 1.0 / np.sqrt(var + eps)
    xhat = (x2 - mean[:, None]) * inv[:, None]
    if ctx.wants("Scale@GRAD"):
        ctx.set("Scale@GRAD", (dy * xhat).sum(axis=0).reshape(ctx.shape("Scale")))
    if ctx.wants("Bias@GRAD"):
        ctx.set("Bias@GRAD", dy.sum(axis=0).reshape(ctx.shape("Bias")))
    if ctx.wants("X@GRAD"):
        g = dy * dense(ctx.x("Scale")).reshape(1, -1) if ctx.has("Scale") else dy
        n = x2.shape[1]
        dx = inv[:, None] * (g - g.mean(axis=1, keepdims=True)
                             - xhat * (g * xhat).sum(axis=1, keepdims=True) / n)
        ctx.set("X@GRAD", dx.reshape(x.shape), lod=ctx.lod("X"))


# --- p_norm / norm / clip_by_norm -----------------------------------------------------------
def _pnorm_axis(ctx, x):
    if ctx.attr("asvector", False):
        return None
    return ctx.attr("axis", -1) % x.ndim if x.ndim else None


def _pnorm(x, p, axis, keep):
    a = np.abs(x)
    if p == np.inf:
        return a.max(axis=axis, keepdims=keep)
    if p == -np.inf:
        return a.min(axis=axis, keepdims=keep)
    if p == 0:
        return (a != 0).sum(axis=axis, keepdims=keep).astype(x.dtype)
    return np.power(np.power(a, p).sum(axis=axis, keepdims=keep), 1.0 / p)


@kernel("p_norm")
def p_norm(ctx):
    x = dense(ctx.x("X"))
    p = float(ctx.attr("porder", 2.0))
    axis = _pnorm_axis(ctx, x)
    keep = ctx.attr("keepdim", False)
    out = _pnorm(x, p, axis, keep)
    if axis is None and keep:
        out = np.reshape(out, [1] * x.ndim)
    ctx.set("Out", np.asarray(out, dtype=x.dtype))


@kernel("p_norm_grad")
def p_norm_grad(ctx):
    x = dense(ctx.x("X"))
    p = float(ctx.attr("porder", 2.0))
    axis = _pnorm_axis(ctx, x)
    out = _pnorm(x, p, axis, True)
    d = dense(ctx.x("Out@GRAD"))
    d = np.reshape(d, np.shape(out)) if axis is not None else np.reshape(d, ())
    if axis is None:
        out = np.reshape(out, ())
    eps = ctx.attr("epsilon", 1e-12)
    if p in (np.inf, -np.inf):
        g = np.sign(x) * (np.abs(x) == out) * d
    elif p == 0:
        g = np.zeros_like(x)
    else:
        g = np.sign(x) * np.power(np.abs(x), p - 1) * d / np.power(np.maximum(out, eps), p - 1)
    ctx.set("X@GRAD", g.astype(x.dtype, copy=False))


def _fro_axes(ctx, nd):
    dims = ctx.attr("dim", []) or []
    if ctx.attr("reduce_all", False) or not dims:
        return tuple(range(nd))
    return tuple(sorted(int(d) % nd for d in dims))


@kernel("frobenius_norm")
def frobenius_norm(ctx):
    x = dense(ctx.x("X"))
    out = np.sqrt((x * x).sum(axis=_fro_axes(ctx, x.ndim), keepdims=ctx.attr("keep_dim", False)))
    ctx.set("Out", np.asarray(out, dtype=x.dtype))


@kernel("frobenius_norm_grad")
def frobenius_norm_grad(ctx):
    x = dense(ctx.x("X"))
    axes = _fro_axes(ctx, x.ndim)
    kshape = [1 if i in axes else s for i, s in enumerate(x.shape)]
    out = np.sqrt((x * x).sum(axis=axes, keepdims=True))
    d = np.asarray(dense(ctx.x("Out@GRAD"))).reshape(kshape)
    ctx.set("X@GRAD", x * d / out)


@kernel("norm")
def norm(ctx):
    """l2_normalize: Norm = sqrt(sum(X^2, axis) + epsilon), Out = X / Norm."""
    x = dense(ctx.x("X"))
    axis = ctx.attr("axis", 1)
    axis = axis % x.ndim
    n = np.sqrt((x * x).sum(axis=axis, keepdims=True) + ctx.attr("epsilon", 1e-10))
    ctx.set("Out", x / n, lod=ctx.lod("X"))
    ctx.set("Norm", n)


@kernel("norm_grad")
def norm_grad(ctx):
    x = dense(ctx.x("X"))
    axis = ctx.attr("axis", 1) % x.ndim
    n = dense(ctx.x("Norm")) if ctx.has("Norm") else \
        np.sqrt((x * x).sum(axis=axis, keepdims=True) + ctx.attr("epsilon", 1e-10))
    n = n.reshape([1 if i == axis else s for i, s in enumerate(x.shape)])
    d = dense(ctx.x("Out@GRAD"))
    g = d / n - x * (d * x).sum(axis=axis, keepdims=True) / n ** 3
    ctx.set("X@GRAD", g, lod=ctx.lod("X"))


@kernel("clip_by_norm")
def clip_by_norm(ctx):
    """X * max_norm / ||X|| when ||X|| > max_norm (a SelectedRows X: its merged rows)."""
    x = ctx.x("X")
    mx = ctx.attr("max_norm", 1.0)
    sr = x.merged() if isinstance(x, SelectedRows) else None
    v = sr.value if sr is not None else dense(x)
    n = float(np.sqrt((v * v).sum()))
    out = np.asarray(v * (mx / n) if n > mx else v, dtype=v.dtype)
    ctx.set("Out", SelectedRows(sr.rows, out, sr.height) if sr is not None else out)


# --- group_norm / instance_norm -------------------------------------------------------------
def _grouped(ctx, x, groups):
    """x as NCHW, viewed [N, groups, -1], and whether it was NHWC."""
    nhwc = (ctx.attr("data_layout", "NCHW") or "NCHW") == "NHWC"
    if nhwc:
        x = np.moveaxis(x, -1, 1)
    return x, x.reshape(x.shape[0], groups, -1), nhwc


def _per_channel(ctx, slot, c, default):
    return dense(ctx.x(slot)).reshape(-1) if ctx.has(slot) else np.full(c, default)


def _group_forward(ctx, x, groups):
    eps = ctx.attr("epsilon", 1e-5)
    xc, xg, nhwc = _grouped(ctx, x, groups)
    mean = xg.mean(axis=2)
    var = xg.var(axis=2)
    inv = 1.0 / np.sqrt(var + eps)
    xhat = ((xg - mean[..., None]) * inv[..., None]).reshape(xc.shape)
    c = xc.shape[1]
    b = [1, c] + [1] * (xc.ndim - 2)
    y = xhat * _per_channel(ctx, "Scale", c, 1.0).reshape(b) \
        + _per_channel(ctx, "Bias", c, 0.0).reshape(b)
    return (np.moveaxis(y, 1, -1) if nhwc else y), mean, var, inv


def _group_backward(ctx, x, groups, mean, inv):
    xc, xg, nhwc = _grouped(ctx, x, groups)
    dy = dense(ctx.x("Y@GRAD"))
    dyc = np.moveaxis(dy, -1, 1) if nhwc else dy
    c = xc.shape[1]
    b = [1, c] + [1] * (xc.ndim - 2)
    xhat = ((xg - mean.reshape(xg.shape[0], groups, 1)) * inv.reshape(xg.shape[0], groups, 1))
    xhat_c = xhat.reshape(xc.shape)
    axes = tuple(i for i in range(xc.ndim) if i != 1)
    if ctx.wants("Scale@GRAD"):
        ctx.set("Scale@GRAD", (dyc * xhat_c).sum(axis=axes).reshape(
            ctx.shape("Scale") if ctx.has("Scale") else (c,)))
    if ctx.wants("Bias@GRAD"):
        # instance_norm_grad gets no Bias input, only its grad output
        ctx.set("Bias@GRAD", dyc.sum(axis=axes).reshape(
            ctx.shape("Bias") if ctx.has("Bias") else (c,)))
    if ctx.wants("X@GRAD"):
        g = (dyc * _per_channel(ctx, "Scale", c, 1.0).reshape(b)).reshape(xg.shape)
        dx = inv.reshape(xg.shape[0], groups, 1) * (
            g - g.mean(axis=2, keepdims=True) - xhat * (g * xhat).mean(axis=2, keepdims=True))
        dx = dx.reshape(xc.shape)
        ctx.set("X@GRAD", np.moveaxis(dx, 1, -1) if nhwc else dx)


@kernel("group_norm")
def group_norm(ctx):
    """Statistics over each group of groups-many consecutive channels (and the spatial dims);
    Mean and Variance [N, groups] hold mean and (biased) variance."""
    x = dense(ctx.x("X"))
    y, mean, var, _ = _group_forward(ctx, x, int(ctx.attr("groups", 1)))
    ctx.set("Y", y)
    ctx.set("Mean", mean)
    ctx.set("Variance", var)


@kernel("group_norm_grad")
def group_norm_grad(ctx):
    x = dense(ctx.x("X"))
    groups = int(ctx.attr("groups", 1))
    mean = dense(ctx.x("Mean"))
    inv = 1.0 / np.sqrt(dense(ctx.x("Variance")) + ctx.attr("epsilon", 1e-5))
    _group_backward(ctx, x, groups, mean, inv)


@kernel("instance_norm")
def instance_norm(ctx):
    """Statistics per sample and channel over the spatial dims; SavedMean and SavedVariance
    ([N * C]) hold the mean and the inverse std."""
    x = dense(ctx.x("X"))
    y, mean, _, inv = _group_forward(ctx, x, x.shape[1])
    ctx.set("Y", y)
    ctx.set("SavedMean", mean.reshape(-1))
    ctx.set("SavedVariance", inv.reshape(-1))


@kernel("instance_norm_grad")
def instance_norm_grad(ctx):
    x = dense(ctx.x("X"))
    _group_backward(ctx, x, x.shape[1], dense(ctx.x("SavedMean")),
                    dense(ctx.x("SavedVariance")))


# --- l1_norm / squared_l2_norm ---------------------------------------------------------------
def _total(ctx, value, like):
    """A sum as the program declares it: 0-d, or [1] (Paddle's older shape)."""
    var = ctx.ex.program.find_var(ctx.op.output("Out")[0], ctx.block_idx)
    out = np.asarray(value, dtype=like.dtype)
    return out.reshape(()) if var is not None and var.shape == () else out.reshape(1)


def _dout_scalar(ctx) -> float:
    return float(np.asarray(dense(ctx.x("Out@GRAD"))).reshape(-1)[0])


@kernel("l1_norm")
def l1_norm(ctx):
    """Out = sum(|X|)."""
    x = np.asarray(dense(ctx.x("X")))
    ctx.set("Out", _total(ctx, np.abs(x).sum(), x))


@kernel("l1_norm_grad")
def l1_norm_grad(ctx):
    x = np.asarray(dense(ctx.x("X")))
    ctx.set("X@GRAD", np.sign(x) * _dout_scalar(ctx))


@kernel("squared_l2_norm")
def squared_l2_norm(ctx):
    """Out = sum(X^2) (a SelectedRows X: of its rows as they are)."""
    x = ctx.x("X")
    x = np.asarray(x.value if isinstance(x, SelectedRows) else dense(x))
    ctx.set("Out", _total(ctx, (x * x).sum(), x))


@kernel("squared_l2_norm_grad")
def squared_l2_norm_grad(ctx):
    x = ctx.x("X")
    d = 2.0 * _dout_scalar(ctx)
    if isinstance(x, SelectedRows):
        ctx.set("X@GRAD", SelectedRows(x.rows, x.value * d, x.height))
        return
    ctx.set("X@GRAD", np.asarray(dense(x)) * d)
