"""Less common creation and indexing ops: assign_value, *_batch_size_like, eye, randint,
set_value, flip, roll, tril_triu, take_along_axis / put_along_axis, index_sample,
masked_select, scatter_nd_add, isfinite / isnan / isinf, max_pool2d_with_index; with grads."""
from __future__ import annotations

import numpy as np

from ..values import SimError, dense, np_dtype
from .registry import kernel
from .shape_ops import int_list, sum_to


def _scalar(v):
    """A value of a SCALAR / SCALARS attr (decoded as {"type": .., "r" | "i" | "b": ..})."""
    if isinstance(v, dict):
        for k in ("r", "i", "b"):
            if k in v:
                return v[k]
        if "c" in v:
            return complex(*v["c"])
        return 0
    return v


@kernel("assign_value")
def assign_value(ctx):
    dt = np_dtype(ctx.attr("dtype", 5), ctx.fdt)
    vals = None
    for a in ("fp32_values", "fp64_values", "int32_values", "int64_values", "bool_values",
              "values"):
        v = ctx.attr(a, None)
        if v:
            vals = [_scalar(x) for x in v]
            break
    shape = [int(d) for d in ctx.attr("shape", [])]
    n = int(np.prod(shape)) if shape else 1
    if vals is None:
        vals = [0] * n
    if len(vals) != n:
        raise SimError("assign_value: %d values for shape %s" % (len(vals), shape))
    ctx.set("Out", np.asarray(vals).astype(dt).reshape(shape))


def _batch_like_shape(ctx):
    shape = [int(d) for d in ctx.attr("shape", [])]
    src = ctx.shape("Input")
    i, o = ctx.attr("input_dim_idx", 0), ctx.attr("output_dim_idx", 0)
    shape[o] = src[i]
    return shape


@kernel("fill_constant_batch_size_like")
def fill_constant_batch_size_like(ctx):
    value = ctx.attr("value", 0.0)
    if ctx.attr("str_value", ""):
        value = float(ctx.attr("str_value"))
    ctx.set("Out", np.full(_batch_like_shape(ctx), value,
                           dtype=np_dtype(ctx.attr("dtype", 5), ctx.fdt)))


@kernel("uniform_random_batch_size_like", "gaussian_random_batch_size_like")
def random_batch_size_like(ctx):
    shape = _batch_like_shape(ctx)
    if ctx.ex.samples:
        from .tensor_ops import keyed_random
        return ctx.set("Out", keyed_random(ctx, shape).astype(
            np_dtype(ctx.attr("dtype", 5), ctx.fdt)))
    rng = ctx.rng()
    if ctx.op.type.startswith("uniform"):
        out = rng.uniform(ctx.attr("min", -1.0), ctx.attr("max", 1.0), size=shape)
    else:
        out = rng.normal(ctx.attr("mean", 0.0), ctx.attr("std", 1.0), size=shape)
    ctx.set("Out", out.astype(np_dtype(ctx.attr("dtype", 5), ctx.fdt)))


@kernel("eye")
def eye(ctx):
    r = int(ctx.attr("num_rows", 1))
    c = int(ctx.attr("num_columns", -1))
    ctx.set("Out", np.eye(r, r if c < 0 else c, dtype=np_dtype(ctx.attr("dtype", 5), ctx.fdt)))


@kernel("randint")
def randint(ctx):
    shape = int_list(ctx, "shape", "ShapeTensor", "ShapeTensorList")
    lo, hi = ctx.attr("low", 0), ctx.attr("high", 2)
    if ctx.ex.samples:
        out = lo + np.floor(ctx.keyed_uniform(shape, seed=ctx.attr("seed", 0) or 0)
                            * (hi - lo)).astype(np.int64)
    else:
        out = ctx.rng().integers(lo, hi, size=shape)
    ctx.set("Out", out.astype(np_dtype(ctx.attr("dtype", 3), ctx.fdt)))


@kernel("multinomial")
def multinomial(ctx):
    """num_samples class indices per row of X (unnormalised probabilities, [C] or [N, C]),
    by inverse CDF of keyed uniforms (OpCtx.keyed_uniform: a trainer's rows draw what the
    original drew for them); without replacement a class drawn leaves the row's mass."""
    p = np.asarray(dense(ctx.x("X")), dtype=np.float64)
    rows = p.reshape(-1, p.shape[-1]) if p.ndim else p.reshape(1, 1)
    k = int(ctx.attr("num_samples", 1) or 1)
    replace = bool(ctx.attr("replacement", False))
    if (rows < 0).any() or not np.isfinite(rows).all():
        raise SimError("multinomial: X holds a negative or non-finite probability")
    if not replace and k > int((rows > 0).sum(axis=1).min(initial=rows.shape[1])):
        raise SimError("multinomial: %d samples without replacement from a row with fewer "
                       "non-zero classes" % k)
    u = ctx.keyed_uniform((rows.shape[0], k))
    out = np.zeros((rows.shape[0], k), dtype=np.int64)
    for i, row in enumerate(rows):
        w = row.copy()
        for j in range(k):
            c = np.cumsum(w)
            if c[-1] <= 0:
                raise SimError("multinomial: a row of X sums to 0")
            out[i, j] = min(int(np.searchsorted(c, u[i, j] * c[-1], side="right")), len(w) - 1)
            if not replace:
                w[out[i, j]] = 0.0
    ctx.set("Out", out.reshape(p.shape[:-1] + (k,)) if p.ndim > 1 else out.reshape(k))


# --- set_value ------------------------------------------------------------------------------
def _set_value_index(ctx, shape):
    axes = [int(a) for a in ctx.attr("axes", [])]
    starts = int_list(ctx, "starts", None, "StartsTensorList")
    ends = int_list(ctx, "ends", None, "EndsTensorList")
    steps = int_list(ctx, "steps", None, "StepsTensorList") or [1] * len(axes)
    idx = [slice(None)] * len(shape)
    for a, s, e, st in zip(axes, starts, ends, steps):
        dim = shape[a]
        if st > 0:
            s = min(max(s + dim if s < 0 else s, 0), dim)
            e = min(max(e + dim if e < 0 else e, 0), dim)
            idx[a] = slice(s, e, st)
        else:
            s = min(s + dim if s < 0 else s, dim - 1)
            e = e + dim if e < 0 else e
            idx[a] = slice(s, e if e >= 0 else None, st)
    return tuple(idx)


def _decreased(ctx, region):
    """The region's shape without its decreased axes (x[i] drops axis i): what the value
    broadcasts to."""
    dec = {int(a) for a in (ctx.attr("decrease_axes", []) or [])}
    return [d for i, d in enumerate(region) if i not in dec]


def _set_value_value(ctx, region, dtype):
    if ctx.has("ValueTensor"):
        v = np.asarray(dense(ctx.x("ValueTensor")))
    else:
        vals = [_scalar(x) for x in (ctx.attr("values", []) or [])]
        if not vals:
            for a in ("fp32_values", "fp64_values", "int32_values", "int64_values",
                      "bool_values"):
                if ctx.attr(a, None):
                    vals = list(ctx.attr(a))
                    break
        shape = [int(d) for d in ctx.attr("shape", [])] or [len(vals)]
        v = np.asarray(vals, dtype=dtype).reshape(shape)
    if v.size == int(np.prod(region)):
        return v.reshape(region)
    return np.broadcast_to(v, _decreased(ctx, region)).reshape(region)


@kernel("set_value")
def set_value(ctx):
    """Input with a strided region (axes, starts, ends, steps) set to ValueTensor or to the
    values attr, broadcast."""
    x = dense(ctx.x("Input"))
    out = np.array(x, copy=True)
    idx = _set_value_index(ctx, x.shape)
    out[idx] = _set_value_value(ctx, out[idx].shape, x.dtype)
    ctx.set("Out", out, lod=ctx.lod("Input"))


@kernel("set_value_grad")
def set_value_grad(ctx):
    d = dense(ctx.x("Out@GRAD"))
    idx = _set_value_index(ctx, d.shape)
    if ctx.wants("Input@GRAD"):
        g = np.array(d, copy=True)
        g[idx] = 0
        ctx.set("Input@GRAD", g)
    if ctx.wants("ValueTensor@GRAD"):
        vshape = ctx.shape("ValueTensor")
        region = d[idx]
        if int(np.prod(vshape)) == region.size:
            ctx.set("ValueTensor@GRAD", region.reshape(vshape))
        else:
            ctx.set("ValueTensor@GRAD",
                    sum_to(region.reshape(_decreased(ctx, region.shape)), vshape))


# --- flips, rolls, triangles ----------------------------------------------------------------
@kernel("flip")
def flip(ctx):
    x = dense(ctx.x("X"))
    ctx.set("Out", np.flip(x, axis=tuple(int(a) % x.ndim for a in ctx.attr("axis", []))).copy())


@kernel("flip_grad")
def flip_grad(ctx):
    d = dense(ctx.x("Out@GRAD"))
    ctx.set("X@GRAD", np.flip(d, axis=tuple(int(a) % d.ndim for a in ctx.attr("axis", []))).copy())


def _roll(ctx, a, sign):
    shifts = int_list(ctx, "shifts", "ShiftsTensor", None)
    axis = [int(v) for v in ctx.attr("axis", [])]
    shifts = [sign * s for s in shifts]
    if not axis:
        return np.roll(a.reshape(-1), shifts[0]).reshape(a.shape)
    return np.roll(a, shifts, axis=axis)


@kernel("roll")
def roll(ctx):
    ctx.set("Out", _roll(ctx, dense(ctx.x("X")), 1))


@kernel("roll_grad")
def roll_grad(ctx):
    ctx.set("X@GRAD", _roll(ctx, dense(ctx.x("Out@GRAD")), -1))


def _tri(ctx, a):
    k = ctx.attr("diagonal", 0)
    return np.tril(a, k) if ctx.attr("lower", True) else np.triu(a, k)


@kernel("tril_triu")
def tril_triu(ctx):
    ctx.set("Out", _tri(ctx, dense(ctx.x("X"))))


@kernel("tril_triu_grad")
def tril_triu_grad(ctx):
    ctx.set("X@GRAD", _tri(ctx, dense(ctx.x("Out@GRAD"))))


# --- along-axis and masked indexing ---------------------------------------------------------
@kernel("take_along_axis")
def take_along_axis(ctx):
    x = dense(ctx.x("Input"))
    idx = np.asarray(dense(ctx.x("Index"))).astype(np.int64)
    axis = ctx.attr("Axis", 0) % x.ndim
    bshape = [d if i == axis else max(d, idx.shape[i]) for i, d in enumerate(x.shape)]
    xb = np.broadcast_to(x, [x.shape[i] if i == axis else bshape[i] for i in range(x.ndim)])
    ctx.set("Result", np.take_along_axis(xb, idx, axis=axis))


@kernel("take_along_axis_grad")
def take_along_axis_grad(ctx):
    shape = ctx.shape("Input")
    idx = np.asarray(dense(ctx.x("Index"))).astype(np.int64)
    d = dense(ctx.x("Result@GRAD"))
    axis = ctx.attr("Axis", 0) % len(shape)
    g = np.zeros([shape[i] if i == axis else idx.shape[i] for i in range(len(shape))],
                 dtype=d.dtype)
    ix = list(np.indices(idx.shape, sparse=True))
    ix[axis] = idx
    np.add.at(g, tuple(ix), d)
    ctx.set("Input@GRAD", sum_to(g, shape))


@kernel("put_along_axis")
def put_along_axis(ctx):
    x = dense(ctx.x("Input"))
    idx = np.asarray(dense(ctx.x("Index"))).astype(np.int64)
    v = np.broadcast_to(dense(ctx.x("Value")), idx.shape)
    axis = ctx.attr("Axis", 0) % x.ndim
    red = ctx.attr("Reduce", "assign")
    out = np.array(x, copy=True)
    ix = list(np.indices(idx.shape, sparse=True))
    ix[axis] = idx
    ix = tuple(ix)
    if red == "assign":
        out[ix] = v
    elif red == "add":
        np.add.at(out, ix, v)
    elif red in ("mul", "multiply"):
        np.multiply.at(out, ix, v)
    else:
        raise SimError("put_along_axis: reduce %s is not simulated" % red)
    ctx.set("Result", out)


@kernel("index_sample")
def index_sample(ctx):
    x = dense(ctx.x("X"))
    idx = np.asarray(dense(ctx.x("Index"))).astype(np.int64)
    ctx.set("Out", np.take_along_axis(x, idx, axis=1))


@kernel("index_sample_grad")
def index_sample_grad(ctx):
    shape = ctx.shape("X")
    idx = np.asarray(dense(ctx.x("Index"))).astype(np.int64)
    d = dense(ctx.x("Out@GRAD"))
    g = np.zeros(shape, dtype=d.dtype)
    np.add.at(g, (np.arange(shape[0])[:, None], idx), d)
    ctx.set("X@GRAD", g)


@kernel("masked_select")
def masked_select(ctx):
    x = dense(ctx.x("X"))
    m = np.broadcast_to(np.asarray(dense(ctx.x("Mask"))).astype(bool), x.shape)
    ctx.set("Y", x[m])


@kernel("masked_select_grad")
def masked_select_grad(ctx):
    shape = ctx.shape("X")
    m = np.broadcast_to(np.asarray(dense(ctx.x("Mask"))).astype(bool), shape)
    d = dense(ctx.x("Y@GRAD"))
    g = np.zeros(shape, dtype=d.dtype)
    g[m] = d
    ctx.set("X@GRAD", g)


@kernel("scatter_nd_add")
def scatter_nd_add(ctx):
    x = dense(ctx.x("X"))
    idx = np.asarray(dense(ctx.x("Index"))).astype(np.int64)
    u = dense(ctx.x("Updates"))
    out = np.array(x, copy=True)
    np.add.at(out, tuple(np.moveaxis(idx, -1, 0)), u)
    ctx.set("Out", out)


@kernel("scatter_nd_add_grad")
def scatter_nd_add_grad(ctx):
    idx = np.asarray(dense(ctx.x("Index"))).astype(np.int64)
    d = dense(ctx.x("Out@GRAD"))
    if ctx.wants("X@GRAD"):
        ctx.set("X@GRAD", np.array(d, copy=True))
    if ctx.wants("Updates@GRAD"):
        ctx.set("Updates@GRAD", d[tuple(np.moveaxis(idx, -1, 0))])


_CHECKS = {"isfinite_v2": np.isfinite, "isnan_v2": np.isnan, "isinf_v2": np.isinf}


@kernel(*_CHECKS)
def isfinite(ctx):
    ctx.set("Out", _CHECKS[ctx.op.type](dense(ctx.x("X"))))


@kernel("isfinite", "isnan", "isinf")
def any_check(ctx):
    """The older ops: one bool, whether any element is (not) finite / nan / inf."""
    x = dense(ctx.x("X"))
    if ctx.op.type == "isfinite":
        v = bool(np.isfinite(x).all())
    else:
        v = bool((np.isnan(x) if ctx.op.type == "isnan" else np.isinf(x)).any())
    ctx.set("Out", np.asarray([v]))


# --- max_pool2d_with_index ------------------------------------------------------------------
def _maxpool_index(ctx, x):
    """Out and Mask (the argmax's flat h * W + w index in its input plane)."""
    n, c, h, w = x.shape
    k = list(ctx.attr("ksize", [1, 1]))
    s = list(ctx.attr("strides", [1, 1]))
    p = list(ctx.attr("paddings", [0, 0]))
    if ctx.attr("global_pooling", False):
        k, s, p = [h, w], [1, 1], [0, 0]
    adaptive = ctx.attr("adaptive", False)
    if adaptive:
        oh, ow = k
        rows = [(i * h // oh, -(-(i + 1) * h // oh)) for i in range(oh)]
        cols = [(j * w // ow, -(-(j + 1) * w // ow)) for j in range(ow)]
    else:
        oh = (h + 2 * p[0] - k[0]) // s[0] + 1
        ow = (w + 2 * p[1] - k[1]) // s[1] + 1
        rows = [(max(i * s[0] - p[0], 0), min(i * s[0] - p[0] + k[0], h)) for i in range(oh)]
        cols = [(max(j * s[1] - p[1], 0), min(j * s[1] - p[1] + k[1], w)) for j in range(ow)]
    out = np.empty((n, c, oh, ow), dtype=x.dtype)
    mask = np.empty((n, c, oh, ow), dtype=np.int32)
    for i, (a, b) in enumerate(rows):
        for j, (cc, dd) in enumerate(cols):
            seg = x[:, :, a:b, cc:dd].reshape(n, c, -1)
            am = seg.argmax(axis=-1)
            out[:, :, i, j] = np.take_along_axis(seg, am[..., None], -1)[..., 0]
            mask[:, :, i, j] = (a + am // (dd - cc)) * w + cc + am % (dd - cc)
    return out, mask


@kernel("max_pool2d_with_index")
def max_pool2d_with_index(ctx):
    out, mask = _maxpool_index(ctx, dense(ctx.x("X")))
    ctx.set("Out", out)
    ctx.set("Mask", mask)


@kernel("max_pool2d_with_index_grad")
def max_pool2d_with_index_grad(ctx):
    shape = ctx.shape("X")
    n, c, h, w = shape
    mask = np.asarray(dense(ctx.x("Mask"))).astype(np.int64).reshape(n, c, -1)
    d = dense(ctx.x("Out@GRAD")).reshape(n, c, -1)
    g = np.zeros((n, c, h * w), dtype=d.dtype)
    np.add.at(g, (np.arange(n)[:, None, None], np.arange(c)[None, :, None], mask), d)
    ctx.set("X@GRAD", g.reshape(shape))


# --- coalesce_tensor ------------------------------------------------------------------------
@kernel("coalesce_tensor")
def coalesce_tensor(ctx):
    """Outputs share one buffer, FusedOutput: each Output[i] is Input[i] (copy_data, or the
    memory the inputs already had) or the constant (set_constant); FusedOutput holds them all,
    flattened one after another (alignment padding left out)."""
    xs = [np.asarray(dense(v)) for v in ctx.xs("Input")]
    if ctx.attr("set_constant", False):
        xs = [np.full(x.shape, ctx.attr("constant", 0.0), dtype=x.dtype) for x in xs]
    for i, x in enumerate(xs):
        ctx.set("Output", np.array(x, copy=True), idx=i)
    if ctx.wants("FusedOutput"):
        flat = [x.reshape(-1) for x in xs]
        ctx.set("FusedOutput", np.concatenate(flat) if flat else np.zeros(0, ctx.fdt))
