"""The original program's initial state, and the split's random initializers aligned with it."""
from __future__ import annotations

import re

import numpy as np

from ...ir.program import Program
from ..model.executor import default_lazy_policy
from ..model.largescale import block_shapes
from ..model.values import LazyTable, Pending, shape_of

_BLOCK_SUFFIX = re.compile(r"^(.+)\.block(\d+)$")
_DIST_ATTRS = ("min", "max", "mean", "std")
RELEASE_SIZE = 1 << 20      # release_init: initial values of more floats than this go


def snapshot(v):
    """A value that later steps cannot change: a LazyTable's copy; an array itself, made
    read-only, not copied (kernels write new arrays into a scope, never into the arrays it
    holds, so a snapshot of a table of a million rows costs nothing; a kernel that wrote into
    one would fail loudly)."""
    if isinstance(v, LazyTable):
        return v.copy()
    if isinstance(v, np.ndarray) and v.base is None:
        v.flags.writeable = False
        return v
    return np.array(v, copy=True)


class Reference:
    """The original program's run: its initial values, for aligning the split's random inits.

    Random initializers in the split take the values the original drew for the same
    parameter (or its row slice): both runs start from one state; a random init with other
    settings than the original's is left alone and reported."""

    def __init__(self, main: Program, startup: Program):
        self.main = main
        self.startup = startup
        self.init: dict = {}
        self.moved: dict = {}       # compare.measure_movements: name or (name, r0, r1) -> float
        self.init_ops: dict = {}
        self.slices: dict = {}
        for op in startup.global_block.ops:
            for n in op.output_names():
                self.init_ops[n] = op

    def build_slices(self, programs, notes):
        """`P.blockN` vars of the split -> (P, first row, end row) of the original P."""
        blocks: dict = {}
        for prog in programs:
            shapes = {n: tuple(v.shape) for n, v in prog.global_block.vars.items() if v.shape}
            shapes.update(block_shapes(prog))   # large-scale tables: a block without a var
            for name, shape in shapes.items():
                m = _BLOCK_SUFFIX.match(name)
                if m and m.group(1) in self.init:
                    blocks.setdefault(m.group(1), {})[int(m.group(2))] = shape
        for base, parts in blocks.items():
            full = self.init[base].shape
            idx = sorted(parts)
            rows = [parts[i][0] for i in idx]
            if idx != list(range(len(idx))) or sum(rows) != full[0] \
                    or any(tuple(parts[i][1:]) != tuple(full[1:]) for i in idx):
                notes.append("the blocks of %s (%s) do not tile its shape %s; their random "
                             "init is not aligned with the original's"
                             % (base, ", ".join("%s.block%d%s" % (base, i, list(parts[i]))
                                                for i in idx), list(full)))
                continue
            start = 0
            for i, r in zip(idx, rows):
                self.slices["%s.block%d" % (base, i)] = (base, start, start + r)
                start += r

    def release_init(self, keep=()) -> None:
        """The split's startup has taken what it aligns from the initial values: keep of them
        only the shapes (Pending), but for the names in `keep` (what the comparison still reads
        whole: a pserver's auto-grown sparse table) and the LazyTables (kept row by row) and
        small values. The comparison reads the movements measured before
        (compare.measure_movements); a table of 55 million floats is not held twice more."""
        for name, v in list(self.init.items()):
            if name in keep or not isinstance(v, np.ndarray) or v.size < RELEASE_SIZE:
                continue
            self.init[name] = Pending(v.shape, v.dtype)

    def lazy_policy(self, name, shape) -> bool:
        """A split's initializer output is a LazyTable where the original's var (or the
        table its row block is cut from) is one."""
        origin = self.slices[name][0] if name in self.slices else name
        if origin in self.init:
            return isinstance(self.init[origin], LazyTable)
        return default_lazy_policy(name, shape)

    def align_random(self, label, name, value, op, notes):
        origin, rows = name, None
        if name in self.slices:
            origin, r0, r1 = self.slices[name]
            rows = (r0, r1)
        ref = self.init.get(origin)
        ref_op = self.init_ops.get(origin)
        if ref is None or ref_op is None:
            notes.append("%s: %s draws random values for %s, which the original does not "
                         "initialize; they stay unaligned" % (label, op.type, name))
            return value
        if ref_op.type != op.type or any(
                not _close(ref_op.attr(a), op.attr(a)) for a in _DIST_ATTRS):
            notes.append("%s: %s initializes %s with %s, the original with %s %s"
                         % (label, op.type, name, _dist(op), ref_op.type, _dist(ref_op)))
            return value
        if isinstance(ref, LazyTable):
            first = rows[0] if rows else 0
            part = ref.view(first, (rows[1] - rows[0]) if rows else ref.height)
        else:
            part = ref if rows is None else ref[rows[0]:rows[1]]
        if tuple(shape_of(part)) != tuple(shape_of(value)):
            notes.append("%s: %s initializes %s with shape %s; the original's %s is %s"
                         % (label, op.type, name, list(shape_of(value)), origin,
                            list(shape_of(part))))
            return value
        if isinstance(part, LazyTable) or (isinstance(part, np.ndarray)
                                           and not part.flags.writeable):
            return part     # the original's rows, read-only (snapshot): shared, not copied
        return np.array(part, copy=True)


def _close(a, b):
    if a is None or b is None:
        return a is b
    return abs(float(a) - float(b)) <= 1e-7 * max(1.0, abs(float(a)))


def _dist(op):
    return "(%s)" % ", ".join("%s=%s" % (a, op.attr(a)) for a in _DIST_ATTRS
                              if op.attr(a) is not None)
