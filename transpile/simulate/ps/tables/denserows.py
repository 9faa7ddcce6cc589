"""A dense table's values where a big parameter's untouched rows are not spelled out (issue
47: PaddleRec's mind keeps a [367983, 64] embedding, looked up without is_sparse, in its dense
table; its pushes and pulls carried 23M floats each, its trainers held it whole).

`FlatRows` is a flat float32 vector given at some positions, every other value read from a
base (the values trainer 0 pushed at the start; zeros for a gradient). A `MemoryDenseTable`
started from one (`push_param`) keeps its values so (`RowValues`): the positions any push
named, in compact arrays, and the rest at the base (Param) or at their constant initializer
(the rule's state). Exact where a zero gradient on a value at its start leaves it so, which
`fixed_point` probes with the very scalars of each push (sgd, adam with zero moments);
where that fails the table is made whole (`RowValues.whole`) and runs as before.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

F32 = np.float32
# rules whose zero gradient can leave a value alone (sum's Param + 0 turns a -0.0 into 0.0:
# a sum table is kept by rows from a start with no -0.0, FlatRows.signed_zero)
ROW_RULES = ("sgd", "adam", "sum")
HELD_CHUNK = 1 << 20     # positions RowValues looks up at once (activate, grad)
PROBE = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -3.0e-3, 1.0e-30, 7.0e3], dtype=F32)


class FlatRows:
    """`size` float32 values: `values` at `pos` (sorted, unique), `base(positions)` elsewhere
    (None: zeros)."""

    def __init__(self, size: int, pos, values, base: Optional[Callable] = None,
                 signed_zero: bool = True):
        self.size = int(size)
        self.pos = np.asarray(pos, dtype=np.int64)
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
        a, b = np.searchsorted(self.pos, [lo, hi])
        if lo == 0:     # views: a cut at the start copies nothing
            return FlatRows(hi, self.pos[:b], self.values[:b], self.base, self.signed_zero)
        base = None if self.base is None else _shifted(self.base, lo)
        return FlatRows(hi - lo, self.pos[a:b] - lo, self.values[a:b], base, self.signed_zero)

    def read(self, positions) -> np.ndarray:
        """The values at `positions` (sorted)."""
        positions = np.asarray(positions, dtype=np.int64)
        out = self.base_at(positions)
        at = np.searchsorted(self.pos, positions)
        hit = at < len(self.pos)
        hit[hit] = self.pos[at[hit]] == positions[hit]
        out[hit] = self.values[at[hit]]
        return out

    def take(self, lo: int, hi: int) -> np.ndarray:
        """Values lo .. hi - 1 as one float32 array."""
        a, b = np.searchsorted(self.pos, [lo, hi])
        if b - a == hi - lo:        # every value given (a param not kept by rows)
            return np.array(self.values[a:b], dtype=F32)
        part = self.cut(lo, hi)
        out = part.base_at(np.arange(hi - lo))
        out[part.pos] = part.values
        return out

    @staticmethod
    def joined(parts) -> "FlatRows":
        """The parts one after the other (a pull over the pservers' slices)."""
        count = sum(len(p.pos) for p in parts)
        pos, values = np.empty(count, dtype=np.int64), np.empty(count, dtype=F32)
        bases, at, k = [], 0, 0
        for p in parts:
            n = len(p.pos)
            np.add(p.pos, at, out=pos[k:k + n])
            values[k:k + n] = p.values
            bases.append((at, at + p.size, p.base))
            at += p.size
            k += n
        return FlatRows(at, pos, values, _pieced(bases), any(p.signed_zero for p in parts))


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


def _missing(pos, positions):
    """(those of `positions` (sorted) not in `pos`, their searchsorted indexes in `pos`),
    a chunk at a time (a push of 15M positions needs no temporaries of its size)."""
    new, ins = [], []
    for lo in range(0, len(positions), HELD_CHUNK):
        p = positions[lo:lo + HELD_CHUNK]
        at = np.searchsorted(pos, p)
        ok = at < len(pos)
        hit = np.zeros(len(p), dtype=bool)
        hit[ok] = pos[at[ok]] == p[ok]
        if not hit.all():
            new.append(p[~hit])
            ins.append(at[~hit])
    if not new:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(new), np.concatenate(ins)


class RowValues:
    """A table slice's vector values kept at `pos` (compact arrays, one per vector slot, the
    sync reservoir among them); Param elsewhere at `base`, the other slots at `consts`."""

    def __init__(self, dim: int, vector: list, consts: dict, start: FlatRows, initial: dict):
        self.dim, self.vector, self.consts = dim, list(vector), dict(consts)
        self.base, self.signed_zero = start.base, start.signed_zero
        self.pos = start.pos.copy()
        self.cv = {n: (np.array(start.values, dtype=F32) if n == "Param"
                       else np.asarray(initial[n], dtype=F32)[self.pos].copy())
                   for n in self.vector}
        self.reservoir = np.zeros(len(self.pos), dtype=F32)

    def activate(self, positions) -> None:
        """Keep `positions` (sorted, unique) too (the new ones inserted in order: no sort of
        the kept ones, which may be millions)."""
        new, ins = _missing(self.pos, np.asarray(positions, dtype=np.int64))
        if not len(new):
            return
        for n in self.vector:
            fill = (np.asarray(self.base(new), dtype=F32) if n == "Param"
                    else np.full(len(new), self.consts[n], dtype=F32))
            self.cv[n] = np.insert(self.cv[n], ins, fill)
        self.reservoir = np.insert(self.reservoir, ins, np.zeros(len(new), dtype=F32))
        self.pos = np.insert(self.pos, ins, new)

    def grad(self, push: FlatRows) -> np.ndarray:
        """A pushed gradient over the kept positions (zeros where it names none), scattered
        a chunk of positions at a time."""
        self.activate(push.pos)
        g = np.zeros(len(self.pos), dtype=F32)
        for lo in range(0, len(push.pos), HELD_CHUNK):
            g[np.searchsorted(self.pos, push.pos[lo:lo + HELD_CHUNK])] = \
                push.values[lo:lo + HELD_CHUNK]
        return g

    def bounds(self, bounds) -> list:
        """The rule's bucket bounds over the slice, in compact indexes."""
        return np.searchsorted(self.pos, bounds).tolist()

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
        out[self.pos] = self.cv[name]
        return out

    def whole_reservoir(self) -> np.ndarray:
        out = np.zeros(self.dim, dtype=F32)
        out[self.pos] = self.reservoir
        return out
