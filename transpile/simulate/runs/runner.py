"""One run of `simulate`: its options, its context and the one step loop every run trains in.

A run is (a) the original program trained under the mode's schedule (schedule.py; original.py,
turns.py, georef.py), then (b) the split's programs run for as many steps by the style's
SIMULATE behaviour (core/stylehooks.py; classic and fleet: clusterrun.py; style ps: ps/run.py,
its reference and its cluster), each trainer on its shard of the same global batch. All take
their steps in `train_steps` (and so does runtime/predict.py): step s's global batch
fed (feeds.py), cut into the trainers' shards, handed to a stepper's `step(s, shards, per)`
(per: the samples of a shard). `RunContext` carries what (b) runs with: the program pair, the
feeds, the schedule, the tolerance, the style's own options and the original's run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

from ...core.errors import UserError
from ...ir.program import Program
from ..refs.reference import Reference
from .result import SimResult
from ..model.values import SimError

if TYPE_CHECKING:
    from .splitprograms import SplitPrograms

# The default tolerance: a sync split computes what the data-parallel original computes, op for
# op, so in float64 they agree to rounding (most often exactly); float32 leaves more room.
RTOL_FLOAT64 = 1e-6
RTOL_FLOAT32 = 1e-3
DEFAULT_BATCH = 8


@dataclass
class SimOptions:
    """What a run is asked for. `steps`: at least so many (more while a trainable parameter has
    not moved: train_original); `batch`: the global batch (None: default_batch, or the one the
    program fixes in its own ops: batchsize.py); `rtol` (None: by `float32`); `expect_equal`:
    a comparison that proves nothing fails, but for the parameters `accept_unchanged` names
    (fnmatch patterns); `push_every`: geo's push interval (schedule.py); `progress(done,
    total)`: called after each step of either run; `ps_options`: the style's own (style ps:
    its descriptor texts, program_init, why); `lod`: (MIN, MAX), a LoD feed's sequence
    lengths (feeds.LOD_LENGTHS by default)."""
    steps: int = 5
    batch: Optional[int] = None
    seed: int = 0
    rtol: Optional[float] = None
    float32: bool = False
    expect_equal: bool = False
    accept_unchanged: tuple = ()
    push_every: Optional[int] = None
    progress: Optional[Callable] = None
    ps_options: Optional[dict] = None
    lod: Optional[tuple] = None


@dataclass
class RunContext:
    """What a style's SIMULATE hook (core/stylehooks.py) runs the split with, once the original
    has trained: `res` to fill, the original (`main`, `startup`) and its run (`run`, `ref`),
    the split's programs (`sp`), the feeds and the schedule; `options`: the style's own
    (style ps: its descriptor texts, program_init, why)."""
    res: SimResult
    main: Program
    startup: Program
    config: object
    schedule: object
    fdt: object = None
    seed: int = 0
    rtol: float = RTOL_FLOAT64
    progress: object = None
    options: dict = field(default_factory=dict)
    sp: Optional["SplitPrograms"] = None
    ref: Optional[Reference] = None
    run: object = None
    feeder: object = None


def train_steps(stepper, feeder, trainers: int, steps: int, *, per: int, start: int = 0,
                more=None, done=None) -> int:
    """The step loop: steps `start`, ... of `stepper` (`step(s, shards, per)`) on the feeds of
    `feeder` cut into `trainers` shards, up to `steps`, then on while `more(s)`; `done(s)`
    after each (s: the steps taken). The steps taken."""
    s = start
    while s < steps or (more is not None and more(s)):
        glob = feeder.feed(s)
        stepper.step(s, [feeder.shard(glob, t, trainers) for t in range(trainers)], per)
        s += 1
        if done is not None:
            done(s)
    return s


def context(main: Program, startup: Optional[Program], config, opts: SimOptions) -> RunContext:
    """The run's context, its inputs validated as `split` validates them (UserError)."""
    import numpy as np

    from ...ir.validate import validate_for_split
    from ..refs.schedule import make_schedule

    validate_for_split(main, "main program")
    if startup is not None:
        validate_for_split(startup, "startup program")
    schedule = make_schedule(config, opts.push_every)
    rtol = opts.rtol
    if rtol is None:
        rtol = RTOL_FLOAT32 if opts.float32 else RTOL_FLOAT64
    if opts.steps < 1 or (opts.batch is not None and opts.batch < 1):
        raise UserError("--steps and --batch must be at least 1")
    res = SimResult(config.mode, opts.steps, opts.batch or DEFAULT_BATCH, rtol,
                    expect_equal=bool(opts.expect_equal),
                    accepted=tuple(opts.accept_unchanged or ()), schedule=schedule.describe())
    return RunContext(res, main, startup if startup is not None else Program.empty(), config,
                      schedule, fdt=np.float32 if opts.float32 else np.float64, seed=opts.seed,
                      rtol=rtol, progress=opts.progress or (lambda done, total: None),
                      options=opts.ps_options or {})


def run_original(ctx: RunContext, opts: SimOptions) -> None:
    """(a): the original trained under the schedule; `ctx` gets its run, feeder and reference
    (`res` its steps, global batch and notes). A SimError here is the input's (UserError)."""
    res = ctx.res
    ctx.ref = Reference(ctx.main, ctx.startup)
    try:
        ctx.feeder, ctx.run, res.batch = start_original(ctx, opts.batch, opts.lod)
        res.notes.extend(ctx.feeder.notes)
        res.steps = train_original(ctx, opts.steps)
    except SimError as e:
        raise UserError("the original program does not run: %s" % e) from None
    if res.steps > opts.steps:
        res.notes.append("the original run went on to %d steps (--steps %d) while a trainable "
                         "parameter had not moved" % (res.steps, opts.steps))
    from ..explain.paddlelimits import original_limits
    res.notes.extend(original_limits(ctx.main))
    ctx.run.release()


def original_run(main, startup, schedule, *, fdt, seed):
    """The original program trained under `schedule` (original.py)."""
    from ..refs.georef import GeoRun
    from ..refs.original import SyncRun
    from ..refs.turns import TurnRun
    kind = TurnRun if schedule.turns else GeoRun if schedule.mode == "geo" else SyncRun
    return kind(main, startup, schedule, fdt=fdt, seed=seed)


def default_batch(trainers: int) -> int:
    """The global batch without --batch: DEFAULT_BATCH, rounded up to a multiple of the
    trainers (each trainer gets a whole share)."""
    n = max(1, int(trainers))
    return -(-DEFAULT_BATCH // n) * n


def max_steps(steps: int) -> int:
    """How far the original run goes on while a trainable parameter has not moved."""
    return max(2 * steps, steps + 4)


def start_original(ctx: RunContext, batch: Optional[int], lod=None) -> tuple:
    """(feeder, run, global batch) with the original's startup and first step done. Without
    a `batch`, DEFAULT_BATCH (rounded up to a multiple of the trainers); when the program does
    not run on it, the per-trainer batch sizes its own ops suggest (batchsize.py), first that
    runs."""
    from ..model.batchsize import candidates
    from ..model.feeds import LOD_LENGTHS, Feeder
    main, n = ctx.main, ctx.schedule.trainers
    tries = [batch] if batch is not None else \
        [default_batch(n)] + [b * n for b in candidates(main) if b * n != default_batch(n)]
    first = None
    for b in tries:
        feeder = Feeder(main, b, ctx.seed, ctx.fdt, trainers=n, lod=lod or LOD_LENGTHS)
        run = original_run(main, ctx.startup, ctx.schedule, fdt=ctx.fdt, seed=ctx.seed)
        ctx.ref.init = run.startup()
        try:
            train_steps(run, feeder, n, 1, per=b // n)
        except SimError as e:
            first = first or e
            continue
        if b != tries[0]:
            ctx.res.notes.append("the program fixes its batch in its own ops: it runs on %d "
                                 "samples a trainer (global batch %d), not on %d"
                                 % (b // n, b, tries[0] // n))
        return feeder, run, b
    if batch is None and len(tries) == 1:
        raise SimError("%s (nothing in the program fixes a batch size; if it needs one, give "
                       "--batch N)" % first)
    if batch is None:
        raise SimError("%s (nor on the per-trainer batch sizes its ops suggest: %s)"
                       % (first, ", ".join(str(b // n) for b in tries[1:])))
    raise first


def train_original(ctx: RunContext, steps: int) -> int:
    """Steps of the original run after its first: up to `steps`, and more while a trainable
    parameter has not moved beyond rounding (a table whose gradient is another table's rows,
    which start at 0, moves once a later step reads rows an earlier one trained; geo pushes
    every K steps), up to max_steps(steps), as long as each extra step (or K of them) moves
    another parameter: one whose gradient is rounding noise (a bias batch_norm centres) never
    moves, and more steps only let float64 rounding grow."""
    run, feeder, progress = ctx.run, ctx.feeder, ctx.progress
    trainers = run.schedule.trainers
    patience = run.schedule.push_every if run.schedule.mode == "geo" else 1
    waiting = {"left": None, "waited": 0}

    def unmoved_left(s) -> bool:
        now = run.unmoved(ctx.ref.init)
        if not now or s >= max_steps(steps):
            return False
        left = waiting["left"]
        waiting["waited"] = 0 if left is None or len(now) < len(left) else waiting["waited"] + 1
        if waiting["waited"] >= patience:
            return False
        waiting["left"] = now
        return True

    progress(1, 2 * steps)
    return train_steps(run, feeder, trainers, steps, per=feeder.batch // trainers, start=1,
                       more=unmoved_left, done=lambda s: progress(s, 2 * max(s, steps)))
