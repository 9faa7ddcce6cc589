"""Comparing the original run's parameters with the split's, and saying which comparisons
prove nothing (a parameter the original run did not move).

A lazily kept table (values.LazyTable) is compared on the rows either side touched: the rows
nobody touched hold the initial values both sides derive from the same keyed draw.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ...ir.optimizers import trainable_params
from ..model.values import LazyTable, SparseTable, Unallocated, dense

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
    still_blocks: tuple = ()         # "rows a:b" of a pserver block of it the run did not move


@dataclass(frozen=True)
class Judge:
    """What a comparison judges a pair of values by: the initial values (`init`, {name:
    value}) a parameter's movement is measured from, the relative tolerance, and whether the
    runs compute in float32 (`f32`: its rounding allowed)."""
    init: dict
    rtol: float
    f32: bool = False


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
                    else _block_array(v)[rows[m] - r0]
        return out

    def to_dense(self):
        return np.concatenate([_block_array(v) for _, v in self.parts], axis=0)


def _block_array(v):
    """A block's values as an array; an auto-grown table block (a table served as row blocks)
    is its original rows with the rows it holds in their place."""
    if isinstance(v, SparseTable) and v.origin is not None:
        out = np.array(dense(v.origin), copy=True)
        for key, i in v.index.items():
            if 0 <= key < out.shape[0]:
                out[key] = v.value[i]
        return out
    return np.asarray(dense(v))


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


def _rows_pair(a, b, rows):
    """Float64 arrays of rows r0:r1 of a and b (of a lazy table: the touched ones)."""
    r0, r1 = rows
    if isinstance(a, (LazyTable, Blocks)) or isinstance(b, (LazyTable, Blocks)):
        ta, tb = _touched(a), _touched(b)
        if ta is not None and tb is not None:
            idx = np.unique(np.concatenate([ta, tb])).astype(np.int64)
            idx = idx[(idx >= r0) & (idx < r1)]
            return (np.asarray(a.get(idx), dtype=np.float64),
                    np.asarray(b.get(idx), dtype=np.float64))
    fa = a.to_dense() if isinstance(a, Blocks) else dense(a)
    fb = b.to_dense() if isinstance(b, Blocks) else dense(b)
    return (np.asarray(fa, dtype=np.float64)[r0:r1], np.asarray(fb, dtype=np.float64)[r0:r1])


def compare_params(main, run, cluster, ref, rtol) -> list:
    """A ParamDiff per parameter of `main`: the original's final values (`run`, original.py:
    what the pservers and each trainer should hold) against the split's. Each trainer that
    holds a parameter is compared with what that trainer holds in the reference (sync: the
    pservers' value; state no optimizer updates, which each trainer keeps from its own shard,
    as the trainers' mean); the pservers' value where no trainer holds it, and in async,
    half_async and geo, where trainers and pservers hold different values, always.

    The difference is measured against how far the original run moved the parameter from its
    initial value: a split that never updates it differs by all of that (relative difference
    1), float64 rounding by far less than `rtol`. A parameter the run did not move beyond
    rounding is `changed = False`: comparing it proves nothing."""
    train = trainable_params(main)
    f32 = np.dtype(getattr(cluster, "float_dtype", np.float64)) == np.float32
    free = run.gradient_free()
    out = []
    for var in main.parameters():
        final = _final(run, var.name)
        moved = _moved(ref, var.name, final)
        pairs = _pairs(var.name, run, cluster, ref, var.name in train)
        d = compare_pairs(var, pairs, rtol, moved, f32)
        d.trainable = var.name in train
        if moved is not None:
            d.changed = moved > noise(scale_of(final), f32)
        if var.name in free:
            # its gradient is rounding noise: what moved it (an L1 decay's sign of that
            # noise) is decided by rounding, which the split's sums may round otherwise
            d.changed, d.ok = False, True
            d.note = "its gradient is 0 up to rounding: a bias a batch_norm follows"
        if d.trainable and d.changed:
            d.still_blocks = tuple(
                "rows %d:%d" % (r0, r1) for r0, r1 in _blocks_of(var.name, ref)
                if (_moved(ref, var.name, final, (r0, r1)) or 0.0)
                <= noise(scale_of(final), f32))
        out.append(d)
    return out


def _final(run, name):
    """The original's final value of parameter `name` (the pservers', else trainer 0's)."""
    final = run.server(name)
    return run.trainer(name, 0) if final is None else final


def _moved(ref, name, final, rows=None):
    """How far the original moved `name` (its rows r0:r1): measured before the initial values
    were released (measure_movements), else now."""
    key = name if rows is None else (name,) + tuple(rows)
    if key in ref.moved:
        return ref.moved[key]
    return movement(ref.init.get(name), final, rows)


def measure_movements(main, run, ref) -> None:
    """ref.moved: how far the original run moved each parameter and each of its pserver
    blocks, measured while the initial values are still held (Reference.release_init)."""
    for var in main.parameters():
        final = _final(run, var.name)
        ref.moved[var.name] = movement(ref.init.get(var.name), final)
        for r0, r1 in _blocks_of(var.name, ref):
            ref.moved[(var.name, r0, r1)] = movement(ref.init.get(var.name), final, (r0, r1))


def _blocks_of(name, ref) -> list:
    """The row ranges of the pserver blocks a parameter is cut into (reference.py's slices),
    but a block of no rows (a table with fewer rows than pservers): nothing there to move."""
    return sorted((r0, r1) for base, r0, r1 in ref.slices.values() if base == name and r1 > r0)


def _pairs(name, run, cluster, ref, trainable) -> list:
    """[(who, reference value, split value)] to compare for parameter `name`."""
    server = run.server(name)
    held = []
    for tr in cluster.trainers:
        v = tr.scope.get(name)
        if v is not None and not isinstance(v, Unallocated):
            held.append((tr, v))
    out = []
    if held and run.local_mean and not trainable and len(held) > 1:
        mean = sum(np.asarray(dense(v), dtype=np.float64) for _, v in held) / len(held)
        out.append(("the trainers' mean", server, mean))
    else:
        for tr, v in held:
            want = run.trainer(name, tr.tid)
            out.append((tr.label, server if want is None else want, v))
    if server is not None and (not held or not run.local_mean):
        found = _server_value(name, cluster, ref)
        if found is not None:
            out.append((found[0], server, found[1]))
        elif not held:
            out.append(("no trainer or pserver of the split", server, None))
    return out


def _server_value(name, cluster, ref):
    """(who, value) of parameter `name` as the pservers hold it (whole, a sparse table, or
    assembled from row blocks), or None."""
    tables = [(ep, ps.value(name)) for ep, ps in cluster.pservers.items()
              if isinstance(ps.value(name), SparseTable)]
    if tables and name in ref.init:
        # auto-grown tables hold the ids they saw; the others keep their initial rows
        out = np.array(dense(ref.init[name]), dtype=np.float64, copy=True)
        for _, t in tables:
            for key, i in t.index.items():
                out[key] = t.value[i]
        return ("pservers' sparse tables", out)
    for ep, ps in cluster.pservers.items():
        v = ps.value(name)
        if v is not None and not hasattr(v, "rows") and not isinstance(v, Unallocated):
            return ("pserver %s" % ep, v)
    parts = sorted((r0, n) for n, (base, r0, _) in ref.slices.items() if base == name)
    if parts:
        got = []
        for r0, n in parts:
            v = next((ps.value(n) for ps in cluster.pservers.values()
                      if ps.value(n) is not None), None)
            if v is None:
                return None
            got.append((r0, v))
        full = ref.init.get(name)
        height = full.shape[0] if full is not None else sum(v.shape[0] for _, v in got)
        return ("pservers", Blocks(got, height, got[0][1].shape[1:]))
    return None


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


def relative(m: float, scale: float, moved, rtol: float, f32: bool = False):
    """(max rel, ok) of a largest difference `m` on a parameter of largest entry `scale` that
    the original moved by `moved` (None: unknown, then taken relative to `scale`): max rel is
    m / moved, the movement taken as at least the rounding noise; a difference within that
    noise is ok whatever its max rel (a parameter that barely moved)."""
    floor = noise(scale, f32)
    rel = m / (scale if moved is None else max(moved, floor))
    return rel, rel <= rtol or m <= floor


def scale_of(v) -> float:
    if v is None:
        return SCALE_FLOOR
    try:
        x = np.asarray(dense(v), dtype=np.float64) if not isinstance(v, (LazyTable, Blocks)) \
            else _pair(v, v)[0]
    except Exception:   # noqa: BLE001 - a value we cannot read as numbers: no scale
        return SCALE_FLOOR
    return max(float(np.nanmax(np.abs(x))) if x.size else 0.0, SCALE_FLOOR)


def movement(a, b, rows=None) -> Optional[float]:
    """The largest change of any entry from `a` (initial) to `b` (final) (of rows r0:r1 only,
    given `rows`), or None when the two cannot be compared (no initial value, another
    shape)."""
    if a is None or b is None:
        return None
    if tuple(np.shape(a) if not hasattr(a, "shape") else a.shape) != \
            tuple(np.shape(b) if not hasattr(b, "shape") else b.shape):
        return None
    if rows is None and _by_chunks(a, b):
        return movement_chunked(a, b)
    if rows is not None:
        a, b = _rows_pair(a, b, rows)
    else:
        a, b = _pair(a, b)
    if not a.size:
        return 0.0
    d = abs_diff(a, b)
    if np.isnan(d).any():
        return float("inf")
    return float(np.max(d))


CHUNK = 1 << 20         # values a chunked comparison reads at once (8 MB in float64)


def _by_chunks(a, b) -> bool:
    """Whether movement(a, b) reads them in chunks of rows: an array against a LazyTable of
    its shape (whole, each would be a copy of the table's size, and so would |a - b|)."""
    return sum(isinstance(v, LazyTable) for v in (a, b)) == 1 and all(
        isinstance(v, (LazyTable, np.ndarray)) and len(v.shape) >= 1 for v in (a, b))


def row_chunks(v, rows: int):
    """Float64 blocks of `rows` rows of `v` in order, a LazyTable's read without growing it
    (its untouched rows from its initial values, the others as it holds them)."""
    height = v.shape[0]
    touched = v.touched() if isinstance(v, LazyTable) else None
    for lo in range(0, height, rows):
        hi = min(height, lo + rows)
        if touched is None:
            yield np.asarray(v[lo:hi], dtype=np.float64)
            continue
        out = np.asarray(v.initial(np.arange(lo, hi)), dtype=np.float64)
        mine = touched[(touched >= lo) & (touched < hi)]
        if len(mine):
            out[mine - lo] = v.data[[v.index[int(r)] for r in mine]]
        yield out


def rows_per_chunk(shape) -> int:
    return max(1, CHUNK // max(1, int(np.prod(shape[1:]))))


def movement_chunked(a, b) -> float:
    """The movement of whole values (every row, LazyTables too) from `a` to `b` of one shape,
    read in chunks of rows: what movement gives of their whole arrays, bit for bit."""
    m, per = 0.0, rows_per_chunk(b.shape)
    for ca, cb in zip(row_chunks(a, per), row_chunks(b, per)):
        d = abs_diff(ca, cb)
        if np.isnan(d).any():
            return float("inf")
        if d.size:
            m = max(m, float(np.max(d)))
    return m


def abs_max(x) -> float:
    """max |x| (NaN if x holds one) without a temporary of x's size."""
    return float(max(abs(np.max(x)), abs(np.min(x))))


def abs_diff(a, b):
    """|a - b|, 0 where both are NaN (NaN where only one is), in one array of a's size: a
    table of a million rows compared makes no more temporaries than that."""
    d = np.subtract(a, b)
    np.abs(d, out=d)
    if d.size and np.isnan(d).any():
        d[np.isnan(a) & np.isnan(b)] = 0.0
    return d


def compare_pairs(var, pairs, rtol, moved=None, f32=False) -> ParamDiff:
    """The worst of `pairs` ([(who, reference value, split value)]). `moved`: how far the
    original moved the parameter (None: unknown; the difference is then taken relative to the
    parameter's largest entry)."""
    shape = tuple(var.shape or ())

    def bad(note):
        return ParamDiff(var.name, shape, float("nan"), float("nan"), False, note)

    if not pairs:
        return bad("no trainer or pserver of the split holds it")
    worst_abs, worst_rel, note, ok = 0.0, 0.0, "", True
    for who, a, b in pairs:
        if a is None:
            return bad("the original holds no value")
        if b is None:
            return bad("%s holds it" % who)
        a_shape = tuple(a.shape) if hasattr(a, "shape") else tuple(np.shape(a))
        b_shape = tuple(b.shape) if hasattr(b, "shape") else tuple(np.shape(b))
        if b_shape != a_shape:
            return bad("%s holds shape %s" % (who, list(b_shape)))
        x, y = _pair(a, b)
        scale = max(abs_max(x) if x.size else 0.0, SCALE_FLOOR)
        d = abs_diff(x, y)
        if np.isnan(d).any():
            return bad("NaN in %s" % ("the original" if np.isnan(x).any() else who))
        m = float(d.max()) if d.size else 0.0
        rel, fine = relative(m, scale, moved, rtol, f32)
        if not fine and (ok or rel > worst_rel):
            note = who
        ok = ok and fine
        worst_abs, worst_rel = max(m, worst_abs), max(rel, worst_rel)
    return ParamDiff(var.name, shape, worst_abs, worst_rel, ok, "" if ok else "worst: " + note)
