"""Indexing kernels: gather / scatter / index_select / where, one_hot, top_k, arg_max, range,
cumsum, shape."""
from __future__ import annotations

import numpy as np

from ..values import LazyTable, SimError, dense, np_dtype
from .registry import kernel
from .shape_ops import sum_to


# --- gather / scatter / index_select / where ------------------------------------------------
def _index(ctx, slot="Index"):
    idx = np.asarray(dense(ctx.x(slot))).astype(np.int64)
    return idx


def _gather_axis(ctx, ndim):
    a = ctx.attr("axis", 0) or 0
    if ctx.has("Axis"):
        a = int(np.asarray(dense(ctx.x("Axis"))).reshape(-1)[0])
    return a % ndim


@kernel("gather")
def gather(ctx):
    raw = ctx.raw("X")
    idx = _index(ctx)
    if idx.ndim > 1:
        if idx.shape[-1] != 1:
            raise SimError("gather: Index of shape %s" % (idx.shape,))
        idx = idx.reshape(-1)
    if isinstance(raw, LazyTable) and _gather_axis(ctx, len(raw.shape)) == 0:
        # rows of a lazily kept table (style ps's pulled dense tables, ps/denseflat.py)
        h = raw.height
        if idx.size and (idx.min() < -h or idx.max() >= h):
            raise SimError("gather: index %d outside dim 0 of size %d" % (int(idx.max()), h))
        return ctx.set("Out", raw.get(idx % h))
    x = dense(ctx.x("X"))
    axis = _gather_axis(ctx, x.ndim)
    if idx.size and (idx.min() < -x.shape[axis] or idx.max() >= x.shape[axis]):
        raise SimError("gather: index %d outside dim %d of size %d"
                       % (int(idx.max()), axis, x.shape[axis]))
    ctx.set("Out", np.take(x, idx, axis=axis))


@kernel("gather_grad")
def gather_grad(ctx):
    shape = ctx.shape("X")
    idx = _index(ctx).reshape(-1)
    d = dense(ctx.x("Out@GRAD"))
    axis = _gather_axis(ctx, len(shape))
    g = np.zeros(shape, dtype=d.dtype)
    gm, dm = np.moveaxis(g, axis, 0), np.moveaxis(d, axis, 0)
    np.add.at(gm, idx, dm)
    ctx.set("X@GRAD", g)


@kernel("gather_nd")
def gather_nd(ctx):
    x = dense(ctx.x("X"))
    idx = _index(ctx)
    k = idx.shape[-1]
    if k > x.ndim:
        raise SimError("gather_nd: index depth %d for a rank-%d X" % (k, x.ndim))
    ctx.set("Out", x[tuple(np.moveaxis(idx, -1, 0))] if k else
            np.broadcast_to(x, idx.shape[:-1] + x.shape).copy())


@kernel("gather_nd_grad")
def gather_nd_grad(ctx):
    shape = ctx.shape("X")
    idx = _index(ctx)
    d = dense(ctx.x("Out@GRAD"))
    g = np.zeros(shape, dtype=d.dtype)
    if idx.shape[-1]:
        np.add.at(g, tuple(np.moveaxis(idx, -1, 0)), d)
    else:
        g += d.reshape((-1,) + tuple(shape)).sum(axis=0)
    ctx.set("X@GRAD", g)


@kernel("scatter")
def scatter(ctx):
    x = dense(ctx.x("X"))
    ids = _index(ctx, "Ids").reshape(-1)
    upd = dense(ctx.x("Updates")).reshape((ids.size,) + x.shape[1:])
    out = np.array(x, copy=True)
    if ctx.attr("overwrite", True):
        for i, r in enumerate(ids):      # in order: a repeated id keeps the last update
            out[r] = upd[i]
    else:
        out[ids] = 0
        np.add.at(out, ids, upd)
    ctx.set("Out", out)


@kernel("scatter_grad")
def scatter_grad(ctx):
    ids = _index(ctx, "Ids").reshape(-1)
    d = dense(ctx.x("Out@GRAD"))
    if ctx.wants("X@GRAD"):
        g = np.array(d, copy=True)
        g[ids] = 0
        ctx.set("X@GRAD", g)
    if ctx.wants("Updates@GRAD"):
        ctx.set("Updates@GRAD", d[ids].reshape(ctx.shape("Updates")))


@kernel("index_select")
def index_select(ctx):
    x = dense(ctx.x("X"))
    idx = _index(ctx).reshape(-1)
    ctx.set("Out", np.take(x, idx, axis=ctx.attr("dim", 0) % x.ndim))


@kernel("index_select_grad")
def index_select_grad(ctx):
    shape = ctx.shape("X")
    idx = _index(ctx).reshape(-1)
    d = dense(ctx.x("Out@GRAD"))
    axis = ctx.attr("dim", 0) % len(shape)
    g = np.zeros(shape, dtype=d.dtype)
    np.add.at(np.moveaxis(g, axis, 0), idx, np.moveaxis(d, axis, 0))
    ctx.set("X@GRAD", g)


@kernel("where")
def where(ctx):
    c = np.asarray(dense(ctx.x("Condition"))).astype(bool)
    ctx.set("Out", np.where(c, dense(ctx.x("X")), dense(ctx.x("Y"))))


@kernel("where_grad")
def where_grad(ctx):
    c = np.asarray(dense(ctx.x("Condition"))).astype(bool)
    d = dense(ctx.x("Out@GRAD"))
    if ctx.wants("X@GRAD"):
        ctx.set("X@GRAD", sum_to(np.where(c, d, 0.0), ctx.shape("X")))
    if ctx.wants("Y@GRAD"):
        ctx.set("Y@GRAD", sum_to(np.where(c, 0.0, d), ctx.shape("Y")))


@kernel("where_index")
def where_index(ctx):
    c = np.asarray(dense(ctx.x("Condition")))
    ctx.set("Out", np.argwhere(c).astype(np.int64))


# --- one_hot / top_k / arg_max --------------------------------------------------------------
@kernel("one_hot", "one_hot_v2")
def one_hot(ctx):
    x = np.asarray(dense(ctx.x("X"))).astype(np.int64)
    depth = ctx.attr("depth", -1)
    if ctx.has("depth_tensor"):
        depth = int(np.asarray(dense(ctx.x("depth_tensor"))).reshape(-1)[0])
    if ctx.op.type == "one_hot":
        if x.shape[-1] != 1:
            raise SimError("one_hot: X must end in a dim of 1, got %s" % (x.shape,))
        x = x.reshape(x.shape[:-1])
    bad = (x < 0) | (x >= depth)
    if bad.any() and not ctx.attr("allow_out_of_range", False):
        raise SimError("%s: id %d outside depth %d" % (ctx.op.type, int(x[bad][0]), depth))
    out = (x[..., None] == np.arange(depth)) & ~bad[..., None]
    ctx.set("Out", out.astype(np_dtype(ctx.attr("dtype", 5), ctx.fdt)), lod=ctx.lod("X"))


def _topk(ctx, x):
    k = ctx.attr("k", 1)
    if ctx.has("K"):
        k = int(np.asarray(dense(ctx.x("K"))).reshape(-1)[0])
    axis = ctx.attr("axis", -1) % x.ndim if x.ndim else 0
    largest = ctx.attr("largest", True)
    key = -x if largest else x
    order = np.argsort(key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return idx, axis


@kernel("top_k", "top_k_v2")
def top_k(ctx):
    x = dense(ctx.x("X"))
    idx, axis = _topk(ctx, x)
    ctx.set("Out", np.take_along_axis(x, idx, axis=axis), lod=ctx.lod("X"))
    ctx.set("Indices", idx.astype(np.int64), lod=ctx.lod("X"))


@kernel("top_k_grad", "top_k_v2_grad")
def top_k_grad(ctx):
    shape = ctx.shape("X")
    idx = np.asarray(dense(ctx.x("Indices"))).astype(np.int64)
    d = dense(ctx.x("Out@GRAD"))
    axis = ctx.attr("axis", -1) % len(shape) if shape else 0
    g = np.zeros(shape, dtype=d.dtype)
    np.put_along_axis(g, idx, d, axis=axis)
    ctx.set("X@GRAD", g)


@kernel("arg_max", "arg_min")
def arg_max(ctx):
    x = dense(ctx.x("X"))
    fn = np.argmax if ctx.op.type == "arg_max" else np.argmin
    dt = np_dtype(ctx.attr("dtype", 3), ctx.fdt)
    if dt not in (np.int32, np.int64):
        dt = np.int64
    if ctx.attr("flatten", False) or x.ndim == 0:
        out = np.asarray(fn(x.reshape(-1)))
        if ctx.attr("keepdims", False):
            out = out.reshape([1] * x.ndim)
    else:
        out = fn(x, axis=ctx.attr("axis", -1) % x.ndim, keepdims=ctx.attr("keepdims", False))
    ctx.set("Out", np.asarray(out).astype(dt))


# --- range / cumsum / shape -----------------------------------------------------------------
@kernel("range")
def range_(ctx):
    s, e, st = (np.asarray(dense(ctx.x(n))).reshape(-1)[0] for n in ("Start", "End", "Step"))
    dt = np.asarray(dense(ctx.x("Start"))).dtype
    n = int(np.ceil(abs((e - s) / st))) if st else 0
    ctx.set("Out", (s + st * np.arange(n)).astype(dt))


@kernel("linspace")
def linspace(ctx):
    s, e = (float(np.asarray(dense(ctx.x(n))).reshape(-1)[0]) for n in ("Start", "Stop"))
    n = int(np.asarray(dense(ctx.x("Num"))).reshape(-1)[0])
    ctx.set("Out", np.linspace(s, e, n).astype(np_dtype(ctx.attr("dtype", 5), ctx.fdt)))


def _cumsum(x, ctx, reverse):
    if ctx.attr("flatten", False) or x.ndim == 0:
        x = x.reshape(-1)
        axis = 0
    else:
        axis = ctx.attr("axis", -1) % x.ndim
    if reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis)
    if ctx.attr("exclusive", False):
        out = out - x
    return np.flip(out, axis) if reverse else out


@kernel("cumsum")
def cumsum(ctx):
    x = dense(ctx.x("X"))
    ctx.set("Out", _cumsum(x, ctx, ctx.attr("reverse", False)).astype(x.dtype, copy=False))


@kernel("cumsum_grad")
def cumsum_grad(ctx):
    d = dense(ctx.x("Out@GRAD"))
    g = _cumsum(d, ctx, not ctx.attr("reverse", False))
    ctx.set("X@GRAD", g.reshape(ctx.shape("X")) if ctx.has("X") else g)


@kernel("shape")
def shape(ctx):
    ctx.set("Out", np.asarray(ctx.shape("Input"), dtype=np.int32))


@kernel("size", "numel")
def numel(ctx):
    ctx.set("Out", np.asarray(int(np.prod(ctx.shape("Input"))), dtype=np.int64))
