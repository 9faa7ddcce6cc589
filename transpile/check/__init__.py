"""`check`: validate a parameter-server split (ours or Paddle's) without running it.

A split folder holds trainer_<id>/{main,startup}.pb (+ runtime.json in fleet style) and
pserver_<host>_<port>/{main,startup}.pb. The checks read the original program and the cluster
config and look at the split from both sides:

  structure   every var an op uses is declared in its block or an ancestor; block attrs point at
              existing blocks; blocks no op can reach only get a warning (Paddle leaves LR-decay
              sub-blocks behind in trainer programs);                              programs.py
  listen      each pserver has one listen_and_serv for its own endpoint, Fanin = trainers, the
              mode's distributed_mode, optimize_blocks without repeats, a grad_to_block_id that
              points into optimize_blocks;                                         pserver.py
  optimize    each parameter block has one optimizer op whose accumulators have the block's
              shape (main and startup), no dead computation, and in sync mode its merged grad is
              averaged over the trainers;                                          pserver.py
  coverage    the pserver blocks of every trainable parameter tile it exactly once (contiguous
              slices, shapes add up, dtypes agree);                                coverage.py
  send / recv every grad a trainer sends reaches the endpoint that optimizes it under a name that
              endpoint knows; every received parameter block exists where it is received from;
              every optimized block is fed and read back;                          trainer.py
  trainer     no optimizer op left on the trainer (except geo mode); sync mode has its barriers.
  reads       no trainer op reads a var nothing gives a value (an empty SelectedRows' rows
              included): the trainer would fail at its first step;               reads.py
  fault       a warning naming each known Paddle fault (plan/faults.py) the split reproduces;
                                                                                   faults.py
  golden      with --expect, every difference from a golden split (diff/programs.py). golden.py

Style ps (Paddle 2.1+'s pipeline: tables in worker_desc.txt / server_desc.txt, pserver programs
all but empty) has checks of its own after structure: ps.py (listen, tables, coverage of the
dense shards) and ps_trainer.py (send / barrier wiring, lookups against the tables, trainer).

Reading the split is loading.py; what the checks look up, indexed once before they run,
index.py; what they share while they run (the findings so far), context.py; how they read
ops and vars, ops.py. Findings are data (findings.py); render.py only formats them.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Optional

from ..core.config import ClusterConfig
from ..core import forked
from ..core.styles import CLASSIC, FLEET, PS
from ..core.stylehooks import CHECK
from ..core.forked import workers_available, worth_forking
from ..core.gcpause import keep_until_exit, paused_gc
from ..ir.program import Program
from .context import CheckContext
from .index import ParamBlock
from .coverage import check_coverage
from .faults import check_faults
from .findings import CHECKS, CheckReport, Finding
from .golden import golden_findings
from .inputs import check_inputs, check_trainer_inputs
from .loading import Part, Split, load_program_raw, load_split
from .blocks import block_refs, reachable_blocks
from .programs import check_structure
from .reads import check_reads
from .ps_trainer import ps_checks
from .pserver import check_listen, check_optimize, expected_distributed_mode
from .stream import is_lazy, streamed_context
from .render import RENDERERS, render_json, render_junit, render_text
from .trainer import check_trainers, joined, trainer_half

__all__ = [
    "CHECKS", "RENDERERS", "CheckReport", "Finding", "ParamBlock", "Part", "Split",
    "block_refs", "check_coverage", "check_dir", "check_listen", "check_optimize",
    "check_split", "check_structure", "check_trainers", "expected_distributed_mode",
    "golden_findings", "load_program_raw", "load_split", "reachable_blocks", "render_json",
    "render_junit", "render_text",
]


# the order the findings are reported in (each check reads only the inputs and ctx.index, built
# before any of them runs)
CHECK_ORDER = (check_structure, check_listen, check_optimize, check_coverage, check_trainers,
               check_inputs, check_reads, check_faults)
CHECK_STEPS = len(CHECK_ORDER)


@dataclass(frozen=True)
class CheckWay:
    """How a style's splits are checked (its CHECK hook, core/stylehooks.py): `order()` the
    checks in the order their findings are reported; `streamed`: its pservers are read one at
    a time while the checks run (classic and fleet pservers each have programs about the
    original's size), else all at once."""
    order: Callable[[], tuple]
    streamed: bool


def _listen_and_serv_checks() -> tuple:
    return CHECK_ORDER


def _the_one_ps_checks() -> tuple:
    # the tables of the descriptors, after the programs' structure; no pserver program to read
    return (check_structure,) + ps_checks() + (check_trainer_inputs, check_reads, check_faults)


for _traits in (CLASSIC, FLEET):
    CHECK.register(_traits.name, CheckWay(_listen_and_serv_checks, streamed=True))
CHECK.register(PS.name, CheckWay(_the_one_ps_checks, streamed=False))


def check_split(main: Program, startup: Optional[Program], config: ClusterConfig,
                split: Split, step=None, workers: int = 1) -> CheckReport:
    """Run every check on a loaded split; findings and warnings in a report.
    `step()` is called after each of the CHECK_STEPS groups of checks. `workers`: 2 lets a
    forked child read some of a lazy split's pservers (stream.py), and another run the trainer
    checks while this process runs the others (_trainers_aside); the report is the same."""
    if is_lazy(split):
        ctx = streamed_context(main, startup, config, split, workers)
    else:
        ctx = CheckContext(main, startup, config, split)
    order = CHECK.of(config.style).order()
    # the coverage check, right before the trainers', goes aside with half of theirs (it
    # reads the index only): what it finds has its place right before what they find
    at = order.index(check_trainers) if check_trainers in order else len(order)
    moved = check_coverage if 0 < at < len(order) and order[at - 1] is check_coverage \
        else None
    aside = _trainers_aside(ctx, workers, moved) if at < len(order) else None
    # with half of the trainer checks aside, this process runs the other half and the checks
    # after them, collected apart to follow the trainers' findings
    if aside is None:
        at, moved = len(order), None
    later: tuple = ([], [])
    try:
        for check in order[:at]:
            if check is not moved:
                check(ctx)
            if step is not None:
                step()
        if aside is not None:
            ours = trainer_half(ctx, 1)
            with ctx.collecting() as later:
                for check in order[at + 1:]:
                    check(ctx)
    except BaseException:
        if aside is not None:
            aside.abandon()
        raise
    if aside is not None:
        got, theirs = aside.result()
        found, warned = joined(theirs, ours)
        ctx.findings += got[0] + found + later[0]
        ctx.warnings += got[1] + warned + later[1]
        for _ in order[at:]:
            if step is not None:
                step()
    return CheckReport(split.root, ctx.findings, ctx.warnings, [p.name for p in ctx.parts()])


def _trainers_aside(ctx: CheckContext, workers: int, moved=None):
    """Half of the trainer checks (trainer_half 0: each trainer's sends), and the check
    `moved` before them if any, run by a forked child while this process runs the other half
    and the other checks (the trainer checks read every parameter block of every pserver,
    much of what a large check does once the pservers are read): a Forked whose result is
    (what `moved` found, that half's findings), or None where a fork is not worth it (as for
    the pservers: core/forked.py's worth_forking)."""
    eps = len(ctx.split.pservers)
    if not worth_forking(workers, 2, eps, len(ctx.main.global_block.ops)):
        return None

    def work():
        got: tuple = ([], [])
        if moved is not None:
            with ctx.collecting() as got:
                moved(ctx)
        return got, trainer_half(ctx, 0)
    return forked.Forked(work)


def check_dir(main: Program, startup: Optional[Program], config: ClusterConfig,
              split_dir: str, expect_dir: Optional[str] = None,
              op_defaults: Optional[dict] = None, progress=None) -> CheckReport:
    """Load a split folder and check it; with expect_dir, also diff it against a golden split.
    `progress(done, total)`: called after each folder read and each group of checks."""
    progress = progress or (lambda done, total: None)
    folders = [0]

    def read(done, total):
        folders[0] = total
        progress(done, total + CHECK_STEPS)

    with paused_gc():       # reading a split allocates millions of objects and frees none
        # classic and fleet pservers each have programs about the original's size: those
        # are read, checked and let go one pserver at a time (stream.py)
        split = load_split(split_dir, config, read, lazy=CHECK.of(config.style).streamed)
        keep_until_exit(split)
        checked = itertools.count(folders[0] + 1)
        report = check_split(main, startup, config, split,
                             lambda: progress(next(checked), folders[0] + CHECK_STEPS),
                             workers_available())
        if expect_dir is not None:
            report.findings.extend(golden_findings(split_dir, expect_dir, op_defaults))
    return report
