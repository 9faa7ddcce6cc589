"""Runtime values of the simulator: dtypes, SelectedRows, sparse tables, errors; copying a value
and cutting it by rows (what a send does)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...core.errors import UserError

# Paddle's VarType.Type numbers (framework.proto) for the tensor dtypes.
DTYPE_CODES = {0: "BOOL", 1: "INT16", 2: "INT32", 3: "INT64", 4: "FP16", 5: "FP32", 6: "FP64",
               20: "UINT8", 21: "INT8", 22: "BF16"}
FLOAT_NAMES = ("FP16", "FP32", "FP64", "BF16")
INT_DTYPES = {"BOOL": np.bool_, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
              "UINT8": np.uint8, "INT8": np.int8}


class SimError(Exception):
    """The split (or the original) cannot be executed: a missing var, a shape mismatch... Exit 1."""


class NoKernelError(UserError):
    """An op the simulator has no kernel for. Exit 2."""


def np_dtype(name, float_dtype):
    """The numpy dtype for a Paddle dtype name or code; floats all become `float_dtype`."""
    if isinstance(name, int):
        name = DTYPE_CODES.get(name, "FP32")
    if name is None or name in FLOAT_NAMES:
        return float_dtype
    return INT_DTYPES.get(name, float_dtype)


class SelectedRows:
    """A sparse gradient: `value[i]` is row `rows[i]` of a [height, ...] tensor (rows may repeat)."""

    def __init__(self, rows, value, height, no_memory=False):
        self.rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        self.value = np.asarray(value)
        self.height = int(height)
        # an empty SelectedRows Paddle's executor made for a var no op writes: its value holds
        # no memory (only `sum` and `merge_selected_rows` take one; ir/dataflow.py)
        self.no_memory = bool(no_memory)
        if self.value.shape[0] != self.rows.shape[0]:
            raise SimError("SelectedRows with %d rows but a value of %d rows"
                           % (self.rows.shape[0], self.value.shape[0]))

    @staticmethod
    def unwritten(shape, dtype) -> "SelectedRows":
        """The empty SelectedRows of a var declared SELECTED_ROWS `shape` that no op wrote."""
        shape = [max(int(d), 0) for d in (shape or (0,))]
        return SelectedRows([], np.zeros([0] + shape[1:], dtype=dtype), shape[0], True)

    @property
    def shape(self):
        return (self.height,) + tuple(self.value.shape[1:])

    def to_dense(self):
        out = np.zeros(self.shape, dtype=self.value.dtype)
        np.add.at(out, self.rows, self.value)
        return out

    def merged(self) -> "SelectedRows":
        """Duplicate rows added up, rows sorted (Paddle's MergeAdd)."""
        uniq, inv = np.unique(self.rows, return_inverse=True)
        val = np.zeros((len(uniq),) + tuple(self.value.shape[1:]), dtype=self.value.dtype)
        np.add.at(val, inv, self.value)
        return SelectedRows(uniq, val, self.height)

    def scaled(self, s, b=0.0) -> "SelectedRows":
        return SelectedRows(self.rows, self.value * s + b, self.height)

    def __repr__(self):
        return "SelectedRows(height=%d, rows=%d%s)" % (self.height, len(self.rows),
                                                       ", no memory" * self.no_memory)


class Unallocated:
    """A var with a shape but no memory: what Paddle's fake_init leaves (it only resizes).

    Reading one is an error in Paddle ("holds no memory"), and here."""

    def __init__(self, shape, by: str):
        self.shape = tuple(int(d) for d in shape)
        self.by = by

    def __repr__(self):
        return "Unallocated(%s)" % list(self.shape)


def dense(v):
    return v.to_dense() if isinstance(v, (SelectedRows, LazyTable)) else v


def shape_of(v):
    if isinstance(v, (SelectedRows, Unallocated, SparseTable, LazyTable, Pending)):
        return v.shape
    return tuple(np.shape(v))


class Pending:
    """The values a random initializer is about to draw, not drawn yet: what it asks the
    split's alignment hook (reference.py) about first. Where the original's values replace
    them, they are never drawn (a table of 55 million floats: ~20 s of a pserver's startup)."""

    def __init__(self, shape, dtype):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)


class LazyTable:
    """A big [height, ...] table whose rows exist only once touched: what simulate keeps for
    an embedding table of a million rows, of which a run reads a few hundred.

    `init(rows)` gives the initial values of global rows (deterministic per row: keyed.py), so
    an untouched row always reads its initial value and a pserver's block of the table (a
    `view` at its first row) starts from the very rows of the original. Kernels copy before
    they write (copy(), then set()); reading a row materializes it, which changes nothing
    anyone can see.
    """

    def __init__(self, height, row_shape, dtype, init, offset=0):
        self.height = int(height)
        self.row_shape = tuple(int(d) for d in row_shape)
        self.dtype = np.dtype(dtype)
        self.init = init
        self.offset = int(offset)       # init's rows are this table's rows + offset
        self.index: dict = {}
        self.data = np.empty((0,) + self.row_shape, dtype=self.dtype)

    @property
    def shape(self):
        return (self.height,) + self.row_shape

    def __len__(self):
        return self.height

    def initial(self, rows):
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        vals = np.asarray(self.init(rows + self.offset), dtype=self.dtype)
        return vals.reshape((len(rows),) + self.row_shape)

    def view(self, first: int, height: int) -> "LazyTable":
        """A fresh table of rows first .. first + height - 1 of this one's initial values."""
        return LazyTable(height, self.row_shape, self.dtype, self.init, self.offset + first)

    def copy(self) -> "LazyTable":
        t = LazyTable(self.height, self.row_shape, self.dtype, self.init, self.offset)
        t.index = dict(self.index)
        t.data = self.data.copy()
        return t

    def touched(self):
        """The rows materialized so far (sorted)."""
        return np.sort(np.fromiter(self.index, dtype=np.int64, count=len(self.index)))

    def _slots(self, rows):
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows.size and (rows.min() < 0 or rows.max() >= self.height):
            raise SimError("row %d outside the %d rows of the table"
                           % (int(rows.max() if rows.max() >= self.height else rows.min()),
                              self.height))
        new = [r for r in dict.fromkeys(rows.tolist()) if r not in self.index]
        if new:
            base = len(self.index)
            for i, r in enumerate(new):
                self.index[r] = base + i
            self.data = np.concatenate([self.data, self.initial(new)])
        return np.fromiter((self.index[r] for r in rows.tolist()), dtype=np.int64,
                           count=rows.size)

    def get(self, rows):
        slots = self._slots(rows)       # (may grow self.data)
        return self.data[slots]

    def set(self, rows, values):
        """Rows `rows` (unique) take `values`."""
        slots = self._slots(rows)
        self.data[slots] = values

    @staticmethod
    def over(array) -> "LazyTable":
        """A table whose untouched rows are read from `array` (held, not copied: the caller
        leaves it unchanged)."""
        return LazyTable(array.shape[0], array.shape[1:], array.dtype,
                         lambda rows: array[np.asarray(rows, dtype=np.int64)])

    @staticmethod
    def stacked(parts) -> Optional["LazyTable"]:
        """The table whose rows are `parts`' one after the other, where every part is a
        LazyTable of rows of one table in order (a trainer's recv of the pservers' row blocks
        of a table: its rows as they are, none drawn); None otherwise."""
        if not parts or not all(isinstance(p, LazyTable) for p in parts):
            return None
        first = parts[0]
        at = first.offset
        for p in parts:
            if p.init is not first.init or p.offset != at or p.row_shape != first.row_shape \
                    or p.dtype != first.dtype:
                return None
            at += p.height
        out = LazyTable(at - first.offset, first.row_shape, first.dtype, first.init,
                        first.offset)
        data, base = [], 0
        for p in parts:
            shift = p.offset - first.offset
            for r, slot in p.index.items():
                out.index[r + shift] = base + slot
            data.append(p.data)
            base += len(p.data)
        out.data = np.concatenate(data) if len(data) > 1 else data[0].copy()
        return out

    def to_dense(self):
        out = self.initial(np.arange(self.height))
        if self.index:
            rows = np.fromiter(self.index, dtype=np.int64, count=len(self.index))
            out[rows] = self.data[np.fromiter(self.index.values(), dtype=np.int64,
                                              count=len(self.index))]
        return out

    def __repr__(self):
        return "LazyTable(%s, %d rows touched)" % (list(self.shape), len(self.index))


class SparseTable:
    """A pserver's auto-grown table: a SELECTED_ROWS var an initializer filled.

    Paddle's initializer fills the value block ([capacity, width]) and leaves the rows empty; a
    lookup of an unknown id appends it and gives it the next row of the block
    (SelectedRows::AutoGrownIndex). `origin`, when given, is the original program's initial
    table: a new id k then takes its row k instead, so that both runs start from one state.
    """

    def __init__(self, pool, origin=None):
        self.value = np.array(pool, copy=True)
        self.origin = origin
        self.index: dict = {}

    @property
    def rows(self):
        return np.fromiter(self.index, dtype=np.int64, count=len(self.index))

    @property
    def height(self):
        return self.value.shape[0]

    @property
    def shape(self):
        return tuple(self.value.shape)

    def copy(self) -> "SparseTable":
        t = SparseTable(self.value, self.origin)
        t.index = dict(self.index)
        return t

    def slot(self, key: int, grow: bool) -> int:
        i = self.index.get(key)
        if i is not None:
            return i
        if not grow:
            raise SimError("id %d is not in the table (it was never looked up)" % key)
        i = len(self.index)
        if i >= self.value.shape[0]:
            raise SimError("the table is full: %d ids" % i)
        self.index[key] = i
        if self.origin is not None and 0 <= key < self.origin.shape[0]:
            self.value[i] = self.origin.get([key])[0] if isinstance(self.origin, LazyTable) \
                else self.origin[key]
        return i

    def get(self, ids, grow=True):
        idx = [self.slot(int(k), grow) for k in np.asarray(ids).reshape(-1)]
        return self.value[np.asarray(idx, dtype=np.int64)] if idx else \
            np.zeros((0,) + self.value.shape[1:], dtype=self.value.dtype)

    def __repr__(self):
        return "SparseTable(%s, %d ids)" % (list(self.value.shape), len(self.index))


def copy_value(v):
    """A copy of a dense value or SelectedRows (what a send hands over)."""
    if isinstance(v, SelectedRows):
        return SelectedRows(v.rows.copy(), v.value.copy(), v.height)
    if isinstance(v, LazyTable):
        return v.copy()
    return np.array(v, copy=True)


def frozen(a):
    """Array `a` made read-only (no copy): a kernel that wrote into it would fail loudly."""
    if isinstance(a, np.ndarray):
        a.flags.writeable = False
    return a


def shared(v):
    """`v` as another role of the cluster receives it (a send, a recv): the same arrays, made
    read-only, not copied. Kernels write new arrays, never into the ones a scope holds, so a
    trainer and a pserver may hold one array (copy-on-write: an in-place update checks that
    its array is held once, kernels/optim_ops.py); a LazyTable, whose rows are written in
    place, is copied."""
    if isinstance(v, np.ndarray):
        return frozen(v)
    if isinstance(v, SelectedRows):
        return SelectedRows(frozen(v.rows), frozen(v.value), v.height, v.no_memory)
    return copy_value(v)


def split_rows(v, sections, name):
    """`v` cut by rows into blocks of `sections` rows (a send_ctx's sections; none: the
    whole), shared (views of a dense value, read-only)."""
    if not sections:
        return [shared(v)]
    if isinstance(v, SelectedRows):
        if sum(sections) != v.height:
            raise SimError("send_ctx %s: sections %s do not cover height %d"
                           % (name, sections, v.height))
        out, start = [], 0
        for h in sections:
            m = (v.rows >= start) & (v.rows < start + h)
            out.append(SelectedRows(v.rows[m] - start, v.value[m], h))
            start += h
        return out
    if sum(sections) != shape_of(v)[0]:
        raise SimError("send_ctx %s: sections %s do not cover the %d rows"
                       % (name, sections, shape_of(v)[0]))
    return [frozen(p) for p in np.split(shared(v), np.cumsum(sections)[:-1], axis=0)]
