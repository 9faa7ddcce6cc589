"""The structure check, on every program of the split: block indices and parents in order,
block attrs pointing at existing blocks, every var an op uses declared in its block or an
ancestor. Blocks no op can reach only get a warning (Paddle leaves LR-decay sub-blocks behind in
trainer programs) and are not checked further.

programio.load's validate_structure covers the first half, but it raises at the first problem;
here every problem is a finding, so the split is read raw (loading.load_program_raw)."""
from __future__ import annotations

from ..ir.program import Op, Program
from ..ir.validate import EMPTY_VAR
from .context import CheckContext
from .ops import colon_pairs

# "name:block" string maps whose blocks an op runs
_BLOCK_MAP_ATTRS = ("grad_to_block_id", "prefetch_var_name_to_block_id")


def block_refs(op: Op) -> list:
    """Blocks an op makes run: BLOCK(S) attrs, *block_id ints, name:block string maps."""
    refs = list(op.block_refs())
    for k in op.attr_names():
        if not (k.endswith("block_id") or k in _BLOCK_MAP_ATTRS):
            continue
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
            for r in block_refs(op):
                if isinstance(r, int) and 0 <= r < len(prog.blocks) and r not in seen:
                    seen.add(r)
                    todo.append(r)
    return seen


def check_structure(ctx: CheckContext) -> None:
    """Structure findings for every program; fills ctx.reach for the checks after it."""
    for part in ctx.parts():
        prog = part.prog
        n = len(prog.blocks)
        broken = False
        for i, b in enumerate(prog.blocks):
            if b.idx != i:
                ctx.add("structure", part, i, None, "block %d says its idx is %d" % (i, b.idx),
                        "idx %d" % i)
                broken = True
            if i > 0 and not 0 <= b.parent_idx < n:
                ctx.add("structure", part, i, None,
                        "parent_idx %d is not a block of the program" % b.parent_idx,
                        "a parent in 0..%d" % (n - 1))
                broken = True
            for j, op in enumerate(b.ops):
                for r in op.block_refs():
                    if not isinstance(r, int) or not 0 <= r < n:
                        ctx.add("structure", part, i, j,
                                "%s points at block %s, which does not exist" % (op.type, r),
                                "a block in 0..%d" % (n - 1))
        reach = reachable_blocks(prog) if not broken else set(range(n))
        ctx.reach[part.name] = reach
        for i in range(n):
            if i not in reach:
                ctx.warn("structure", part, i, None,
                         "block %d is never run (no op refers to it); not checked" % i)
        if broken:
            continue
        for bi in sorted(reach):
            b = prog.blocks[bi]
            own = b.vars
            declared: dict = {}     # names not in the block itself: whether an ancestor has them
            for j, op in enumerate(b.ops):
                for slots in (op.inputs, op.outputs):
                    for args in slots.values():
                        for name in args:
                            if not name or name == EMPTY_VAR or own.get(name) is not None:
                                continue
                            found = declared.get(name)
                            if found is None:
                                found = declared[name] = prog.find_var(name, bi) is not None
                            if found:
                                continue
                            ctx.add("structure", part, bi, j,
                                    "%s uses %s, which is not declared" % (op.type, name),
                                    "a var %s in block %d or an ancestor" % (name, bi))
