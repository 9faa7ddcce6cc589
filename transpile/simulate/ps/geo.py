"""Style ps in geo mode: Paddle 2.6.2's GeoCommunicator (`ps/service/communicator/
communicator.cc`) against tables/' servers, shared by the ps geo reference and the split's run.

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

from ..refs.geo import rows_of, with_rows
from . import denseflat
from .denseflat import FlatRows
from .tables import TableError
from .tables.runs import Runs
from .tables.server import dense_per, geo_server
from ..refs.reference import snapshot
from ..model.values import LazyTable, SelectedRows, SimError, Unallocated, dense, shape_of

F32 = np.float32
GEO = "MemorySparseGeoTable"
DATA_NORM = (".batch_size", ".batch_sum", ".batch_square_sum")
CHUNK = 1 << 18     # values a dense push or pull computes at once (2 MB in float64)


def _flat(v, fdt):
    return np.asarray(dense(v), dtype=fdt).reshape(-1)


class GeoClient:
    """One trainer's GeoCommunicator. `sparse`: {param: table id}; `dense`: {table id: [params
    in send order]}; `scope`: the trainer's Scope. `keep_rows`: a big dense param is kept by
    rows (denseflat.py; simulate's ps geo run sets it): trainer 0's start read from one
    float32 copy, a push carrying the rows its trainer or the tables moved, its params and
    what it last pulled LazyTables over that start."""
    keep_rows = False

    def __init__(self, label, tid, trainers, servers, sparse, dense_tables, scope, fdt):
        self.label, self.tid, self.trainers = label, tid, max(int(trainers), 1)
        self.servers, self.sparse, self.dense = servers, dict(sparse), dict(dense_tables)
        self.scope, self.fdt = scope, fdt
        self.old: dict = {}
        self.kept: dict = {}        # dense table id -> its params kept by rows
        self.bases: dict = {}       # dense table id -> {kept param: its start's rows}
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
                values = [(p, self._get(p)) for p in params]
                self.kept[tid] = denseflat.kept_by_rows(
                    denseflat.layout(values), [self._table(s, tid) for s in self.servers]) \
                    if self.keep_rows else frozenset()
                start, self.bases[tid] = denseflat.start_values(values, self.kept[tid])
                for server, part in zip(self.servers, denseflat.split(start, n)):
                    self._table(server, tid).push_param(part)
            else:
                self.kept[tid], self.bases[tid] = first.kept[tid], first.bases[tid]
            got = self._pull_dense(tid, params)
            if isinstance(got, FlatRows):
                self._put_rows(tid, self._layout(params), got, None)
            else:
                self._put_dense(self._layout(params), got.astype(self.fdt), got)

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
        (pulled - old), old = pulled. Param by param in slices of CHUNK values (the same
        arithmetic, elementwise: the same bits), the delta rounded to float32 straight into
        the pushed slices, the delta recomputed after the pull rather than kept: a dense
        table of 70M floats holds its float32 push and pull at once, and slices."""
        layout = self._layout(params)
        if self._by_rows(tid, layout):
            return self._dense_rows(tid, layout)
        n = len(self.servers)
        total = sum(size for _, _, size in layout)
        per = dense_per(total, n)
        padded = np.zeros(per * n, dtype=F32)       # split_dense's layout: float32 slices
        at = 0
        for p, _, size in layout:
            latest, old = _flat(self._get(p), self.fdt), _flat(self.old[p], F32)
            for lo, hi in _chunks(size):
                padded[at + lo:at + hi] = self._delta(latest[lo:hi], old[lo:hi])
            at += size
        for i, server in enumerate(self.servers):
            try:
                self._table(server, tid).push(padded[i * per:(i + 1) * per])
            except TableError as e:
                raise SimError("geo: %s pushes dense table %d: %s" % (self.label, tid, e)) \
                    from None
        del padded
        got = self._pull_dense(tid, params)
        local = np.empty(total, dtype=self.fdt)
        got = got.take(0, total) if isinstance(got, FlatRows) else got
        at, latest, old = 0, None, None
        for p, _, size in layout:
            latest, old = _flat(self._get(p), self.fdt), _flat(self.old[p], F32)
            for lo, hi in _chunks(size):
                t = np.add(old[lo:hi], self._delta(latest[lo:hi], old[lo:hi]))  # old += delta
                t = np.subtract(got[at + lo:at + hi].astype(self.fdt), t, out=t)
                t += latest[lo:hi]                              # local = pulled - old + latest
                local[at + lo:at + hi] = t
            at += size
        del latest, old
        self._put_dense(layout, local, got)

    def _by_rows(self, tid, layout) -> bool:
        """Whether the table's kept params are still LazyTables (an op that read one whole
        left an array: then the whole arithmetic, on every value)."""
        kept = self.kept.get(tid)
        return bool(kept) and all(isinstance(self._get(p), LazyTable)
                                  and isinstance(self.old.get(p), LazyTable)
                                  for p, _, _ in layout if p in kept)

    def _dense_rows(self, tid, layout):
        """_dense with kept params: the delta of every value of the others and of the kept
        ones' rows this trainer holds (any other row is the start's in both latest and old:
        its delta is 0), pushed as a FlatRows a pserver's slice at a time; the pull
        (_put_rows) updates those rows and the rows the tables moved."""
        kept = self.kept[tid]
        rows = {p: np.union1d(self._get(p).touched(), self.old[p].touched())
                for p, _, _ in layout if p in kept}
        per = dense_per(sum(size for _, _, size in layout), len(self.servers))
        for s, server in enumerate(self.servers):
            part = self._push_slice(layout, kept, rows, s * per, (s + 1) * per)
            try:
                self._table(server, tid).push(part)
            except TableError as e:
                raise SimError("geo: %s pushes dense table %d: %s" % (self.label, tid, e)) \
                    from None
            part = None         # pushed: the next slice's arrays, then the pull's, take its place
        got = self._pull_dense(tid, [p for p, _, _ in layout])
        if not isinstance(got, FlatRows):       # a table made whole (denserows.py)
            got = FlatRows(len(got), Runs.span(0, len(got)), got)
        self._put_rows(tid, layout, got, rows)

    def _push_slice(self, layout, kept, rows, lo, hi) -> FlatRows:
        """The deltas _dense_rows pushes at positions lo .. hi - 1 (one pserver's slice), as a
        FlatRows of their own (positions from lo): float32 as the whole push rounds them."""
        mine, at = [], 0        # (param, shape, its start, first, end position in the slice)
        for p, shape, size in layout:
            if max(at, lo) < min(at + size, hi):
                mine.append((p, shape, at, max(at, lo), min(at + size, hi)))
            at += size
        pieces = {}     # a kept param's rows in the slice: (positions, deltas)
        for p, shape, at, a, b in mine:
            if p in kept:
                here = denseflat.row_positions(at, rows[p], shape)
                d = self._delta(np.asarray(self._get(p).get(rows[p]), self.fdt).reshape(-1),
                                self.old[p].get(rows[p]).reshape(-1))
                m = (here >= a) & (here < b)
                pieces[p] = here[m], d[m]
        count = sum(len(pieces[p][0]) if p in kept else b - a for p, _, _, a, b in mine)
        runs, vals = [], np.empty(count, dtype=F32)
        k = 0
        for p, shape, at, a, b in mine:
            if p in kept:
                here, d = pieces[p]
                runs.append(Runs.of(here - lo))
                vals[k:k + len(here)] = d
                k += len(here)
                continue
            latest, old = _flat(self._get(p), self.fdt), _flat(self.old[p], F32)
            runs.append(Runs.span(a - lo, b - lo))
            for c0, c1 in _chunks(b - a):
                vals[k + c0:k + c1] = self._delta(latest[a - at + c0:a - at + c1],
                                                  old[a - at + c0:a - at + c1])
            k += b - a
        return FlatRows(hi - lo, Runs.concat(runs), vals)

    def _put_rows(self, tid, layout, got: FlatRows, rows):
        """A pull kept by rows (`rows`: {kept param: the rows it pushed}, None at the start):
        a kept param and what was last pulled of it become LazyTables over its start with
        those rows and the rows the tables moved; the others as _dense / _put_dense make
        them (views of one array laid out as the table, its kept spans never written)."""
        kept, bases = self.kept[tid], self.bases[tid]
        local = np.empty(sum(size for _, _, size in layout), dtype=self.fdt)
        at = 0
        for p, shape, size in layout:
            if p in kept:
                rs = np.union1d(rows.get(p, np.zeros(0, np.int64)) if rows is not None
                                else np.zeros(0, np.int64),
                                denseflat.table_rows(got, at, shape, size))
                g = got.read(denseflat.row_positions(at, rs, shape))
                t = self._pulled(self._get(p).get(rs), self.old[p].get(rs), g) \
                    if rows is not None else g.astype(self.fdt)
                self.scope.put(p, denseflat.lazy_table(bases[p], shape, self.fdt, rs, t))
                self.old[p] = denseflat.lazy_table(bases[p], shape, F32, rs, g)
            else:
                g = got.take(at, at + size)
                if rows is None:
                    local[at:at + size] = g
                else:
                    latest, old = _flat(self._get(p), self.fdt), _flat(self.old[p], F32)
                    for lo, hi in _chunks(size):
                        local[at + lo:at + hi] = self._pulled(latest[lo:hi], old[lo:hi],
                                                              g[lo:hi])
                self.scope.put(p, local[at:at + size].reshape(shape))
                self.old[p] = g
            at += size

    def _pulled(self, latest, old, got):
        """local = pulled - (old + delta) + latest, as _dense computes it."""
        latest = np.asarray(latest, dtype=self.fdt).reshape(-1)
        old = np.asarray(old).reshape(-1)
        t = np.add(old, self._delta(latest, old))
        t = np.subtract(np.asarray(got).reshape(-1).astype(self.fdt), t, out=t)
        t += latest
        return t

    def _delta(self, latest, old):
        """(latest - old) / trainers, as the whole-array update computes it."""
        delta = np.subtract(latest, old)
        delta *= 1.0 / self.trainers
        return delta

    def _layout(self, params) -> list:
        """(param, shape, size) of a dense table's params in send order."""
        out = []
        for p in params:
            shape = tuple(shape_of(self._get(p)))
            out.append((p, shape, int(np.prod(shape)) if shape else 1))
        return out

    def _pull_dense(self, tid, params):
        """The table's float32 values over the pservers, as many as its params hold."""
        total = sum(size for _, _, size in self._layout(params))
        try:
            got = denseflat.joined([self._table(s, tid).pull() for s in self.servers])
        except TableError as e:
            raise SimError("geo: %s pulls dense table %d: %s" % (self.label, tid, e)) from None
        if len(got) < total:
            raise SimError("geo: %s pulls dense table %d: %d values for params %s (%d values)"
                           % (self.label, tid, len(got), ", ".join(params), total))
        return got if isinstance(got, FlatRows) else got[:total]

    def _put_dense(self, layout, local, got):
        """The trainer's params become views of `local` (one array of the table's values in
        the simulation's float type, laid out as the table: the kernels then see the arrays
        they always saw, and BLAS sums the same way); what it last pulled, `got`, is kept in
        float32, as the table holds it (a pulled value is a float32 one: the same value at
        half the bytes)."""
        at = 0
        for p, shape, size in layout:
            self.scope.put(p, local[at:at + size].reshape(shape))
            self.old[p] = np.array(got[at:at + size], dtype=F32)
            at += size


def _chunks(size):
    """(lo, hi) of slices of CHUNK values covering `size`."""
    for lo in range(0, size, CHUNK):
        yield lo, min(size, lo + CHUNK)


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
