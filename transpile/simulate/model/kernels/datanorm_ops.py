"""data_norm and data_norm_grad: the CPU kernels of Paddle's data_norm_op.cc.

data_norm normalises each column c of a [N, C] input by statistics kept in three parameters:
Means = BatchSum / BatchSize, Scales = sqrt(BatchSize / BatchSquareSum),
Y = (X - Means) * Scales. With `slot_dim` > 0 the columns come in slots of that width whose
first column is a show count: a slot whose show is 0 (|x| < 1e-7) gives zeros. With
`enable_scale_and_shift` Y is further scaled by `scale_w` and shifted by `bias`.

data_norm_grad: X@GRAD = Y@GRAD * Scales (* scale_w); the statistics' "gradients" are the
batch's own statistics, which the optimizer (or a pserver's summary table) adds up:
BatchSize@GRAD = N, BatchSum@GRAD = sum of X, BatchSquareSum@GRAD = sum of (X - Means)^2 +
N * epsilon. With `slot_dim` > 0 only rows whose slot shows are counted, and each column's
sums are divided by its count (BatchSize@GRAD 1, square sum + count * epsilon). The CPU kernel
does not write the BatchSize / BatchSum / BatchSquareSum outputs it declares (the GPU one
decays them in place).
"""
from __future__ import annotations

import numpy as np

from ..values import SimError, dense
from .registry import kernel

MIN_PRECISION = 1e-7


def _input(ctx):
    x = dense(ctx.x("X"))
    if x.ndim != 2:
        raise SimError("data_norm: X of rank %d (the kernel takes [N, C])" % x.ndim)
    return x


def _stats(ctx, x):
    """(means, scales) of the statistics parameters, as the forward computes them."""
    size = dense(ctx.x("BatchSize")).reshape(-1)
    total = dense(ctx.x("BatchSum")).reshape(-1)
    square = dense(ctx.x("BatchSquareSum")).reshape(-1)
    c = x.shape[1]
    if not (len(size) == len(total) == len(square) == c):
        raise SimError("data_norm: statistics of %d, %d, %d values for %d columns"
                       % (len(size), len(total), len(square), c))
    with np.errstate(divide="ignore", invalid="ignore"):
        return total / size, np.sqrt(size / square)


def _shown(x, slot_dim):
    """[N, C] bool: the entries whose slot shows (its first column is not 0)."""
    n, c = x.shape
    if c % slot_dim:
        raise SimError("data_norm: %d columns are no whole number of slots of %d"
                       % (c, slot_dim))
    show = x[:, ::slot_dim]
    visible = ~((show > -MIN_PRECISION) & (show < MIN_PRECISION))
    return np.repeat(visible, slot_dim, axis=1)


def _scale_shift(ctx, c, dtype):
    if not ctx.attr("enable_scale_and_shift", False):
        return None, None
    if not (ctx.has("scale_w") and ctx.has("bias")):
        raise SimError("data_norm: enable_scale_and_shift without scale_w and bias")
    w = dense(ctx.x("scale_w")).reshape(-1)
    b = dense(ctx.x("bias")).reshape(-1)
    if len(w) != c or len(b) != c:
        raise SimError("data_norm: scale_w / bias of %d / %d values for %d columns"
                       % (len(w), len(b), c))
    return w.astype(dtype, copy=False), b.astype(dtype, copy=False)


@kernel("data_norm")
def data_norm(ctx):
    x = _input(ctx)
    means, scales = _stats(ctx, x)
    w, b = _scale_shift(ctx, x.shape[1], x.dtype)
    y = (x - means) * scales
    if w is not None:
        y = y * w + b
    slot_dim = int(ctx.attr("slot_dim", -1) or -1)
    if slot_dim > 0 and len(x):
        y = np.where(_shown(x, slot_dim), y, 0)
    ctx.set("Y", y.astype(x.dtype, copy=False), lod=ctx.lod("X"))
    ctx.set("Means", means.astype(x.dtype, copy=False))
    ctx.set("Scales", scales.astype(x.dtype, copy=False))


def _stat_grads(x, means, eps, slot_dim):
    """(BatchSize@GRAD, BatchSum@GRAD, BatchSquareSum@GRAD)."""
    n, c = x.shape
    if slot_dim <= 0 or n == 0:
        size = np.full(c, float(n), dtype=x.dtype)
        return size, x.sum(axis=0), ((x - means) ** 2).sum(axis=0) + size * eps
    shown = _shown(x, slot_dim)
    count = shown.sum(axis=0).astype(x.dtype)
    total = np.where(shown, x, 0).sum(axis=0)
    square = np.where(shown, (x - means) ** 2, 0).sum(axis=0)
    seen = count >= 1
    safe = np.where(seen, count, 1)
    total = np.where(seen, total / safe, total)
    square = np.where(seen, square / safe + count * eps, square)
    return np.where(seen, 1, count).astype(x.dtype), total, square


@kernel("data_norm_grad")
def data_norm_grad(ctx):
    x = _input(ctx)
    dy = dense(ctx.x("Y@GRAD"))
    means = dense(ctx.x("Means")).reshape(-1)
    scales = dense(ctx.x("Scales")).reshape(-1)
    eps = float(ctx.attr("epsilon", 1e-4))
    slot_dim = int(ctx.attr("slot_dim", -1) or -1)
    w, _ = _scale_shift(ctx, x.shape[1], x.dtype)
    shown = _shown(x, slot_dim) if slot_dim > 0 and len(x) else np.ones(x.shape, bool)
    if ctx.wants("X@GRAD"):
        dx = dy * scales * (1 if w is None else w)
        if w is not None and slot_dim > 0:
            dx = np.where(shown, dx, 0)
        ctx.set("X@GRAD", dx.astype(x.dtype, copy=False), lod=ctx.lod("X"))
    if w is not None:
        if ctx.wants("bias@GRAD"):
            ctx.set("bias@GRAD", np.where(shown, dy, 0).sum(axis=0))
        if ctx.wants("scale_w@GRAD"):
            ctx.set("scale_w@GRAD", np.where(shown, (x - means) * scales * dy, 0).sum(axis=0))
    size, total, square = _stat_grads(x, means, eps, slot_dim)
    ctx.set("BatchSize@GRAD", size)
    ctx.set("BatchSum@GRAD", total.astype(x.dtype, copy=False))
    ctx.set("BatchSquareSum@GRAD", square.astype(x.dtype, copy=False))
