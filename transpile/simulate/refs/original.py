"""The original program trained under a mode's schedule (schedule.py): the reference the split
must equal.

A run starts from the original startup, then takes steps; what it ends with is, per parameter,
the value the pservers should hold (`server`) and the value trainer t should hold (`trainer`;
None where the trainers hold the server's). sync: SyncRun (dataparallel.py); async and
half_async: turns.py's TurnRun; geo: georef.py's GeoRun.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...ir.program import Program
from ...ir.tables import LOOKUP_GRAD_TYPES, LOOKUP_TABLE_TYPES
from ..explain.compare import abs_max, movement, noise, scale_of, trainable_params
from ..model.executor import LAZY_AWARE_OPS, Executor, default_lazy_policy
from .reference import snapshot


def lazy_policy_for(main: Program, dense_lookups: bool = True):
    """Which initializer outputs of the original become LazyTables: big tables that only
    lookups and row-wise ops read. A table a dense-gradient lookup reads too where
    `dense_lookups` (its row-local optimizer updates the gradient's nonzero rows and the rows
    with state, kernels/rowwise.py; not in geo, whose deltas read such a table whole: there it
    is drawn whole at once, cheaper than materialized at its first step)."""
    whole = set()
    for _, _, op in main.ops():
        for slot, names in op.inputs.items():
            if op.type in LOOKUP_TABLE_TYPES and slot == "W":
                if not (dense_lookups or op.attr("is_sparse") is True
                        or op.attr("is_distributed") is True):
                    whole.update(names)
            elif op.type not in LOOKUP_GRAD_TYPES and op.type not in LAZY_AWARE_OPS:
                whole.update(names)

    def policy(name, shape) -> bool:
        return default_lazy_policy(name, shape) and name not in whole

    return policy


class OriginalRun:
    """Base: the startup (shared by every mode) and what a run ends with."""

    # sync: state the forward writes is compared with the trainers' mean (dataparallel.py)
    local_mean = False

    def __init__(self, main: Program, startup: Program, schedule, *, fdt, seed):
        self.main = main
        self.schedule = schedule
        self.fdt = fdt
        self.seed = seed
        self.ex_startup = Executor("original startup", startup, float_dtype=fdt, seed=seed)
        self.ex_startup.lazy_policy = lazy_policy_for(main, schedule.mode != "geo")
        self.scope = self.ex_startup.scope
        self.trainable = trainable_params(main)
        self.steps_run = 0
        self.grad_peaks: dict = {}      # param -> the largest |entry| its backward gradient had

    def startup(self) -> dict:
        """Run the original startup; the initial values (parameters and the rest)."""
        self.ex_startup.run_block(0)
        init = {k: snapshot(v) for k, v in self.scope.vars.items() if not hasattr(v, "rows")}
        self.begin()
        return init

    def begin(self):
        """After the startup: set up what the mode keeps besides the scope."""

    def step(self, step: int, shards: list, per: int):
        raise NotImplementedError

    def server(self, name):
        return self.scope.get(name)

    def trainer(self, name, tid) -> Optional[object]:
        return None

    def executors(self) -> list:
        return [self.ex_startup]

    def release(self) -> None:
        """The run is over: keep of every scope only the parameters, which is all the
        comparisons read (server, trainer); its optimizer state and the rest go (with a table
        of a million rows, each copy of it and of its moments is 128 MB)."""
        keep = {v.name for v in self.main.parameters()}
        for ex in self.executors():
            ex.scope.keep_only(keep)
        self.released(keep)

    def released(self, keep: set) -> None:
        """What a mode keeps besides the scopes, cut to the parameters `keep`."""

    def watch(self, ex) -> Executor:
        """`ex` (a main program's executor) records each trainable parameter's largest
        backward gradient (grad_peaks)."""
        from ...ir import roles
        grads = {p + "@GRAD": p for p in self.trainable}

        def after(ex, op):
            if not roles.role(op) & roles.BACKWARD:
                return
            for name in op.output_names():
                p = grads.get(name)
                v = ex.scope.get(name) if p is not None else None
                if v is None:
                    continue
                v = getattr(v, "value", v)
                peak = abs_max(v) if np.size(v) else 0.0     # no temporary of v's size
                self.grad_peaks[p] = max(self.grad_peaks.get(p, 0.0), peak)
        ex.after_op = after
        return ex

    def gradient_free(self) -> set:
        """The trainable parameters whose backward gradient never rose above rounding (1e-10
        of the largest any parameter had): a bias a batch_norm follows, whose gradient is 0
        by construction; what moves it (an L1 decay's sign of that noise) proves nothing."""
        top = max(self.grad_peaks.values(), default=0.0)
        if top <= 0.0:
            return set()
        return {p for p, g in self.grad_peaks.items() if g <= 1e-10 * top}

    def unmoved(self, init: dict) -> list:
        """The trainable parameters the run has not moved beyond rounding yet (as compare.py
        judges it: on the pservers, else on trainer 0)."""
        import numpy as np
        f32 = np.dtype(self.fdt) == np.float32
        out = []
        for p in sorted(self.trainable):
            value = self.server(p)
            if value is None:
                value = self.trainer(p, 0)
            moved = movement(init.get(p), value)
            if moved is not None and moved <= noise(scale_of(value), f32):
                out.append(p)
        return out


class SyncRun(OriginalRun):
    """sync: data-parallel (dataparallel.py's ShardedStep)."""

    local_mean = True

    def begin(self):
        from .dataparallel import ShardedStep
        self.ex = self.watch(Executor("original main", self.main, self.scope,
                                      float_dtype=self.fdt, seed=self.seed))
        self.ex.free_temporaries()
        self.stepper = ShardedStep(self.ex, self.schedule.trainers)

    def step(self, step, shards, per):
        self.stepper.run(step, shards, per)
        self.steps_run = step + 1

    def executors(self):
        return [self.ex_startup, self.ex]
