"""A trainer's side of style ps's dense tables: its params (or their gradients) as the flat
float32 values a dense table is pushed, and a pull put back into its params; shared by the
split's run (cluster.py) and the ps reference (ref.py).

A big param (a [100000+, ...] table, as `default_lazy_policy` sizes them: mind's item_emb,
looked up without is_sparse) is kept by rows where every pserver's table can
(`MemoryDenseTable.row_ready`): the push that starts the tables is a FlatRows whose untouched
rows are read from trainer 0's values (one float32 copy, or the LazyTable's own draws), a
gradient only its nonzero rows, and a pull gives the trainers a LazyTable of the table's rows
(tables/denserows.py). The values are the ones the whole arrays had, bit for bit.
"""
from __future__ import annotations

import numpy as np

from ..model.executor import default_lazy_policy
from ..model.values import LazyTable, SelectedRows, dense, shape_of
from .tables.denserows import FlatRows
from .tables.runs import Runs
from .tables.server import dense_per, split_dense

F32 = np.float32
ROWS_AT_ONCE = 1 << 12     # rows of a param's start read at once (_table_base)


def layout(values: list) -> list:
    """(name, shape, size) of a dense table's params, in send order, from [(name, value)]."""
    out = []
    for name, v in values:
        shape = tuple(shape_of(v))
        out.append((name, shape, int(np.prod(shape)) if shape else 1))
    return out


def kept_by_rows(lay: list, tables: list) -> frozenset:
    """The params of layout `lay` kept by rows: big tables, where every pserver's table (of
    `tables`) keeps its values by rows."""
    big = frozenset(n for n, shape, _ in lay if default_lazy_policy(n, shape))
    if big and all(getattr(t, "row_ready", lambda: False)() for t in tables):
        return big
    return frozenset()


def _rows_base(lay, bases):
    """base(positions) of the flat layout from {param: base(rows) -> [rows, width]} (the
    positions sorted and unique, as a FlatRows holds them)."""
    spans, at = [], 0
    for name, shape, size in lay:
        if name in bases:
            spans.append((at, at + size, int(np.prod(shape[1:])), bases[name]))
        at += size

    def base(positions):
        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) > 1 and positions[-1] - positions[0] == len(positions) - 1 \
                and positions[0] <= positions[-1]:
            return _span_base(spans, int(positions[0]), int(positions[-1]) + 1)
        out = np.zeros(len(positions), dtype=F32)
        for lo, hi, width, fn in spans:
            m = (positions >= lo) & (positions < hi)
            if m.any():
                rel = positions[m] - lo
                rows, col = rel // width, rel % width
                uniq, inv = _unique(rows)
                got = np.asarray(fn(uniq), dtype=F32).reshape(len(uniq), width)
                out[m] = got[inv, col]
        return out
    return base


def _span_base(spans, p0, p1):
    """base(positions p0 .. p1 - 1): each span's rows read as one block (a table made whole
    reads its every value so: no position arrays of its size)."""
    out = np.zeros(p1 - p0, dtype=F32)
    for lo, hi, width, fn in spans:
        a, b = max(lo, p0), min(hi, p1)
        if a >= b:
            continue
        r0, r1 = (a - lo) // width, (b - 1 - lo) // width + 1
        block = np.asarray(fn(np.arange(r0, r1, dtype=np.int64)), dtype=F32).reshape(-1)
        out[a - p0:b - p0] = block[a - lo - r0 * width:b - lo - r0 * width]
    return out


def _unique(rows):
    """np.unique(rows, return_inverse=True), in one pass where `rows` ascend (positions
    do)."""
    if len(rows) and np.all(rows[1:] >= rows[:-1]):
        first = np.empty(len(rows), dtype=bool)
        first[0] = True
        np.not_equal(rows[1:], rows[:-1], out=first[1:])
        return rows[first], np.cumsum(first) - 1
    return np.unique(rows, return_inverse=True)


def _table_base(v):
    """(base(rows) of a param's start: the LazyTable's draws, else its rows in float32: read
    from the array itself where it is a snapshot (read-only: the initial values hold it),
    else from one float32 copy; whether it may hold a -0.0)."""
    if isinstance(v, LazyTable):
        return (lambda rows: np.asarray(v.initial(rows), dtype=F32)), True
    arr = np.asarray(v)
    arr = arr.reshape(arr.shape[0], -1)
    if arr.dtype != F32 and arr.flags.writeable:
        arr = arr.astype(F32)
    signed = False
    for lo in range(0, arr.shape[0], ROWS_AT_ONCE):     # in float32: -1e-50 is a -0.0 there
        part = np.asarray(arr[lo:lo + ROWS_AT_ONCE], dtype=F32)
        if np.any(np.signbit(part) & (part == 0)):
            signed = True
            break
    return (lambda rows: np.asarray(arr[np.asarray(rows, dtype=np.int64)], dtype=F32)), signed


def start_values(values: list, kept: frozenset):
    """(what trainer 0 pushes at the start (push_dense_params), {kept param: base(rows)}):
    one float32 array, or a FlatRows whose kept params are read from their own start values
    (base: a kept param's untouched rows, float32, [rows, width])."""
    if not kept:
        return np.concatenate([np.asarray(dense(v), dtype=F32).reshape(-1)
                               for _, v in values]), {}
    lay = layout(values)
    pos, vals, bases, at, signed = [], [], {}, 0, False
    for (name, v), (_, shape, size) in zip(values, lay):
        if name in kept:
            bases[name], zero = _table_base(v)
            signed = signed or zero
            if isinstance(v, LazyTable) and v.index:
                rows = np.unique(np.asarray(v.touched(), dtype=np.int64))
                pos.append(Runs.rows(at, rows, size // shape[0]))
                vals.append(np.asarray(v.get(rows), dtype=F32).reshape(-1))
        else:
            pos.append(Runs.span(at, at + size))
            vals.append(np.asarray(dense(v), dtype=F32).reshape(-1))
        at += size
    return FlatRows(at, Runs.concat(pos), _cat(vals, F32), _rows_base(lay, bases),
                    signed), bases


def grad_values(grads: list, kept: frozenset, shapes: dict):
    """What a trainer's dense send pushes: its gradients [(param, value)] flattened, one
    float32 array, or a FlatRows of every value of the other params and the nonzero rows of
    the kept ones (`shapes`: param -> its shape)."""
    if not kept:
        flat = [np.asarray(dense(g), dtype=F32).reshape(-1) for _, g in grads]
        return np.concatenate(flat) if flat else np.zeros(0, F32)
    pos, vals, at = [], [], 0
    for name, g in grads:
        g = dense(g) if isinstance(g, (SelectedRows, LazyTable)) else np.asarray(g)
        size = int(g.size)
        if name in kept:
            height = shapes[name][0]
            g2 = g.reshape(height, -1)
            rows = np.flatnonzero(np.any(g2 != 0, axis=1))
            pos.append(Runs.rows(at, rows, g2.shape[1]))
            vals.append(np.asarray(g2[rows], dtype=F32).reshape(-1))
        else:
            pos.append(Runs.span(at, at + size))
            vals.append(np.asarray(g, dtype=F32).reshape(-1))
        at += size
    return FlatRows(at, Runs.concat(pos), _cat(vals, F32))


def pulled_values(got, lay: list, bases: dict, fdt) -> list:
    """[(name, value)] of a pull (`got`: the pservers' slices joined): each param its part in
    the simulation's float type; a kept param (of `bases`: start_values') a LazyTable of the
    table's rows, its untouched rows its base's."""
    out, at = [], 0
    for name, shape, size in lay:
        if isinstance(got, FlatRows) and name in bases:
            out.append((name, _lazy(got, at, shape, size, fdt, bases[name])))
        elif isinstance(got, FlatRows):
            out.append((name, got.take(at, at + size).reshape(shape).astype(fdt)))
        else:
            out.append((name, got[at:at + size].reshape(shape).astype(fdt)))
        at += size
    return out


def _lazy(got: FlatRows, at, shape, size, fdt, base) -> LazyTable:
    width = size // shape[0]
    part = got.cut(at, at + size)
    rows = part.pos.row_ids(width)
    return lazy_table(base, shape, fdt, rows, part.read(_row_positions(0, rows, width)))


def lazy_table(base, shape, dtype, rows, values) -> LazyTable:
    """A LazyTable of `shape` over `base` (a kept param's start rows, float32) whose rows
    `rows` (unique) hold `values`."""
    width = int(np.prod(shape[1:]))

    def init(rs):
        return np.asarray(base(rs), dtype=F32).reshape(len(rs), width)
    table = LazyTable(shape[0], shape[1:], dtype, init)
    if len(rows):
        table.set(rows, np.asarray(values).reshape((len(rows),) + tuple(shape[1:])))
    return table


def table_rows(got: FlatRows, at, shape, size):
    """The rows of the kept param at `at` a pull named (sorted)."""
    return got.cut(at, at + size).pos.row_ids(size // shape[0])


def row_positions(at, rows, shape):
    """The flat positions of rows `rows` of a param of `shape` laid out from `at`."""
    return _row_positions(at, rows, int(np.prod(shape[1:])))


def _row_positions(at, rows, width):
    rows = np.asarray(rows, dtype=np.int64)
    return (at + rows[:, None] * width + np.arange(width, dtype=np.int64)).reshape(-1)


def _cat(parts, dtype=np.int64):
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def split(values, server_num: int):
    """The pservers' slices of a dense push (split_dense's: total / n + 1 values each; of a
    FlatRows, FlatRows, each cut as it is asked for: one slice's positions at a time)."""
    if not isinstance(values, FlatRows):
        return split_dense(values, server_num)
    per = dense_per(len(values), server_num)
    return (values.cut(i * per, (i + 1) * per) for i in range(server_num))


def joined(parts):
    """A pull's slices over the pservers, one after the other (one array, or a FlatRows
    where a table is kept by rows)."""
    if not any(isinstance(p, FlatRows) for p in parts):
        return np.concatenate(parts)
    return FlatRows.joined([p if isinstance(p, FlatRows) else
                            FlatRows(len(p), Runs.span(0, len(p)), p) for p in parts])
