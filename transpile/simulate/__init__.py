"""`simulate`: train the original program and its split side by side with numpy, compare params.

(a) the original: startup once, then steps on a global batch, trained under the mode's schedule
(schedule.py; original.py: sync data-parallel, dataparallel.py; async and half_async turn by
turn, turns.py; geo with local training and pushed deltas, georef.py); (b) the split: pserver
and trainer startups, then as many steps of the trainers' mains with the pservers' optimize
blocks run by an in-process message layer (cluster.py) under the same schedule, each trainer on
its shard of the same global batch. Random initializers in (b) take the values (a) drew for the
same parameter (or its row slice) (reference.py); random ops of a training step draw per sample
(keyed.py), so a trainer's shard sees the original's draws for the same samples. Big tables are
kept lazily (values.LazyTable): only the rows a run touches exist. Parameters are compared on
each trainer and on the pservers (compare.py). The original run goes on past --steps while a
trainable parameter has not moved; one that never does is reported (its equality proves
nothing) and, with expect_equal, fails the comparison unless accepted by name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from ..core.errors import UserError
from ..core.styles import CLASSIC, FLEET, PS
from ..core.stylehooks import SIMULATE
from ..ir.program import Program
from .compare import ParamDiff, compare_params
from .reference import Reference
from .values import NoKernelError, SimError

if TYPE_CHECKING:
    from .splitprograms import SplitPrograms

__all__ = ["simulate", "SimResult", "ParamDiff", "SimError", "NoKernelError", "Reference",
           "split_programs_from"]

# The default tolerance: a sync split computes what the data-parallel original computes, op for
# op, so in float64 they agree to rounding (most often exactly); float32 leaves more room.
RTOL_FLOAT64 = 1e-6
RTOL_FLOAT32 = 1e-3
DEFAULT_BATCH = 8


@dataclass
class SimResult:
    mode: str
    steps: int
    batch: int
    rtol: float
    params: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    error: Optional[str] = None          # the split failed to execute
    expect_equal: bool = False           # fail a comparison that proves nothing (unchanged)
    faults: list = field(default_factory=list)   # Paddle fault ids the split reproduces
    fix_tried: bool = False     # the split was made with `paddle_faults: fix`
    accepted: tuple = ()                 # names (fnmatch patterns) accepted unchanged
    schedule: str = ""                   # schedule.py: what the reference is

    @property
    def unchanged(self) -> list:
        """The trainable parameters the original run left as they started: comparing them
        proves nothing about the split."""
        return [p.name for p in self.params if p.trainable and p.changed is False]

    @property
    def partly_unchanged(self) -> list:
        """"name (rows a:b)" of the pserver blocks of moved parameters that did not move:
        the comparison proves nothing about the pserver that holds them."""
        return ["%s (%s)" % (p.name, b) for p in self.params for b in p.still_blocks]

    @property
    def vacuous(self) -> list:
        """The unchanged parameters and blocks not accepted by name."""
        import fnmatch
        names = self.unchanged + self.partly_unchanged
        return [n for n in names
                if not any(fnmatch.fnmatchcase(n.split(" ")[0], pat) for pat in self.accepted)]

    @property
    def equal(self) -> bool:
        return self.error is None and all(p.ok for p in self.params)

    @property
    def exit_code(self) -> int:
        if not self.equal:
            return 1
        if self.expect_equal and self.vacuous:
            return 1
        return 0


def split_programs_from(programs: dict, runtime: dict, config) -> "SplitPrograms":
    """SplitResult-style dicts ("trainer_0/main" -> Program, "trainer_0" -> runtime) by role;
    trainers the split lacks are derived from the lowest trainer present."""
    from ..output.result import endpoint_dir
    from .splitprograms import SplitPrograms, rename_runtime, rename_trainer_program

    sp = SplitPrograms()
    dirs = {endpoint_dir(ep): ep for ep in config.pservers}
    trainers: dict = {}
    for key, prog in programs.items():
        folder, _, kind = key.rpartition("/")
        if kind not in ("main", "startup"):
            continue
        m = re.fullmatch(r"trainer_(\d+)", folder)
        if m:
            trainers.setdefault(int(m.group(1)), {})[kind] = prog
        elif folder in dirs:
            sp.pservers.setdefault(dirs[folder], {})[kind] = prog
        elif folder.startswith("pserver_"):
            raise UserError("the split has %s/, which is no endpoint of the cluster config (%s)"
                            % (folder, ", ".join(config.pservers)))
    for ep in config.pservers:
        if "main" not in sp.pservers.get(ep, {}):
            raise UserError("the split has no %s/main program for pserver %s"
                            % (endpoint_dir(ep), ep))
        sp.pservers[ep].setdefault("startup", Program.empty())
    if not trainers:
        raise UserError("the split has no trainer_<id>/main program")
    for tid, p in trainers.items():
        if "main" not in p:
            raise UserError("the split has trainer_%d/startup but no trainer_%d/main" % (tid, tid))
        p.setdefault("startup", Program.empty())
    rts = {}
    for key, rt in (runtime or {}).items():
        m = re.fullmatch(r"trainer_(\d+)", key)
        if m:
            rts[int(m.group(1))] = rt
    src = min(trainers)
    derived = []
    for tid in range(config.trainers):
        if tid in trainers:
            sp.trainers[tid] = trainers[tid]
            if tid in rts:
                sp.runtime[tid] = rts[tid]
            continue
        sp.trainers[tid] = {k: rename_trainer_program(v, src, tid)
                            for k, v in trainers[src].items()}
        if src in rts:
            sp.runtime[tid] = rename_runtime(rts[src], src, tid)
        derived.append(tid)
    if derived:
        sp.notes.append("%s derived from trainer_%d by renaming its .trainer_%d vars"
                        % (", ".join("trainer_%d" % t for t in derived), src, src))
    if config.traits.runtime_json:
        for tid in sp.trainers:
            if tid not in sp.runtime:
                sp.notes.append("trainer_%d has no runtime.json: its sends go by epmap" % tid)
    return sp


def simulate(main: Program, startup: Optional[Program], config, split_programs: dict,
             runtime: Optional[dict] = None, *, steps: int = 5, batch: Optional[int] = None,
             seed: int = 0,
             rtol: Optional[float] = None, float32: bool = False,
             expect_equal: bool = False, accept_unchanged=(), push_every=None,
             progress=None, ps_options: Optional[dict] = None, lod=None) -> SimResult:
    """Train the original under the mode's schedule (schedule.py) and run the split for as many
    steps; compare every parameter.

    At least `steps` steps; more (up to max_steps(steps)) while a trainable parameter has not
    moved in the original run (and extra steps move others). `batch` is the global batch
    (None: default_batch(trainers), or, when the program fixes its batch in its own ops, that batch a
    trainer: batchsize.py). The inputs are validated as `split` validates them. SimError in
    the split becomes result.error (exit 1); NoKernelError and UserError propagate (exit 2).
    `progress(done, total)` is called after each step of either run. Style ps: psrun.py
    (`ps_options`: its descriptor texts, program_init, why). `lod`: (MIN, MAX), the range
    of a LoD feed's sequence lengths (feeds.LOD_LENGTHS by default)."""
    import numpy as np

    from ..ir.validate import validate_for_split
    from .schedule import make_schedule

    validate_for_split(main, "main program")
    if startup is not None:
        validate_for_split(startup, "startup program")
    schedule = make_schedule(config, push_every)
    if rtol is None:
        rtol = RTOL_FLOAT32 if float32 else RTOL_FLOAT64
    if steps < 1 or (batch is not None and batch < 1):
        raise UserError("--steps and --batch must be at least 1")
    startup = startup if startup is not None else Program.empty()
    progress = progress or (lambda done, total: None)
    fdt = np.float32 if float32 else np.float64
    res = SimResult(config.mode, steps, batch or DEFAULT_BATCH, rtol,
                    expect_equal=bool(expect_equal), accepted=tuple(accept_unchanged or ()),
                    schedule=schedule.describe())

    # (a) the original
    ref = Reference(main, startup)
    try:
        feeder, run, res.batch = _start_original(main, startup, schedule, batch, seed, fdt, ref,
                                                 res.notes, lod)
        res.notes.extend(feeder.notes)
        res.steps = _train_original(run, feeder, steps, ref, progress)
    except SimError as e:
        raise UserError("the original program does not run: %s" % e) from None
    if res.steps > steps:
        res.notes.append("the original run went on to %d steps (--steps %d) while a trainable "
                         "parameter had not moved" % (res.steps, steps))
    from .paddlelimits import original_limits
    res.notes.extend(original_limits(main))
    batch = res.batch
    run.release()

    # (b) the split
    sp = split_programs_from(split_programs, runtime or {}, config)
    return SIMULATE.of(config.style)(SplitRun(
        res, main, startup, config, sp, ref, run, feeder, schedule, fdt=fdt, seed=seed,
        rtol=rtol, progress=progress, options=ps_options or {}))


@dataclass
class SplitRun:
    """What a style's SIMULATE hook (core/stylehooks.py) runs the split with, once the original
    has trained: `res` to fill, the original (`main`, `startup`) and its run (`run`, `ref`),
    the split's programs (`sp`), the feeds and the schedule; `options`: the style's own
    (style ps: its descriptor texts, program_init, why)."""
    res: SimResult
    main: Program
    startup: Program
    config: object
    sp: "SplitPrograms"
    ref: Reference
    run: object
    feeder: object
    schedule: object
    fdt: object = None
    seed: int = 0
    rtol: float = RTOL_FLOAT64
    progress: object = None
    options: dict = field(default_factory=dict)


def _run_the_one_ps(r: SplitRun) -> SimResult:
    """(b) in style ps: the ps reference and the split on its descriptors (psrun.py)."""
    from .psrun import run_ps
    return run_ps(r.res, r.main, r.startup, r.config, r.sp, r.ref, r.run.scope, r.feeder,
                  r.res.steps, r.res.batch, r.seed, r.fdt, r.progress, run=r.run, **r.options)


def _run_split(r: SplitRun) -> SimResult:
    """(b): the split's programs run under the schedule; `res` filled with the comparison."""
    from .cluster import Cluster
    res, main, config, sp, ref, run, feeder = r.res, r.main, r.config, r.sp, r.ref, r.run, \
        r.feeder
    fdt, seed, rtol, progress, schedule = r.fdt, r.seed, r.rtol, r.progress, r.schedule
    batch = res.batch
    res.notes.extend(sp.notes)
    ref.build_slices([p["main"] for p in sp.pservers.values()]
                     + [p["startup"] for p in sp.pservers.values()]
                     + [p["main"] for p in sp.trainers.values()], res.notes)
    from .compare import measure_movements
    measure_movements(main, run, ref)
    cluster = None
    try:
        cluster = Cluster(sp, config, float_dtype=fdt, seed=seed, reference=ref,
                          schedule=schedule)
        per = batch // max(1, len(cluster.trainers))
        cluster.startup()
        ref.release_init(keep=_whole_init_needed(cluster))
        for s in range(res.steps):
            for t in cluster.trainers:
                t.ex.begin_step(s, per, t.tid * per)
            glob = feeder.feed(s)
            cluster.step([feeder.shard(glob, t.tid, len(cluster.trainers))
                          for t in cluster.trainers], s)
            progress(res.steps + s + 1, 2 * res.steps)
        cluster.check_blocks_run()
    except SimError as e:
        res.error = str(e)
        if cluster is not None:
            res.notes.extend(n for n in cluster.notes if n not in res.notes)
        return res
    res.notes.extend(n for n in cluster.notes if n not in res.notes)
    cluster.release({v.name for v in main.parameters()} | set(ref.slices))
    res.params = compare_params(main, run, cluster, ref, rtol)
    res.notes.extend(_memory_notes(main, run, [run.executors(), cluster.executors()]))
    return res


for _traits in (CLASSIC, FLEET):
    SIMULATE.register(_traits.name, _run_split)
SIMULATE.register(PS.name, _run_the_one_ps)


def _whole_init_needed(cluster) -> set:
    """The parameters whose initial values the comparison still reads whole: those a pserver
    keeps as an auto-grown sparse table (compare._server_value fills the rows it never saw
    from them)."""
    from .values import SparseTable
    out = set()
    for ps in cluster.pservers.values():
        for name, v in ps.scope.vars.items():
            if isinstance(v, SparseTable):
                out.add(cluster.reference.slices.get(name, (name,))[0])
    return out


def original_run(main, startup, schedule, *, fdt, seed):
    """The original program trained under `schedule` (original.py)."""
    from .georef import GeoRun
    from .original import SyncRun
    from .turns import TurnRun
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


def _start_original(main, startup, schedule, batch, seed, fdt, ref, notes, lod=None):
    """(feeder, run, global batch) with the original's startup and first step done. Without
    a `batch`, DEFAULT_BATCH (rounded up to a multiple of the trainers); when the program does not run on it, the per-trainer batch
    sizes its own ops suggest (batchsize.py), first that runs."""
    from .batchsize import candidates
    from .feeds import LOD_LENGTHS, Feeder
    n = schedule.trainers
    tries = [batch] if batch is not None else \
        [default_batch(n)] + [b * n for b in candidates(main) if b * n != default_batch(n)]
    first = None
    for b in tries:
        feeder = Feeder(main, b, seed, fdt, trainers=n, lod=lod or LOD_LENGTHS)
        run = original_run(main, startup, schedule, fdt=fdt, seed=seed)
        ref.init = run.startup()
        try:
            glob = feeder.feed(0)
            run.step(0, [feeder.shard(glob, t, n) for t in range(n)], b // n)
        except SimError as e:
            first = first or e
            continue
        if b != tries[0]:
            notes.append("the program fixes its batch in its own ops: it runs on %d samples a "
                         "trainer (global batch %d), not on %d" % (b // n, b, tries[0] // n))
        return feeder, run, b
    if batch is None and len(tries) == 1:
        raise SimError("%s (nothing in the program fixes a batch size; if it needs one, give "
                       "--batch N)" % first)
    if batch is None:
        raise SimError("%s (nor on the per-trainer batch sizes its ops suggest: %s)"
                       % (first, ", ".join(str(b // n) for b in tries[1:])))
    raise first


def _train_original(run, feeder, steps, ref, progress) -> int:
    """Steps of the original run after its first: up to `steps`, and more while a trainable
    parameter has not moved beyond rounding (a table whose gradient is another table's rows,
    which start at 0, moves once a later step reads rows an earlier one trained; geo pushes
    every K steps), up to max_steps(steps), as long as each extra step (or K of them) moves
    another parameter: one whose gradient is rounding noise (a bias batch_norm centres) never
    moves, and more steps only let float64 rounding grow."""
    trainers = run.schedule.trainers
    per = feeder.batch // trainers
    patience = run.schedule.push_every if run.schedule.mode == "geo" else 1
    s, left, waited = 1, None, 0
    progress(s, 2 * steps)
    while True:
        if s >= steps:
            now = run.unmoved(ref.init)
            if not now or s >= max_steps(steps):
                return s
            waited = 0 if left is None or len(now) < len(left) else waited + 1
            if waited >= patience:
                return s
            left = now
        glob = feeder.feed(s)
        run.step(s, [feeder.shard(glob, t, trainers) for t in range(trainers)], per)
        s += 1
        progress(s, 2 * max(s, steps))


def _memory_notes(main, run, executors) -> list:
    """Which tables were kept lazily (and how many rows the run touched), and which an op
    needed whole."""
    from .values import LazyTable
    out = []
    for p in main.parameters():
        v = run.server(p.name)
        v = run.scope.get(p.name) if v is None else v
        if isinstance(v, LazyTable):
            out.append("%s %s kept lazily: the original run touched %d of its rows"
                       % (p.name, list(v.shape), len(v.index)))
    seen = set()
    for ex in executors:
        for exe in (ex if isinstance(ex, list) else [ex]):
            for name, op_type in exe.densified.items():
                if (name, op_type) not in seen:
                    seen.add((name, op_type))
                    out.append("%s: %s reads the whole of %s, which is materialized"
                               % (exe.label, op_type, name))
    return out
