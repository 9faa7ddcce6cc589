"""The structure check, on every program of the split: block indices and parents in order,
block attrs pointing at existing blocks, every var an op uses declared in its block or an
ancestor. Blocks no op can reach only get a warning (Paddle leaves LR-decay sub-blocks behind in
trainer programs) and are not checked further.

programio.load's validate_structure covers the first half, but it raises at the first problem;
here every problem is a finding, so the split is read raw (loading.load_program_raw)."""
from __future__ import annotations

from itertools import chain, filterfalse

from ..ir.validate import EMPTY_VAR, arg_names
from ..ir.vartable import names_of
from ..plan.faults import CLASSIC_CLIP_ON_PSERVER, KIND
from .context import CheckContext
from .inputs import has_clip


def _undeclared_fault(ctx: CheckContext) -> set:
    """The grads a classic split of a Paddle 2.x clip leaves undeclared on the trainer
    (classic-clip-on-pserver: the transpiler drops `<param>@GRAD`, which the grad ops still
    write): {every updated param's grad} when that fault applies, else {}."""
    if KIND[CLASSIC_CLIP_ON_PSERVER].style != ctx.config.style or not has_clip(ctx):
        return set()
    return {rv[0] + "@GRAD" for op in ctx.main.global_block.ops
            for rv in [op.attr("op_role_var") or []] if len(rv) >= 2}

def check_structure(ctx: CheckContext) -> None:
    """Structure findings for every program (ctx.index says which blocks can run)."""
    for part in ctx.parts():
        if not ctx.replay("structure", part.name):
            structure_of(ctx, part)


def structure_of(ctx: CheckContext, part) -> None:
    """The structure findings of one program."""
    clip_grads = ctx.memo("undeclared_fault", lambda: _undeclared_fault(ctx))
    prog = part.prog
    n = len(prog.blocks)
    broken = part.name in ctx.index.broken
    for i, b in enumerate(prog.blocks):
        if b.idx != i:
            ctx.add("structure", part, i, None, "block %d says its idx is %d" % (i, b.idx),
                    "idx %d" % i)
        if i > 0 and not 0 <= b.parent_idx < n:
            ctx.add("structure", part, i, None,
                    "parent_idx %d is not a block of the program" % b.parent_idx,
                    "a parent in 0..%d" % (n - 1))
        for j, op in enumerate(b.ops):
            for r in op.block_refs():
                if not isinstance(r, int) or not 0 <= r < n:
                    ctx.add("structure", part, i, j,
                            "%s points at block %s, which does not exist" % (op.type, r),
                            "a block in 0..%d" % (n - 1))
    reach = ctx.index.reach[part.name]
    for i in range(n):
        if i not in reach:
            ctx.warn("structure", part, i, None,
                     "block %d is never run (no op refers to it); not checked" % i)
    if broken:
        return
    _declared_vars(ctx, part, reach, clip_grads)


def _undeclared(ops: list, own) -> set:
    """The names the ops use that `own` (a block's names: names_of) does not declare, but
    "" and EMPTY_VAR: each argument looked up in C as it comes (no set of every name of the
    block is made: a trainer's at 64 pservers was megabytes, one op's twenty thousand)."""
    names = set(filterfalse(own.__contains__, chain(arg_names(ops, "inputs"),
                                                     arg_names(ops, "outputs"))))
    names.discard("")
    names.discard(EMPTY_VAR)
    return names


def _declared_vars(ctx: CheckContext, part, reach, clip_grads: set) -> None:
    """Every var an op of a block that runs uses is declared in the block or an ancestor (a
    grad classic-clip-on-pserver leaves undeclared is named so)."""
    prog = part.prog
    blocks = prog.blocks
    # the blocks whose only ancestor is block 0 (a pserver's optimize blocks, hundreds of
    # them) take what they do not declare from block 0's vars
    top_is_root = bool(blocks) and not 0 <= blocks[0].parent_idx < len(blocks)
    # those of them that declare no var of their own, looked at together first: when block 0
    # declares every name their ops use (as a rule), none of them lacks a var
    fine: set = set()
    if top_is_root:
        plain = [bi for bi in reach if bi != 0 and blocks[bi].parent_idx == 0 and
                 not blocks[bi].vars]
        if plain and not _undeclared([op for bi in plain for op in blocks[bi].ops],
                                     {}).difference(names_of(blocks[0].vars)):
            fine = set(plain)
    for bi in sorted(reach):
        if bi in fine:
            continue
        # the block's names not its own: the ops are gone through one by one only where one
        # of them is declared nowhere, to say where
        b = blocks[bi]
        own = b.vars
        names = _undeclared(b.ops, names_of(own))
        if top_is_root and bi != 0 and b.parent_idx == 0:
            if not names.difference(names_of(blocks[0].vars)):
                continue
        elif all(prog.find_var(name, bi) is not None for name in names):
            continue
        for j, op in enumerate(b.ops):
            for slots in (op.inputs, op.outputs):
                for args in slots.values():
                    for name in args:
                        if not name or name == EMPTY_VAR or own.get(name) is not None or \
                                prog.find_var(name, bi) is not None:
                            continue
                        fault = CLASSIC_CLIP_ON_PSERVER if name in clip_grads else ""
                        ctx.add("structure", part, bi, j, "%s%s uses %s, which is not "
                                "declared" % ("Paddle fault %s: " % fault if fault else "",
                                              op.type, name),
                                "a var %s in block %d or an ancestor" % (name, bi),
                                fault=fault)
