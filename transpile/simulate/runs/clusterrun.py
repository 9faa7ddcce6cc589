"""(b) in styles classic and fleet: the split's programs run on the in-process cluster
(cluster.py) under the schedule, in runner.py's step loop; every parameter compared
(compare.py)."""
from __future__ import annotations

from ..explain.compare import compare_params, measure_movements
from .result import SimResult
from .runner import RunContext, train_steps
from ..model.values import SimError


def run_cluster(ctx: RunContext) -> SimResult:
    """(b): the split's programs run under the schedule; `res` filled with the comparison."""
    from .cluster import Cluster
    res, main, ref, run = ctx.res, ctx.main, ctx.ref, ctx.run
    res.notes.extend(ctx.sp.notes)
    ref.build_slices([p["main"] for p in ctx.sp.pservers.values()]
                     + [p["startup"] for p in ctx.sp.pservers.values()]
                     + [p["main"] for p in ctx.sp.trainers.values()], res.notes)
    measure_movements(main, run, ref)
    cluster = None
    try:
        cluster = Cluster(ctx.sp, ctx.config, float_dtype=ctx.fdt, seed=ctx.seed, reference=ref,
                          schedule=ctx.schedule)
        n = len(cluster.trainers)
        cluster.startup()
        ref.release_init(keep=_whole_init_needed(cluster))
        train_steps(cluster, ctx.feeder, n, res.steps, per=res.batch // max(1, n),
                    done=lambda s: ctx.progress(res.steps + s, 2 * res.steps))
        cluster.check_blocks_run()
    except SimError as e:
        res.error = str(e)
        if cluster is not None:
            res.notes.extend(n for n in cluster.notes if n not in res.notes)
        return res
    res.notes.extend(n for n in cluster.notes if n not in res.notes)
    cluster.release({v.name for v in main.parameters()} | set(ref.slices))
    res.params = compare_params(main, run, cluster, ref, ctx.rtol)
    res.notes.extend(memory_notes(main, run, [run.executors(), cluster.executors()]))
    return res


def _whole_init_needed(cluster) -> set:
    """The parameters whose initial values the comparison still reads whole: those a pserver
    keeps as an auto-grown sparse table (compare._server_value fills the rows it never saw
    from them)."""
    from ..model.values import SparseTable
    out = set()
    for ps in cluster.pservers.values():
        for name, v in ps.scope.vars.items():
            if isinstance(v, SparseTable):
                out.add(cluster.reference.slices.get(name, (name,))[0])
    return out


def memory_notes(main, run, executors) -> list:
    """Which tables were kept lazily (and how many rows the run touched), and which an op
    needed whole."""
    from ..model.values import LazyTable
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
