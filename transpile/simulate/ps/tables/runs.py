"""Sorted, unique flat positions held as runs of consecutive ones (issue 47: bst's dense table
keeps 15M values that are not kept by rows; as an int64 array their positions cost 0.12 GB in
the tables, and again in each push's slice and each joined pull).

`Runs` is what a FlatRows (denserows.py) names its given values by: [starts[i], ends[i]) for
each run, sorted, disjoint and apart (touching runs are one), `offs[i]` the values before run
i. A param not kept by rows is one run, a kept row one run of its width (touching rows one).
Its answers are the ones an int64 array of the positions gives (np.searchsorted, membership,
scatter, gather), computed over the runs.
"""
from __future__ import annotations

import numpy as np

I64 = np.int64


class Runs:
    """Positions [starts[i], ends[i]) for each run i (see the module's docstring)."""

    __slots__ = ("starts", "ends", "offs")

    def __init__(self, starts, ends):
        self.starts = np.asarray(starts, dtype=I64)
        self.ends = np.asarray(ends, dtype=I64)
        self.offs = np.zeros(len(self.starts) + 1, dtype=I64)
        np.cumsum(self.ends - self.starts, out=self.offs[1:])

    # --- making -------------------------------------------------------------------------
    @staticmethod
    def of(positions) -> "Runs":
        """The runs of `positions` (sorted, unique)."""
        p = np.asarray(positions, dtype=I64).reshape(-1)
        if not len(p):
            return EMPTY
        if len(p) > 1 and not np.all(p[1:] > p[:-1]):
            raise ValueError("positions not sorted and unique")
        brk = np.flatnonzero(p[1:] != p[:-1] + 1) + 1
        return Runs(p[np.concatenate(([0], brk))], p[np.concatenate((brk - 1, [len(p) - 1]))] + 1)

    @staticmethod
    def span(lo: int, hi: int) -> "Runs":
        """Every position lo .. hi - 1."""
        return Runs([lo], [hi]) if hi > lo else EMPTY

    @staticmethod
    def rows(at: int, rows, width: int) -> "Runs":
        """The positions of rows `rows` (sorted, unique) of a [*, width] param laid out from
        `at`."""
        rows = np.asarray(rows, dtype=I64).reshape(-1)
        if not len(rows) or width <= 0:
            return EMPTY
        return _joined(at + rows * width, at + (rows + 1) * width)

    @staticmethod
    def concat(parts) -> "Runs":
        """The positions of `parts`, each after the one before (their runs in order)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return EMPTY
        starts = np.concatenate([p.starts for p in parts])
        ends = np.concatenate([p.ends for p in parts])
        if len(starts) > 1 and np.any(starts[1:] < ends[:-1]):
            raise ValueError("runs out of order or overlapping")
        return _joined(starts, ends)

    # --- reading ------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.offs[-1])

    def count(self) -> int:
        """How many runs."""
        return len(self.starts)

    def array(self) -> np.ndarray:
        """The positions as one int64 array (small sets: tests, a kept param's rows)."""
        out = np.empty(len(self), dtype=I64)
        for s, e, o in zip(self.starts.tolist(), self.ends.tolist(), self.offs.tolist()):
            out[o:o + e - s] = np.arange(s, e, dtype=I64)
        return out

    def rank(self, q):
        """np.searchsorted(positions, q) (side left): how many positions are below each of
        `q` (an int or an array)."""
        qa = np.asarray(q, dtype=I64)
        if not len(self.starts):
            return np.zeros(qa.shape, dtype=I64) if qa.ndim else 0
        j = np.searchsorted(self.starts, qa, side="right") - 1
        jj = np.maximum(j, 0)
        inside = np.minimum(qa, self.ends[jj]) - self.starts[jj]
        out = np.where(j >= 0, self.offs[jj] + inside, 0)
        return int(out) if qa.ndim == 0 else out

    def lookup(self, q):
        """(rank(q), whether each of `q` is a position) for an array `q`."""
        qa = np.asarray(q, dtype=I64)
        if not len(self.starts):
            return np.zeros(qa.shape, dtype=I64), np.zeros(qa.shape, dtype=bool)
        j = np.searchsorted(self.starts, qa, side="right") - 1
        jj = np.maximum(j, 0)
        hit = (j >= 0) & (qa < self.ends[jj])
        inside = np.minimum(qa, self.ends[jj]) - self.starts[jj]
        return np.where(j >= 0, self.offs[jj] + inside, 0), hit

    def clip(self, lo: int, hi: int) -> "Runs":
        """The positions in lo .. hi - 1."""
        a = int(np.searchsorted(self.ends, lo, side="right"))
        b = int(np.searchsorted(self.starts, hi, side="left"))
        if a >= b:
            return EMPTY
        starts, ends = self.starts[a:b].copy(), self.ends[a:b].copy()
        starts[0] = max(starts[0], lo)
        ends[-1] = min(ends[-1], hi)
        return Runs(starts, ends)

    def shift(self, d: int) -> "Runs":
        return Runs(self.starts + d, self.ends + d) if d else self

    def scatter(self, out, values) -> None:
        """out[positions] = values."""
        for s, e, o in zip(self.starts.tolist(), self.ends.tolist(), self.offs.tolist()):
            out[s:e] = values[o:o + e - s]

    def gather(self, arr) -> np.ndarray:
        """arr[positions], one array."""
        out = np.empty(len(self), dtype=np.asarray(arr).dtype)
        for s, e, o in zip(self.starts.tolist(), self.ends.tolist(), self.offs.tolist()):
            out[o:o + e - s] = arr[s:e]
        return out

    def row_ids(self, width: int) -> np.ndarray:
        """np.unique(positions // width): the rows of a [*, width] param laid out from 0 that
        any position falls in."""
        if not len(self.starts):
            return np.zeros(0, dtype=I64)
        first, last = self.starts // width, (self.ends - 1) // width
        return np.unique(_expand(first, last + 1))

    def union(self, other: "Runs") -> "Runs":
        if not len(other):
            return self
        if not len(self):
            return other
        starts = np.concatenate((self.starts, other.starts))
        ends = np.concatenate((self.ends, other.ends))
        order = np.argsort(starts, kind="stable")
        return _joined(starts[order], ends[order], overlap=True)

    def minus(self, other: "Runs") -> "Runs":
        """The positions of self not in `other`."""
        if not len(self) or not len(other):
            return self
        # the bounds of both as events; a position is kept where self covers it, other not
        bounds = np.unique(np.concatenate((self.starts, self.ends, other.starts, other.ends)))
        lo, hi = bounds[:-1], bounds[1:]
        _, mine = self.lookup(lo)
        _, theirs = other.lookup(lo)
        keep = mine & ~theirs
        return _joined(lo[keep], hi[keep]) if keep.any() else EMPTY


def _expand(lo, hi) -> np.ndarray:
    """lo[0] .. hi[0] - 1, lo[1] .. hi[1] - 1, ... as one array."""
    n = hi - lo
    out = np.ones(int(n.sum()), dtype=I64)
    if not len(out):
        return out
    at = np.concatenate(([0], np.cumsum(n)[:-1]))
    nz = n > 0
    out[0] = lo[nz][0]
    out[at[nz][1:]] = lo[nz][1:] - (hi[nz][:-1] - 1)
    return np.cumsum(out)


def _joined(starts, ends, overlap=False) -> Runs:
    """Runs from sorted (by start) runs, touching ones (overlapping ones with `overlap`)
    joined, empty ones dropped."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if len(starts) < 2:
        return Runs(starts, ends) if len(starts) else EMPTY
    reach = np.maximum.accumulate(ends) if overlap else ends
    new = np.concatenate(([True], starts[1:] > reach[:-1]))
    first = np.flatnonzero(new)
    last = np.concatenate((first[1:], [len(starts)])) - 1
    return Runs(starts[first], reach[last])


EMPTY = Runs(np.zeros(0, dtype=I64), np.zeros(0, dtype=I64))
