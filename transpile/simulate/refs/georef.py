"""geo: the original program trained with geo-SGD (schedule.py, geo.py).

Every trainer is a whole copy of the original (its own parameters, optimizer state, learning
rate) that trains on its shards. After every K-th step the trainers take turns, trainer 0
first, to push (per trainable parameter: delta = (local - last pulled) / trainers added to the
pservers' value; a sparse table only for the rows its gradients touched since the last push)
and pull (local += pserver - last pulled; a sparse table for the rows any trainer pushed since
this trainer's last pull). The pservers' value of a parameter starts as its initial value.
"""
from __future__ import annotations

import numpy as np

from ..model.executor import Executor, Scope
from .geo import delta_of, pulled, rows_of, with_rows
from .original import OriginalRun, lazy_policy_for
from .reference import snapshot
from ..model.values import LazyTable, SelectedRows, dense


class GeoRun(OriginalRun):

    def begin(self):
        n = self.schedule.trainers
        self.exs = []
        for t in range(n):
            scope = Scope()
            for name, v in self.scope.vars.items():
                scope.put(name, v if hasattr(v, "rows") else snapshot(v),
                          self.scope.lods.get(name))
            ex = self.watch(Executor("original trainer_%d" % t, self.main, scope,
                                     float_dtype=self.fdt, seed=self.seed))
            ex.free_temporaries()
            self.exs.append(ex)
        params = sorted(p for p in self.trainable if self.scope.get(p) is not None)
        self.values = {p: snapshot(self.scope.get(p)) for p in params}
        self.old = [{p: snapshot(self.scope.get(p)) for p in params} for _ in range(n)]
        policy = lazy_policy_for(self.main)
        for p in params:
            self._by_rows(p, policy)
        self.sparse: set = set()
        self.touched = [{} for _ in range(n)]
        self.updated: dict = {}          # sparse table -> [rows pushed since trainer t pulled]
        self.updates = [(i, op.input("Param")[0], op.input("Grad")[0])
                        for i, op in enumerate(self.main.global_block.ops)
                        if op.input("Param") and op.input("Grad")]

    def _by_rows(self, p, policy) -> None:
        """A big dense param that only lookups and row-wise ops read (`policy`:
        lazy_policy_for's; a table looked up without is_sparse, drawn whole in geo) kept by
        rows from here on: each trainer's copy, what it last pulled and the
        pservers' value LazyTables over its initial values (no copy), a push and a pull
        computed on the rows any of them moved (any other row is the initial one in all
        three: its delta is 0). Not where the initial values hold a -0.0, which a delta of
        0 would turn into 0.0."""
        v = self.scope.get(p)
        if not isinstance(v, np.ndarray) or not policy(p, tuple(v.shape)) \
                or np.any(np.signbit(v) & (v == 0)):
            return
        table = LazyTable.over(snapshot(v))
        for ex, old in zip(self.exs, self.old):
            ex.scope.put(p, table.copy())
            old[p] = table.copy()
        self.values[p] = table.copy()

    def step(self, step, shards, per):
        for t, feed in enumerate(shards):
            self._local(step, t, feed, per)
        if self.schedule.pushes_after(step):
            for t in range(len(self.exs)):
                pushed = self._push(t)
                self._pull(t, pushed)
        self.steps_run = step + 1

    def _local(self, step, t, feed, per):
        ex = self.exs[t]
        for name, (arr, lod) in feed.items():
            ex.scope.put(name, arr, lod)
        ex.begin_step(step, per, t * per)
        grads = {i: g for i, _, g in self.updates}
        params = {i: p for i, p, _ in self.updates}
        # a table's rows its lookups' gradient names: what the communicator records and pushes,
        # also where a decay makes the table's update dense (fleet sends `<table>@GRAD`)
        lookup_grads = {p + "@GRAD": p for _, p, _ in self.updates}
        for i, op in enumerate(self.main.global_block.ops):
            if i in grads:
                self._touch(t, params[i], ex.scope.get(grads[i]))
            ex.run_op(0, i, op)
            for name in op.output_names():
                if name in lookup_grads:
                    self._touch(t, lookup_grads[name], ex.scope.get(name))

    def _touch(self, t, param, g) -> None:
        if isinstance(g, SelectedRows):
            self.sparse.add(param)
            self.touched[t].setdefault(param, set()).update(int(r) for r in g.rows)

    def _push(self, t) -> set:
        """Trainer t's push; the sparse tables it sent rows of."""
        n = len(self.exs)
        scope, old = self.exs[t].scope, self.old[t]
        pushed = set()
        for p in self.values:
            latest = scope.get(p)
            if p in self.sparse:
                ids = np.array(sorted(self.touched[t].pop(p, ())), dtype=np.int64)
                if not ids.size:
                    continue
                lo = rows_of(old[p], ids)
                delta = delta_of(rows_of(latest, ids), lo, n)
                old[p] = with_rows(old[p], ids, lo + delta)
                self.values[p] = with_rows(self.values[p], ids,
                                           rows_of(self.values[p], ids) + delta)
                for rows in self.updated.setdefault(p, [set() for _ in range(n)]):
                    rows.update(ids.tolist())
                pushed.add(p)
                continue
            if _lazy(latest, old[p], self.values[p]):
                ids = np.union1d(latest.touched(), old[p].touched())
                lo = rows_of(old[p], ids)
                delta = delta_of(rows_of(latest, ids), lo, n)
                old[p] = with_rows(old[p], ids, lo + delta)
                self.values[p] = with_rows(self.values[p], ids,
                                           rows_of(self.values[p], ids) + delta)
                continue
            delta = delta_of(dense(latest), dense(old[p]), n)
            old[p] = np.asarray(dense(old[p])) + delta
            self.values[p] = np.asarray(dense(self.values[p])) + delta
        return pushed

    def _pull(self, t, pushed):
        scope, old = self.exs[t].scope, self.old[t]
        for p in self.values:
            if p in self.sparse:
                if p not in pushed:
                    continue
                ids = np.array(sorted(self.updated[p][t]), dtype=np.int64)
                self.updated[p][t] = set()
                if not ids.size:
                    continue
                vals = rows_of(self.values[p], ids)
                scope.put(p, with_rows(scope.get(p), ids,
                                       pulled(rows_of(scope.get(p), ids), rows_of(old[p], ids),
                                              vals)))
                old[p] = with_rows(old[p], ids, vals)
                continue
            latest = scope.get(p)
            if _lazy(latest, old[p], self.values[p]):
                ids = np.union1d(np.union1d(latest.touched(), old[p].touched()),
                                 self.values[p].touched())
                scope.put(p, with_rows(latest, ids, pulled(
                    rows_of(latest, ids), rows_of(old[p], ids), rows_of(self.values[p], ids))))
                old[p] = self.values[p].copy()
                continue
            scope.put(p, pulled(dense(latest), dense(old[p]), dense(self.values[p])))
            old[p] = np.array(dense(self.values[p]), copy=True)

    def server(self, name):
        return self.values.get(name)

    def trainer(self, name, tid):
        return self.exs[tid].scope.get(name)

    def executors(self):
        return [self.ex_startup] + self.exs

    def released(self, keep):
        self.old = []       # what each trainer last pulled: for its next push only

    def release_servers(self) -> None:
        """The pservers' values go (style ps compares the trainers' alone: ps/georun.py)."""
        self.values = {}

    def release_trainers(self) -> None:
        """The trainers' values go (style ps has compared them: ps/georun.py)."""
        for ex in self.exs:
            ex.scope.keep_only(())


def _lazy(*values) -> bool:
    """Whether a dense param's copies are all kept by rows (GeoRun._by_rows; an op that read
    a trainer's whole left an array: then every value is computed whole)."""
    return all(isinstance(v, LazyTable) for v in values)
