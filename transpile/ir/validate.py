"""Structural checks on a freshly read program: things that would make every pass misbehave."""
from __future__ import annotations

from itertools import chain
from operator import attrgetter

from ..core.errors import ProgramFormatError
from .program import Program


def validate_structure(prog: Program) -> None:
    """Block indices in order, parents and BLOCK attrs pointing at existing blocks."""
    n = len(prog.blocks)
    good_types: set = set()     # ids of the VarTypes seen fine (the vars of a program share few)
    for i, b in enumerate(prog.blocks):
        if b.idx != i:
            raise ProgramFormatError("block %d has idx %d (blocks must be numbered 0..%d in order)"
                                     % (i, b.idx, n - 1))
        if i == 0 and b.parent_idx != -1 and b.parent_idx != 0:
            raise ProgramFormatError("block 0 has parent_idx %d (expected -1)" % b.parent_idx)
        if i > 0 and not 0 <= b.parent_idx < n:
            raise ProgramFormatError("block %d: parent_idx %d is out of range (0..%d)"
                                     % (i, b.parent_idx, n - 1))
        for j, op in enumerate(b.ops):
            for ref in op.block_refs():
                if not isinstance(ref, int) or not 0 <= ref < n:
                    raise ProgramFormatError("block %d op %d (%s): block attr points at block %s, "
                                             "which does not exist" % (i, j, op.type, ref))
        for v in b.vars.values():
            t = v.type
            if id(t) in good_types:
                continue
            if t.type in ("LOD_TENSOR", "SELECTED_ROWS") and t.dtype is not None \
                    and not isinstance(t.dtype, str):
                raise ProgramFormatError("block %d var %r: unknown dtype %s" % (i, v.name, t.dtype))
            good_types.add(id(t))


def arg_names(ops, slots: str):
    """Every argument of the ops' "inputs" or "outputs" (`slots`), in order (iterated in C)."""
    return chain.from_iterable(chain.from_iterable(map(dict.values, map(attrgetter(slots), ops))))


EMPTY_VAR = "@EMPTY@"     # Paddle's name for "no variable here" (kEmptyVarName)
TENSOR_KINDS = ("LOD_TENSOR", "SELECTED_ROWS")    # what a parameter and its gradient can be


def validate_for_split(prog: Program, role: str = "program", outputs: bool = True) -> None:
    """What a split needs beyond structure: every op argument names a var in scope, and every
    parameter has a known dtype and positive dims. `role` names the program in messages.
    `outputs` False: only the inputs (Paddle's own splits leave outputs naming vars its passes
    deleted, a bias's @GRAD or a removed LR var, which its executor leaves unwritten)."""
    from .program import DTYPE_BYTES
    scopes: list = []
    for b in prog.blocks:
        scope = []
        idx, seen = b.idx, set()
        while 0 <= idx < len(prog.blocks) and idx not in seen:
            seen.add(idx)
            scope.append(prog.blocks[idx].vars)
            idx = prog.blocks[idx].parent_idx
        # a grad sub-block (a while_grad's) also reads the vars of its forward block: Paddle
        # runs it in the forward block's step scopes
        fwd = b.forward_block_idx
        if fwd is not None and 0 <= fwd < len(prog.blocks) and fwd not in seen:
            scope.append(prog.blocks[fwd].vars)
        scopes.append(scope)
    for b in prog.blocks:
        scope = scopes[b.idx]
        # each distinct argument looked up once; op by op only to name the first that fails
        names = set(arg_names(b.ops, "inputs"))
        if outputs:
            names.update(arg_names(b.ops, "outputs"))
        names.discard(EMPTY_VAR)
        for vs in scope:
            names.difference_update(vs.keys())
        if not names:
            continue
        for i, op in enumerate(b.ops):
            for slots in (op.inputs, op.outputs) if outputs else (op.inputs,):
                for slot, args in slots.items():
                    for a in args:
                        if a != EMPTY_VAR and not any(a in vs for vs in scope):
                            raise ProgramFormatError(
                                "%s block %d op %d (%s): %s argument %r names no var in scope"
                                % (role, b.idx, i, op.type, slot, a))
    block = prog.global_block
    for v in block.vars.values():
        if not v.is_parameter:
            continue
        for t in (v, block.vars.get(v.name + "@GRAD")):
            if t is not None and t.kind not in TENSOR_KINDS:
                raise ProgramFormatError("%s: %s %r is a %s var (expected one of %s)" % (
                    role, "parameter" if t is v else "gradient", t.name, t.kind,
                    ", ".join(TENSOR_KINDS)))
        if v.dtype not in DTYPE_BYTES:
            raise ProgramFormatError("%s: parameter %r has an unknown dtype %s"
                                     % (role, v.name, v.dtype))
        if not v.shape or any(d <= 0 for d in v.shape):
            raise ProgramFormatError("%s: parameter %r has shape %s (every dim must be > 0)"
                                     % (role, v.name, list(v.shape or ())))
