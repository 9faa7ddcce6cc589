"""A dense table's values where a big parameter's untouched rows are not spelled out (issue
47: PaddleRec's mind keeps a [367983, 64] embedding, looked up without is_sparse, in its dense
table; its pushes and pulls carried 23M floats each, its trainers held it whole).

`FlatRows` is a flat float32 vector given at some positions, every other value read from a
base (the values trainer 0 pushed at the start; zeros for a gradient). A `MemoryDenseTable`
started from one (`push_param`) keeps its values so (`RowValues`): the positions any push
named (as runs, runs.py: a param not kept by rows is one range, no array of positions), their
values in compact arrays, and the rest at the base (Param) or at their constant initializer
(the rule's state). Exact where a zero gradient on a value at its start leaves it so, which
`fixed_point` probes with the very scalars of each push (sgd, adam with zero moments);
where that fails the table is made whole (`RowValues.whole`) and runs as before.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from .runs import Runs

F32 = np.float32
# rules whose zero gradient can leave a value alone (sum's Param + 0 turns a -0.0 into 0.0:
# a sum table is kept by rows from a start with no -0.0, FlatRows.signed_zero)
ROW_RULES = ("sgd", "adam", "sum")
PROBE = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -3.0e-3, 1.0e-30, 7.0e3], dtype=F32)


class FlatRows:
    """`size` float32 values: `values` at `pos` (a Runs, or sorted unique positions),
    `base(positions)` elsewhere (None: zeros)."""

    def __init__(self, size: int, pos, values, base: Optional[Callable] = None,
                 signed_zero: bool = True):
        self.size = int(size)
        self.pos = pos if isinstance(pos, Runs) else Runs.of(pos)
        self.values = np.asarray(values, dtype=F32)
        self.base = base
        self.signed_zero = signed_zero      # whether the base may hold a -0.0

    def __len__(self):
        return self.size

    def base_at(self, positions) -> np.ndarray:
        positions = np.asarray(positions, dtype=np.int64)
        if self.base is None:
            return np.zeros(len(positions), dtype=F32)
        return np.asarray(self.base(positions), dtype=F32)

    def cut(self, lo: int, hi: int) -> "FlatRows":
        """Values lo .. hi - 1 as a FlatRows of their own (positions from 0)."""
        part = self.pos.clip(lo, hi)
        a = self.pos.rank(lo)
        b = a + len(part)
        if lo == 0:     # views: a cut at the start copies nothing
            return FlatRows(hi, part, self.values[:b], self.base, self.signed_zero)
        base = None if self.base is None else _shifted(self.base, lo)
        return FlatRows(hi - lo, part.shift(-lo), self.values[a:b], base, self.signed_zero)

    def read(self, positions) -> np.ndarray:
        """The values at `positions` (sorted)."""
        positions = np.asarray(positions, dtype=np.int64)
        out = self.base_at(positions)
        at, hit = self.pos.lookup(positions)
        out[hit] = self.values[at[hit]]
        return out

    def take(self, lo: int, hi: int) -> np.ndarray:
        """Values lo .. hi - 1 as one float32 array."""
        a, b = self.pos.rank(lo), self.pos.rank(hi)
        if b - a == hi - lo:        # every value given (a param not kept by rows)
            return np.array(self.values[a:b], dtype=F32)
        part = self.cut(lo, hi)
        out = part.base_at(np.arange(hi - lo))
        part.pos.scatter(out, part.values)
        return out

    @staticmethod
    def joined(parts) -> "FlatRows":
        """The parts one after the other (a pull over the pservers' slices)."""
        count = sum(len(p.pos) for p in parts)
        values = np.empty(count, dtype=F32)
        runs, bases, at, k = [], [], 0, 0
        for p in parts:
            n = len(p.pos)
            runs.append(p.pos.shift(at))
            values[k:k + n] = p.values
            bases.append((at, at + p.size, p.base))
            at += p.size
            k += n
        return FlatRows(at, Runs.concat(runs), values, _pieced(bases),
                        any(p.signed_zero for p in parts))


def _shifted(base, lo):
    return lambda positions: base(np.asarray(positions, dtype=np.int64) + lo)


def _pieced(bases):
    def base(positions):
        positions = np.asarray(positions, dtype=np.int64)
        out = np.zeros(len(positions), dtype=F32)
        for lo, hi, b in bases:
            m = (positions >= lo) & (positions < hi)
            if b is not None and m.any():
                out[m] = b(positions[m] - lo)
        return out
    return base


def constant_of(spec: str) -> Optional[float]:
    """The value of a `fill_constant&v` initializer (None: any other)."""
    kind, *args = spec.split("&")
    if kind != "fill_constant" or len(args) < 1:
        return None
    try:
        return float(F32(float(args[0])))
    except ValueError:
        return None


def fixed_point(rule_cls, values: dict, vector: list, consts: dict, buckets: int,
                signed_zero: bool = True) -> bool:
    """Whether a push of zeros through `buckets` calls of the rule (on a copy of the scalars)
    leaves a value at any base (`signed_zero`: -0.0 among them) and its state at their
    constants alone, bit for bit."""
    start = PROBE if signed_zero else PROBE[~(np.signbit(PROBE) & (PROBE == 0))]
    probe = {n: np.array(v, copy=True) for n, v in values.items() if n not in vector}
    for n in vector:
        probe[n] = start.copy() if n == "Param" else np.full(len(start), consts[n], dtype=F32)
    rule = rule_cls(probe)
    zeros = np.zeros(len(start), dtype=F32)
    with np.errstate(all="ignore"):
        for _ in range(buckets):
            rule.update(zeros, 0, len(start))
    return all(np.array_equal(probe[n].view(np.uint32),
                              (start if n == "Param" else
                               np.full(len(start), consts[n], dtype=F32)).view(np.uint32))
               for n in vector)


class RowValues:
    """A table slice's vector values kept at `pos` (a Runs; compact arrays, one per vector
    slot, the sync reservoir among them); Param elsewhere at `base`, the other slots at
    `consts`. The reservoir is made as it is first written (a table that is not sync never
    writes it)."""

    def __init__(self, dim: int, vector: list, consts: dict, start: FlatRows, initial: dict):
        self.dim, self.vector, self.consts = dim, list(vector), dict(consts)
        self.base, self.signed_zero = start.base, start.signed_zero
        self.pos = start.pos
        self.cv = {n: (np.array(start.values, dtype=F32) if n == "Param"
                       else self.pos.gather(np.asarray(initial[n], dtype=F32)))
                   for n in self.vector}
        self._reservoir = None      # None: zeros at every kept position

    @property
    def reservoir(self) -> np.ndarray:
        if self._reservoir is None:
            return np.zeros(len(self.pos), dtype=F32)
        return self._reservoir

    @reservoir.setter
    def reservoir(self, value) -> None:
        self._reservoir = value

    def activate(self, positions) -> None:
        """Keep `positions` (a Runs, or sorted unique positions) too (the new ones inserted in
        order: no sort of the kept ones, which may be millions)."""
        runs = positions if isinstance(positions, Runs) else Runs.of(positions)
        fresh = runs.minus(self.pos)
        if not len(fresh):
            return
        new = fresh.array()
        ins = self.pos.rank(new)
        for n in self.vector:
            fill = (np.asarray(self.base(new), dtype=F32) if n == "Param"
                    else np.full(len(new), self.consts[n], dtype=F32))
            self.cv[n] = np.insert(self.cv[n], ins, fill)
        if self._reservoir is not None:
            self._reservoir = np.insert(self._reservoir, ins, np.zeros(len(new), dtype=F32))
        self.pos = self.pos.union(fresh)

    def grad(self, push: FlatRows) -> np.ndarray:
        """A pushed gradient over the kept positions (zeros where it names none), copied a
        run at a time (a run of the push lies in one run of the kept positions)."""
        self.activate(push.pos)
        g = np.zeros(len(self.pos), dtype=F32)
        at = self.pos.rank(push.pos.starts)
        runs = push.pos
        for k, s, e, o in zip(at.tolist(), runs.starts.tolist(), runs.ends.tolist(),
                              runs.offs.tolist()):
            g[k:k + e - s] = push.values[o:o + e - s]
        return g

    def bounds(self, bounds) -> list:
        """The rule's bucket bounds over the slice, in compact indexes."""
        return np.asarray(self.pos.rank(np.asarray(bounds, dtype=np.int64))).tolist()

    def pulled(self) -> FlatRows:
        """Param as a FlatRows: views of the kept arrays (the client joins the pservers'
        pulls into arrays of its own at once: denseflat.joined)."""
        return FlatRows(self.dim, self.pos, self.cv["Param"], self.base, self.signed_zero)

    def whole(self, name) -> np.ndarray:
        """Slot `name` as one array of the slice's values."""
        if name == "Param":
            out = np.asarray(self.base(np.arange(self.dim)), dtype=F32).copy()
        else:
            out = np.full(self.dim, self.consts[name], dtype=F32)
        self.pos.scatter(out, self.cv[name])
        return out

    def whole_reservoir(self) -> np.ndarray:
        out = np.zeros(self.dim, dtype=F32)
        if self._reservoir is not None:
            self.pos.scatter(out, self._reservoir)
        return out
