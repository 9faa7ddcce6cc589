"""The checks of a lazily read split (classic and fleet styles, where every pserver has a main
and a startup program about as large as the original's): each pserver's programs are read,
checked and let go in cluster order, so that one pserver's programs are held at a time.

What the checks do with one pserver's programs is done while they are held, and kept
(CheckContext.recording); the index (index.py) grows a pserver at a time and keeps the small
things the later checks read (parameter blocks, grad keys), the trainer checks read a summary
of each pserver main program (pssummary.py). Then the checks run in their order as ever,
replaying what was kept in its place: the findings and warnings, and their order, are those of
the checks on a split read whole."""
from __future__ import annotations

from ..plan.faults import FLEET_LARGE_SCALE_ADAM, FLEET_SYNC_STEP_COUNTER, KIND
from ..plan.faults import CLASSIC_DIST_TABLE_OPTIMIZER
from .context import CheckContext
from .faults import dist_table_of, dist_table_target, large_scale_adam_of, step_counter_of
from .index import IndexBuilder
from .inputs import pserver_reads
from .loading import Split, load_pserver, release_pserver
from .programs import structure_of
from .pserver import listen_of, optimize_of


def is_lazy(split: Split) -> bool:
    """Whether the split's pserver programs are read on demand (load_split(lazy=True))."""
    return any("paths" in p for p in split.pservers.values())


def streamed_context(main, startup, config, split: Split) -> CheckContext:
    """A CheckContext whose index is complete and whose per-pserver findings are recorded,
    every pserver program read once and let go."""
    builder = IndexBuilder(config, split)
    for tid in sorted(split.trainers):
        t = split.trainers[tid]
        for k in ("main", "startup"):
            if t[k] is not None:
                builder.add_part(t[k])
    ctx = CheckContext(main, startup, config, split, index=builder.index())
    for ep in config.pservers:
        p = split.pservers.get(ep)
        if p is None:
            continue
        load_pserver(split, p, config)
        parts = [p["main"]] + ([p["startup"]] if p["startup"] is not None else [])
        for part in parts:
            builder.add_part(part)
        builder.read_pserver(ep, p["main"])
        ctx.index = builder.index()
        _record(ctx, ep, p, parts)
        release_pserver(p)
    ctx.index = builder.index()
    return ctx


def _record(ctx: CheckContext, ep: str, p: dict, parts: list) -> None:
    """What the checks do with pserver `ep`'s programs, kept for their replay."""
    for part in parts:
        with ctx.recording("structure", part.name):
            structure_of(ctx, part)
    with ctx.recording("listen", ep):
        listen_of(ctx, ep, p)
    if ep in ctx.param_blocks:
        with ctx.recording("optimize", ep):
            optimize_of(ctx, ep, p)
    ctx.recorded[("reads", ep)] = pserver_reads(ctx, p)
    style = ctx.config.style
    if KIND[CLASSIC_DIST_TABLE_OPTIMIZER].style == style:
        target = ctx.memo("dist_table_target", lambda: dist_table_target(ctx))
        if target is not None:
            with ctx.recording("dist_table", ep):
                dist_table_of(ctx, p, *target)
    if KIND[FLEET_SYNC_STEP_COUNTER].style == style and ctx.config.sync_mode:
        with ctx.recording("step_counter", ep):
            step_counter_of(ctx, p)
    if KIND[FLEET_LARGE_SCALE_ADAM].style == style:
        with ctx.recording("large_scale_adam", ep):
            large_scale_adam_of(ctx, p)
    ctx.pserver_summary(ep)
