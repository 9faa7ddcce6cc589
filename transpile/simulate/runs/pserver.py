"""A pserver of the in-process cluster (cluster.py): its listen_and_serv (optimize blocks,
grad_to_block_id, the LR-decay block, prefetch blocks), what it receives, its tables, and the
global step trainers notify it of."""
from __future__ import annotations

import re

import numpy as np

from ...ir.program import Program
from ..model.executor import Executor, Scope
from ..model.values import LazyTable, SimError, SparseTable, dense

STEP_COUNTER = "@PS_STEP_COUNTER@"
LR_DECAY_COUNTER = "@LR_DECAY_COUNTER@"
TRAINER_SUFFIX = re.compile(r"\.trainer_(\d+)(?=$|\.)")


def role_executors(owner, cluster, label: str, main: Program, startup: Program):
    """(scope, startup executor, main executor) of one role of the cluster, sharing the scope
    and the cluster's settings; their rpc ops reach the cluster as `owner`."""
    scope = Scope()
    kw = dict(float_dtype=cluster.float_dtype, seed=cluster.seed, rpc=cluster.rpc,
              random_hook=cluster.random_hook)
    ex_startup = Executor(label + " startup", startup, scope, **kw)
    ex = Executor(label + " main", main, scope, **kw)
    ex.owner = ex_startup.owner = owner
    ex.lazy_policy = ex_startup.lazy_policy = cluster.reference.lazy_policy
    return scope, ex_startup, ex


def _parse_grad_to_block(values) -> dict:
    out = {}
    for item in values or []:
        name, _, idx = str(item).rpartition(":")
        out[name] = int(idx)
    return out


class PServer:
    """One endpoint of the cluster (`cluster`: the Cluster of cluster.py it belongs to)."""
    def __init__(self, cluster, endpoint: str, main: Program, startup: Program):
        self.cluster = cluster
        self.endpoint = endpoint
        self.main = main
        label = "pserver %s" % endpoint
        self.scope, self.ex_startup, self.ex = role_executors(self, cluster, label, main, startup)
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
        self.large_scale: dict = {}     # large-scale tables (largescale.py), by name
        self.inbox: dict = {}
        self.declared = {n for b in main.blocks for n in b.vars}
        for b in self.optimize_blocks:
            if not 0 <= b < len(main.blocks):
                raise SimError("%s: listen_and_serv lists optimize block %d; the program has "
                               "blocks 0..%d" % (label, b, len(main.blocks) - 1))
        # what a round received and computed goes once its optimizer has read it (a dense
        # gradient of a big table: the trainers' copies, their sum, the scaled sum)
        self.ex.free_temporaries(
            blocks=sorted(set(self.optimize_blocks)),
            keep={n for op in startup.global_block.ops for n in op.output_names()})

    def startup(self):
        self.ex_startup.run_block(0)
        if not self.cluster.sync and self.optimize_blocks and self.optimize_blocks[0] == 1 \
                and 1 not in self.grad_to_block.values():
            self.ex.run_block(1)

    def _table_origin(self, name, pool):
        """The original's initial table for this pserver's auto-grown table `name` (of a row
        block `P.blockN`: the block's rows of the original P)."""
        reference = self.cluster.reference
        ref = reference.init.get(name)
        if ref is None and name in reference.slices:
            base, r0, r1 = reference.slices[name]
            full = reference.init.get(base)
            if full is not None:
                ref = full.view(r0, r1 - r0) if isinstance(full, LazyTable) else full[r0:r1]
        if ref is None or tuple(ref.shape[1:]) != tuple(pool.shape[1:]):
            self.cluster.note("pserver %s: the sparse table %s %s has no original of the same "
                              "width; its new ids take rows of its own random block"
                              % (self.endpoint, name, list(pool.shape)))
            return None
        self.cluster.note("pserver %s: the sparse table %s %s grows by first lookup; a new id "
                          "k takes row k of the original's initial %s (Paddle: the next row of "
                          "the pserver's own random block)"
                          % (self.endpoint, name, list(pool.shape),
                             "%s (its rows %d:%d)" % reference.slices[name]
                             if name in reference.slices else name))
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
        w = self.value(table)
        if w is None:
            raise SimError("%s looks up %s on pserver %s, which holds no such table"
                           % (sender, table, self.endpoint))
        if isinstance(w, SparseTable):
            return w.get(ids, grow=True)
        if isinstance(w, LazyTable):
            if ids.size and (ids.min() < 0 or ids.max() >= w.height):
                raise SimError("%s looks up id %d of %s on pserver %s, which has %d rows"
                               % (sender, int(ids.max()), table, self.endpoint, w.height))
            return w.get(ids)
        w = dense(w)
        if ids.size and (ids.min() < 0 or ids.max() >= w.shape[0]):
            raise SimError("%s looks up id %d of %s on pserver %s, which has %d rows"
                           % (sender, int(ids.max()), table, self.endpoint, w.shape[0]))
        return w[ids]

    def param_for_grad(self, grad: str):
        """The parameter an optimize block updates with `grad` (the merged grad of a block),
        else the var named like it without `@GRAD` if this pserver holds one; None."""
        for b in self.optimize_blocks:
            for op in self.main.blocks[b].ops:
                if op.input("Param") and op.input("Grad") == [grad]:
                    return op.input("Param")[0]
        for name, table in self.large_scale.items():
            if table["grad"] == grad:
                return name
        name = grad.replace("@GRAD", "")
        return name if name in self.declared else None

    def target_of(self, name: str) -> str:
        """The var the block bound to a received `name` writes (geo: `sum(P, P.delta) -> P`)."""
        blk = self.grad_to_block.get(TRAINER_SUFFIX.sub("", name), self.grad_to_block.get(name))
        if blk is not None and 0 <= blk < len(self.main.blocks):
            for op in self.main.blocks[blk].ops:
                if name in op.input_names() and op.output_names():
                    return op.output_names()[0]
        return name[:-len(".delta")] if name.endswith(".delta") else name

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
            base = TRAINER_SUFFIX.sub("", name)
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
        if name in self.large_scale:
            return self.large_scale[name]["values"]["Param"]
        return self.scope.get(name)
