"""geo-SGD (schedule.py): the arithmetic of a push and a pull, shared by the reference
(georef.py) and the split's trainers, and the trainers' communicator in the cluster.

Paddle 2.0's GeoCommunicator: a dense parameter's delta is (latest - old) * (1 / trainers), old
+= delta, the pserver adds the delta (its geo block: `sum(P, P.delta) -> P`); the pull takes the
pserver's value: latest += pserver - old, old = pserver. A sparse table's send records the rows
of its SelectedRows gradient; the push sends the delta of those rows (merged since the last
push) as a SelectedRows cut by the table's blocks; the pserver records the rows it was sent for
every trainer (AsyncSparseParamUpdateRecorder) and a pull takes, from every block, the rows
recorded for that trainer since its last pull.

Rows are routed to blocks by the runtime.json `sections` (contiguous rows, as the simulator
routes every sparse table; Paddle 2.0's communicator routes id % pservers: the same training
when every block is hit).
"""
from __future__ import annotations

import numpy as np

from ..model.values import LazyTable, SelectedRows, SimError, copy_value, dense, split_rows


def rows_of(v, rows):
    rows = np.asarray(rows, dtype=np.int64)
    if isinstance(v, LazyTable):
        return v.get(rows)
    return np.asarray(dense(v))[rows]


def with_rows(v, rows, values):
    """A copy of `v` whose rows `rows` (unique) hold `values`."""
    rows = np.asarray(rows, dtype=np.int64)
    if isinstance(v, LazyTable):
        out = v.copy()
        out.set(rows, values)
        return out
    out = np.array(dense(v), copy=True)
    out[rows] = values
    return out


def delta_of(latest, old, trainers: int):
    """What a push sends: (latest - old) scaled by 1 / trainers (SendDense, SendSparse)."""
    return (np.asarray(latest) - np.asarray(old)) * (1.0 / trainers)


def pulled(latest, old, server):
    """The trainer's value after a pull (RecvDense, RecvSparse)."""
    return np.asarray(latest) + (np.asarray(server) - np.asarray(old))


class GeoCommunicator:
    """A trainer's geo communicator: what its sends recorded, the values it last pulled."""

    def __init__(self, cluster, tr):
        rt = tr.runtime
        if rt is None:
            raise SimError("geo mode: %s has no runtime.json (its communicator's send and recv "
                           "contexts)" % tr.label)
        self.cluster = cluster
        self.tr = tr
        self.send_ctx = {n: c for n, c in (rt.get("send_ctx") or {}).items()
                         if not c.get("is_tensor_table")}
        self.recv_ctx = rt.get("recv_ctx") or {}
        kw = rt.get("kwargs") or {}
        self.trainers = int(kw.get("trainers") or cluster.config.trainers or 1)
        self.old: dict = {}
        self.touched = {n: set() for n, c in self.send_ctx.items() if c.get("is_sparse")}

    def _param(self, name, ctx) -> str:
        origin = ctx.get("origin_varnames") or [name]
        return origin[0]

    def _recv(self, param):
        ctx = self.recv_ctx.get(param)
        if ctx is None:
            raise SimError("geo: %s's runtime.json has no recv_ctx for %s"
                           % (self.tr.label, param))
        return ctx

    def _server(self, ctx, param):
        parts = []
        for n, ep in zip(ctx.get("split_varnames") or [], ctx.get("split_endpoints") or []):
            v = self.cluster.pserver(ep, self.tr.label).value(n)
            if v is None:
                raise SimError("%s pulls %s from pserver %s, which holds no such var"
                               % (self.tr.label, n, ep))
            parts.append(np.asarray(dense(v)))
        if not parts:
            raise SimError("geo: recv_ctx %s has no split vars" % param)
        try:
            return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        except ValueError as e:
            raise SimError("geo: the pieces of %s do not concatenate: %s" % (param, e)) from None

    def init(self):
        """InitParams: dense parameters pulled from the pservers; a sparse table keeps the
        trainer's own (the original's) initial rows as the values last pulled."""
        for name, ctx in self.send_ctx.items():
            param = self._param(name, ctx)
            if ctx.get("is_sparse"):
                self.old[param] = copy_value(self.tr.ex.read(param))
                continue
            v = self._server(self._recv(param), param)
            self.tr.ex.write(0, param, np.array(v, copy=True))
            self.old[param] = np.array(v, copy=True)

    def record(self, ctx_name, value):
        """A send of a sparse table's gradient: its rows, for the next push."""
        if ctx_name not in self.touched:
            raise SimError("geo: %s sends %s, which is no sparse send_ctx of its runtime.json"
                           % (self.tr.label, ctx_name))
        if not isinstance(value, SelectedRows):
            raise SimError("geo: %s sends %s, a dense value: the geo communicator records the "
                           "rows of a sparse table's SelectedRows gradient" % (self.tr.label,
                                                                                ctx_name))
        self.touched[ctx_name].update(int(r) for r in value.rows)

    def push_pull(self):
        for name, ctx in self.send_ctx.items():
            if ctx.get("is_sparse"):
                self._sparse(name, ctx)
            else:
                self._dense(name, ctx)

    def _send(self, parts, ctx, name):
        names, eps = ctx.get("split_varnames") or [], ctx.get("split_endpoints") or []
        if not (len(parts) == len(names) == len(eps)):
            raise SimError("send_ctx %s: %d sections, %d split_varnames, %d endpoints"
                           % (name, len(parts), len(names), len(eps)))
        for part, n, ep in zip(parts, names, eps):
            if isinstance(part, SelectedRows) and not len(part.rows):
                continue
            ps = self.cluster.pserver(ep, self.tr.label)
            ps.receive(n, part, None, self.tr.label)
            if isinstance(part, SelectedRows):
                self.cluster.geo_record(ps, n, part.rows)

    def _dense(self, name, ctx):
        param = self._param(name, ctx)
        latest, old = self.tr.ex.read(param), self.old[param]
        delta = delta_of(dense(latest), old, self.trainers)
        old = np.asarray(old) + delta
        self._send(split_rows(delta, ctx.get("sections") or [], name), ctx, name)
        server = self._server(self._recv(param), param)
        self.tr.ex.write(0, param, pulled(dense(latest), old, server))
        self.old[param] = np.array(server, copy=True)

    def _sparse(self, name, ctx):
        param = self._param(name, ctx)
        ids = np.array(sorted(self.touched[name]), dtype=np.int64)
        self.touched[name] = set()
        if not ids.size:
            return
        latest, old = self.tr.ex.read(param), self.old[param]
        lo = rows_of(old, ids)
        delta = delta_of(rows_of(latest, ids), lo, self.trainers)
        old = with_rows(old, ids, lo + delta)
        height = latest.shape[0]
        grad = SelectedRows(ids, delta, height)
        self._send(split_rows(grad, ctx.get("sections") or [], name), ctx, name)
        latest, old = self._pull_rows(param, latest, old)
        self.tr.ex.write(0, param, latest)
        self.old[param] = old

    def _pull_rows(self, param, latest, old):
        ctx = self._recv(param)
        start = 0
        sections = [int(s) for s in ctx.get("sections") or []]
        names, eps = ctx.get("split_varnames") or [], ctx.get("split_endpoints") or []
        if not sections:
            sections = [latest.shape[0]] * len(names)
        got = []            # (global rows, their values) of each pserver's block
        for n, ep, h in zip(names, eps, sections):
            ps = self.cluster.pserver(ep, self.tr.label)
            rows = self.cluster.geo_updated(ps, n, self.tr.tid)
            if rows.size:
                block = ps.value(n)
                if block is None:
                    raise SimError("%s pulls %s from pserver %s, which holds no such var"
                                   % (self.tr.label, n, ep))
                got.append((rows + start, rows_of(block, rows)))
            start += h
        if not got:
            return latest, old
        # one copy of the table for all the blocks' rows (a block's rows are its own)
        gids = np.concatenate([g for g, _ in got])
        vals = np.concatenate([v for _, v in got])
        latest = with_rows(latest, gids, pulled(rows_of(latest, gids), rows_of(old, gids), vals))
        return latest, with_rows(old, gids, vals)
