"""Optimizer updates on lazily kept tables (values.LazyTable): only the rows that can change.

With a SelectedRows gradient, Paddle's sparse optimizer kernels touch only the gradient's rows
(sgd, adam in lazy_mode) or run over every row (adam, momentum, adagrad, rmsprop, ...). A row
that is neither in the gradient nor carries optimizer state (a zero moment, velocity,
accumulator) does not move in any of those: the update runs on the gradient's rows and on the
rows whose state some earlier step set, with the dense kernel's own arithmetic, and writes
those rows back. A dense gradient (a lookup without is_sparse) is run so too, on its nonzero
rows and the rows with state. Anything else (momentum's l2_decay, which moves every row,
adamax) materializes the tables and runs the dense kernel.
"""
from __future__ import annotations

import numpy as np

from ..values import LazyTable, SelectedRows

# The optimizers whose update of a row with a zero gradient and zero state leaves the row and
# its state as they are (not adamax: its infinity norm grows by epsilon on every row).
ROW_LOCAL = frozenset({"sgd", "adam", "momentum", "adagrad", "decayed_adagrad", "rmsprop"})
# Optimizers that touch only the gradient's rows (adam only in lazy_mode).
GRAD_ROWS_ONLY = frozenset({"sgd"})
# Optimizers whose sparse kernel looks each parameter row up in the merged gradient's rows by
# binary search (Paddle 2.6.2's SparseMomentumFunctor, SparseRmspropGradFunctor).
SEARCHED = frozenset({"momentum", "rmsprop"})
NONZERO_AT_ONCE = 1 << 20      # values nonzero_rows tests at once
# Inputs that are never per-row state.
_SCALARS = ("LearningRate", "Beta1Pow", "Beta2Pow", "Beta1Tensor", "Beta2Tensor",
            "EpsilonTensor", "SkipUpdate", "MasterParam")


class RowCtx:
    """The kernel's view of `rows` of its tables (the OpCtx interface the optimizer kernels
    use); outputs written back into copies of the tables."""

    def __init__(self, ctx, rows, height, grad):
        self.ctx, self.rows, self.height, self.grad = ctx, rows, height, grad
        self.op, self.fdt, self.ex = ctx.op, ctx.fdt, ctx.ex

    def attr(self, name, default=None):
        return self.ctx.attr(name, default)

    def has(self, slot) -> bool:
        return self.ctx.has(slot)

    def wants(self, slot) -> bool:
        return self.ctx.wants(slot)

    def owned(self, slot, out_slot, held=1) -> bool:
        """Never in place: the kernel sees copies of some rows (OpCtx.owned)."""
        return False

    def _row_shaped(self, slot, v):
        if slot in _SCALARS:
            return False
        return isinstance(v, LazyTable) or (isinstance(v, np.ndarray) and v.ndim >= 1
                                            and v.shape[0] == self.height)

    def x(self, slot, i=0):
        if slot == "Grad":
            return self.grad
        v = self.ctx.raw(slot, i)
        if self._row_shaped(slot, v):
            return v.get(self.rows) if isinstance(v, LazyTable) else v[self.rows]
        return v

    def shape(self, slot, i=0):
        return tuple(np.shape(self.x(slot, i)))

    def set(self, slot, value, **kw):
        src_slot = slot[:-3] if slot.endswith("Out") else None
        src = self.ctx.raw(src_slot) if src_slot and self.ctx.has(src_slot) else None
        if src is None or not self._row_shaped(src_slot, src):
            return self.ctx.set(slot, value, **kw)
        if isinstance(src, LazyTable):
            new = src.copy()
            new.set(self.rows, value)
        else:
            new = np.array(src, copy=True)
            new[self.rows] = value
        return self.ctx.set(slot, new, **kw)


def paddle_kernels(ctx) -> bool:
    """Whether the executor runs Paddle 2.6.2's sparse kernels as they run (row misses and
    all: run --local's prediction of the runtime) rather than what they mean."""
    return bool(getattr(getattr(ctx, "ctx", ctx).ex, "paddle_sparse_kernels", False))


def searched_rows(g: SelectedRows) -> SelectedRows:
    """The rows of a SelectedRows gradient a binary-searching sparse kernel applies. Paddle's
    MergeAdd (CPU) keeps the rows in their own order when none repeats, and sorts them when
    some do; the kernel then looks each parameter row up by binary search, which, in rows not
    sorted, can miss one: that row gets no gradient (its velocity or moment still decays).
    Seen on Paddle 2.6.2: momentum over ids [5539, 8846, 7950, 9867] leaves row 7950."""
    rows = g.rows
    if len(np.unique(rows)) != len(rows):
        return g.merged()
    found = [i for i, r in enumerate(rows.tolist()) if _search(rows, r)]
    if len(found) == len(rows):
        return g
    return SelectedRows(rows[found], g.value[found], g.height)


def _search(rows, value) -> bool:
    """phi::funcs::BinarySearch: whether it finds `value` in `rows` (sorted or not)."""
    lo, hi = 0, len(rows) - 1
    while lo <= hi:
        mid = (lo + hi) >> 1
        if rows[mid] == value:
            return True
        if rows[mid] < value:
            lo = mid + 1
        else:
            hi = mid - 1
    return False


def _state_rows(ctx, height):
    """Rows of the op's per-row state (moments, velocities...) that may be nonzero."""
    out = []
    for slot, names in ctx.op.inputs.items():
        if slot in ("Param", "Grad") + _SCALARS or not names:
            continue
        v = ctx.raw(slot)
        if isinstance(v, LazyTable):
            out.append(v.touched())
        elif isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == height:
            out.append(nonzero_rows(v, height))
    return out


def nonzero_rows(v, height) -> np.ndarray:
    """The rows of `v` ([height, ...]) holding a nonzero, a block of rows at a time (bst's
    dense gradient of a [192403, 288] table: no mask of its size)."""
    v2 = v.reshape(height, -1)
    step = max(1, NONZERO_AT_ONCE // max(1, v2.shape[1]))
    if step >= height:
        return np.nonzero(np.any(v2 != 0, axis=1))[0]
    return np.concatenate([lo + np.nonzero(np.any(v2[lo:lo + step] != 0, axis=1))[0]
                           for lo in range(0, height, step)])


def lazy_inputs(ctx) -> list:
    """The slots of the op's inputs that hold a LazyTable."""
    out = []
    for slot, names in ctx.op.inputs.items():
        if names and isinstance(ctx.ex.scope.get(names[0]), LazyTable):
            out.append(slot)
    return out


def _dense_rows(ctx, grad, height):
    """A dense gradient (a lookup without is_sparse) over a lazy table: the RowCtx of its
    nonzero rows and the rows with state (any other row has a zero gradient and zero state,
    which no ROW_LOCAL update moves), or None where that is every row (a weight decay's
    gradient: the tables are materialized, as for any dense update)."""
    nonzero = nonzero_rows(grad, height)
    if len(nonzero) == height:
        return None
    rows = np.unique(np.concatenate([nonzero] + _state_rows(ctx, height))).astype(np.int64)
    return RowCtx(ctx, rows, height, grad[rows]) if len(rows) < height else None


def run(ctx, fn):
    """Run optimizer kernel `fn`, row by row where its tables are lazy and that is exact."""
    slots = lazy_inputs(ctx)
    if not slots:
        return fn(ctx)
    t = ctx.op.type
    grad = ctx.raw("Grad")
    height = ctx.shape("Param")[0]
    dense_grad = isinstance(grad, np.ndarray) and grad.ndim >= 1 and grad.shape[0] == height
    exact = (t in ROW_LOCAL and (isinstance(grad, SelectedRows) or dense_grad)
             and not (t == "momentum" and ctx.attr("regularization_method", "")))
    rows_ctx = _dense_rows(ctx, grad, height) if exact and dense_grad else None
    exact = exact and (rows_ctx is not None or not dense_grad)
    faithful = paddle_kernels(ctx)
    if exact and faithful and t == "momentum" and not dense_grad and grad.rows.size == 0:
        # Paddle's MomentumSparseImpl returns before it updates (optim_ops.momentum)
        ctx.set("ParamOut", ctx.raw("Param"))
        ctx.set("VelocityOut", ctx.raw("Velocity"))
        return None
    if not exact:
        for slot in slots:
            name = ctx.op.input(slot)[0]
            ctx.ex.densify(name, ctx.ex.scope.get(name), t)
        return fn(ctx)
    if rows_ctx is not None:
        return fn(rows_ctx)
    g = searched_rows(grad).merged() if faithful and t in SEARCHED else grad.merged()
    rows = [g.rows]
    if t not in GRAD_ROWS_ONLY and not (t == "adam" and ctx.attr("lazy_mode", False)):
        rows += _state_rows(ctx, height)
    rows = np.unique(np.concatenate(rows)).astype(np.int64)
    gd = np.zeros((len(rows),) + tuple(g.value.shape[1:]), dtype=g.value.dtype)
    gd[np.searchsorted(rows, g.rows)] = g.value
    return fn(RowCtx(ctx, rows, height, gd))
