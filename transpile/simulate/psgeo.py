"""Style ps in geo mode: Paddle 2.6.2's GeoCommunicator (`ps/service/communicator/
communicator.cc`) against pstables' servers, shared by the ps geo reference and the split's run.

Each trainer trains the whole program locally (lookups of its own table copy, its optimizer
ops). Start (`InitParams`, then `_pull_all_dense`): trainer 0 pushes its dense params to the
dense tables and every row of each sparse table to the `MemorySparseGeoTable`s (row `k` to
pserver `k % pservers`); every trainer pulls the dense tables; the other trainers pull the
sparse rows (trainer 0's values). What a trainer last pulled is its `old` copy.
A trainer's `send` of a sparse grad records the grad's rows. After every K-th step (the geo
schedule, schedule.py) the trainers take turns, trainer 0 first:
- sparse table, for each pserver s: the recorded rows `k % pservers == s` (if any) push
  delta = (local - old) / trainers (old += delta), the table adds it and records the keys for
  every trainer; then (`RecvSparse`, even when nothing was sent) the trainer pulls the rows
  recorded for it on s: local += pulled - old, old = pulled;
- dense table (its params in send order): the same delta pushed to the `sum` rule
  (`Param += delta`), the whole table pulled: local += pulled - old, old = pulled.
The tables keep float32; the trainers compute in the simulation's float type.
"""
from __future__ import annotations

import numpy as np

from .geo import rows_of, with_rows
from .pstables import TableError
from .pstables.server import geo_server, split_dense
from .reference import snapshot
from .values import SelectedRows, SimError, Unallocated, dense

F32 = np.float32
GEO = "MemorySparseGeoTable"
DATA_NORM = (".batch_size", ".batch_sum", ".batch_square_sum")


def _flat(v, fdt):
    return np.asarray(dense(v), dtype=fdt).reshape(-1)


class GeoClient:
    """One trainer's GeoCommunicator. `sparse`: {param: table id}; `dense`: {table id: [params
    in send order]}; `scope`: the trainer's Scope."""

    def __init__(self, label, tid, trainers, servers, sparse, dense_tables, scope, fdt):
        self.label, self.tid, self.trainers = label, tid, max(int(trainers), 1)
        self.servers, self.sparse, self.dense = servers, dict(sparse), dict(dense_tables)
        self.scope, self.fdt = scope, fdt
        self.old: dict = {}
        self.touched = {p: set() for p in self.sparse}
        self.unsent_pulls: set = set()   # tables whose rows it pulled from a pserver it sent none

    def _get(self, name):
        v = self.scope.get(name)
        if v is None or isinstance(v, Unallocated):
            raise SimError("geo: %s holds no value of %s (the communicator sends and pulls it)"
                           % (self.label, name))
        return v

    def _table(self, server, tid, kind="MemoryDenseTable"):
        try:
            table = server.table(tid)
        except TableError as e:
            raise SimError("geo: %s: %s" % (self.label, e)) from None
        if table.table_class != kind:
            raise SimError("geo: %s sends table %d to pserver %d, whose table %d is a %s, not "
                           "a %s" % (self.label, tid, server.index, tid, table.table_class,
                                     kind))
        return table

    # --- start ------------------------------------------------------------------------
    def init_params(self, first: "GeoClient"):
        """InitParams for this trainer (`first`: trainer 0's client, already started)."""
        n = len(self.servers)
        for p, tid in sorted(self.sparse.items()):
            if self is first:
                v = snapshot(self._get(p))
                for s, server in enumerate(self.servers):
                    self._table(server, tid, GEO).push_all_params(
                        lambda keys, v=v: rows_of(v, keys), s, n)
            else:
                self.scope.put(p, snapshot(first._get(p)))
            self.old[p] = snapshot(self._get(p))
        for tid, params in sorted(self.dense.items()):
            if self is first:
                vals = np.concatenate([_flat(self._get(p), F32) for p in params])
                for server, part in zip(self.servers, split_dense(vals, n)):
                    self._table(server, tid).push_param(part)
            got = self._pull_dense(tid, params)
            self._write_dense(params, got)
            self._set_old(params, got)

    # --- the push interval ------------------------------------------------------------
    def record(self, param, value):
        """A `send` of `param`'s gradient: its rows, for the next push."""
        if param not in self.touched:
            raise SimError("geo: %s sends the gradient of %s, which is no geo sparse table of "
                           "its worker_desc.txt (tables: %s)" % (self.label, param,
                                                                  sorted(self.sparse)))
        if not isinstance(value, SelectedRows):
            raise SimError("geo: %s sends %s's gradient as a dense value: the geo communicator "
                           "sends only sparse (SelectedRows) gradients" % (self.label, param))
        self.touched[param].update(int(r) for r in np.asarray(value.rows).reshape(-1))

    def push_pull(self):
        for p, tid in sorted(self.sparse.items(), key=lambda x: x[1]):
            self._sparse(p, tid)
        for tid, params in sorted(self.dense.items()):
            self._dense(tid, params)

    def _sparse(self, p, tid):
        ids = np.array(sorted(self.touched[p]), dtype=np.int64)
        self.touched[p] = set()
        where = geo_server(ids, len(self.servers)) if ids.size else ids
        for s, server in enumerate(self.servers):
            table = self._table(server, tid, GEO)
            mine = ids[where == s]
            if mine.size:
                lo = rows_of(self.old[p], mine)
                delta = (rows_of(self._get(p), mine) - lo) * (1.0 / self.trainers)
                self.old[p] = with_rows(self.old[p], mine, lo + delta)
                self._push_rows(table, mine, delta)
            keys, vals = table.pull_geo(self.tid)
            if not keys.size:
                continue
            if not mine.size:
                self.unsent_pulls.add(p)
            keys = keys.astype(np.int64)
            latest = self._get(p)
            old = rows_of(self.old[p], keys)
            self.scope.put(p, with_rows(latest, keys, rows_of(latest, keys) + (vals - old)))
            self.old[p] = with_rows(self.old[p], keys, vals)

    def _push_rows(self, table, keys, delta):
        try:
            table.push(keys.astype(np.uint64), np.asarray(delta, dtype=F32))
        except TableError as e:
            raise SimError("geo: %s pushes: %s" % (self.label, e)) from None

    def _dense(self, tid, params):
        """delta = (latest - old) / trainers pushed, old += delta; pulled: local = latest +
        (pulled - old), old = pulled. In place on the concatenations, the same arithmetic
        (IEEE addition commutes): a dense table of 70M floats holds a few copies at once,
        not eight."""
        latest = np.concatenate([_flat(self._get(p), self.fdt) for p in params])
        old = np.concatenate([self.old[p].reshape(-1) for p in params])
        for p in params:
            self.old[p] = None      # (set again below: the concatenation holds them now)
        delta = np.subtract(latest, old)
        delta *= 1.0 / self.trainers
        old += delta
        part = None
        for server, part in zip(self.servers, split_dense(delta, len(self.servers))):
            try:
                self._table(server, tid).push(part)
            except TableError as e:
                raise SimError("geo: %s pushes dense table %d: %s" % (self.label, tid, e)) \
                    from None
        del delta, part     # (the parts are views of delta)
        got = self._pull_dense(tid, params)
        local = np.subtract(got, old, out=old)
        local += latest
        del latest
        self._write_dense(params, local)
        self._set_old(params, got, copy=False)

    def _pull_dense(self, tid, params):
        total = sum(int(np.size(dense(self._get(p)))) for p in params)
        try:
            got = np.concatenate([self._table(s, tid).pull() for s in self.servers])
        except TableError as e:
            raise SimError("geo: %s pulls dense table %d: %s" % (self.label, tid, e)) from None
        if len(got) < total:
            raise SimError("geo: %s pulls dense table %d: %d values for params %s (%d values)"
                           % (self.label, tid, len(got), ", ".join(params), total))
        return got[:total].astype(self.fdt)

    def _write_dense(self, params, flat):
        at = 0
        for p in params:
            shape = np.shape(dense(self._get(p)))
            size = int(np.prod(shape)) if shape else 1
            self.scope.put(p, np.asarray(flat[at:at + size], dtype=self.fdt).reshape(shape))
            at += size

    def _set_old(self, params, flat, copy=True):
        """old[p] = p's values in `flat` (views of it where `copy` is False: `flat` is the
        caller's own, which nothing else holds or writes)."""
        at = 0
        for p in params:
            size = int(np.size(dense(self._get(p))))
            part = flat[at:at + size]
            self.old[p] = np.array(part, dtype=self.fdt) if copy else \
                np.asarray(part, dtype=self.fdt)
            at += size


def dense_groups(params) -> list:
    """The dense send contexts' params: the plain ones, then data_norm's statistics (a table of
    their own), each sorted by name (Paddle's merged dense pairs)."""
    plain = sorted(p for p in params if not p.endswith(DATA_NORM))
    norm = sorted(p for p in params if p.endswith(DATA_NORM))
    return [g for g in (plain, norm) if g]


def updated_params(main) -> dict:
    """param -> grad of block 0's update ops (an op with Param and Grad inputs)."""
    out = {}
    for op in main.global_block.ops:
        if op.input("Param") and op.input("Grad"):
            out.setdefault(op.input("Param")[0], op.input("Grad")[0])
    return out


def geo_dense_params(main) -> list:
    """The params a geo trainer's communicator syncs through dense tables (with the sparse
    tables, to be left out): those its update ops update and the parameters the backward
    gives a gradient (Paddle takes them from the original program, which the split does not
    carry: a trainer that lost an update op still syncs the param)."""
    block = main.global_block
    out = dict.fromkeys(updated_params(main))
    for v in main.parameters():
        if v.name + "@GRAD" in block.vars and not v.stop_gradient:
            out.setdefault(v.name)
    return list(out)
