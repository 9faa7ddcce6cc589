"""`simulate`: train the original program and its split side by side with numpy, compare params.

(a) the original: startup once, then N steps on a global batch, trained data-parallel
(dataparallel.py: forward and backward on each trainer's shard, gradients averaged, the update
ops once); (b) the split: pserver and trainer startups, then N steps of the trainers' mains with
the pservers' optimize blocks run by an in-process message layer (cluster.py), each trainer on
its shard of the same global batch. Random initializers in (b) take the values (a) drew for the
same parameter (or its row slice) (reference.py); random ops of a training step draw per sample
(keyed.py), so a trainer's shard sees the original's draws for the same samples. Big tables are
kept lazily (values.LazyTable): only the rows a run touches exist. Parameters are compared on
each trainer, else assembled from the pservers (compare.py), and the trainable ones the original
run did not move are reported: their equality proves nothing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from ..core.errors import UserError
from ..ir.program import Program
from .compare import ParamDiff, compare_params
from .reference import Reference, snapshot
from .values import NoKernelError, SimError

if TYPE_CHECKING:
    from .splitprograms import SplitPrograms

__all__ = ["simulate", "SimResult", "ParamDiff", "SimError", "NoKernelError", "Reference",
           "split_programs_from"]

# The default tolerance: a sync split computes what the data-parallel original computes, op for
# op, so in float64 they agree to rounding (most often exactly); float32 leaves more room.
RTOL_FLOAT64 = 1e-6
RTOL_FLOAT32 = 1e-3


@dataclass
class SimResult:
    mode: str
    steps: int
    batch: int
    rtol: float
    params: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    error: Optional[str] = None          # the split failed to execute
    expect_equal: bool = True            # False: async / half-async report only
    faults: list = field(default_factory=list)   # Paddle fault ids the split reproduces

    @property
    def unchanged(self) -> list:
        """The trainable parameters the original run left as they started: comparing them
        proves nothing about the split."""
        return [p.name for p in self.params if p.trainable and p.changed is False]

    @property
    def equal(self) -> bool:
        return self.error is None and all(p.ok for p in self.params)

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return 1
        if self.expect_equal and not self.equal:
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
             runtime: Optional[dict] = None, *, steps: int = 5, batch: int = 8, seed: int = 0,
             rtol: Optional[float] = None, float32: bool = False,
             expect_equal: Optional[bool] = None, progress=None,
             ps_options: Optional[dict] = None) -> SimResult:
    """Run the original and the split for `steps` steps; compare every parameter.

    SimError in the split becomes result.error (exit 1); NoKernelError and UserError propagate
    (exit 2). `progress(done, total)` is called after each step of either run. Style ps: psrun.py
    (`ps_options`: its texts, program_init, why)."""
    import numpy as np
    from .cluster import Cluster
    from .dataparallel import ShardedStep
    from .executor import Executor
    from .feeds import Feeder

    if config.mode == "geo" and not config.traits.descriptors:
        raise UserError("geo mode is not simulated (its trainers train locally and push deltas)")
    if rtol is None:
        rtol = RTOL_FLOAT32 if float32 else RTOL_FLOAT64
    if steps < 1 or batch < 1:
        raise UserError("--steps and --batch must be at least 1")
    if expect_equal is None:
        expect_equal = config.mode == "sync"
    startup = startup if startup is not None else Program.empty()
    progress = progress or (lambda done, total: None)
    fdt = np.float32 if float32 else np.float64
    res = SimResult(config.mode, steps, batch, rtol, expect_equal=expect_equal)

    # (a) the original
    ref = Reference(main, startup)
    feeder = Feeder(main, batch, seed, fdt, trainers=config.trainers)
    orig = Executor("original startup", startup, float_dtype=fdt, seed=seed)
    try:
        orig.run_block(0)
        ref.init = {k: snapshot(v) for k, v in orig.scope.vars.items()
                    if not hasattr(v, "rows")}
        orig_main = Executor("original main", main, orig.scope, float_dtype=fdt, seed=seed)
        orig_main.free_temporaries()
        stepper = ShardedStep(orig_main, config.trainers)
        per = batch // max(1, config.trainers)
        for s in range(steps):
            glob = feeder.feed(s)
            stepper.run(s, [feeder.shard(glob, t, config.trainers)
                            for t in range(config.trainers)], per)
            progress(s + 1, 2 * steps)
    except SimError as e:
        raise UserError("the original program does not run: %s" % e) from None

    sp = split_programs_from(split_programs, runtime or {}, config)    # (b) the split
    if config.traits.descriptors:   # style ps: the ps reference and the split (psrun.py)
        from .psrun import run_ps
        return run_ps(res, main, startup, config, sp, ref, orig.scope, feeder, steps, batch,
                      seed, fdt, progress, **(ps_options or {}))
    res.notes.extend(sp.notes)
    ref.build_slices([p["main"] for p in sp.pservers.values()]
                     + [p["startup"] for p in sp.pservers.values()]
                     + [p["main"] for p in sp.trainers.values()], res.notes)
    cluster = None
    try:
        cluster = Cluster(sp, config, float_dtype=fdt, seed=seed, reference=ref)
        per = batch // max(1, len(cluster.trainers))
        cluster.startup()
        for s in range(steps):
            for t in cluster.trainers:
                t.ex.begin_step(s, per, t.tid * per)
            glob = feeder.feed(s)
            cluster.step([feeder.shard(glob, t.tid, len(cluster.trainers))
                          for t in cluster.trainers])
            progress(steps + s + 1, 2 * steps)
        cluster.check_blocks_run()
    except SimError as e:
        res.error = str(e)
        if cluster is not None:
            res.notes.extend(n for n in cluster.notes if n not in res.notes)
        return res
    res.notes.extend(n for n in cluster.notes if n not in res.notes)
    res.params = compare_params(main, orig.scope, cluster, ref, rtol)
    res.notes.extend(_memory_notes(main, orig.scope, [orig_main, cluster.executors()]))
    return res


def _memory_notes(main, scope, executors) -> list:
    """Which tables were kept lazily (and how many rows the run touched), and which an op
    needed whole."""
    from .values import LazyTable
    out = []
    for p in main.parameters():
        v = scope.get(p.name)
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
