"""`simulate` for style ps: the split (pscluster.py) against the ps reference (psref.py), and the
ps reference against the original as written (pswhy.py).

Both runs start from the original's initial values (random initializers of the split aligned
with the original's draws, reference.py), see the same feeds, and keep their sparse rows in
pstables' tables (float32, Paddle's layouts); new rows draw from the same keyed generators, so
a correctly wired split equals the reference exactly.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.errors import UserError
from .compare import ParamDiff, movement, noise
from .pstables import PserverRefuses, TableError, TableOptions
from .values import LazyTable, SimError, Unallocated, dense


@dataclass
class PsReport:
    """What `simulate` says about a ps split beyond the comparison with the ps reference."""
    original: list = field(default_factory=list)     # ParamDiff: ps reference vs original
    why: dict = field(default_factory=dict)          # param -> [Why]
    program_init: bool = False


def reference_descs(main, startup, config) -> tuple:
    """(plan, {endpoint: server_desc.txt text}) our split writes for the original."""
    from ..styles.registry import style_of
    prep = style_of(config).prepare(main, startup, config)
    descs = prep.shared["descs"]
    return prep.plan, {ep: descs.server_desc(ep) for ep in config.pservers}


def table_options(seed, init, program_init) -> TableOptions:
    from .psref import program_rows
    # an empty dense initializer: Paddle's pserver throws at start; here zeros and a note (the
    # Param it concerns is overwritten by trainer 0's push)
    return TableOptions(seed=seed, program_init=program_rows(init) if program_init else None,
                        lenient_initializers=True)


def train_reference(main, init, plan, config, texts, feeder, *, steps, batch, seed, fdt,
                    options, variant=frozenset(), progress=None):
    """The ps reference trained `steps` steps (psref.PsReference)."""
    from .psref import PsReference
    ref = PsReference(main, init, plan, config, texts, fdt=fdt, seed=seed, options=options,
                      variant=variant)
    n = config.trainers
    per = batch // max(1, n)
    ref.startup()
    for s in range(steps):
        glob = feeder.feed(s)
        ref.step([feeder.shard(glob, t, n) for t in range(n)], s, per)
        if progress:
            progress(s)
    return ref


def run_ps(res, main, startup, config, programs: dict, texts: dict, *, ref, orig_scope, feeder,
           steps, batch, seed, fdt, progress, program_init=False, why=True):
    """Fill `res` (a SimResult): params = the split against the ps reference; res.ps = the
    reference against the original."""
    from .pscluster import PsCluster
    from . import split_programs_from
    if config.mode == "geo":
        raise UserError("style ps: geo mode is not simulated yet")
    plan, ref_texts = reference_descs(main, startup, config)
    options = table_options(seed, ref.init, program_init)
    sp = split_programs_from(programs, {}, config)
    res.notes.extend(sp.notes)
    try:
        psref = train_reference(main, ref.init, plan, config, ref_texts, feeder, steps=steps,
                                batch=batch, seed=seed, fdt=fdt, options=options,
                                progress=lambda s: progress(steps + s + 1, 3 * steps))
    except (SimError, TableError) as e:
        raise UserError("the ps reference (the original under its descriptors) does not run: "
                        "%s" % e) from None
    cluster = None
    try:
        cluster = PsCluster(sp, texts, config, float_dtype=fdt, seed=seed, reference=ref,
                            options=options)
        n = len(cluster.trainers)
        if n != config.trainers:
            raise SimError("the split has %d trainers, the config %d" % (n, config.trainers))
        per = batch // max(1, n)
        cluster.startup()
        for s in range(steps):
            glob = feeder.feed(s)
            cluster.step([feeder.shard(glob, t.tid, n) for t in cluster.trainers], s, per)
            progress(2 * steps + s + 1, 3 * steps)
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
    from .pswhy import explain
    res.ps = PsReport(program_init=program_init)
    res.ps.original, res.ps.why = explain(
        main, plan, psref, orig_scope, ref.init, res.rtol, f32, why=why,
        rerun=lambda variant, texts, init_rows: train_reference(
            main, ref.init, plan, config, texts or ref_texts, feeder, steps=steps,
            batch=batch, seed=seed, fdt=fdt, variant=variant,
            options=table_options(seed, ref.init, init_rows or program_init)),
        texts=ref_texts, config=config)
    return res


# --- the split against the ps reference -----------------------------------------------------
def table_rows(servers, tid) -> dict:
    out = {}
    for server in servers:
        t = server.tables.get(tid)
        if t is None or not hasattr(t, "rows"):
            continue
        for k in t.keys():
            out[k] = t.row(k)
    return out


def diff_of(name, shape, a, b, moved, rtol, f32, who="") -> ParamDiff:
    """a (reference) against b, relative to how far the reference moved (`moved`)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return ParamDiff(name, shape, float("nan"), float("nan"), False,
                         "%s holds shape %s" % (who or "the split", list(b.shape)))
    d = np.where(np.isnan(a) & np.isnan(b), 0.0, np.abs(a - b))
    if np.isnan(d).any():
        return ParamDiff(name, shape, float("nan"), float("nan"), False, "NaN")
    m = float(d.max()) if d.size else 0.0
    scale = max(float(np.abs(a).max()) if a.size else 0.0, 1e-6)
    base = scale if moved is None else max(moved, noise(scale, f32))
    rel = 0.0 if m <= noise(scale, f32) else m / base
    ok = rel <= rtol
    return ParamDiff(name, shape, m, rel, ok, "" if ok else ("worst: " + who if who else ""))


def _sparse_diff(name, shape, tid, psref, cluster, rtol, f32) -> ParamDiff:
    mine = table_rows(psref.servers, tid)
    theirs = table_rows(cluster.servers, tid)
    if set(mine) != set(theirs):
        extra = sorted(set(theirs) - set(mine))[:5]
        lack = sorted(set(mine) - set(theirs))[:5]
        return ParamDiff(name, shape, float("nan"), float("nan"), False,
                         "the split's tables hold other rows (extra %s, missing %s)"
                         % (extra, lack))
    keys = sorted(mine)
    if not keys:
        return ParamDiff(name, shape, 0.0, 0.0, True, "no rows in either run")
    width = max(len(r) for r in list(mine.values()) + list(theirs.values()))
    a = np.zeros((len(keys), width))
    b = np.zeros((len(keys), width))
    for i, k in enumerate(keys):
        a[i, :len(mine[k])] = mine[k]
        b[i, :len(theirs[k])] = theirs[k]
        if len(mine[k]) != len(theirs[k]):
            return ParamDiff(name, shape, float("nan"), float("nan"), False,
                             "row %d is %s in the split" % (k, "short" if len(theirs[k]) <
                                                            len(mine[k]) else "extended"))
    moved = float(np.abs(a).max())
    d = diff_of(name, shape, a, b, moved, rtol, f32, "the pservers' rows")
    d.changed = moved > 0
    return d


def compare_split(main, plan, psref, cluster, init, rtol, f32) -> list:
    """A ParamDiff per parameter of the original: the split's value against the reference's
    (sparse tables: every stored row, statistics and rule state included; dense and trainer
    state: each trainer's copy)."""
    from ..ir.optimizers import trainable_params
    train = trainable_params(main)
    out = []
    for var in main.parameters():
        name, shape = var.name, tuple(var.shape or ())
        if name in plan.table_ids:
            d = _sparse_diff(name, shape, plan.table_ids[name], psref, cluster, rtol, f32)
        else:
            d = _dense_diff(name, shape, psref, cluster, init, rtol, f32)
        d.trainable = name in train
        out.append(d)
    return out


def _value(scope, name):
    v = scope.get(name)
    if v is None or isinstance(v, Unallocated):
        return None
    return v.to_dense() if isinstance(v, LazyTable) else dense(v)


def _dense_diff(name, shape, psref, cluster, init, rtol, f32) -> ParamDiff:
    worst = None
    for rt, tr in zip(psref.trainers, cluster.trainers):
        a, b = _value(rt.scope, name), _value(tr.scope, name)
        if a is None:
            continue
        if b is None:
            return ParamDiff(name, shape, float("nan"), float("nan"), False,
                             "%s holds no value" % tr.label)
        moved = movement(init.get(name), a) if name in init else None
        d = diff_of(name, shape, a, b, moved, rtol, f32, tr.label)
        d.changed = None if moved is None else moved > noise(1.0, f32)
        if worst is None or (worst.ok and (not d.ok or d.max_abs > worst.max_abs)):
            worst = d
    return worst or ParamDiff(name, shape, float("nan"), float("nan"), False,
                              "no trainer of the reference holds it")
