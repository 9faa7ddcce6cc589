"""The split against the ps reference (ps/run.py): every parameter, sparse tables row by row
(every stored float: weights, show / click, rule state), dense params and trainer state on each
trainer."""
from __future__ import annotations

import numpy as np

from .compare import (ParamDiff, abs_diff, movement, movement_chunked, noise, relative,
                      row_chunks, rows_per_chunk)
from ..model.values import LazyTable, Unallocated, dense


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
    d = abs_diff(a, b)
    if np.isnan(d).any():
        return ParamDiff(name, shape, float("nan"), float("nan"), False, "NaN")
    m = float(d.max()) if d.size else 0.0
    scale = max(float(np.abs(a).max()) if a.size else 0.0, 1e-6)
    rel, ok = relative(m, scale, moved, rtol, f32)
    return ParamDiff(name, shape, m, rel, ok, "" if ok else ("worst: " + who if who else ""))


def chunked(*values) -> bool:
    """Whether values are compared in chunks: a big table of which one is a LazyTable (whole
    copies of it, of the other and of their difference would each be its size)."""
    return any(isinstance(v, LazyTable) for v in values) and all(
        isinstance(v, (LazyTable, np.ndarray)) and len(v.shape) >= 1 for v in values) and \
        len({tuple(v.shape) for v in values}) == 1


def diff_chunked(name, shape, a, b, moved, rtol, f32, who="") -> ParamDiff:
    """diff_of(a, b) read in chunks of rows: the same figures, bit for bit (every one a max
    of elementwise values)."""
    m, top, per = 0.0, 0.0, rows_per_chunk(a.shape)
    for ca, cb in zip(row_chunks(a, per), row_chunks(b, per)):
        d = abs_diff(ca, cb)
        if np.isnan(d).any():
            return ParamDiff(name, shape, float("nan"), float("nan"), False, "NaN")
        if d.size:
            m = max(m, float(d.max()))
            big = float(np.abs(ca).max())       # NaN where both hold one there, as whole
            top = big if np.isnan(big) or np.isnan(top) else max(top, big)
    rel, ok = relative(m, max(top, 1e-6), moved, rtol, f32)
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
    from ...ir.optimizers import trainable_params
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
    return v if isinstance(v, LazyTable) else dense(v)


def _dense_diff(name, shape, psref, cluster, init, rtol, f32) -> ParamDiff:
    worst = None
    for rt, tr in zip(psref.trainers, cluster.trainers):
        a, b = _value(rt.scope, name), _value(tr.scope, name)
        if a is None:
            continue
        if b is None:
            return ParamDiff(name, shape, float("nan"), float("nan"), False,
                             "%s holds no value" % tr.label)
        if chunked(a, b):
            start = init.get(name)
            moved = (movement_chunked(start, a) if chunked(start, a)
                     else movement(start, _whole(a))) if name in init else None
            d = diff_chunked(name, shape, a, b, moved, rtol, f32, tr.label)
        else:
            a, b = _whole(a), _whole(b)
            moved = movement(init.get(name), a) if name in init else None
            d = diff_of(name, shape, a, b, moved, rtol, f32, tr.label)
        d.changed = None if moved is None else moved > noise(1.0, f32)
        if worst is None or (worst.ok and (not d.ok or d.max_abs > worst.max_abs)):
            worst = d
    return worst or ParamDiff(name, shape, float("nan"), float("nan"), False,
                              "no trainer of the reference holds it")


def _whole(v):
    return v.to_dense() if isinstance(v, LazyTable) else v
