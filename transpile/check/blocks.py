"""Which blocks of a program can run: what an op makes run (BLOCK attrs, block ids, name:block
maps), the blocks reachable from block 0, and whether the blocks are numbered as they must."""
from __future__ import annotations

from ..ir.program import Op, Program
from .ops import colon_pairs

# "name:block" string maps whose blocks an op runs
_BLOCK_MAP_ATTRS = ("grad_to_block_id", "prefetch_var_name_to_block_id")


# an op's attr names -> those of them that can name a block: ops mostly share a few lists of
# attr names (one per op type), each looked through once
_REF_NAMES: dict = {}
_REF_NAMES_KEPT = 4096


def _ref_names(op: Op) -> tuple:
    return _ref_names_of(tuple(op.attr_names()))


def _ref_names_of(names: tuple) -> tuple:
    found = _REF_NAMES.get(names)
    if found is None:
        if len(_REF_NAMES) >= _REF_NAMES_KEPT:
            _REF_NAMES.clear()
        found = _REF_NAMES[names] = tuple(k for k in names if k.endswith("block_id") or
                                          k in _BLOCK_MAP_ATTRS)
    return found


def refs_no_block(op: Op) -> bool:
    """Whether `op` is as read and none of its attrs can name a block (most ops): told by its
    attr names alone (block_refs is then [])."""
    src = op.source
    return src is not None and not src.block_attrs and not op.attrs_decoded and \
        not op.attr_patch and not _ref_names_of(src.names)


def block_refs(op: Op) -> list:
    """Blocks an op makes run: BLOCK(S) attrs, *block_id ints, name:block string maps."""
    if refs_no_block(op):
        return []
    refs = list(op.block_refs())
    for k in _ref_names(op):
        a = op.find_attr(k)     # only the attrs that can name a block are decoded
        if a.type in ("INT", "LONG") and k.endswith("block_id") and isinstance(a.value, int) \
                and a.value >= 0:
            refs.append(a.value)
        elif a.type == "STRINGS" and k in _BLOCK_MAP_ATTRS:
            for _, v in colon_pairs(a.value) or ():
                if v.lstrip("-").isdigit() and int(v) >= 0:
                    refs.append(int(v))
    return refs


def reachable_blocks(prog: Program) -> set:
    """Blocks that can run: block 0 and whatever ops in reachable blocks point at."""
    seen = {0}
    todo = [0]
    while todo:
        b = todo.pop()
        if not 0 <= b < len(prog.blocks):
            continue
        for op in prog.blocks[b].ops:
            if refs_no_block(op):
                continue
            for r in block_refs(op):
                if isinstance(r, int) and 0 <= r < len(prog.blocks) and r not in seen:
                    seen.add(r)
                    todo.append(r)
    return seen


def structure_broken(prog: Program) -> bool:
    """Blocks numbered out of order, or a parent that is not a block of the program."""
    n = len(prog.blocks)
    return any(b.idx != i or (i > 0 and not 0 <= b.parent_idx < n)
               for i, b in enumerate(prog.blocks))
