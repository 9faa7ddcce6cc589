"""The in-process message layer: trainers and pservers of a split, stepped as a cluster would.

Sync mode, per step: every trainer runs its main block up to its send_barrier (its sends land in
the pservers' inboxes, named as sent), then every pserver runs the optimize blocks of its
listen_and_serv in order (the LR-decay block included, once), then the trainers (or, in fleet
style, their communicators from runtime.json) receive. Async and half-async: trainers take turns;
a pserver runs a grad's block (grad_to_block_id) as soon as the grad arrives, and block 1 once at
startup when no grad is bound to it (listen_and_serv's RunAsyncLoop).

The global step of LR decay (Fleet): a trainer's `send` of @PS_STEP_COUNTER@ (a tensor-table
send_ctx in runtime.json) reaches every pserver as a notify with the trainer's batch count; the
pserver keeps one count per trainer, sets @LR_DECAY_COUNTER@ to their sum and runs its
lr_decay_block_id (Paddle 2.0's RequestNotifyHandler). Without such a send the counter keeps its
startup value.

A pserver is pserver.py's PServer; the split's programs by role come as splitprograms.py's
SplitPrograms.
"""
from __future__ import annotations

import re
from typing import Optional

import numpy as np

from ...ir.program import Program
from ..model.executor import Executor
from ..model import largescale
from . import tableid
from .pserver import LR_DECAY_COUNTER, STEP_COUNTER, TRAINER_SUFFIX, PServer, role_executors
from .splitprograms import SplitPrograms
from ..model.values import (LazyTable, NoKernelError, SelectedRows, SimError, Unallocated,
                            dense, shared, split_rows)


class Trainer:
    def __init__(self, cluster: "Cluster", tid: int, main: Program, startup: Program,
                 runtime: Optional[dict]):
        self.cluster = cluster
        self.tid = tid
        self.runtime = runtime
        self.geo = None              # geo mode: its communicator (geo.py)
        self.scope, self.ex_startup, self.ex = role_executors(
            self, cluster, "trainer_%d" % tid, main, startup)
        self.ex.free_temporaries()
        self.main = main
        ops = main.global_block.ops
        self.barriers = [i for i, op in enumerate(ops) if op.type == "send_barrier"]
        self.pos = 0

    @property
    def label(self):
        return "trainer_%d" % self.tid

    def startup(self):
        self.ex_startup.run_block(0)

    def feed(self, feeds: dict):
        for name, (arr, lod) in feeds.items():
            self.scope.put(name, arr, lod)

    def run_until(self, stop: Optional[int]):
        self.ex.run_block(0, self.pos, stop)
        self.pos = stop if stop is not None else 0

    def communicator_recv(self):
        """Fleet style: the communicator pulls every recv_ctx var after the step."""
        if self.runtime is None:
            return
        for name in (self.runtime.get("recv_ctx") or {}):
            self.cluster.recv_ctx(self, name, self.ex, 0)


class Cluster:
    def __init__(self, split: SplitPrograms, config, *, float_dtype, seed, reference,
                 schedule=None):
        from ..refs.schedule import make_schedule
        self.config = config
        self.schedule = schedule or make_schedule(config)
        self.sync = config.mode == "sync"
        self.geo = config.mode == "geo"
        self.geo_rows: dict = {}     # (endpoint, table block) -> rows pushed, per trainer
        self.float_dtype = float_dtype
        self.recv_cache: Optional[dict] = None     # _assembled: pieces' ids -> (pieces, value)
        self.seed = seed
        self.reference = reference           # reference.py: Reference
        self.notes = list(split.notes)
        self.pservers = {ep: PServer(self, ep, p["main"], p["startup"])
                         for ep, p in split.pservers.items()}
        self.trainers = [Trainer(self, tid, p["main"], p["startup"], split.runtime.get(tid))
                         for tid, p in sorted(split.trainers.items())]
        counts = {len(t.barriers) for t in self.trainers}
        if len(counts) != 1:
            raise SimError("trainers differ in their number of send_barrier ops: %s"
                           % {t.label: len(t.barriers) for t in self.trainers})
        if self.sync and not self.trainers[0].barriers:
            raise SimError("sync mode, but trainer_0's main program has no send_barrier: the "
                           "pservers would never know when a step's grads are all in")
        if self.geo:
            from ..refs.geo import GeoCommunicator
            for tr in self.trainers:
                tr.geo = GeoCommunicator(self, tr)
        elif not self.sync:
            self._note_merging()

    def _note_merging(self):
        """The turn schedule sends each step's gradients alone; say so where a trainer's
        communicator may merge more (Fleet's runtime sets 1)."""
        for tr in self.trainers:
            envs = (tr.runtime or {}).get("envs") or {}
            try:
                n = int(envs.get("communicator_max_merge_var_num", 1))
            except (TypeError, ValueError):
                continue
            if n > 1:
                self.note("%s's runtime.json lets its communicator merge up to %d queued "
                          "gradients a send; the schedule sends each step's alone (one merge "
                          "Paddle may also make)" % (tr.label, n))

    def executors(self) -> list:
        return [e for p in list(self.pservers.values()) + self.trainers
                for e in (p.ex_startup, p.ex)]

    def release(self, keep) -> None:
        """The run is over: every scope keeps only the vars `keep` names (the parameters and
        their pserver blocks, what the comparison reads); optimizer state and the rest go."""
        for ex in self.executors():
            ex.scope.keep_only(keep)
        for tr in self.trainers:
            if tr.geo is not None:
                tr.geo.old = {}

    # --- the message layer ------------------------------------------------------------
    def pserver(self, ep, who) -> PServer:
        ps = self.pservers.get(ep)
        if ps is None:
            raise SimError("%s addresses %s, which is not a pserver of the split (%s)"
                           % (who, ep, ", ".join(self.pservers)))
        return ps

    def note(self, msg):
        if msg not in self.notes:
            self.notes.append(msg)

    def random_hook(self, ex, name, value, op):
        var = ex.program.find_var(name)
        if var is not None and var.kind == "SELECTED_ROWS" and not isinstance(value, LazyTable):
            return value        # an auto-grown table: aligned id by id (PServer._table_origin)
        return self.reference.align_random(ex.label, name, value, op, self.notes)

    def rpc(self, ex: Executor, block_idx: int, op):
        owner = getattr(ex, "owner", None)
        t = op.type
        if self.recv_cache and t not in ("recv", "fetch_barrier"):
            self.recv_cache = {}
        if t in ("send_barrier", "fetch_barrier", "listen_and_serv", "checkpoint_notify",
                 "recv_save"):
            return
        if t == "fake_init":
            # Paddle's fake_init only resizes: the var has a shape and no memory until a recv
            # (or a prefetch-only use) makes reading it unnecessary
            for n in op.output("Out"):
                ex.write(block_idx, n, Unallocated(op.attr("shape", []) or [],
                                                   "%s's fake_init" % ex.label))
            return
        if isinstance(owner, PServer) and t == "lookup_sparse_table_init":
            return largescale.init_tables(self, owner, op)
        if isinstance(owner, PServer) and t in ("lookup_sparse_table_fuse_adam",
                                                "lookup_sparse_table_fuse_sgd"):
            return largescale.fuse(self, owner, ex, op)
        if isinstance(owner, Trainer) and t == "prefetch":
            return self._prefetch(owner, ex, block_idx, op)
        if isinstance(owner, Trainer) and t == "distributed_lookup_table":
            return self._distributed_lookup(owner, ex, block_idx, op)
        if isinstance(owner, Trainer) and t == "distributed_push_sparse":
            return tableid.push(self, tr=owner, ex=ex, op=op)
        if isinstance(owner, Trainer) and t == "send":
            return self._send(owner, ex, op)
        if isinstance(owner, Trainer) and t == "recv":
            return self._recv(owner, ex, block_idx, op)
        raise NoKernelError("no kernel for op %s (in %s)" % (t, ex.label))

    def _prefetch(self, tr: Trainer, ex: Executor, block_idx: int, op):
        ins, outs, eps = op.input("X"), op.output("Out"), op.attr("epmap", []) or []
        if not len(ins) == len(outs) == len(eps):
            raise SimError("prefetch: %d ids vars, %d outputs, %d endpoints"
                           % (len(ins), len(outs), len(eps)))
        for i, o, ep in zip(ins, outs, eps):
            ids = np.asarray(ex.read(i))
            out = self.pserver(ep, tr.label).prefetch(i, ids.copy(), o, tr.label)
            ex.write(block_idx, o, shared(dense(out)))

    def _distributed_lookup(self, tr: Trainer, ex: Executor, block_idx: int, op):
        """The classic remote prefetch: ids cut by row ranges (height_sections), each range
        looked up on its endpoint's table block with ids made local, rows put back in order."""
        tables = op.attr("table_names", []) or []
        eps = op.attr("endpoints", []) or []
        sections = [int(h) for h in op.attr("height_sections", []) or []]
        if not tables and not eps and op.attr("table_id") is not None:
            return tableid.lookup(self, tr, ex, block_idx, op)
        if not tables or not (len(tables) == len(eps) == len(sections)):
            raise SimError("distributed_lookup_table of %s: %d table_names, %d endpoints, %d "
                           "height_sections" % (op.input("W"), len(tables), len(eps),
                                                len(sections)))
        starts = np.concatenate([[0], np.cumsum(sections)])
        v2 = op.attr("lookup_table_version", "lookup_table") == "lookup_table_v2"
        pad = op.attr("padding_idx", -1)
        for k, (name, out_name) in enumerate(zip(op.input("Ids"), op.output("Outputs"))):
            ids = np.asarray(ex.read(name)).astype(np.int64)
            flat = ids.reshape(-1)
            if flat.size and (flat.min() < 0 or flat.max() >= starts[-1]):
                raise SimError("distributed_lookup_table: id %d of %s outside height_sections "
                               "%s" % (int(flat.max()), name, sections))
            which = np.searchsorted(starts, flat, side="right") - 1
            rows = None
            for s_i, (tbl, ep) in enumerate(zip(tables, eps)):
                m = which == s_i
                if not m.any():
                    continue
                got = self.pserver(ep, tr.label).lookup(tbl, flat[m] - starts[s_i], tr.label)
                if rows is None:
                    rows = np.zeros((flat.size,) + got.shape[1:], dtype=got.dtype)
                rows[m] = got
            if rows is None:
                rows = np.zeros((0, 0), dtype=self.float_dtype)
            if pad is not None and pad != -1:
                rows = np.where((flat == pad)[:, None], 0.0, rows)
            lead = ids.shape if v2 else ids.shape[:-1]
            ex.write(block_idx, out_name, rows.reshape(tuple(lead) + rows.shape[1:]),
                     tr.scope.lods.get(name))

    def _send(self, tr: Trainer, ex: Executor, op):
        names = op.input("X")
        ctx_names = [n for n in op.attr("send_varnames", []) or [] if n]
        if ctx_names and tr.runtime is not None:
            for cn in ctx_names:
                if self.geo:
                    self._geo_send(tr, cn, names, ex)
                else:
                    self.send_ctx(tr, cn, ex)
            return
        eps = op.attr("epmap", []) or []
        sections = op.attr("sections", []) or []
        if len(names) == 1 and len(eps) > 1 and len(ctx_names) == len(eps) == len(sections):
            # one var, cut by rows (height for SelectedRows) into the pieces send_varnames name
            parts = split_rows(ex.read(names[0]), sections, names[0])
            for part, n, ep in zip(parts, ctx_names, eps):
                self.pserver(ep, tr.label).receive(n, part, None, tr.label)
            return
        if len(eps) != len(names):
            raise SimError("send: %d vars for %d endpoints (epmap %s)" % (len(names), len(eps), eps))
        for n, ep in zip(names, eps):
            v = ex.read(n)
            self.pserver(ep, tr.label).receive(n, shared(v), tr.scope.lods.get(n), tr.label)

    def _geo_send(self, tr: Trainer, ctx_name: str, names: list, ex: Executor):
        """GeoCommunicator::Send: a sparse table's gradient only leaves its rows behind."""
        ctx = (tr.runtime.get("send_ctx") or {}).get(ctx_name)
        if ctx is None:
            raise SimError("send: runtime.json has no send_ctx %r" % ctx_name)
        if ctx.get("is_tensor_table"):
            return
        if not names:
            raise SimError("geo: the send of %s has no input" % ctx_name)
        tr.geo.record(ctx_name, ex.read(names[0]))

    def geo_record(self, ps: PServer, name: str, rows):
        """A pserver got sparse rows of a table block: every trainer's next pull takes them."""
        block = ps.target_of(name)
        sets = self.geo_rows.setdefault((ps.endpoint, block),
                                        [set() for _ in range(len(self.trainers))])
        for s in sets:
            s.update(int(r) for r in rows)

    def geo_updated(self, ps: PServer, block: str, tid: int):
        sets = self.geo_rows.get((ps.endpoint, block))
        if not sets:
            return np.zeros(0, dtype=np.int64)
        rows = np.array(sorted(sets[tid]), dtype=np.int64)
        sets[tid] = set()
        return rows

    def send_ctx(self, tr: Trainer, ctx_name: str, ex: Executor):
        ctx = (tr.runtime.get("send_ctx") or {}).get(ctx_name)
        if ctx is None:
            raise SimError("send: runtime.json has no send_ctx %r" % ctx_name)
        if ctx.get("is_tensor_table"):
            kwargs = tr.runtime.get("kwargs") or {}
            if ctx_name == STEP_COUNTER and str(kwargs.get("need_global_step", "0")) == "1":
                # the communicator counts the batches since its last send: one per step here
                # (it drops the step counter when no LR decay needs a global step)
                for ep in dict.fromkeys(ctx.get("split_endpoints") or []):
                    self.pserver(ep, tr.label).notify_step(tr.tid, 1, tr.label)
            return
        vals = [ex.read(n) for n in ctx.get("origin_varnames") or [ctx_name]]
        if len(vals) == 1:
            v = vals[0]
        elif all(isinstance(x, SelectedRows) for x in vals):
            v = SelectedRows(np.concatenate([x.rows for x in vals]),
                             np.concatenate([x.value for x in vals]), vals[0].height)
        else:
            v = sum(dense(x) for x in vals)
        parts = split_rows(v, ctx.get("sections") or [], ctx_name)
        names, eps = ctx.get("split_varnames") or [], ctx.get("split_endpoints") or []
        if not (len(parts) == len(names) == len(eps)):
            raise SimError("send_ctx %s: %d sections, %d split_varnames, %d endpoints"
                           % (ctx_name, len(parts), len(names), len(eps)))
        for part, n, ep in zip(parts, names, eps):
            self.pserver(ep, tr.label).receive(n, part, None, tr.label)

    def recv_ctx(self, tr: Trainer, name: str, ex: Executor, block_idx: int):
        ctx = (tr.runtime.get("recv_ctx") or {}).get(name)
        if ctx is None:
            raise SimError("recv: runtime.json has no recv_ctx %r" % name)
        parts = []
        for n, ep in zip(ctx.get("split_varnames") or [], ctx.get("split_endpoints") or []):
            v = self.pserver(ep, tr.label).value(n)
            if v is None:
                raise SimError("%s receives %s from pserver %s, which holds no such var"
                               % (tr.label, n, ep))
            parts.append(v)
        if not parts:
            raise SimError("recv_ctx %s has no split vars" % name)
        ex.write(block_idx, ctx.get("var_name") or name,
                 shared(self._assembled("recv_ctx %s" % name, parts)))

    def _assembled(self, what, parts):
        """A received var from its row pieces; while the trainers pull in turn with no
        pserver update between (recv_cache), one array for every trainer that pulls the same
        pieces (a table of 55 million floats is not assembled once per trainer)."""
        key = tuple(id(p) for p in parts)
        hit = self.recv_cache.get(key) if self.recv_cache is not None else None
        if hit is not None and all(a is b for a, b in zip(hit[0], parts)):
            return hit[1]
        v = LazyTable.stacked(parts)
        try:
            if v is None:
                arrays = [dense(p) for p in parts]
                v = arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=0)
        except ValueError as e:
            raise SimError("%s: the pieces do not concatenate: %s" % (what, e)) from None
        if self.recv_cache is not None:
            self.recv_cache[key] = (parts, v)
        return v

    def _recv(self, tr: Trainer, ex: Executor, block_idx: int, op):
        outs = op.output("Out")
        remote = [n for n in op.attr("recv_varnames", []) or [] if n]
        if not outs and remote:
            if tr.runtime is None:
                raise SimError("recv of %s needs the trainer's runtime.json" % remote)
            for n in remote:
                self.recv_ctx(tr, n, ex, block_idx)
            return
        eps = op.attr("epmap", []) or []
        names = remote or outs
        if len(outs) == 1 and len(eps) > 1 and len(remote) == len(eps):
            # one var, gathered by rows from its pieces
            parts = []
            for n, ep in zip(remote, eps):
                v = self.pserver(ep, tr.label).value(n)
                if v is None:
                    raise SimError("%s receives %s from pserver %s, which holds no such var"
                                   % (tr.label, n, ep))
                parts.append(v)
            ex.write(block_idx, outs[0], shared(self._assembled("recv of %s" % outs[0], parts)))
            return
        if len(eps) != len(outs) or len(names) != len(outs):
            raise SimError("recv: %d outputs for %d endpoints" % (len(outs), len(eps)))
        for out, n, ep in zip(outs, names, eps):
            v = self.pserver(ep, tr.label).value(n)
            if v is None:
                raise SimError("%s receives %s from pserver %s, which holds no such var"
                               % (tr.label, n, ep))
            ex.write(block_idx, out, shared(v))

    # --- running ------------------------------------------------------------------------
    def startup(self):
        for ps in self.pservers.values():
            ps.startup()
        self.recv_cache = {}
        try:
            for tr in self.trainers:
                tr.startup()
        finally:
            self.recv_cache = None
        if self.geo:
            for tr in self.trainers:
                tr.geo.init()

    def step(self, step: int, shards: list, per: int):
        """Step `step` of every trainer, each on its shard (`per` samples: runner.py's
        step loop), the pservers answering under the schedule."""
        for tr in self.trainers:
            tr.ex.begin_step(step, per, tr.tid * per)
        for tr, feed in zip(self.trainers, shards):
            tr.feed(feed)
            tr.pos = 0
        if self.sync:
            for b in self.trainers[0].barriers:
                for tr in self.trainers:
                    tr.run_until(tr.barriers[self.trainers[0].barriers.index(b)] + 1)
                for ps in self.pservers.values():
                    ps.run_round()
            # the trainers pull in turn: a var they pull from the same pieces is assembled
            # once (recv_cache; any other message to a pserver drops it: Cluster.rpc)
            self.recv_cache = {}
            try:
                for tr in self.trainers:
                    tr.communicator_recv()
                    tr.run_until(None)
            finally:
                self.recv_cache = None
        elif self.geo:
            for tr in self.trainers:
                tr.run_until(None)
            if self.schedule.pushes_after(step):
                for tr in self.trainers:
                    tr.geo.push_pull()
        else:
            for tr in self.trainers:
                tr.run_until(None)
                tr.communicator_recv()

    def check_blocks_run(self):
        for ep, ps in self.pservers.items():
            self._note_frozen_counter(ps)
            self._note_optimize_blocks(ps)
            never = [b for b in ps.optimize_blocks if b not in ps.ex.blocks_run]
            if never:
                raise SimError("pserver %s: optimize block%s %s never ran (no grad reached %s)"
                               % (ep, "s" if len(never) > 1 else "", ", ".join(map(str, never)),
                                  "them" if len(never) > 1 else "it"))

    def _note_optimize_blocks(self, ps: PServer):
        """Say where a pserver block optimizes differently from the original: another
        optimizer for the parameter, or trainers' grads summed where other blocks average."""
        orig_opt = {}
        for op in self.reference.main.global_block.ops:
            if op.input("Param") and op.input("Grad"):
                orig_opt[op.input("Param")[0]] = op.type
        blocks = [ps.main.blocks[b] for b in ps.optimize_blocks]
        averages = any(op.type == "scale" for blk in blocks for op in blk.ops)
        for blk in blocks:
            summed = {}
            for op in blk.ops:
                if op.type == "sum" and sum(bool(TRAINER_SUFFIX.search(n))
                                            for n in op.input("X")) > 1:
                    summed[op.output("Out")[0]] = True
                elif op.type == "scale" and op.input("X") and op.input("X")[0] in summed:
                    summed[op.input("X")[0]] = False
                elif op.input("Param") and op.input("Grad"):
                    param = op.input("Param")[0]
                    base = re.sub(r"\.block\d+$", "", param)
                    if orig_opt.get(base) not in (None, op.type):
                        self.note("pserver %s: block %d updates %s with %s; the original "
                                  "updates %s with %s" % (ps.endpoint, blk.idx, param, op.type,
                                                          base, orig_opt[base]))
                    g = op.input("Grad")[0]
                    if averages and summed.get(g):
                        self.note("pserver %s: block %d sums the trainers' %s without the "
                                  "1/trainers scale its other blocks apply"
                                  % (ps.endpoint, blk.idx, g))

    def _note_frozen_counter(self, ps: PServer):
        """Say so when a pserver's LR decay reads a global step that nothing ever advanced."""
        if ps.lr_block < 0 or ps.decay_counters:
            return
        blk = ps.main.blocks[ps.lr_block]
        reads = {n for op in blk.ops for n in op.input_names()}
        if LR_DECAY_COUNTER not in reads:
            return
        writes = {n for b in ps.main.blocks[1:] for op in b.ops for n in op.output_names()}
        if LR_DECAY_COUNTER in writes:
            return
        v = ps.value(LR_DECAY_COUNTER)
        self.notes.append(
            "pserver %s: its LR-decay block (block %d) reads %s, which no pserver op "
            "increments and no trainer notifies (%s): it kept its startup value %s, so the "
            "learning rate never followed the original's schedule"
            % (ps.endpoint, ps.lr_block, LR_DECAY_COUNTER, STEP_COUNTER,
               None if v is None else np.asarray(v).reshape(-1).tolist()))
