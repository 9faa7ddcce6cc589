"""`simulate`: train the original program and its split side by side with numpy, compare params.

(a) the original: startup once, then steps on a global batch, trained under the mode's schedule
(refs/: schedule.py; original.py: sync data-parallel, dataparallel.py; async and half_async turn
by turn, turns.py; geo with local training and pushed deltas, georef.py); (b) the split: pserver
and trainer startups, then as many steps of the trainers' mains with the pservers' optimize
blocks run by an in-process message layer (runs/cluster.py; style ps: ps/) under the same
schedule, each trainer on its shard of the same global batch. Random initializers in (b) take
the values (a) drew for the same parameter (or its row slice) (refs/reference.py); random ops
of a training step draw per sample (model/keyed.py), so a trainer's shard sees the original's
draws for the same samples. Big tables are kept lazily (model/values.LazyTable): only the rows
a run touches exist. Parameters are compared on each trainer and on the pservers
(explain/compare.py). The original run goes on past --steps while a trainable parameter has
not moved; one that never does is reported (its equality proves nothing) and, with
expect_equal, fails the comparison unless accepted by name.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..core.styles import CLASSIC, FLEET, PS
from ..core.stylehooks import SIMULATE
from ..ir.program import Program
from .runs.clusterrun import run_cluster
from .explain.compare import ParamDiff
from .refs.reference import Reference
from .runs.result import SimResult
from .runs.runner import (DEFAULT_BATCH, RTOL_FLOAT32, RTOL_FLOAT64, RunContext, SimOptions,
                          context, default_batch, max_steps, original_run, run_original)
from .runs.splitprograms import split_programs_from
from .model.values import NoKernelError, SimError

__all__ = ["simulate", "SimOptions", "SimResult", "RunContext", "ParamDiff", "SimError",
           "NoKernelError", "Reference", "split_programs_from", "original_run",
           "default_batch", "max_steps", "DEFAULT_BATCH", "RTOL_FLOAT32", "RTOL_FLOAT64"]


def simulate(main: Program, startup: Optional[Program], config, split_programs: dict,
             runtime: Optional[dict] = None, *, options: Optional[SimOptions] = None,
             **given) -> SimResult:
    """Train the original under the mode's schedule (schedule.py) and run the split for as many
    steps; compare every parameter.

    `options` (a SimOptions; `given`: its fields by name, over it) say how: at least `steps`
    steps; more (up to max_steps(steps)) while a trainable parameter has not moved in the
    original run (and extra steps move others); `batch`, the global batch... (runner.py).
    `split_programs` and `runtime`: SplitResult-style dicts (split_programs_from). The inputs
    are validated as `split` validates them. SimError in the split becomes result.error (exit
    1); NoKernelError and UserError propagate (exit 2). The split is run by the style's
    SIMULATE behaviour (core/stylehooks.py), registered below."""
    opts = replace(options or SimOptions(), **given)
    ctx = context(main, startup, config, opts)
    run_original(ctx, opts)                                     # (a) the original
    ctx.sp = split_programs_from(split_programs, runtime or {}, config)
    return SIMULATE.of(config.style)(ctx)                       # (b) the split


def _run_the_one_ps(r: RunContext) -> SimResult:
    """(b) in style ps: the ps reference and the split on its descriptors (ps/run.py)."""
    from .ps.run import run_ps
    return run_ps(r)


for _traits in (CLASSIC, FLEET):
    SIMULATE.register(_traits.name, run_cluster)
SIMULATE.register(PS.name, _run_the_one_ps)
