"""Counter-based random numbers: one value per (key, row, column), whichever process draws it.

A numpy Generator's stream depends on how much was drawn before, so the original run (the
whole global batch, a whole table) and a trainer or pserver (its shard, its row block) would
draw different numbers for the same sample or row. Here a value is a hash of its key, its
global row and its column (SplitMix64's finalizer), so a trainer drawing rows 4..7 of a batch
gets exactly the original's rows 4..7, and a pserver initialising rows 500..999 of a table gets
the original's rows 500..999.
"""
from __future__ import annotations

import zlib

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_COL = np.uint64(0xD1B54A32D192ED03)


def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def key_of(*parts) -> int:
    """A 64-bit key from ints and strings."""
    z = np.uint64(0x243F6A8885A308D3)
    with np.errstate(over="ignore"):
        for p in parts:
            v = zlib.crc32(p.encode()) if isinstance(p, str) else int(p) & 0xFFFFFFFFFFFFFFFF
            z = _mix(np.asarray(z ^ np.uint64(v), dtype=np.uint64) + _GOLDEN)
    return int(z)


def uniform(key: int, rows, width: int):
    """[len(rows), width] uniforms in [0, 1): entry (i, j) depends only on key, rows[i], j."""
    r = np.asarray(rows, dtype=np.int64).reshape(-1).astype(np.uint64)[:, None]
    j = np.arange(width, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        z = _mix(np.uint64(key) + (r + np.uint64(1)) * _GOLDEN)
        z = _mix(z ^ ((j + np.uint64(1)) * _COL))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def normal(key: int, rows, width: int, mean=0.0, std=1.0, truncated=False):
    """Gaussian values (Box-Muller of two keyed uniforms); `truncated`: redrawn (with the next
    key) where they fall beyond two standard deviations, as Paddle's truncated_gaussian_random
    keeps only those."""
    def draw(k):
        u1 = uniform(key_of(k, 1), rows, width)
        u2 = uniform(key_of(k, 2), rows, width)
        return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
    z = draw(key)
    if truncated:
        attempt = 0
        bad = np.abs(z) > 2.0
        while bad.any():
            attempt += 1
            z = np.where(bad, draw(key_of(key, "retry", attempt)), z)
            bad = np.abs(z) > 2.0
    return mean + std * z


def init_rows(op, key: int, rows, width: int):
    """The initial values a random (or constant) initializer op gives rows `rows` of a table
    ([len(rows), width]), from the op's attrs."""
    t = op.type
    if t == "fill_constant":
        v = op.attr("value", 0.0)
        if op.attr("str_value", ""):
            try:
                v = float(op.attr("str_value"))
            except ValueError:
                pass
        return np.full((len(rows), width), float(v))
    if t == "uniform_random":
        lo, hi = op.attr("min", -1.0), op.attr("max", 1.0)
        return lo + (hi - lo) * uniform(key, rows, width)
    return normal(key, rows, width, op.attr("mean", 0.0), op.attr("std", 1.0),
                  truncated=(t == "truncated_gaussian_random"))


def lazy_table(op, seed: int, height: int, row_shape, dtype):
    """A values.LazyTable whose rows initializer `op` gives (keyed by the run's seed, the op's
    seed and its output's name)."""
    from .values import LazyTable
    key = key_of(seed, int(op.attr("seed", 0) or 0), op.output_names()[0])
    width = int(np.prod(row_shape)) if len(row_shape) else 1
    return LazyTable(height, row_shape, dtype, lambda rows: init_rows(op, key, rows, width))
