"""`simulate` for style ps: the split (pscluster.py) against the ps reference (psref.py), and the
ps reference against the original as written (explain/pswhy.py).

Both runs start from the original's initial values (random initializers of the split aligned
with the original's draws, reference.py), see the same feeds, and keep their sparse rows in
tables/' tables (float32, Paddle's layouts); new rows draw from the same keyed generators, so
a correctly wired split equals the reference exactly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ...core.errors import UserError
from ..explain.compare import Judge
from ..explain.pscompare import compare_split
from ..runs.runner import train_steps
from .ref import PsReference, RefRun
from .tables import ClientAborts, PserverRefuses, TableError, TableOptions
from ..model.values import SimError

if TYPE_CHECKING:
    from ..runs.runner import RunContext


@dataclass
class PsReport:
    """What `simulate` says about a ps split beyond the comparison with the ps reference."""
    original: list = field(default_factory=list)     # ParamDiff: ps reference vs original
    why: dict = field(default_factory=dict)          # param -> [Why]
    program_init: bool = False


def reference_descs(main, startup, config) -> tuple:
    """(plan, {endpoint: server_desc.txt text}) our split writes for the original."""
    from ...styles.registry import style_of
    prep = style_of(config).prepare(main, startup, config)
    descs = prep.shared["descs"]
    return prep.plan, {ep: descs.server_desc(ep) for ep in config.pservers}


def table_options(seed, init, program_init) -> TableOptions:
    from .ref import program_rows
    # an empty dense initializer: Paddle's pserver throws at start; here zeros and a note (the
    # Param it concerns is overwritten by trainer 0's push)
    return TableOptions(seed=seed, program_init=program_rows(init) if program_init else None,
                        lenient_initializers=True)


def train_reference(r: RefRun, texts, options, *, variant=frozenset(), progress=None):
    """The ps reference trained `r.steps` steps on the descriptor `texts` (ref.PsReference)."""
    ref = PsReference(r, texts, options, variant)
    n = r.config.trainers
    ref.startup()
    train_steps(ref, r.feeder, n, r.steps, per=r.batch // max(1, n), done=progress)
    return ref


def run_ps(ctx: "RunContext"):
    """Fill `ctx.res` (a SimResult): params = the split (`ctx.sp`: its SplitPrograms) against
    the ps reference; res.ps = the reference against the original. `ctx.options`: the
    descriptor `texts` the split wrote, `program_init`, `why` (core/stylehooks.py's SIMULATE)."""
    from .cluster import PsCluster
    res, main, config, sp, ref, feeder = ctx.res, ctx.main, ctx.config, ctx.sp, ctx.ref, \
        ctx.feeder
    steps, batch, seed, fdt, progress = res.steps, res.batch, ctx.seed, ctx.fdt, ctx.progress
    unknown = sorted(set(ctx.options) - {"texts", "program_init", "why"})
    if unknown:
        raise TypeError("run_ps: unknown ps options %s" % ", ".join(unknown))
    texts = ctx.options.get("texts") or {}
    program_init = ctx.options.get("program_init", False)
    why = ctx.options.get("why", True)
    plan, ref_texts = reference_descs(main, ctx.startup, config)
    options = table_options(seed, ref.init, program_init)
    res.notes.extend(sp.notes)
    if config.mode == "geo":
        if program_init:
            raise UserError("--program-init: geo tables start from trainer 0's own rows "
                            "already (nothing to change)")
        from .georun import run_geo
        return run_geo(ctx, plan, texts=texts, ref_texts=ref_texts, options=options, why=why,
                       report=PsReport)
    refrun = RefRun(main, ref.init, plan, config, feeder, steps, batch, seed, fdt)
    try:
        psref = train_reference(refrun, ref_texts, options,
                                progress=lambda s: progress(steps + s, 3 * steps))
    except ClientAborts as e:       # Paddle's trainers abort too: the split cannot train
        res.error = "the ps reference, like Paddle's trainer, aborts: %s" % e
        return res
    except (SimError, TableError) as e:
        raise UserError("the ps reference (the original under its descriptors) does not run: "
                        "%s" % e) from None
    psref.release()
    cluster = None
    try:
        cluster = PsCluster(sp, texts, config, float_dtype=fdt, seed=seed, reference=ref,
                            options=options)
        cluster.keep_rows = True
        n = len(cluster.trainers)
        if n != config.trainers:
            raise SimError("the split has %d trainers, the config %d" % (n, config.trainers))
        cluster.startup()       # its trainers: trainer_0 .. n-1 (splitprograms.py)
        train_steps(cluster, feeder, n, steps, per=batch // max(1, n),
                    done=lambda s: progress(2 * steps + s, 3 * steps))
    except (SimError, PserverRefuses) as e:
        res.error = str(e)
        if cluster is not None:
            res.notes.extend(x for x in cluster.notes if x not in res.notes)
        return res
    except TableError as e:
        res.error = str(e)
        return res
    res.notes.extend(x for x in cluster.notes if x not in res.notes)
    for server in cluster.servers:
        for t in server.tables.values():
            res.notes.extend(x for x in getattr(t, "notes", ()) if x not in res.notes)
    f32 = np.dtype(fdt) == np.float32
    res.params = compare_split(main, plan, psref, cluster, ref.init, res.rtol, f32)
    from ..explain.pswhy import Ablation, explain
    res.ps = PsReport(program_init=program_init)
    ablate = Ablation(lambda variant, texts, init_rows: train_reference(
        refrun, texts or ref_texts, table_options(seed, ref.init, init_rows or program_init),
        variant=variant), ref_texts, config) if why else None
    res.ps.original, res.ps.why = explain(main, plan, psref, ctx.run.scope,
                                          Judge(ref.init, res.rtol, f32), ablate)
    return res
