"""Comparing the original run's parameters with the split's, and saying which comparisons
prove nothing (a parameter the original run did not move).

A lazily kept table (values.LazyTable) is compared on the rows either side touched: the rows
nobody touched hold the initial values both sides derive from the same keyed draw.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..ir.optimizers import trainable_params
from .values import LazyTable, SparseTable, Unallocated, dense

# Differences are relative to the parameter's largest entry, but never to less than this: a
# parameter that stays near 0 (a conv bias before batch_norm, whose gradient is rounding noise)
# would otherwise turn that noise into a large relative difference.
SCALE_FLOOR = 1e-6


@dataclass
class ParamDiff:
    name: str
    shape: tuple
    max_abs: float
    max_rel: float
    ok: bool
    note: str = ""
    trainable: bool = True           # an optimizer op of the original updates it
    changed: Optional[bool] = None   # did the original run move it (beyond rounding)?


class Blocks:
    """A parameter assembled from row blocks [(first row, value)] (pservers' pieces)."""

    def __init__(self, parts, height, row_shape):
        self.parts = sorted(parts, key=lambda p: p[0])
        self.shape = (height,) + tuple(row_shape)

    def touched(self):
        out = []
        for r0, v in self.parts:
            if not isinstance(v, LazyTable):
                return None
            out.append(v.touched() + r0)
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def get(self, rows):
        out = np.zeros((len(rows),) + self.shape[1:])
        starts = np.array([r0 for r0, _ in self.parts])
        which = np.searchsorted(starts, rows, side="right") - 1
        for k, (r0, v) in enumerate(self.parts):
            m = which == k
            if m.any():
                out[m] = v.get(rows[m] - r0) if isinstance(v, LazyTable) \
                    else np.asarray(dense(v))[rows[m] - r0]
        return out

    def to_dense(self):
        return np.concatenate([np.asarray(dense(v)) for _, v in self.parts], axis=0)


def _touched(v):
    """The rows of `v` that may differ from the initial values; None: all of them."""
    return v.touched() if isinstance(v, (LazyTable, Blocks)) else None


def _pair(a, b):
    """Float64 arrays of the rows of a and b worth comparing."""
    if isinstance(a, (LazyTable, Blocks)) or isinstance(b, (LazyTable, Blocks)):
        ta, tb = _touched(a), _touched(b)
        if ta is not None and tb is not None and tuple(a.shape) == tuple(b.shape):
            rows = np.unique(np.concatenate([ta, tb])).astype(np.int64)
            return (np.asarray(a.get(rows), dtype=np.float64),
                    np.asarray(b.get(rows), dtype=np.float64))
    fa = a.to_dense() if isinstance(a, Blocks) else dense(a)
    fb = b.to_dense() if isinstance(b, Blocks) else dense(b)
    return np.asarray(fa, dtype=np.float64), np.asarray(fb, dtype=np.float64)


def compare_params(main, scope, cluster, ref, rtol) -> list:
    """A ParamDiff per parameter of `main`: the original's final value (in `scope`) against
    the split's. A trainable parameter is compared on each trainer that holds it (else as the
    pservers hold it); one no optimizer updates (batch_norm's running statistics), which each
    trainer keeps for itself from its own shard, against the trainers' mean.

    The difference is measured against how far the original run moved the parameter from its
    initial value: a split that never updates it differs by all of that (relative difference
    1), float64 rounding by far less than `rtol`. A parameter the run did not move beyond
    rounding is `changed = False`: comparing it proves nothing."""
    train = trainable_params(main)
    f32 = np.dtype(getattr(cluster, "float_dtype", np.float64)) == np.float32
    out = []
    for var in main.parameters():
        final = scope.get(var.name)
        moved = movement(ref.init.get(var.name), final)
        d = _compare(var, final, cluster, ref, rtol, var.name in train, moved, f32)
        d.trainable = var.name in train
        if moved is not None:
            d.changed = moved > noise(_scale(final), f32)
        out.append(d)
    return out


# What rounding alone can move a parameter by in a few steps, relative to its largest entry and
# never less than that in absolute terms. Not one ulp: an adaptive optimizer divides a gradient
# that is rounding noise (a bias batch_norm centres, one added before a softmax) by its own
# tiny running norm, and such a parameter drifts by ~1e-10 in float64 while the others move by
# the learning rate (~1e-3) every step.
NOISE = 1e-9
NOISE_FLOAT32 = 1e-5


def noise(scale: float, float32: bool = False) -> float:
    """What a parameter of largest entry `scale` moves by rounding alone."""
    return (NOISE_FLOAT32 if float32 else NOISE) * max(scale, 1.0)


def _scale(v) -> float:
    if v is None:
        return SCALE_FLOOR
    try:
        x = np.asarray(dense(v), dtype=np.float64) if not isinstance(v, (LazyTable, Blocks)) \
            else _pair(v, v)[0]
    except Exception:   # noqa: BLE001 - a value we cannot read as numbers: no scale
        return SCALE_FLOOR
    return max(float(np.nanmax(np.abs(x))) if x.size else 0.0, SCALE_FLOOR)


def movement(a, b) -> Optional[float]:
    """The largest change of any entry from `a` (initial) to `b` (final), or None when the
    two cannot be compared (no initial value, another shape)."""
    if a is None or b is None:
        return None
    if tuple(np.shape(a) if not hasattr(a, "shape") else a.shape) != \
            tuple(np.shape(b) if not hasattr(b, "shape") else b.shape):
        return None
    a, b = _pair(a, b)
    if not a.size:
        return 0.0
    d = np.abs(a - b)
    d = np.where(np.isnan(a) & np.isnan(b), 0.0, d)
    if np.isnan(d).any():
        return float("inf")
    return float(np.max(d))


def _split_value(name, cluster, ref, trainable):
    """The split's value of parameter `name`: [(who, value)] — each trainer's copy (or, for
    trainer-local state, their mean), else assembled from the pservers."""
    vals = []
    for tr in cluster.trainers:
        v = tr.scope.get(name)
        if v is not None and not isinstance(v, Unallocated):
            vals.append((tr.label, v))
    if vals:
        if not trainable and len(vals) > 1:
            return [("the trainers' mean", sum(np.asarray(dense(v), dtype=np.float64)
                                               for _, v in vals) / len(vals))]
        return vals
    tables = [(ep, ps.value(name)) for ep, ps in cluster.pservers.items()
              if isinstance(ps.value(name), SparseTable)]
    if tables and name in ref.init:
        # auto-grown tables hold the ids they saw; the others keep their initial rows
        out = np.array(dense(ref.init[name]), dtype=np.float64, copy=True)
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
        for r0, n in parts:
            v = next((ps.value(n) for ps in cluster.pservers.values()
                      if ps.value(n) is not None), None)
            if v is None:
                return []
            got.append((r0, v))
        full = ref.init.get(name)
        height = full.shape[0] if full is not None else sum(v.shape[0] for _, v in got)
        return [("pservers", Blocks(got, height, got[0][1].shape[1:]))]
    return []


def _compare(var, a, cluster, ref, rtol, trainable, moved=None, f32=False) -> ParamDiff:
    """`moved`: how far the original moved the parameter (None: unknown; the difference is
    then taken relative to the parameter's largest entry)."""
    shape = tuple(var.shape or ())
    if a is None:
        return ParamDiff(var.name, shape, float("nan"), float("nan"), False,
                         "the original holds no value")
    vals = _split_value(var.name, cluster, ref, trainable)
    if not vals:
        return ParamDiff(var.name, shape, float("nan"), float("nan"), False,
                         "no trainer or pserver of the split holds it")
    worst_abs, worst_rel, note = 0.0, 0.0, ""
    a_shape = tuple(a.shape) if hasattr(a, "shape") else tuple(np.shape(a))
    for who, b in vals:
        b_shape = tuple(b.shape) if hasattr(b, "shape") else tuple(np.shape(b))
        if b_shape != a_shape:
            return ParamDiff(var.name, shape, float("nan"), float("nan"), False,
                             "%s holds shape %s" % (who, list(b_shape)))
        x, y = _pair(a, b)
        scale = max(float(np.max(np.abs(x))) if x.size else 0.0, SCALE_FLOOR)
        both_nan = np.isnan(x) & np.isnan(y)
        d = np.where(both_nan, 0.0, np.abs(x - y))
        if np.isnan(d).any():
            return ParamDiff(var.name, shape, float("nan"), float("nan"), False,
                             "NaN in %s" % ("the original" if np.isnan(x).any() else who))
        m = float(d.max()) if d.size else 0.0
        base = scale if moved is None else max(moved, noise(scale, f32))
        rel = 0.0 if m <= noise(scale, f32) else m / base
        if m > worst_abs or rel > worst_rel:
            worst_abs, worst_rel, note = max(m, worst_abs), max(rel, worst_rel), who
    ok = worst_rel <= rtol
    return ParamDiff(var.name, shape, worst_abs, worst_rel, ok, "" if ok else "worst: " + note)
