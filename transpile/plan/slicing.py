"""Slicing variables into dim-0 blocks and dispatching the blocks to pserver endpoints.

The arithmetic the classic and fleet styles share (Paddle's `slice_variable` and its
dispatchers), the names of the pieces (`w.block0`, `w@GRAD.block0.trainer_1`) and `VarBlock`,
one placed block. Where the styles differ it is said here:
  - classic slices with the config's `min_block_size` (or not at all without slice_var_up) and
    dispatches `round_robin`, `hash_name` or `balanced` over all blocks in grad order;
  - Fleet always slices with a fixed minimum of 81920 elements (FLEET_MIN_BLOCK_SIZE), dispatches
    dense blocks round robin (as Paddle does) or `balanced` when the config asks for it, and cuts
    sparse tables evenly by rows, one block per endpoint, the round robin restarting at the first
    endpoint for every table (`slice_rows_evenly`).
"""
from __future__ import annotations

import heapq
import math
import sys
import zlib
from dataclasses import dataclass
from typing import Optional, Sequence

from ..ir.program import DTYPE_BYTES

# Paddle's names for the pieces of a split variable.
BLOCK_SUFFIX = ".block"
TRAINER_SUFFIX = ".trainer_"

# Fleet's CompileTimeStrategy slices dense vars with this minimum, whatever the config says.
FLEET_MIN_BLOCK_SIZE = 81920


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


# --- slicing ---------------------------------------------------------------------------------
def slice_variable(shape: Sequence[int], slice_count: int, min_block_size: int) -> list[int]:
    """Split a tensor of `shape` into at most `slice_count` dim-0 blocks; returns element counts.

    Paddle's rule: never make blocks smaller than `min_block_size` elements (so a small tensor
    stays whole), round the block size up to a whole number of dim-0 rows for tensors of rank
    >= 2 (1-D tensors split element-wise), and let the last block take the remainder. The
    number of blocks is therefore at most `slice_count` and may be smaller.
    """
    numel = _prod(shape)
    split_count = slice_count
    max_count = int(math.floor(numel / float(min_block_size)))
    if max_count == 0:
        max_count = 1
    if max_count < slice_count:
        split_count = max_count
    block_size = int(math.ceil(numel / float(split_count)))
    if len(shape) >= 2:
        row = _prod(shape[1:])
        remains = block_size % row
        if remains:
            block_size += row - remains
    count = int(math.ceil(numel / float(block_size))) if block_size else 1
    return [min(block_size, numel - i * block_size) for i in range(count)]


def slice_rows_evenly(shape: Sequence[int], slice_count: int) -> list[int]:
    """Fleet's sparse tables: element counts of one row block per endpoint, the remainder rows
    going to the first blocks.

    Paddle computes the rows with true division and truncates the element counts when
    formatting them; reproduced so odd shapes give the same blocks (10001 rows over 2 give
    element counts of 5001.5 and 5000.5 rows, block shapes of 5001 and 5000 rows).
    """
    rows = shape[0] / slice_count
    remainder = shape[0] % slice_count
    dim0s = [rows] * (remainder if rows == 0 else slice_count)
    for i in range(remainder):
        dim0s[i] += 1
    dim1 = _prod(shape[1:])
    return [int(d * dim1) for d in dim0s]


def block_shapes(shape: Sequence[int], sizes: Sequence[int]) -> list[tuple]:
    """The shapes of the dim-0 blocks of `shape` holding `sizes` elements each."""
    if len(sizes) == 1:
        return [tuple(shape)]
    row, tail = _prod(shape[1:]), tuple(shape[1:])
    # the blocks of a var have one or two shapes (the remainder's): one tuple each, shared by
    # the blocks that have it (a split to many pservers makes a hundred thousand blocks)
    made: dict = {}
    out = []
    for size in sizes:
        rows = size // row
        s = made.get(rows)
        if s is None:
            s = made[rows] = (rows,) + tail
        out.append(s)
    return out


def block_name(name: str, index: int) -> str:
    return "%s%s%d" % (name, BLOCK_SUFFIX, index)


@dataclass(frozen=True, slots=True)
class VarBlock:
    """One dim-0 block of a variable (the whole variable when it is not sliced): its name on
    the pserver, which rows it holds, and the endpoint it is dispatched to."""
    name: str               # "fc_w.block0", or "fc_w" when the variable is not sliced
    origin: str             # "fc_w"
    index: int
    row_offset: int         # first dim-0 row of the origin variable it holds
    shape: tuple
    dtype: Optional[str]
    endpoint: str = ""
    kind: str = "LOD_TENSOR"
    lod_level: Optional[int] = None

    @property
    def rows(self) -> int:
        return int(self.shape[0]) if self.shape else 1

    @property
    def row_numel(self) -> int:
        """Elements per dim-0 row."""
        return _prod(self.shape[1:])

    @property
    def offset_elements(self) -> int:
        """The offset in elements of the flattened origin variable."""
        return self.row_offset * self.row_numel

    def nbytes(self) -> int:
        return _prod(self.shape) * DTYPE_BYTES.get(self.dtype, 0)

    def at(self, endpoint: str) -> "VarBlock":
        """This block dispatched to `endpoint`."""
        return _block((self.name, self.origin, self.index, self.row_offset, self.shape,
                       self.dtype, endpoint, self.kind, self.lod_level))


_SETTERS = tuple(getattr(VarBlock, f).__set__ for f in (
    "name", "origin", "index", "row_offset", "shape", "dtype", "endpoint", "kind", "lod_level"))


def _block(fields: tuple, _new=object.__new__, _cls=VarBlock, _set=_SETTERS) -> VarBlock:
    """The VarBlock of `fields` (its 9 fields in order), each set through its slot: a frozen
    dataclass's __init__ sets each field through object.__setattr__, several times the cost,
    and a split to many pservers makes and places a hundred thousand blocks (slots: a block
    holds no dict of its own, half the memory). Equality, hash, repr and pickling see the
    same fields."""
    new = _new(_cls)
    s0, s1, s2, s3, s4, s5, s6, s7, s8 = _set
    v0, v1, v2, v3, v4, v5, v6, v7, v8 = fields
    s0(new, v0)
    s1(new, v1)
    s2(new, v2)
    s3(new, v3)
    s4(new, v4)
    s5(new, v5)
    s6(new, v6)
    s7(new, v7)
    s8(new, v8)
    return new


def split_var(name: str, shape: Sequence[int], sizes: Sequence[int], dtype: Optional[str],
              kind: str = "LOD_TENSOR", lod_level: Optional[int] = None,
              endpoints: Optional[dict] = None) -> list[VarBlock]:
    """The blocks of a var cut into `sizes` elements each: not yet dispatched, or dispatched
    where `endpoints` ({block name: endpoint}) puts them."""
    shapes = block_shapes(shape, sizes)
    if len(shapes) == 1:
        return [VarBlock(name, name, 0, 0, shapes[0], dtype,
                         endpoints[name] if endpoints is not None else "", kind, lod_level)]
    out, row = [], 0
    for i, s in enumerate(shapes):
        bname = block_name(name, i)
        ep = endpoints[bname] if endpoints is not None else ""
        out.append(_block((bname, name, i, row, s, dtype, ep, kind, lod_level)))
        row += int(s[0]) if s else 1
    return out


# --- dispatch --------------------------------------------------------------------------------
def hash_name_index(name: str, count: int) -> int:
    """hash_name dispatch: crc32 of the UTF-8 name modulo the endpoint count (stable across runs,
    unlike the salted hash() Paddle used)."""
    return zlib.crc32(name.encode("utf-8")) % count


def dispatch(block_names: Sequence[str], endpoints: Sequence[str], method: str) -> list[str]:
    """The endpoint of each block: `round_robin` in the order given (starting at the first
    endpoint), or `hash_name` by name."""
    if method == "hash_name":
        return [endpoints[hash_name_index(n, len(endpoints))] for n in block_names]
    if method == "balanced":
        raise ValueError("balanced dispatch needs the blocks' bytes: use balanced_dispatch")
    if method != "round_robin":
        raise ValueError("unknown split method %r" % method)
    return [endpoints[i % len(endpoints)] for i in range(len(block_names))]


def balanced_dispatch(weights: Sequence[int], endpoints: Sequence[str],
                      groups: Optional[Sequence] = None,
                      preload: Optional[Sequence[int]] = None) -> list[str]:
    """`balanced` dispatch: the endpoint of each block, by greedy byte balancing.

    Blocks are taken heaviest first (equal weights: in the order given) and each goes to the
    endpoint holding the fewest bytes so far (equal loads: the earlier endpoint): Graham's
    longest-processing-time rule.
    `weights` are what a block costs its endpoint (the block and its optimizer accumulators);
    `preload` what each endpoint already holds (tables placed by their own rules). Blocks of
    one group (the blocks of one parameter) go to distinct endpoints while one is free, so an
    endpoint never holds two blocks of a parameter when it does not have to (Fleet's pserver
    names a block's accumulators after the parameter, which two blocks would share).
    """
    n = len(endpoints)
    load = list(preload) if preload is not None else [0] * n
    if len(load) != n:
        raise ValueError("preload has %d entries for %d endpoints" % (len(load), n))
    heap = [(load[k], k) for k in range(n)]      # (bytes held, endpoint index)
    heapq.heapify(heap)
    out: list = [None] * len(weights)
    taken: dict = {}
    for i in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        used = taken.setdefault(groups[i] if groups is not None else i, set())
        skipped = []
        while heap and heap[0][1] in used:
            skipped.append(heapq.heappop(heap))
        held, k = heapq.heappop(heap) if heap else skipped.pop(0)
        for item in skipped:
            heapq.heappush(heap, item)
        heapq.heappush(heap, (held + weights[i], k))
        used.add(k)
        out[i] = endpoints[k]
    return out


def paddle_shuffle(items: list, seed: int = 0) -> list:
    """The permutation numpy's legacy `np.random.seed(seed); np.random.shuffle(items)` gives.

    The classic transpiler shuffles the grads this way (seeded by Program.random_seed, 0 unless
    set in Python, which a saved ProgramDesc does not record) before dispatching them when
    slice_var_up is off.
    """
    import numpy as np
    out = list(items)
    np.random.RandomState(seed).shuffle(out)
    return out


# --- names -----------------------------------------------------------------------------------
def varname_parts(name: str) -> tuple[str, str, str]:
    """Split "fc_w@GRAD.block1.trainer_0" into ("fc_w@GRAD", "block1", "trainer_0")."""
    trainer = ""
    t = name.find(TRAINER_SUFFIX)
    if t >= 0:
        trainer = name[t + 1:]
    else:
        t = len(name)
    block = ""
    b = name.find(BLOCK_SUFFIX)
    if b >= 0:
        block = name[b + 1:t]
    else:
        b = len(name)
    return name[:min(b, t)], block, trainer


def trainer_copy_name(name: str, trainer_id: int) -> str:
    """`w@GRAD.block0.trainer_1`: trainer 1's copy of a grad (block), as sync mode with several
    trainers names them so that the pserver can tell the copies apart. Interned: a split names
    each copy over and over (the trainer's var and its send, the pserver's var and its sum),
    one string then held for all of them (and freed with the last of them)."""
    return sys.intern("%s%s%d" % (name, TRAINER_SUFFIX, trainer_id))


def trainer_copy_names(names, trainer_id: int) -> list:
    """[trainer_copy_name(n, trainer_id) for n in names], not interned: the same text, for
    what writes each name once (plan.json)."""
    suffix = "%s%d" % (TRAINER_SUFFIX, trainer_id)
    return [n + suffix for n in names]


def origin_varname(name: str) -> str:
    """`w.block1.trainer_0` -> `w`: strip the block and trainer suffixes (Paddle's
    _orig_varname)."""
    return varname_parts(name)[0]


def is_block_of(block: str, var_name: str) -> bool:
    """`block` is `var_name` itself or one of its `.block<i>` pieces."""
    return block == var_name or block.startswith(var_name + BLOCK_SUFFIX)
