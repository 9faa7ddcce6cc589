"""Shape ops: slice, strided_slice, squeeze / unsqueeze, flatten, stack / unstack, expand / tile;
with their grads (indexing ops are in index_ops.py)."""
from __future__ import annotations

import numpy as np

from ..values import SimError, dense
from .registry import kernel


def int_list(ctx, attr, tensor_slot, list_slot):
    """An int list attr, or its value from a tensor input / a list of 1-element tensors."""
    if tensor_slot and ctx.has(tensor_slot):
        return [int(v) for v in np.asarray(dense(ctx.x(tensor_slot))).reshape(-1)]
    if list_slot and ctx.has(list_slot):
        return [int(np.asarray(dense(v)).reshape(-1)[0]) for v in ctx.xs(list_slot)]
    v = ctx.attr(attr, [])
    return [int(d) for d in (v if isinstance(v, (list, tuple)) else [v])]


def _xshape(ctx, x):
    if ctx.wants("XShape"):
        ctx.set("XShape", np.zeros((0,) + tuple(x.shape), dtype=x.dtype))


def _from_xshape(ctx):
    return tuple(np.shape(ctx.x("XShape"))[1:])


# --- slice ----------------------------------------------------------------------------------
def _slice_index(ctx, shape, strided):
    axes = [int(a) for a in ctx.attr("axes", [])]
    starts = int_list(ctx, "starts", "StartsTensor", "StartsTensorList")
    ends = int_list(ctx, "ends", "EndsTensor", "EndsTensorList")
    strides = int_list(ctx, "strides", "StridesTensor", "StridesTensorList") if strided \
        else [1] * len(axes)
    if not (len(axes) == len(starts) == len(ends) == len(strides)):
        raise SimError("%s: axes %s, starts %s, ends %s do not match"
                       % (ctx.op.type, axes, starts, ends))
    idx = [slice(None)] * len(shape)
    for a, s, e, st in zip(axes, starts, ends, strides):
        a = a % len(shape)
        dim = shape[a]
        if st == 0:
            raise SimError("%s: stride 0" % ctx.op.type)
        if st > 0:
            s = s + dim if s < 0 else s
            e = e + dim if e < 0 else e
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
            idx[a] = slice(s, max(e, s), st)
        else:
            # Paddle: an end of -1 with a negative stride runs through index 0; any other
            # negative end counts from the back and is clamped at 0 (excluded)
            s = s + dim if s < 0 else s
            s = min(s, dim - 1)
            if e == -1:
                stop = None
            else:
                e = e + dim if e < 0 else e
                stop = min(max(e, 0), dim - 1)
            idx[a] = slice(s, stop, st) if s >= 0 else slice(0, 0)
    return tuple(idx)


def _decrease(ctx, out):
    dec = [int(a) % max(out.ndim, 1) for a in (ctx.attr("decrease_axis", []) or [])]
    if not dec:
        return out
    for a in dec:
        if out.shape[a] != 1:
            raise SimError("%s: decrease_axis %d has size %d" % (ctx.op.type, a, out.shape[a]))
    return out.reshape([d for i, d in enumerate(out.shape) if i not in dec])


@kernel("slice", "strided_slice")
def slice_(ctx):
    x = dense(ctx.x("Input"))
    idx = _slice_index(ctx, x.shape, ctx.op.type == "strided_slice")
    ctx.set("Out", _decrease(ctx, x[idx]))


@kernel("slice_grad", "strided_slice_grad")
def slice_grad(ctx):
    shape = ctx.shape("Input")
    d = dense(ctx.x("Out@GRAD"))
    idx = _slice_index(ctx, shape, ctx.op.type == "strided_slice_grad")
    g = np.zeros(shape, dtype=d.dtype)
    g[idx] = d.reshape(g[idx].shape)
    ctx.set("Input@GRAD", g)


# --- squeeze / unsqueeze / flatten ----------------------------------------------------------
def _squeeze_shape(shape, axes):
    if not axes:
        return [d for d in shape if d != 1]
    drop = {a % len(shape) for a in axes if len(shape)}
    return [d for i, d in enumerate(shape) if not (i in drop and d == 1)]


@kernel("squeeze", "squeeze2")
def squeeze(ctx):
    x = dense(ctx.x("X"))
    ctx.set("Out", x.reshape(_squeeze_shape(x.shape, list(ctx.attr("axes", []) or []))),
            lod=ctx.lod("X"))
    _xshape(ctx, x)


def _unsqueeze_shape(shape, axes):
    out = list(shape)
    for a in axes:
        a = a + len(out) + 1 if a < 0 else a
        if not 0 <= a <= len(out):
            raise SimError("unsqueeze: axis %d outside a rank-%d tensor" % (a, len(out)))
        out.insert(a, 1)
    return out


@kernel("unsqueeze", "unsqueeze2")
def unsqueeze(ctx):
    x = dense(ctx.x("X"))
    axes = int_list(ctx, "axes", "AxesTensor", "AxesTensorList")
    ctx.set("Out", x.reshape(_unsqueeze_shape(x.shape, axes)), lod=ctx.lod("X"))
    _xshape(ctx, x)


def _flatten_range_shape(shape, start, stop):
    if not shape:
        return [1]
    n = len(shape)
    start, stop = start % n, stop % n
    if start > stop:
        raise SimError("flatten: start_axis %d after stop_axis %d" % (start, stop))
    return list(shape[:start]) + [int(np.prod(shape[start:stop + 1]))] + list(shape[stop + 1:])


@kernel("flatten_contiguous_range")
def flatten_contiguous_range(ctx):
    x = dense(ctx.x("X"))
    shape = _flatten_range_shape(x.shape, ctx.attr("start_axis", 1), ctx.attr("stop_axis", 1))
    ctx.set("Out", x.reshape(shape), lod=ctx.lod("X"))
    _xshape(ctx, x)


@kernel("flatten", "flatten2")
def flatten(ctx):
    """The older flatten: to 2-D, dims before `axis` and from `axis` on."""
    x = dense(ctx.x("X"))
    a = ctx.attr("axis", 1)
    ctx.set("Out", x.reshape(int(np.prod(x.shape[:a])), int(np.prod(x.shape[a:]))))
    _xshape(ctx, x)


@kernel("squeeze2_grad", "unsqueeze2_grad", "flatten_contiguous_range_grad", "flatten2_grad")
def reshape_back_grad(ctx):
    d = dense(ctx.x("Out@GRAD"))
    ctx.set("X@GRAD", d.reshape(_from_xshape(ctx)), lod=ctx.lod("Out@GRAD"))


@kernel("squeeze_grad", "unsqueeze_grad", "flatten_grad")
def reshape_back_grad_x(ctx):
    ctx.set("X@GRAD", dense(ctx.x("Out@GRAD")).reshape(ctx.shape("X")))


# --- stack / unstack ------------------------------------------------------------------------
def _stacked(arrays: list, axis: int):
    """np.stack along Paddle's axis (negative: counted from the new rank)."""
    axis = axis + arrays[0].ndim + 1 if axis < 0 else axis
    return np.stack(arrays, axis=axis)


def _unstacked(ctx, x, axis: int, out: str) -> None:
    """Set output `out`'s n vars to x's n slices along `axis` (stack's inverse)."""
    axis = axis % x.ndim
    n = len(ctx.out_names(out))
    if x.shape[axis] != n:
        raise SimError("%s: dim %d of %s is not %d" % (ctx.op.type, axis, x.shape, n))
    for i in range(n):
        ctx.set(out, np.take(x, i, axis=axis), idx=i)


@kernel("stack")
def stack(ctx):
    ctx.set("Y", _stacked([dense(v) for v in ctx.xs("X")], ctx.attr("axis", 0)))


@kernel("stack_grad")
def stack_grad(ctx):
    _unstacked(ctx, dense(ctx.x("Y@GRAD")), ctx.attr("axis", 0), "X@GRAD")


@kernel("unstack")
def unstack(ctx):
    _unstacked(ctx, dense(ctx.x("X")), ctx.attr("axis", 0), "Y")


@kernel("unstack_grad")
def unstack_grad(ctx):
    ctx.set("X@GRAD", _stacked([dense(v) for v in ctx.xs("Y@GRAD")], ctx.attr("axis", 0)))


# --- expand / tile --------------------------------------------------------------------------
def sum_to(g, shape):
    """Sum g (broadcast from `shape` with leading dims added) back to `shape`."""
    shape = tuple(shape)
    nd = g.ndim - len(shape)
    if nd:
        g = g.sum(axis=tuple(range(nd)))
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


@kernel("expand")
def expand(ctx):
    x = dense(ctx.x("X"))
    times = int_list(ctx, "expand_times", "ExpandTimes", "expand_times_tensor")
    if len(times) != x.ndim:
        raise SimError("expand: %d expand_times for a rank-%d X" % (len(times), x.ndim))
    ctx.set("Out", np.tile(x, times))


@kernel("expand_grad", "tile_grad")
def tile_grad(ctx):
    shape = ctx.shape("X")
    d = dense(ctx.x("Out@GRAD"))
    if ctx.op.type == "expand_grad":
        times = int_list(ctx, "expand_times", "ExpandTimes", "expand_times_tensor")
    else:
        times = int_list(ctx, "repeat_times", "RepeatTimes", "repeat_times_tensor")
    rank = max(len(shape), len(times))
    xs = [1] * (rank - len(shape)) + list(shape)
    ts = [1] * (rank - len(times)) + list(times)
    # [t0, s0, t1, s1, ...]: the repeats are the outer index of each dim
    g = d.reshape([v for pair in zip(ts, xs) for v in pair]).sum(axis=tuple(range(0, 2 * rank, 2)))
    ctx.set("X@GRAD", g.reshape(shape))


@kernel("tile")
def tile(ctx):
    x = dense(ctx.x("X"))
    times = int_list(ctx, "repeat_times", "RepeatTimes", "repeat_times_tensor")
    ctx.set("Out", np.tile(x, times) if times else x.copy())


def _expand_v2_shape(x_shape, shape):
    shape = list(shape)
    lead = len(shape) - len(x_shape)
    if lead < 0:
        raise SimError("expand_v2: shape %s has fewer dims than X %s" % (shape, list(x_shape)))
    out = []
    for i, d in enumerate(shape):
        xd = x_shape[i - lead] if i >= lead else None
        if d == -1:
            if xd is None:
                raise SimError("expand_v2: -1 for a new dim in %s" % shape)
            d = xd
        if xd is not None and xd != 1 and xd != d:
            raise SimError("expand_v2: cannot expand %s to %s" % (list(x_shape), shape))
        out.append(d)
    return out


@kernel("expand_v2", "expand_as_v2", "expand_as")
def expand_v2(ctx):
    x = dense(ctx.x("X"))
    if ctx.op.type == "expand_v2":
        shape = int_list(ctx, "shape", "Shape", "expand_shapes_tensor")
    elif ctx.has("Y") if ctx.op.type == "expand_as_v2" else False:
        shape = list(ctx.shape("Y"))
    elif ctx.op.type == "expand_as":
        shape = list(ctx.shape("target_tensor"))
    else:
        shape = [int(d) for d in ctx.attr("target_shape", [])]
    ctx.set("Out", np.broadcast_to(x, _expand_v2_shape(x.shape, shape)).copy())


@kernel("expand_v2_grad", "expand_as_v2_grad", "expand_as_grad")
def expand_v2_grad(ctx):
    ctx.set("X@GRAD", sum_to(dense(ctx.x("Out@GRAD")), ctx.shape("X")))
