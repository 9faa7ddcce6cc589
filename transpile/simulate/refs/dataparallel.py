"""The original program trained the way a correct sync split trains it: data-parallel.

One step: the forward and backward ops run once per trainer shard of the global batch (each
shard from the same parameters and the same trainer state), the values the update ops read
from them (the gradients) are averaged over the shards, then the update ops (optimizer,
regularization, clipping, LR schedule: op_role Optimize or LRSched, or an op with Param and
Grad) run once.

For a loss that is a mean over the samples this is the whole-batch step. Where the program
couples the samples of a batch (batch_norm's batch statistics, a loss term summed over the
batch), it is what the trainers compute, each on its own shard: the split is held to the
training it can do, not to one no data-parallel split could match. State the forward writes
(batch_norm's running statistics, auc's buffers) is each trainer's own: every shard starts a
step from the same value, and the reference keeps the shards' mean.
"""
from __future__ import annotations

import numpy as np

from ...ir import roles
from ..model.values import SelectedRows, dense


def runs_once_per_step(op) -> bool:
    """An op of the once-a-step part: optimize or LR-schedule role, or an optimizer update."""
    r = roles.role(op)
    return bool(r & (roles.OPTIMIZE | roles.LRSCHED)) \
        or (bool(op.input("Param")) and bool(op.input("Grad")))


def mean_of(values):
    """The mean of the shards' values of one var: SelectedRows concatenated with their values
    scaled (what a pserver's sum and 1/trainers scale make), arrays averaged, integer and
    boolean values kept when the shards agree (else the first shard's)."""
    if len(values) == 1:
        return values[0]
    if all(isinstance(v, SelectedRows) for v in values):
        return SelectedRows(np.concatenate([v.rows for v in values]),
                            np.concatenate([v.value for v in values]) / len(values),
                            values[0].height)
    arrs = [np.asarray(dense(v)) for v in values]
    if any(a.shape != arrs[0].shape for a in arrs):
        return values[0]
    if arrs[0].dtype.kind == "f":
        # one new array (a dense gradient of a big table is hundreds of MB): the same sum,
        # left to right, then the division
        acc = np.add(arrs[0], arrs[1])
        for a in arrs[2:]:
            acc += a
        acc /= len(arrs)
        return acc
    return values[0]


# outputs an op declares that Paddle's CPU kernel never writes: data_norm_grad's statistics
# (only its GPU kernel updates them in place; kernels/datanorm_ops.py)
UNWRITTEN_OUTPUTS = {"data_norm_grad": ("BatchSize", "BatchSum", "BatchSquareSum")}


def written_names(op) -> list:
    """The names `op` writes (UNWRITTEN_OUTPUTS left out)."""
    skip = UNWRITTEN_OUTPUTS.get(op.type)
    if not skip:
        return op.output_names()
    return [n for slot, names in op.outputs.items() if slot not in skip for n in names]


class ShardedStep:
    """Runs steps of the original program's global block data-parallel over `trainers`
    shards, on executor `ex` (whose scope holds the parameters)."""

    def __init__(self, ex, trainers: int):
        self.ex = ex
        self.trainers = max(1, trainers)
        ops = ex.program.global_block.ops
        self.once = [i for i, op in enumerate(ops) if runs_once_per_step(op)]
        once = set(self.once)
        self.per_shard = [i for i in range(len(ops)) if i not in once]
        written = {n for i in self.per_shard for n in written_names(ops[i])}
        read = {n for i in self.once for n in ops[i].input_names()}
        self.handoff = sorted(written & read)
        block = ex.program.global_block
        self.local_state = sorted(n for n in written - set(self.handoff)
                                  if block.var(n) is not None and block.var(n).is_persistable)

    def run(self, step: int, shards: list, samples_per_shard: int):
        """Step `step`; `shards` is the list of the trainers' feeds (name -> (array, lod))."""
        ex, scope = self.ex, self.ex.scope
        ops = ex.program.global_block.ops
        before = {n: scope.get(n) for n in self.local_state}
        handed: dict = {n: [] for n in self.handoff}
        states: dict = {n: [] for n in self.local_state}
        for t, feed in enumerate(shards):
            for n, v in before.items():
                if v is not None:
                    scope.put(n, v, scope.lods.get(n))
            for name, (arr, lod) in feed.items():
                scope.put(name, arr, lod)
            ex.begin_step(step, samples_per_shard, t * samples_per_shard)
            for i in self.per_shard:
                ex.run_op(0, i, ops[i])
            for n in self.handoff:
                v = scope.get(n)
                if v is not None:
                    handed[n].append(v)
            for n in self.local_state:
                v = scope.get(n)
                if v is not None:
                    states[n].append(v)
        for group in (handed, states):
            for n in list(group):
                vals = group.pop(n)
                if len(vals) == len(shards):
                    scope.put(n, mean_of(vals), scope.lods.get(n))
                del vals        # the shards' values go as their mean is made
        for i in self.once:
            ex.run_op(0, i, ops[i])
