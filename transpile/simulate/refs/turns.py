"""async and half_async: the original program trained turn by turn (schedule.py).

Step s is trainer 0's turn, then trainer 1's, ... In trainer t's turn the forward and backward
ops (dataparallel.py's per-shard part) run on t's shard with the parameters t holds: what it
pulled at the end of its previous turn (the initial values at first). A remote table (looked up
with is_distributed or remote_prefetch: the trainer reads its rows from the pservers) is read
as the pservers hold it in that turn. The update ops then run once on the pservers' state with
t's gradients as they are (async pservers apply each trainer's gradient as it arrives: no
average over trainers), and t pulls: it holds the updated values. State the forward writes
(batch_norm's running statistics, auc's buffers) is each trainer's own.
"""
from __future__ import annotations

from ...ir.tables import CLASSIC_REMOTE_PREFETCH_TYPES, LOOKUP_TABLE_TYPES, is_remote_prefetch
from ..model.executor import Executor
from .original import OriginalRun
from .reference import snapshot


def remote_tables(main) -> set:
    """Tables the trainers read row by row from the pservers instead of holding them."""
    out = set()
    for _, _, op in main.ops():
        w = op.input("W")
        if not w:
            continue
        if is_remote_prefetch(op, CLASSIC_REMOTE_PREFETCH_TYPES) or (
                op.type in LOOKUP_TABLE_TYPES + ("distributed_lookup_table",)
                and op.attr("is_distributed") is True):
            out.add(w[0])
    return out


class TurnRun(OriginalRun):
    """The original trained turn by turn; `copies[t]` are the values trainer t holds."""

    def begin(self):
        from .dataparallel import ShardedStep
        self.ex = self.watch(Executor("original main", self.main, self.scope,
                                      float_dtype=self.fdt, seed=self.seed))
        self.ex.free_temporaries()
        st = ShardedStep(self.ex, self.schedule.trainers)
        self.once, self.per_shard, self.local = st.once, st.per_shard, st.local_state
        ops = self.main.global_block.ops
        written = {n for i in self.once for n in ops[i].output_names()}
        read = {n for i in self.per_shard for n in ops[i].input_names()}
        self.remote = remote_tables(self.main)
        self.held = sorted((written & read) - self.remote - set(st.handoff))
        n = self.schedule.trainers
        self.copies = [self._take(self.held) for _ in range(n)]
        self.locals = [self._take(self.local) for _ in range(n)]

    def _take(self, names) -> dict:
        out = {}
        for name in names:
            v = self.scope.get(name)
            if v is not None:
                out[name] = snapshot(v)
        return out

    def _put(self, values: dict):
        for name, v in values.items():
            self.scope.put(name, v)

    def step(self, step, shards, per):
        for t, feed in enumerate(shards):
            self.turn(step, t, feed, per)
        self.steps_run = step + 1

    def turn(self, step, t, feed, per):
        ex, scope = self.ex, self.scope
        ops = self.main.global_block.ops
        server = {n: scope.get(n) for n in self.held}
        self._put(self.copies[t])
        self._put(self.locals[t])
        for name, (arr, lod) in feed.items():
            scope.put(name, arr, lod)
        ex.begin_step(step, per, t * per)
        for i in self.per_shard:
            ex.run_op(0, i, ops[i])
        self.locals[t] = {n: scope.get(n) for n in self.local if scope.get(n) is not None}
        self._put({n: v for n, v in server.items() if v is not None})
        for i in self.once:
            ex.run_op(0, i, ops[i])
        self.copies[t] = self._take(self.held)

    def trainer(self, name, tid):
        if name in self.copies[tid]:
            return self.copies[tid][name]
        return self.locals[tid].get(name)

    def executors(self):
        return [self.ex_startup, self.ex]

    def released(self, keep):
        self.copies = [{n: v for n, v in c.items() if n in keep} for c in self.copies]
        self.locals = [{n: v for n, v in c.items() if n in keep} for c in self.locals]
