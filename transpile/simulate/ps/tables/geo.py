"""`MemorySparseGeoTable` of Paddle 2.6.2 (`ps/table/memory_sparse_geo_table.cc`,
`depends/geo_recorder.h`): one pserver's rows of a geo-mode sparse table.

Rows are `common.dims[0]` floats; a key the table lacks (at a pull or a push) becomes zeros.
`push_param` sets rows (trainer 0's start: GeoCommunicator::InitSparse pushes every row of the
table, routed key % pservers; `push_all_params` does the same lazily, a row materialized at its
first use); `push` adds the trainers' deltas and records the
keys for every trainer, the pusher included; `pull_geo(t)` hands trainer t the keys recorded
for it since its last call (sorted here; Paddle's set is unordered) with their rows.
"""
from __future__ import annotations

import numpy as np

from ....core.errors import UserError
from . import TableError, TableOptions
from .rules import F32
from .sparse import as_keys


class MemorySparseGeoTable:
    table_class = "MemorySparseGeoTable"

    def __init__(self, param, options: TableOptions = TableOptions(), where: str = "table"):
        common = param.common
        if not len(common.dims):
            raise UserError("%s.common.dims: a geo table needs its row width" % where)
        self.table_id = int(param.table_id)
        self.dim = int(common.dims[0])
        self.trainers = max(int(common.trainer_num), 1)
        self.rows: dict = {}
        self.recorded = [set() for _ in range(self.trainers)]
        self.initial = None             # (rows(keys) -> values, server index, server count)

    def __len__(self):
        return len(self.rows)

    def keys(self):
        return sorted(self.rows)

    def _values(self, values, keys, what):
        values = np.asarray(values, dtype=F32)
        if values.shape != (len(keys), self.dim):
            raise TableError("geo table %d: %s of shape %s for %d keys of width %d"
                             % (self.table_id, what, values.shape, len(keys), self.dim))
        return values

    def row(self, key):
        """The stored row of `key` (a copy)."""
        return self._row(int(key)).copy()

    def _row(self, key):
        row = self.rows.get(key)
        if row is None:
            row = np.zeros(self.dim, dtype=F32)
            if self.initial is not None and key % self.initial[2] == self.initial[1]:
                got = np.asarray(self.initial[0](np.array([key], dtype=np.int64)), dtype=F32)
                row = got.reshape(-1)[:self.dim].copy()
                if row.size != self.dim:
                    raise TableError("geo table %d: a pushed param row of %d floats, the "
                                     "table's rows have %d" % (self.table_id, got.size,
                                                               self.dim))
            self.rows[key] = row
        return row

    def push_all_params(self, rows, index: int, server_num: int):
        """PushSparseParam of every row of the trainer's table whose key routes here
        (key % server_num == index): `rows(keys)` gives their values, taken at first use."""
        self.initial = (rows, int(index), max(int(server_num), 1))

    def pull(self, keys):
        """PullSparse: the rows ([len(keys), dim]); missing keys become zero rows."""
        keys = as_keys(keys).tolist()
        out = np.zeros((len(keys), self.dim), dtype=F32)
        for i, k in enumerate(keys):
            out[i] = self._row(k)
        return out

    def push_param(self, keys, values):
        """PushSparseParam: the rows become `values`."""
        keys = as_keys(keys).tolist()
        values = self._values(values, keys, "param push")
        for k, v in zip(keys, values):
            self.rows[k] = v.copy()

    def push(self, keys, deltas):
        """PushSparse: record the keys for every trainer, then add the deltas, key by key."""
        keys = as_keys(keys).tolist()
        deltas = self._values(deltas, keys, "delta push")
        for rec in self.recorded:
            rec.update(keys)
        for k, d in zip(keys, deltas):
            self.rows[k] = self._row(k) + d

    def pull_geo(self, trainer_id: int):
        """PullGeoParam: (keys, rows) updated since trainer `trainer_id`'s last call."""
        if not 0 <= trainer_id < self.trainers:
            raise TableError("geo table %d: trainer %d of %d" % (self.table_id, trainer_id,
                                                                  self.trainers))
        keys = sorted(self.recorded[trainer_id])
        self.recorded[trainer_id] = set()
        return np.asarray(keys, dtype=np.uint64), self.pull(keys)

    def pour(self):
        """Pour (the barrier's): nothing for a geo table."""
