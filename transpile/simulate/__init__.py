"""`simulate`: train the original program and its split side by side with numpy, compare params.

(a) the original: startup once, then N steps on a global batch; (b) the split: pserver and
trainer startups, then N steps of the trainers' mains with the pservers' optimize blocks run by
an in-process message layer (cluster.py), each trainer on its shard of the same global batch.
Random initializers in (b) take the values (a) drew for the same parameter (or its row slice),
so that both start from one state; a random init with other settings than the original's is left
alone and reported. A pserver's auto-grown sparse table gives a new id k the original's row k.
Parameters are compared on each trainer, else assembled from the pservers (row blocks, or the
ids a sparse table saw over the original's initial rows).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from ..core.errors import UserError
from ..ir.program import Program
from .values import NoKernelError, SimError

if TYPE_CHECKING:
    from .splitprograms import SplitPrograms

__all__ = ["simulate", "SimResult", "ParamDiff", "SimError", "NoKernelError"]

_BLOCK_SUFFIX = re.compile(r"^(.+)\.block(\d+)$")
_DIST_ATTRS = ("min", "max", "mean", "std")


@dataclass
class ParamDiff:
    name: str
    shape: tuple
    max_abs: float
    max_rel: float
    ok: bool
    note: str = ""


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


class Reference:
    """The original program's run: its initial values, for aligning the split's random inits."""

    def __init__(self, main: Program, startup: Program):
        self.main = main
        self.startup = startup
        self.init: dict = {}
        self.init_ops: dict = {}
        self.slices: dict = {}
        for op in startup.global_block.ops:
            for n in op.output_names():
                self.init_ops[n] = op

    def build_slices(self, programs, notes):
        """`P.blockN` vars of the split -> (P, first row, end row) of the original P."""
        blocks: dict = {}
        for prog in programs:
            for name, v in prog.global_block.vars.items():
                m = _BLOCK_SUFFIX.match(name)
                if m and m.group(1) in self.init and v.shape:
                    blocks.setdefault(m.group(1), {})[int(m.group(2))] = tuple(v.shape)
        for base, parts in blocks.items():
            full = self.init[base].shape
            idx = sorted(parts)
            rows = [parts[i][0] for i in idx]
            if idx != list(range(len(idx))) or sum(rows) != full[0] \
                    or any(tuple(parts[i][1:]) != tuple(full[1:]) for i in idx):
                notes.append("the blocks of %s (%s) do not tile its shape %s; their random "
                             "init is not aligned with the original's"
                             % (base, ", ".join("%s.block%d%s" % (base, i, list(parts[i]))
                                                for i in idx), list(full)))
                continue
            start = 0
            for i, r in zip(idx, rows):
                self.slices["%s.block%d" % (base, i)] = (base, start, start + r)
                start += r

    def align_random(self, label, name, value, op, notes):
        import numpy as np
        origin, rows = name, None
        if name in self.slices:
            origin, r0, r1 = self.slices[name]
            rows = (r0, r1)
        ref = self.init.get(origin)
        ref_op = self.init_ops.get(origin)
        if ref is None or ref_op is None:
            notes.append("%s: %s draws random values for %s, which the original does not "
                         "initialize; they stay unaligned" % (label, op.type, name))
            return value
        if ref_op.type != op.type or any(
                not _close(ref_op.attr(a), op.attr(a)) for a in _DIST_ATTRS):
            notes.append("%s: %s initializes %s with %s, the original with %s %s"
                         % (label, op.type, name, _dist(op), ref_op.type, _dist(ref_op)))
            return value
        part = ref if rows is None else ref[rows[0]:rows[1]]
        if part.shape != value.shape:
            notes.append("%s: %s initializes %s with shape %s; the original's %s is %s"
                         % (label, op.type, name, list(value.shape), origin,
                            list(part.shape)))
            return value
        return np.array(part, copy=True)


def _close(a, b):
    if a is None or b is None:
        return a is b
    return abs(float(a) - float(b)) <= 1e-7 * max(1.0, abs(float(a)))


def _dist(op):
    return "(%s)" % ", ".join("%s=%s" % (a, op.attr(a)) for a in _DIST_ATTRS
                              if op.attr(a) is not None)


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
    if config.style == "fleet":
        for tid in sp.trainers:
            if tid not in sp.runtime:
                sp.notes.append("trainer_%d has no runtime.json: its sends go by epmap" % tid)
    return sp


def simulate(main: Program, startup: Optional[Program], config, split_programs: dict,
             runtime: Optional[dict] = None, *, steps: int = 5, batch: int = 8, seed: int = 0,
             rtol: float = 1e-5, float32: bool = False,
             expect_equal: Optional[bool] = None, progress=None) -> SimResult:
    """Run the original and the split for `steps` steps; compare every parameter.

    SimError in the split becomes result.error (exit 1); NoKernelError and UserError propagate
    (exit 2). `progress(done, total)` is called after each step of either run."""
    import numpy as np

    from .cluster import Cluster
    from .executor import Executor
    from .feeds import Feeder

    if config.mode == "geo":
        raise UserError("geo mode is not simulated (its trainers train locally and push deltas)")
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
    feeder = Feeder(main, batch, seed, fdt)
    orig = Executor("original startup", startup, float_dtype=fdt, seed=seed)
    try:
        orig.run_block(0)
        ref.init = {k: np.array(v, copy=True) for k, v in orig.scope.vars.items()
                    if not hasattr(v, "rows")}
        orig_main = Executor("original main", main, orig.scope, float_dtype=fdt, seed=seed)
        for s in range(steps):
            for name, (arr, lod) in feeder.feed(s).items():
                orig.scope.put(name, arr, lod)
            orig_main.run_block(0)
            progress(s + 1, 2 * steps)
    except SimError as e:
        raise UserError("the original program does not run: %s" % e) from None

    # (b) the split
    sp = split_programs_from(split_programs, runtime or {}, config)
    res.notes.extend(sp.notes)
    ref.build_slices([p["main"] for p in sp.pservers.values()]
                     + [p["startup"] for p in sp.pservers.values()]
                     + [p["main"] for p in sp.trainers.values()], res.notes)
    cluster = None
    try:
        cluster = Cluster(sp, config, float_dtype=fdt, seed=seed, reference=ref)
        cluster.startup()
        for s in range(steps):
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
    for p in main.parameters():
        res.params.append(_compare(p, orig.scope.get(p.name), cluster, ref, rtol))
    return res


def _split_value(name, cluster, ref):
    """The split's value of parameter `name`: each trainer's copy, else assembled from the
    pservers."""
    import numpy as np
    from .values import SparseTable, Unallocated
    vals = []
    for tr in cluster.trainers:
        v = tr.scope.get(name)
        if v is not None and not isinstance(v, Unallocated):
            vals.append((tr.label, v))
    if vals:
        return vals
    tables = [(ep, ps.value(name)) for ep, ps in cluster.pservers.items()
              if isinstance(ps.value(name), SparseTable)]
    if tables and name in ref.init:
        # auto-grown tables hold the ids they saw; the others keep their initial rows
        out = np.array(ref.init[name], dtype=np.float64, copy=True)
        for _, t in tables:
            for key, i in t.index.items():
                out[key] = t.value[i]
        return [("pservers' sparse tables", out)]
    for ep, ps in cluster.pservers.items():
        v = ps.value(name)
        if v is not None and not hasattr(v, "rows"):
            return [("pserver %s" % ep, v)]
    parts = sorted((r0, n) for n, (base, r0, _) in ref.slices.items() if base == name)
    if parts:
        got = []
        for _, n in parts:
            v = next((ps.value(n) for ps in cluster.pservers.values()
                      if ps.value(n) is not None), None)
            if v is None:
                return []
            got.append(v)
        return [("pservers", np.concatenate(got, axis=0))]
    return []


def _compare(var, a, cluster, ref, rtol) -> ParamDiff:
    import numpy as np
    shape = tuple(var.shape or ())
    if a is None:
        return ParamDiff(var.name, shape, float("nan"), float("nan"), False,
                         "the original holds no value")
    a = np.asarray(a, dtype=np.float64)
    vals = _split_value(var.name, cluster, ref)
    if not vals:
        return ParamDiff(var.name, shape, float("nan"), float("nan"), False,
                         "no trainer or pserver of the split holds it")
    worst_abs, worst_rel, note = 0.0, 0.0, ""
    scale = float(np.max(np.abs(a))) if a.size else 0.0
    for who, b in vals:
        b = np.asarray(b.to_dense() if hasattr(b, "rows") else b, dtype=np.float64)
        if b.shape != a.shape:
            return ParamDiff(var.name, shape, float("nan"), float("nan"), False,
                             "%s holds shape %s" % (who, list(b.shape)))
        both_nan = np.isnan(a) & np.isnan(b)
        d = np.where(both_nan, 0.0, np.abs(a - b))
        if np.isnan(d).any():
            return ParamDiff(var.name, shape, float("nan"), float("nan"), False,
                             "NaN in %s" % ("the original" if np.isnan(a).any() else who))
        m = float(d.max()) if d.size else 0.0
        rel = m / scale if scale > 0 else (0.0 if m == 0 else float("inf"))
        if m > worst_abs:
            worst_abs, worst_rel, note = m, rel, who
    ok = worst_rel <= rtol
    return ParamDiff(var.name, shape, worst_abs, worst_rel, ok, "" if ok else "worst: " + note)
