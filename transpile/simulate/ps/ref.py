"""The ps reference: the original program trained under the semantics of the descriptors that
`split` writes for it (style ps), without the split's programs.

Tables: tables/' PsServers built from the `server_desc.txt` texts our DescWriter makes for the
original and the cluster config (not the split's: a changed rule or learning rate in a split's
descriptor is then a difference). Trainers: each runs the original program's ops but its
optimizer ops (the plan's optimize ops: the tables update the parameters) on its own scope:
- before a lookup of a sparse table (a lookup with remote_prefetch, the plan's table id), the
  looked-up rows are pulled from the tables into the trainer's copy of the table (padding ids
  read zeros);
- after the backward, each table's lookup grads (in backward order, as the split's push op lists
  them) are pushed as the trainer's client pushes them (tables/client.py: per occurrence,
  scaled by the batch size, show 1 / click 0 or a ShowClickEntry's vars, merged per key);
- the dense grads of each dense table (the plan's send contexts, in their order) are pushed;
- sync: once every trainer has had its turn (trainer 0 first), the barrier pours the dense
  tables and every trainer pulls them; async: each trainer's dense push is applied at once, and
  the trainer pulls at the end of its turn (the turn-by-turn schedule of async mode).
A sparse row is read as the tables hold it at the lookup: a trainer sees the pushes of the
trainers whose turn came before its own in the same step. Start: trainer 0 pushes the original's
initial dense values, every trainer pulls; sparse rows are created by the tables at their first
push (from the table's rule, or with `program_init` from the original's initial rows).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir.program import select
from ...ir.tables import lookup_groups
from ...format import psdesc
from ..model.executor import Executor, Scope
from .tables import TableOptions
from .tables.client import Push, batch_size, fit_push, merge_by_key, push_values
from .tables.server import PsServer, sparse_server
from . import denseflat
from ..refs.reference import snapshot
from ..model.values import LazyTable, SimError, dense, shape_of


def show_click_names(grad_op, block) -> tuple:
    """The show / click vars a push of this lookup grad reports (None: 1 and 0)."""
    entry = str(grad_op.attr("entry", "") or "").split(":")
    if len(entry) == 3 and entry[0] == "show_click_entry" and entry[1] in block.vars \
            and entry[2] in block.vars:
        return entry[1], entry[2]
    return None, None


def table_clips_of(main, tables: list) -> dict:
    """{table: TableClip} of the clipped tables (plan/clip_faults.py): a trainer clips its
    table's gradient rows before it pushes them, as the program clips the gradient."""
    from ...plan.clip_faults import sparse_clip_tables, table_clips
    clipped = sparse_clip_tables(main, set(tables))
    try:
        return {c.table: c for c in table_clips(main, [t for t in tables if t in clipped])}
    except ValueError as e:
        raise SimError("the ps reference can not clip the pushed rows of a table: %s" % e)


def clipped_rows(clip, scope, ids_list, grads) -> list:
    """The lookups' grads `grads` (by `ids_list`) made to add up, per id, to the clipped
    merged gradient: what the fixed trainer pushes (passes/sparseclip.py), op for op."""
    if clip.kind == "global":
        s = np.asarray(dense(scope.get(clip.scale)))
        return [g * s for g in grads]
    merged = scope.get(clip.grad).merged()
    if clip.kind == "norm":
        norm = np.sqrt(np.sum(np.square(merged.value)))
        bound = np.asarray([clip.max_norm], dtype=merged.value.dtype)
        s = bound / np.maximum(norm, bound)
        return [g * s for g in grads]
    flat = [np.asarray(i).astype(np.int64).reshape(-1) for i in ids_list]
    uniq, counts = np.unique(np.concatenate(flat), return_counts=True)
    at = {int(k): j for j, k in enumerate(merged.rows.tolist())}
    out = []
    for ids, g in zip(flat, grads):
        rows = np.stack([merged.value[at[int(k)]] if int(k) in at
                         else np.zeros(merged.value.shape[1:]) for k in ids]).reshape(g.shape)
        n = counts[np.searchsorted(uniq, ids)].astype(g.dtype).reshape(
            g.shape[:-1] + (1,))
        delta = np.clip(rows, clip.min, clip.max) - rows
        out.append(g + delta / np.maximum(n, np.ones(1, dtype=g.dtype)))
    return out


def program_rows(init: dict):
    """TableOptions.program_init from the original's initial values."""
    def rows(table_name, keys):
        v = init.get(table_name)
        if v is None:
            raise KeyError(table_name)
        keys = np.asarray(keys, dtype=np.int64)
        if isinstance(v, LazyTable):
            return np.asarray(v.get(keys), dtype=np.float32)
        return np.asarray(v, dtype=np.float32)[keys]
    return rows


class RefTrainer:
    """`keep`: when given, the temporaries of a step are dropped after their last use
    (Executor.free_temporaries), but these, which the reference reads after the step."""

    def __init__(self, tid, main, init, fdt, seed, keep=None):
        self.tid = tid
        self.scope = Scope()
        for name, v in init.items():
            self.scope.put(name, snapshot(v))
        self.ex = Executor("ps reference trainer_%d" % tid, main, self.scope,
                           float_dtype=fdt, seed=seed)
        if keep is not None:
            self.ex.free_temporaries(keep=keep)


@dataclass(frozen=True)
class RefRun:
    """What every training of the ps reference shares: the original (`main`), its initial
    values (`init`), our PsPlan of it and the config, the feeds and the run's size and
    floats."""
    main: object
    init: dict
    plan: object
    config: object
    feeder: object
    steps: int
    batch: int
    seed: int
    fdt: object


class PsReference:
    """The original of `r` (RefRun) under the tables of `server_texts` (endpoint ->
    server_desc.txt text); `variant`: the effects undone (explain/pswhy.py's ablations)."""

    def __init__(self, r: RefRun, server_texts: dict, options: TableOptions = TableOptions(),
                 variant: frozenset = frozenset()):
        main, init, plan, config, fdt, seed = r.main, r.init, r.plan, r.config, r.fdt, r.seed
        self.main, self.plan, self.config = main, plan, config
        self.variant = variant
        self.fdt = fdt
        self.sync = config.mode == "sync"
        n = len(config.pservers)
        self.servers = [PsServer(psdesc.parse_text(server_texts[ep], "server_desc.txt"), i, n,
                                 options) for i, ep in enumerate(config.pservers)]
        ops = main.global_block.ops
        skip = {id(op) for op in select(ops, set(plan.optimize_ops) | set(plan.lr_ops))}
        self.run_ops = [i for i, op in enumerate(ops) if id(op) not in skip]
        pulls, self.pushes, self.use_cvm = lookup_groups(ops)
        self.table_of = {id(op): w for w, group in pulls.items() for op in group
                         if w in plan.table_ids}
        self.pushes = {w: g for w, g in self.pushes.items() if w in plan.table_ids}
        self.dense = {c.table_id: (list(c.params), list(c.grads)) for c in plan.dense_ctxs}
        self.kept: dict = {}        # dense table id -> the params kept by rows (denseflat.py)
        self.bases: dict = {}       # dense table id -> {kept param: its untouched rows}
        self.touched: dict = {}         # table -> set of keys looked up or pushed
        self.deferred: list = []
        self.cut_pushes: set = set()    # table ids whose pushes the client cut (fit_push)
        self.push_counts: dict = {}     # table -> {key: pushes received}
        self.shard_num = {int(p.table_id): int(p.shard_num) or 1
                          for p in self.servers[0].desc_params.values()}
        self.clips = table_clips_of(main, list(self.pushes))
        self.trainers = [RefTrainer(t, main, init, fdt, seed, keep=self._read_after_step())
                         for t in range(config.trainers)]

    def _read_after_step(self) -> set:
        """The vars a trainer's pushes read once its ops have run: the lookups' ids and
        grads, their show / click vars, the clipped tables' grads and scales, the dense
        grads (each step of ffm's otherwise keeps 1.3 GB of slice grads to its end)."""
        block = self.main.global_block
        out = set()
        for group in self.pushes.values():
            for op in group:
                out.update(op.input("Ids") + op.input("Out@GRAD"))
            out.update(n for n in show_click_names(group[0], block) if n)
        for clip in self.clips.values():
            out.update(n for n in (clip.grad, clip.scale) if n)
        for _, grads in self.dense.values():
            out.update(grads)
        return out

    def release(self) -> None:
        """Trained: keep of each trainer's scope only the parameters the comparisons read."""
        keep = {v.name for v in self.main.parameters()}
        for tr in self.trainers:
            tr.scope.keep_only(keep)

    # --- tables -------------------------------------------------------------------------
    def _route(self, tid, keys):
        return sparse_server(keys, self.shard_num[tid], len(self.servers))

    def pull_sparse(self, w, keys):
        tid = self.plan.table_ids[w]
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        where = self._route(tid, keys)
        out = None
        for s, server in enumerate(self.servers):
            m = where == s
            if m.any():
                got = server.table(tid).pull(keys[m])
                if out is None:
                    out = np.zeros((len(keys), got.shape[1]), dtype=np.float32)
                out[m] = got
        return out

    def _create_full(self, w, keys):
        """Undo lazy rows: a key is a full row (embedx included) before its first pull."""
        tid = self.plan.table_ids[w]
        where = self._route(tid, keys)
        for s, server in enumerate(self.servers):
            t = server.table(tid)
            new = [k for k in keys[where == s].tolist() if int(k) not in t.rows]
            if new:
                for k, row in zip(new, t.create_rows(new)):
                    t.rows[int(k)] = row

    def table_rows(self, w):
        """{key: stored row} of a sparse table over every pserver."""
        tid = self.plan.table_ids[w]
        out = {}
        for server in self.servers:
            t = server.table(tid)
            for k in t.keys():
                out[k] = t.row(k)
        return out

    def startup(self):
        first = self.trainers[0]
        for tid, (params, _) in sorted(self.dense.items()):
            values = [(p, first.scope.get(p)) for p in params]
            self.kept[tid] = denseflat.kept_by_rows(
                denseflat.layout(values), [s.table(tid) for s in self.servers])
            start, self.bases[tid] = denseflat.start_values(values, self.kept[tid])
            for server, part in zip(self.servers, denseflat.split(start, len(self.servers))):
                server.table(tid).push_param(part)
        for tr in self.trainers:
            self.pull_dense(tr)

    def pull_dense(self, tr):
        for tid, (params, _) in sorted(self.dense.items()):
            got = denseflat.joined([s.table(tid).pull() for s in self.servers])
            lay = denseflat.layout([(p, tr.scope.get(p)) for p in params])
            for p, v in denseflat.pulled_values(got, lay, self.bases.get(tid, {}),
                                                self.fdt):
                tr.scope.put(p, v)

    # --- a step -------------------------------------------------------------------------
    def _lookup(self, tr, op):
        """Pull the rows `op` reads into the trainer's copy of its table."""
        w = self.table_of[id(op)]
        pad = op.attr("padding_idx", -1)
        pad = -1 if pad is None else int(pad)
        ids = np.asarray(tr.ex.read(op.input("Ids")[0])).astype(np.int64).reshape(-1)
        keys = np.unique(ids[ids != pad])
        self.touched.setdefault(w, set()).update(keys.tolist())
        if not len(keys):
            return
        if "ps-sparse-lazy-rows" in self.variant:
            self._create_full(w, keys)
        rows = self.pull_sparse(w, keys).astype(self.fdt)
        table = tr.scope.get(w)
        if isinstance(table, LazyTable):
            table.set(keys, rows)
        else:
            table = np.array(dense(table), dtype=self.fdt, copy=True)
            table[keys] = rows
            tr.scope.put(w, table)

    def _push_sparse(self, tr):
        block = self.main.global_block
        for w, group in self.pushes.items():
            tid = self.plan.table_ids[w]
            emb = int(block.var(w).shape[1])
            ids_list = [np.asarray(tr.scope.get(op.input("Ids")[0])) for op in group]
            lods = [(tr.scope.lods.get(op.input("Ids")[0]) or [None])[0] for op in group]
            batch = batch_size(ids_list, lods)
            if "ps-sparse-grad-batch-scale" in self.variant:
                batch = None
            show, clk = show_click_names(group[0], block)
            shows = None if show is None else np.asarray(dense(tr.scope.get(show)))
            clicks = None if clk is None else np.asarray(dense(tr.scope.get(clk)))
            keys, vals = [], []
            grads = [np.asarray(dense(tr.scope.get(op.input("Out@GRAD")[0]))) for op in group]
            if w in self.clips:
                grads = clipped_rows(self.clips[w], tr.scope, ids_list, grads)
            for op, ids, lod, g in zip(group, ids_list, lods, grads):
                pad = op.attr("padding_idx", -1)
                k, v = push_values(ids, g, emb, Push(
                    batch, slot=int(op.attr("slot", 0) or 0), shows=shows, clicks=clicks,
                    padding_idx=-1 if pad is None else int(pad), use_cvm_op=self.use_cvm,
                    lod=lod))
                keys.append(k)
                vals.append(v)
            keys, vals = np.concatenate(keys), np.concatenate(vals)
            if "ps-sparse-trainer-sum" in self.variant:
                vals[:, -emb:] /= np.float32(len(self.trainers))
            if "ps-sparse-turns" in self.variant:
                self.deferred.append((w, tid, keys, vals))
                continue
            self._push_rows(w, tid, keys, vals)

    def _push_rows(self, w, tid, keys, vals):
        """Table `tid`'s (the table of `w`) rows `keys` pushed, each to the pserver it routes to."""
        self.touched.setdefault(w, set()).update(keys.astype(np.int64).tolist())
        self._count(w, keys)
        where = self._route(tid, keys)
        for s, server in enumerate(self.servers):
            m = where == s
            if m.any():
                self._push_table(server.table(tid), keys[m], vals[m])

    def _push_table(self, table, keys, vals):
        cut = fit_push(vals, table.accessor)
        if cut is not None:
            self.cut_pushes.add(table.table_id)
            vals = cut
        table.push(*merge_by_key(keys, vals, table.accessor))

    def _count(self, w, keys):
        counts = self.push_counts.setdefault(w, {})
        for k in np.unique(keys.astype(np.int64)).tolist():
            counts[k] = counts.get(k, 0) + 1

    def _apply_deferred(self):
        pending, self.deferred = self.deferred, []
        for w, tid, keys, vals in pending:
            self._push_rows(w, tid, keys, vals)

    def _push_dense(self, tr):
        for tid, (params, grads) in sorted(self.dense.items()):
            kept = self.kept.get(tid, frozenset())
            values = denseflat.grad_values(
                [(p, tr.scope.get(g)) for p, g in zip(params, grads)], kept,
                {p: shape_of(tr.scope.get(p)) for p in kept})
            for server, part in zip(self.servers, denseflat.split(values, len(self.servers))):
                server.table(tid).push(part)

    def turn(self, tr, feed, step, per):
        """Trainer `tr`'s part of step `step` on its shard `feed`: forward and backward with
        the rows pulled at each lookup, then its pushes."""
        for name, (arr, lod) in feed.items():
            tr.scope.put(name, arr, lod)
        tr.ex.begin_step(step, per, tr.tid * per)
        ops = self.main.global_block.ops
        for i in self.run_ops:
            if id(ops[i]) in self.table_of:
                self._lookup(tr, ops[i])
            tr.ex.run_op(0, i, ops[i])
        self._push_sparse(tr)
        self._push_dense(tr)

    def step(self, step, shards, per):
        for tr, feed in zip(self.trainers, shards):
            self.turn(tr, feed, step, per)
            if not self.sync:
                self.pull_dense(tr)
        self._apply_deferred()
        if self.sync:
            for tr in self.trainers:
                for server in self.servers:
                    server.barrier(tr.tid)
            for tr in self.trainers:
                self.pull_dense(tr)
