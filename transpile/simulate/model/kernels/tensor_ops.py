"""Creation, random init, casts, shape ops, comparisons and logic."""
from __future__ import annotations

import numpy as np

from .. import keyed
from ..values import LazyTable, Pending, SelectedRows, SimError, dense, np_dtype, shape_of
from .registry import kernel


def _shape_attr(ctx):
    if ctx.has("ShapeTensor"):
        return [int(v) for v in np.asarray(ctx.x("ShapeTensor")).reshape(-1)]
    if ctx.has("ShapeTensorList"):
        return [int(np.asarray(v).reshape(-1)[0]) for v in ctx.xs("ShapeTensorList")]
    return [int(d) for d in ctx.attr("shape", [])]


@kernel("fill_constant")
def fill_constant(ctx):
    dt = np_dtype(ctx.attr("dtype", 5), ctx.fdt)
    value = ctx.attr("value", 0.0)
    s = ctx.attr("str_value", "")
    if s:
        value = float(s)
    if ctx.has("ValueTensor"):
        value = np.asarray(ctx.x("ValueTensor")).reshape(-1)[0]
    shape = _shape_attr(ctx)
    if any(d < 0 for d in shape):
        raise SimError("fill_constant: shape %s has an unknown dim" % (shape,))
    if ctx.lazy(shape) and not ctx.has("ValueTensor"):
        v = float(value)
        width = int(np.prod(shape[1:]))
        return ctx.set("Out", LazyTable(shape[0], shape[1:], dt,
                                        lambda rows: _filled((len(rows), width), v, dt)))
    ctx.set("Out", _filled(shape, value, dt))


def _filled(shape, value, dt):
    """An array of `value`: zeros where it is 0, which the OS maps only as they are written (a
    big table's optimizer state starts so, and kernels write new arrays, not into it)."""
    if value == 0:
        return np.zeros(shape, dtype=dt)
    return np.full(shape, value, dtype=dt)


@kernel("fill_any_like", "fill_zeros_like", "zeros_like", "ones_like")
def fill_like(ctx):
    x = dense(ctx.x("X"))
    value = {"fill_zeros_like": 0.0, "zeros_like": 0.0, "ones_like": 1.0}.get(
        ctx.op.type, ctx.attr("value", 0.0))
    dt = ctx.attr("dtype", -1)
    dtype = x.dtype if dt in (-1, None) else np_dtype(dt, ctx.fdt)
    ctx.set("Out", np.full(x.shape, value, dtype=dtype), lod=ctx.lod("X"))


def keyed_random(ctx, shape):
    """A random op's values in a training step, drawn with OpCtx.keyed_uniform (a sample's
    values do not depend on which process draws it)."""
    t = ctx.op.type
    seed = ctx.attr("seed", 0) or 0
    if t.startswith("uniform_random"):
        lo, hi = ctx.attr("min", -1.0), ctx.attr("max", 1.0)
        return lo + (hi - lo) * ctx.keyed_uniform(shape, seed=seed)
    u1 = ctx.keyed_uniform(shape, seed=seed, salt="1")
    u2 = ctx.keyed_uniform(shape, seed=seed, salt="2")
    z = np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
    if t == "truncated_gaussian_random":
        z = np.clip(z, -2.0, 2.0)
    return ctx.attr("mean", 0.0) + ctx.attr("std", 1.0) * z


@kernel("uniform_random", "gaussian_random", "truncated_gaussian_random")
def random_init(ctx):
    shape = _shape_attr(ctx)
    if any(d < 0 for d in shape):
        raise SimError("%s: shape %s has an unknown dim" % (ctx.op.type, shape))
    if ctx.ex.samples:
        # in a training step: keyed draws, the same rows as the original's in every trainer
        return ctx.set("Out", keyed_random(ctx, shape).astype(
            np_dtype(ctx.attr("dtype", 5), ctx.fdt)))
    if ctx.lazy(shape) and not ctx.attr("diag_num", 0):
        return ctx.set("Out", keyed.lazy_table(ctx.op, ctx.ex.seed, shape[0], shape[1:],
                                               np_dtype(ctx.attr("dtype", 5), ctx.fdt)),
                       random=True)
    dt = np_dtype(ctx.attr("dtype", 5), ctx.fdt)
    if ctx.ex.random_hook is not None and not ctx.attr("diag_num", 0):
        # the split's init: the original's values where they align, drawn only where not
        names = ctx.op.output("Out")
        if names:
            got = ctx.ex.random_hook(ctx.ex, names[0], Pending(shape, dt), ctx.op)
            if not isinstance(got, Pending):
                return ctx.set("Out", got)
    ctx.set("Out", _drawn(ctx, shape).astype(dt, copy=False))     # bst: 443 MB not twice


def _drawn(ctx, shape):
    """A random initializer's values drawn from the op's own generator (ctx.rng)."""
    rng = ctx.rng()
    if ctx.op.type == "uniform_random":
        out = rng.uniform(ctx.attr("min", -1.0), ctx.attr("max", 1.0), size=shape)
        n, step, val = ctx.attr("diag_num", 0), ctx.attr("diag_step", 0), ctx.attr("diag_val", 1.0)
        if n:
            flat = out.reshape(-1)
            for i in range(n):
                flat[i * (step + 1)] = val
    else:
        mean, std = ctx.attr("mean", 0.0), ctx.attr("std", 1.0)
        out = rng.normal(mean, std, size=shape)
        if ctx.op.type == "truncated_gaussian_random":
            bad = np.abs(out - mean) > 2 * std
            while bad.any():
                out[bad] = rng.normal(mean, std, size=int(bad.sum()))
                bad = np.abs(out - mean) > 2 * std
    return out


@kernel("cast")
def cast(ctx):
    x = dense(ctx.x("X"))
    ctx.set("Out", x.astype(np_dtype(ctx.attr("out_dtype", 5), ctx.fdt)), lod=ctx.lod("X"))


@kernel("cast_grad")
def cast_grad(ctx):
    d = dense(ctx.x("Out@GRAD"))
    ctx.set("X@GRAD", d.astype(np_dtype(ctx.attr("in_dtype", 5), ctx.fdt)))


@kernel("increment")
def increment(ctx):
    x = dense(ctx.x("X"))
    ctx.set("Out", (x + ctx.attr("step", 1.0)).astype(x.dtype))


@kernel("assign", "share_data", "memcpy")
def assign(ctx):
    x = ctx.raw("X")
    if isinstance(x, LazyTable):
        ctx.set("Out", x.copy())
    elif isinstance(x, SelectedRows):
        ctx.set("Out", SelectedRows(x.rows.copy(), x.value.copy(), x.height))
    else:
        ctx.set("Out", np.array(x, copy=True), lod=ctx.lod("X"))


_CMP = {"less_than": np.less, "less_equal": np.less_equal, "greater_than": np.greater,
        "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal}


@kernel(*_CMP)
def compare(ctx):
    from .math_ops import bcast_y
    x, y = dense(ctx.x("X")), dense(ctx.x("Y"))
    if y.ndim <= x.ndim:
        y = bcast_y(x, y, ctx.attr("axis", -1))
    ctx.set("Out", _CMP[ctx.op.type](x, y))


_LOGIC = {"logical_and": np.logical_and, "logical_or": np.logical_or,
          "logical_xor": np.logical_xor}


@kernel(*_LOGIC, "logical_not")
def logical(ctx):
    x = dense(ctx.x("X")).astype(bool)
    if ctx.op.type == "logical_not":
        ctx.set("Out", np.logical_not(x))
    else:
        ctx.set("Out", _LOGIC[ctx.op.type](x, dense(ctx.x("Y")).astype(bool)))


_BITWISE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
            "bitwise_xor": np.bitwise_xor}


@kernel(*_BITWISE, "bitwise_not")
def bitwise(ctx):
    """Bitwise ops on ints and bools (on bools: the logical ones), numpy broadcasting."""
    x = np.asarray(dense(ctx.x("X")))
    if x.dtype.kind not in "biu":
        raise SimError("%s: X of dtype %s (ints or bools only)" % (ctx.op.type, x.dtype))
    if ctx.op.type == "bitwise_not":
        ctx.set("Out", np.invert(x))
    else:
        ctx.set("Out", _BITWISE[ctx.op.type](x, np.asarray(dense(ctx.x("Y")))))


def _reshape_target(x, shape):
    shape = list(shape)
    out = []
    for i, d in enumerate(shape):
        out.append(x.shape[i] if d == 0 else d)
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        out[out.index(-1)] = x.size // max(known, 1)
    if int(np.prod(out)) != x.size:
        raise SimError("reshape: cannot reshape %s to %s" % (x.shape, shape))
    return out


@kernel("reshape", "reshape2")
def reshape(ctx):
    x = dense(ctx.x("X"))
    shape = ctx.attr("shape")
    if ctx.has("ShapeTensor"):
        # reshape's ShapeTensor is a list of 1-element tensors, one a dim
        shape = [int(np.asarray(dense(v)).reshape(-1)[0]) for v in ctx.xs("ShapeTensor")]
    if ctx.has("Shape"):
        shape = [int(v) for v in np.asarray(dense(ctx.x("Shape"))).reshape(-1)]
    # Paddle's reshape kernel keeps X's LoD (ResetLoD(x.lod())): a sequence reshaped, as the
    # rows of a lookup, is still pooled by its sequences
    ctx.set("Out", x.reshape(_reshape_target(x, shape)), lod=ctx.lod("X"))
    if ctx.wants("XShape"):
        ctx.set("XShape", np.zeros((0,) + x.shape, dtype=x.dtype))


@kernel("reshape2_grad")
def reshape2_grad(ctx):
    xshape = ctx.x("XShape")
    d = dense(ctx.x("Out@GRAD"))
    ctx.set("X@GRAD", d.reshape(np.shape(xshape)[1:]))


@kernel("reshape_grad")
def reshape_grad(ctx):
    ctx.set("X@GRAD", dense(ctx.x("Out@GRAD")).reshape(dense(ctx.x("X")).shape))


@kernel("transpose", "transpose2")
def transpose(ctx):
    x = dense(ctx.x("X"))
    ctx.set("Out", np.transpose(x, ctx.attr("axis")))
    if ctx.wants("XShape"):
        ctx.set("XShape", np.zeros((0,) + x.shape, dtype=x.dtype))


@kernel("transpose2_grad", "transpose_grad")
def transpose_grad(ctx):
    axis = ctx.attr("axis")
    ctx.set("X@GRAD", np.transpose(dense(ctx.x("Out@GRAD")), np.argsort(axis)))


def _axis(ctx, ndim):
    axis = ctx.attr("axis", 0)
    if ctx.has("AxisTensor"):
        axis = int(np.asarray(ctx.x("AxisTensor")).reshape(-1)[0])
    return axis % ndim if ndim else 0


@kernel("concat")
def concat(ctx):
    raw = ctx.xs("X")       # (lazy-aware: a classic trainer's concat of a table's row blocks)
    if _axis(ctx, len(shape_of(raw[0]))) == 0:
        table = LazyTable.stacked(raw)
        if table is not None:
            return ctx.set("Out", table)
    xs = [ctx.ex.densify(n, v, ctx.op.type) if isinstance(v, LazyTable) else dense(v)
          for n, v in zip(ctx.op.input("X"), raw)]
    axis = _axis(ctx, xs[0].ndim)
    for v in xs[1:]:
        if v.ndim != xs[0].ndim or any(a != b for i, (a, b) in enumerate(zip(v.shape, xs[0].shape))
                                       if i != axis):
            raise SimError("concat: inputs of shapes %s do not concatenate on axis %d"
                           % ([x.shape for x in xs], axis))
    ctx.set("Out", np.concatenate(xs, axis=axis))


@kernel("concat_grad")
def concat_grad(ctx):
    xs = [dense(v) for v in ctx.xs("X")]
    axis = _axis(ctx, xs[0].ndim)
    d = dense(ctx.x("Out@GRAD"))
    cuts = np.cumsum([x.shape[axis] for x in xs])[:-1]
    parts = np.split(d, cuts, axis=axis)
    ctx.set_each("X@GRAD", parts, lod_of="X")


@kernel("split")
def split(ctx):
    x = dense(ctx.x("X"))
    axis = _axis(ctx, x.ndim)
    sections = ctx.attr("sections", [])
    n = len(ctx.out_names("Out"))
    if sections:
        sections = list(sections)
        if -1 in sections:
            sections[sections.index(-1)] = x.shape[axis] - (sum(sections) + 1)
        if sum(sections) != x.shape[axis]:
            raise SimError("split: sections %s do not add up to dim %d of %s"
                           % (sections, axis, x.shape))
        parts = np.split(x, np.cumsum(sections)[:-1], axis=axis)
    else:
        num = ctx.attr("num", 0) or n
        if x.shape[axis] % num:
            raise SimError("split: dim %d of %s is not divisible by %d" % (axis, x.shape, num))
        parts = np.split(x, num, axis=axis)
    if len(parts) != n:
        raise SimError("split: %d parts for %d outputs" % (len(parts), n))
    for i, p in enumerate(parts):
        ctx.set("Out", p, idx=i)


@kernel("split_byref")
def split_byref(ctx):
    """Row-split (dim 0) by `sections` (the trainer's side of a sliced parameter's grad)."""
    x = dense(ctx.x("X"))
    sections = list(ctx.attr("sections", []))
    n = len(ctx.out_names("Out"))
    if not sections:
        if x.shape[0] % n:
            raise SimError("split_byref: %d rows do not split in %d" % (x.shape[0], n))
        sections = [x.shape[0] // n] * n
    if len(sections) != n or sum(sections) != x.shape[0]:
        raise SimError("split_byref: sections %s do not cover the %d rows of %s into %d outputs"
                       % (sections, x.shape[0], ctx.op.input("X")[0], n))
    for i, p in enumerate(np.split(x, np.cumsum(sections)[:-1], axis=0)):
        ctx.set("Out", p, idx=i)


@kernel("split_selected_rows")
def split_selected_rows(ctx):
    """Split a SelectedRows by row ranges (`height_sections`); row ids become local."""
    x = ctx.x("X")
    if not isinstance(x, SelectedRows):
        raise SimError("split_selected_rows: %s is not SelectedRows" % ctx.op.input("X")[0])
    sections = list(ctx.attr("height_sections", []))
    n = len(ctx.out_names("Out"))
    if len(sections) != n or sum(sections) != x.height:
        raise SimError("split_selected_rows: height_sections %s do not cover height %d "
                       "in %d outputs" % (sections, x.height, n))
    start = 0
    for i, h in enumerate(sections):
        m = (x.rows >= start) & (x.rows < start + h)
        ctx.set("Out", SelectedRows(x.rows[m] - start, x.value[m], h), idx=i)
        start += h


@kernel("split_ids")
def split_ids(ctx):
    """Ids (or a SelectedRows grad) sharded by id % number of outputs."""
    n = len(ctx.out_names("Out"))
    xs = ctx.xs("Ids")
    if len(xs) == 1 and isinstance(xs[0], SelectedRows):
        # Paddle copies, for every row, the value of the last row with the same id (a repeated
        # id is not added up): harmless after sum's MergeAdd, which leaves no repeats
        x = xs[0]
        last = {int(r): i for i, r in enumerate(x.rows)}
        src = np.array([last[int(r)] for r in x.rows], dtype=np.int64)
        for i in range(n):
            m = x.rows % n == i
            ctx.set("Out", SelectedRows(x.rows[m], x.value[src[m]], x.height), idx=i)
        return
    ids = np.unique(np.concatenate([np.asarray(v).reshape(-1) for v in xs]).astype(np.int64))
    for i in range(n):
        # (declared as the ids it splits: Paddle never holds the shard to that shape)
        ctx.set("Out", ids[ids % n == i].reshape(-1, 1), idx=i, rows=True, unchecked=True)


@kernel("merge_ids")
def merge_ids(ctx):
    """Rows fetched per shard (X[i] for Rows[i]) gathered back in the order of each Ids input."""
    table = {}
    for rows, vals in zip(ctx.xs("Rows"), ctx.xs("X")):
        for r, v in zip(np.asarray(rows).reshape(-1), dense(vals)):
            table[int(r)] = v
    for i, ids in enumerate(ctx.xs("Ids")):
        # Paddle's kernel writes one row per entry of the ids' first dim, from the first ones
        ids = np.asarray(ids)
        flat = ids.reshape(-1)[:ids.shape[0] if ids.ndim else 1]
        try:
            out = np.stack([table[int(r)] for r in flat])
        except KeyError as e:
            raise SimError("merge_ids: id %s was not fetched" % e) from None
        ctx.set("Out", out, idx=i, lod=ctx.lod("Ids", i))
