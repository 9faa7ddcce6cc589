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


def _mix_into(z):
    """_mix of a uint64 array, in place (no temporaries of its size but one)."""
    t = z >> np.uint64(30)
    z ^= t
    z *= np.uint64(0xBF58476D1CE4E5B9)
    np.right_shift(z, np.uint64(27), out=t)
    z ^= t
    z *= np.uint64(0x94D049BB133111EB)
    np.right_shift(z, np.uint64(31), out=t)
    z ^= t
    return z


def _unit(z):
    """Uniforms in [0, 1) from mixed words: their top 53 bits."""
    z >>= np.uint64(11)
    out = z.astype(np.float64)
    out *= 1.0 / (1 << 53)
    return out


def uniform(key: int, rows, width: int):
    """[len(rows), width] uniforms in [0, 1): entry (i, j) depends only on key, rows[i], j."""
    return _uniform_at(key, np.asarray(rows, dtype=np.int64).reshape(-1)[:, None],
                       np.arange(width)[None, :])


def _uniform_at(key: int, rows, cols):
    """The uniform of (key, row, column) at each (rows, cols) pair, broadcast."""
    r = np.asarray(rows, dtype=np.int64).astype(np.uint64)
    j = np.asarray(cols, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        z = _mix(np.uint64(key) + (r + np.uint64(1)) * _GOLDEN)
        return _unit(_mix_into(z ^ ((j + np.uint64(1)) * _COL)))


def _box_muller(u1, u2):
    np.negative(u1, out=u1)
    np.log1p(u1, out=u1)
    u1 *= -2.0
    np.sqrt(u1, out=u1)
    u2 *= 2.0 * np.pi
    np.cos(u2, out=u2)
    u1 *= u2
    return u1


def normal(key: int, rows, width: int, mean=0.0, std=1.0, truncated=False):
    """Gaussian values (Box-Muller of two keyed uniforms); `truncated`: redrawn (with the next
    key) where they fall beyond two standard deviations, as Paddle's truncated_gaussian_random
    keeps only those (only those entries drawn again: an entry depends on its key, row and
    column alone)."""
    z = _box_muller(uniform(key_of(key, 1), rows, width), uniform(key_of(key, 2), rows, width))
    if truncated:
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        attempt = 0
        bad = np.flatnonzero(np.abs(z) > 2.0)
        while bad.size:
            attempt += 1
            k = key_of(key, "retry", attempt)
            r, c = rows[bad // max(width, 1)], bad % max(width, 1)
            again = _box_muller(_uniform_at(key_of(k, 1), r, c), _uniform_at(key_of(k, 2), r, c))
            z.flat[bad] = again
            bad = bad[np.abs(again) > 2.0]
    z *= std
    z += mean
    return z


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
