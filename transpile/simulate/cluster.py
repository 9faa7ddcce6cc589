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
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..ir.program import Program
from .executor import Executor, Scope
from .values import (NoKernelError, SelectedRows, SimError, SparseTable, Unallocated, dense,
                     shape_of)

STEP_COUNTER = "@PS_STEP_COUNTER@"
LR_DECAY_COUNTER = "@LR_DECAY_COUNTER@"
_TRAINER_SUFFIX = re.compile(r"\.trainer_(\d+)(?=$|\.)")


@dataclass
class SplitPrograms:
    """The programs of a split, by role, as the simulator needs them."""
    trainers: dict = field(default_factory=dict)     # id -> {"main": Program, "startup": Program}
    pservers: dict = field(default_factory=dict)     # endpoint -> {"main":..., "startup":...}
    runtime: dict = field(default_factory=dict)      # trainer id -> runtime.json dict
    notes: list = field(default_factory=list)


def rename_trainer_program(program: Program, src: int, dst: int) -> Program:
    """A copy of trainer `src`'s program for trainer `dst`: `.trainer_<src>` names and the
    trainer_id attrs changed."""
    pat = re.compile(r"\.trainer_%d(?=$|\.)" % src)
    sub = ".trainer_%d" % dst

    def rn(name):
        return pat.sub(sub, name)

    p = program.copy()
    for b in p.blocks:
        b.vars = {rn(k): v for k, v in b.vars.items()}
        for k, v in b.vars.items():
            v.name = k
        for op in b.ops:
            op.inputs = {s: [rn(a) for a in args] for s, args in op.inputs.items()}
            op.outputs = {s: [rn(a) for a in args] for s, args in op.outputs.items()}
            if "trainer_id" in op.attrs:
                op.set_attr("trainer_id", dst)
            for name in ("op_role_var",):
                if name in op.attrs and isinstance(op.attr(name), list):
                    op.set_attr(name, [rn(a) for a in op.attr(name)])
    return p


def rename_runtime(rt: dict, src: int, dst: int) -> dict:
    import copy
    pat = re.compile(r"\.trainer_%d(?=$|\.)" % src)
    out = copy.deepcopy(rt)
    for key in ("send_ctx", "recv_ctx"):
        for ctx in (out.get(key) or {}).values():
            ctx["split_varnames"] = [pat.sub(".trainer_%d" % dst, n)
                                     for n in ctx.get("split_varnames", [])]
            if "trainer_id" in ctx:
                ctx["trainer_id"] = dst
    if isinstance(out.get("kwargs"), dict) and "trainer_id" in out["kwargs"]:
        out["kwargs"]["trainer_id"] = dst
    return out


def _parse_grad_to_block(values) -> dict:
    out = {}
    for item in values or []:
        name, _, idx = str(item).rpartition(":")
        out[name] = int(idx)
    return out


class PServer:
    def __init__(self, cluster: "Cluster", endpoint: str, main: Program, startup: Program):
        self.cluster = cluster
        self.endpoint = endpoint
        self.main = main
        self.scope = Scope()
        label = "pserver %s" % endpoint
        kw = dict(float_dtype=cluster.float_dtype, seed=cluster.seed, rpc=cluster.rpc,
                  random_hook=cluster.random_hook)
        self.ex_startup = Executor(label + " startup", startup, self.scope, **kw)
        self.ex = Executor(label + " main", main, self.scope, **kw)
        self.ex.owner = self.ex_startup.owner = self
        self.ex.table_origin = self.ex_startup.table_origin = self._table_origin
        ls = [op for op in main.global_block.ops if op.type == "listen_and_serv"]
        if len(ls) != 1:
            raise SimError("%s main: block 0 has %d listen_and_serv ops, expected 1"
                           % (label, len(ls)))
        op = ls[0]
        self.optimize_blocks = list(op.attr("optimize_blocks", []) or [])
        self.grad_to_block = _parse_grad_to_block(op.attr("grad_to_block_id", []))
        self.lr_block = op.attr("lr_decay_block_id", -1)
        if self.lr_block is None:
            self.lr_block = -1
        self.fanin = op.attr("Fanin", 1)
        self.prefetch_blocks = _parse_grad_to_block(op.attr("prefetch_var_name_to_block_id", []))
        self.decay_counters: dict = {}
        self.inbox: dict = {}
        self.declared = {n for b in main.blocks for n in b.vars}
        for b in self.optimize_blocks:
            if not 0 <= b < len(main.blocks):
                raise SimError("%s: listen_and_serv lists optimize block %d; the program has "
                               "blocks 0..%d" % (label, b, len(main.blocks) - 1))

    def startup(self):
        self.ex_startup.run_block(0)
        if not self.cluster.sync and self.optimize_blocks and self.optimize_blocks[0] == 1 \
                and 1 not in self.grad_to_block.values():
            self.ex.run_block(1)

    def _table_origin(self, name, pool):
        """The original's initial table for this pserver's auto-grown table `name`."""
        ref = self.cluster.reference.init.get(name)
        if ref is None or ref.shape[1:] != pool.shape[1:]:
            self.cluster.note("pserver %s: the sparse table %s %s has no original of the same "
                              "width; its new ids take rows of its own random block"
                              % (self.endpoint, name, list(pool.shape)))
            return None
        self.cluster.note("pserver %s: the sparse table %s %s grows by first lookup; a new id "
                          "k takes row k of the original's initial %s (Paddle: the next row of "
                          "the pserver's own random block)"
                          % (self.endpoint, name, list(pool.shape), name))
        return ref

    def prefetch(self, in_name, ids, out_name, sender):
        """RequestPrefetchHandler: the block bound to the ids' var name computes `out_name`."""
        blk = self.prefetch_blocks.get(in_name)
        if blk is None:
            raise SimError("%s prefetches %s from pserver %s, whose "
                           "prefetch_var_name_to_block_id has %s"
                           % (sender, in_name, self.endpoint, sorted(self.prefetch_blocks)))
        self.scope.put(in_name, ids)
        self.ex.run_block(blk)
        out = self.scope.get(out_name)
        if out is None:
            raise SimError("pserver %s: prefetch block %d computes no %s"
                           % (self.endpoint, blk, out_name))
        self.scope.drop(in_name)
        self.scope.drop(out_name)
        return out

    def lookup(self, table, ids, sender):
        """A remote lookup of `table` (distributed_lookup_table's table_names): rows by id."""
        w = self.scope.get(table)
        if w is None:
            raise SimError("%s looks up %s on pserver %s, which holds no such table"
                           % (sender, table, self.endpoint))
        if isinstance(w, SparseTable):
            return w.get(ids, grow=True)
        w = dense(w)
        if ids.size and (ids.min() < 0 or ids.max() >= w.shape[0]):
            raise SimError("%s looks up id %d of %s on pserver %s, which has %d rows"
                           % (sender, int(ids.max()), table, self.endpoint, w.shape[0]))
        return w[ids]

    def notify_step(self, tid: int, batches: int, sender: str):
        """A trainer's @PS_STEP_COUNTER@: the global step is the sum of every trainer's count."""
        if self.lr_block < 0:
            raise SimError("%s notifies %s to pserver %s, which has no lr_decay_block_id"
                           % (sender, STEP_COUNTER, self.endpoint))
        self.decay_counters[tid] = self.decay_counters.get(tid, 0) + batches
        if LR_DECAY_COUNTER not in self.declared:
            raise SimError("pserver %s runs LR decay on %s but declares no %s"
                           % (self.endpoint, STEP_COUNTER, LR_DECAY_COUNTER))
        self.ex.write(0, LR_DECAY_COUNTER,
                      np.array([sum(self.decay_counters.values())], dtype=np.int64))
        self.ex.run_block(self.lr_block)

    def receive(self, name, value, lod, sender):
        if name not in self.declared:
            raise SimError("%s sends %s to pserver %s, which declares no such var"
                           % (sender, name, self.endpoint))
        if self.cluster.sync and name in self.inbox:
            raise SimError("pserver %s gets %s twice in one step (from %s)"
                           % (self.endpoint, name, sender))
        self.scope.put(name, value, lod)
        self.inbox[name] = sender
        if not self.cluster.sync:
            base = _TRAINER_SUFFIX.sub("", name)
            blk = self.grad_to_block.get(base, self.grad_to_block.get(name))
            if blk is None:
                raise SimError("pserver %s: no optimize block for the grad %s (grad_to_block_id "
                               "has %s)" % (self.endpoint, name, sorted(self.grad_to_block)))
            self.ex.run_block(blk)
            self.inbox.pop(name)

    def run_round(self):
        """Sync: run every optimize block once, in order, then forget what was received."""
        before = set(self.ex.reads)
        self.ex.reads = set()
        for b in self.optimize_blocks:
            self.ex.run_block(b)
        unused = [n for n in self.inbox if n not in self.ex.reads]
        self.ex.reads |= before
        if unused:
            raise SimError("pserver %s received %s but no optimize block reads it"
                           % (self.endpoint, ", ".join(sorted(unused))))
        for n in self.inbox:
            self.scope.drop(n)
        self.inbox = {}

    def value(self, name):
        return self.scope.get(name)


class Trainer:
    def __init__(self, cluster: "Cluster", tid: int, main: Program, startup: Program,
                 runtime: Optional[dict]):
        self.cluster = cluster
        self.tid = tid
        self.scope = Scope()
        self.runtime = runtime
        label = "trainer_%d" % tid
        kw = dict(float_dtype=cluster.float_dtype, seed=cluster.seed, rpc=cluster.rpc,
                  random_hook=cluster.random_hook)
        self.ex_startup = Executor(label + " startup", startup, self.scope, **kw)
        self.ex = Executor(label + " main", main, self.scope, **kw)
        self.ex.owner = self.ex_startup.owner = self
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
    def __init__(self, split: SplitPrograms, config, *, float_dtype, seed, reference):
        self.config = config
        self.sync = config.mode == "sync"
        self.float_dtype = float_dtype
        self.seed = seed
        self.reference = reference           # transpile/simulate/__init__.py: Reference
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
        if var is not None and var.kind == "SELECTED_ROWS":
            return value        # an auto-grown table: aligned id by id (PServer._table_origin)
        return self.reference.align_random(ex.label, name, value, op, self.notes)

    def rpc(self, ex: Executor, block_idx: int, op):
        owner = getattr(ex, "owner", None)
        t = op.type
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
        if t == "lookup_sparse_table_init":
            # large-scale tables are not simulated: their ops (lookup_sparse_table_read /
            # _write / _fuse_*) have no kernel and stop the run where they are reached
            for meta in op.attr("large_scale_metas", []) or []:
                self.note("%s: the large-scale table %s is not simulated"
                          % (ex.label, str(meta).split(":")[0]))
            return
        if isinstance(owner, Trainer) and t == "prefetch":
            return self._prefetch(owner, ex, block_idx, op)
        if isinstance(owner, Trainer) and t == "distributed_lookup_table":
            return self._distributed_lookup(owner, ex, block_idx, op)
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
            ex.write(block_idx, o, np.array(dense(out), copy=True))

    def _distributed_lookup(self, tr: Trainer, ex: Executor, block_idx: int, op):
        """The classic remote prefetch: ids cut by row ranges (height_sections), each range
        looked up on its endpoint's table block with ids made local, rows put back in order."""
        tables = op.attr("table_names", []) or []
        eps = op.attr("endpoints", []) or []
        sections = [int(h) for h in op.attr("height_sections", []) or []]
        if not tables and not eps and op.attr("table_id") is not None:
            raise SimError(_pscore_lookup_finding(tr, op))
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
                self.send_ctx(tr, cn, ex)
            return
        eps = op.attr("epmap", []) or []
        sections = op.attr("sections", []) or []
        if len(names) == 1 and len(eps) > 1 and len(ctx_names) == len(eps) == len(sections):
            # one var, cut by rows (height for SelectedRows) into the pieces send_varnames name
            parts = _split_rows(ex.read(names[0]), sections, names[0])
            for part, n, ep in zip(parts, ctx_names, eps):
                self.pserver(ep, tr.label).receive(n, part, None, tr.label)
            return
        if len(eps) != len(names):
            raise SimError("send: %d vars for %d endpoints (epmap %s)" % (len(names), len(eps), eps))
        for n, ep in zip(names, eps):
            v = ex.read(n)
            self.pserver(ep, tr.label).receive(n, _copy(v), tr.scope.lods.get(n), tr.label)

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
        parts = _split_rows(v, ctx.get("sections") or [], ctx_name)
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
            parts.append(dense(v))
        if not parts:
            raise SimError("recv_ctx %s has no split vars" % name)
        try:
            v = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        except ValueError as e:
            raise SimError("recv_ctx %s: the pieces do not concatenate: %s" % (name, e)) from None
        ex.write(block_idx, ctx.get("var_name") or name, np.array(v, copy=True))

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
                parts.append(dense(v))
            ex.write(block_idx, outs[0], np.concatenate(parts, axis=0))
            return
        if len(eps) != len(outs) or len(names) != len(outs):
            raise SimError("recv: %d outputs for %d endpoints" % (len(outs), len(eps)))
        for out, n, ep in zip(outs, names, eps):
            v = self.pserver(ep, tr.label).value(n)
            if v is None:
                raise SimError("%s receives %s from pserver %s, which holds no such var"
                               % (tr.label, n, ep))
            ex.write(block_idx, out, _copy(v))

    # --- running ------------------------------------------------------------------------
    def startup(self):
        for ps in self.pservers.values():
            ps.startup()
        for tr in self.trainers:
            tr.startup()

    def step(self, shards: list):
        for tr, feed in zip(self.trainers, shards):
            tr.feed(feed)
            tr.pos = 0
        if self.sync:
            for b in self.trainers[0].barriers:
                for tr in self.trainers:
                    tr.run_until(tr.barriers[self.trainers[0].barriers.index(b)] + 1)
                for ps in self.pservers.values():
                    ps.run_round()
            for tr in self.trainers:
                tr.communicator_recv()
                tr.run_until(None)
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
                if op.type == "sum" and sum(bool(_TRAINER_SUFFIX.search(n))
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


def _pscore_lookup_finding(tr: Trainer, op) -> str:
    """Why a Fleet distributed_lookup_table (table_id, no endpoints) cannot run on a
    listen_and_serv cluster, and what else of the trainer reads values nothing writes."""
    w = (op.input("W") or ["?"])[0]
    prog = tr.main
    written = {n for _, _, o in prog.ops() for n in o.output_names()}
    unwritten = sorted({n for _, _, o in prog.ops() for n in o.input_names()
                        if n.startswith(w + "@GRAD") and n not in written})
    msg = ("distributed_lookup_table of %s addresses table_id %s with no endpoints or "
           "table_names: it is the pscore op, which needs the_one_ps's table service, while "
           "these pservers run listen_and_serv (which serves tables only by name)"
           % (w, op.attr("table_id")))
    if unwritten:
        msg += ("; besides, the trainer reads %s, which no op writes (the lookup_table_grad "
                "ops that made them were replaced by distributed_push_sparse)"
                % ", ".join(unwritten))
    return msg


def _copy(v):
    if isinstance(v, SelectedRows):
        return SelectedRows(v.rows.copy(), v.value.copy(), v.height)
    return np.array(v, copy=True)


def _split_rows(v, sections, name):
    if not sections:
        return [_copy(v)]
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
    return [np.array(p, copy=True) for p in np.split(v, np.cumsum(sections)[:-1], axis=0)]
