"""The in-process message layer: trainers and pservers of a split, stepped as a cluster would.

Sync mode, per step: every trainer runs its main block up to its send_barrier (its sends land in
the pservers' inboxes, named as sent), then every pserver runs the optimize blocks of its
listen_and_serv in order (the LR-decay block included, once), then the trainers (or, in fleet
style, their communicators from runtime.json) receive. Async and half-async: trainers take turns;
a pserver runs a grad's block (grad_to_block_id) as soon as the grad arrives.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..program import Program
from .executor import Executor, Scope
from .values import NoKernelError, SelectedRows, SimError, dense, shape_of

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
        self.inbox: dict = {}
        self.declared = {n for b in main.blocks for n in b.vars}
        for b in self.optimize_blocks:
            if not 0 <= b < len(main.blocks):
                raise SimError("%s: listen_and_serv lists optimize block %d; the program has "
                               "blocks 0..%d" % (label, b, len(main.blocks) - 1))

    def startup(self):
        self.ex_startup.run_block(0)

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

    def begin_step(self):
        """Async: the LR-decay block runs once per trainer step."""
        if self.lr_block >= 0:
            self.ex.run_block(self.lr_block)

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

    def random_hook(self, ex, name, value, op):
        return self.reference.align_random(ex.label, name, value, op, self.notes)

    def rpc(self, ex: Executor, block_idx: int, op):
        owner = getattr(ex, "owner", None)
        t = op.type
        if t in ("send_barrier", "fetch_barrier", "listen_and_serv", "checkpoint_notify",
                 "recv_save"):
            return
        if t == "fake_init":
            # Paddle only allocates the tensor (its values are whatever the memory held):
            # zeros here, and said so, since a program that reads it before a recv trains on them
            for n in op.output("Out"):
                shape = [int(d) for d in op.attr("shape", [])]
                ex.write(block_idx, n, np.zeros(shape, dtype=self.float_dtype))
                note = ("%s: fake_init leaves %s uninitialized (simulated as zeros); the "
                        "trainer holds no real copy until it receives one" % (ex.label, n))
                if note not in self.notes:
                    self.notes.append(note)
            return
        if t == "lookup_sparse_table_init":
            if op.attr("large_scale_metas", []):
                raise NoKernelError("lookup_sparse_table_init with large-scale tables (%s) is "
                                    "not simulated" % ", ".join(op.attr("large_scale_metas")))
            return
        if isinstance(owner, Trainer) and t == "send":
            return self._send(owner, ex, op)
        if isinstance(owner, Trainer) and t == "recv":
            return self._recv(owner, ex, block_idx, op)
        raise NoKernelError("no kernel for op %s (in %s)" % (t, ex.label))

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
                for ps in self.pservers.values():
                    ps.begin_step()
                tr.run_until(None)
                tr.communicator_recv()

    def check_blocks_run(self):
        for ep, ps in self.pservers.items():
            never = [b for b in ps.optimize_blocks if b not in ps.ex.blocks_run]
            if never:
                raise SimError("pserver %s: optimize block%s %s never ran (no grad reached %s)"
                               % (ep, "s" if len(never) > 1 else "", ", ".join(map(str, never)),
                                  "them" if len(never) > 1 else "it"))


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
