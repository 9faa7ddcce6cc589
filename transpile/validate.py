"""Structural checks on a freshly read program: things that would make every pass misbehave."""
from __future__ import annotations

from .errors import ProgramFormatError
from .program import Program


def validate_structure(prog: Program) -> None:
    """Block indices in order, parents and BLOCK attrs pointing at existing blocks."""
    n = len(prog.blocks)
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
            if v.kind in ("LOD_TENSOR", "SELECTED_ROWS") and v.dtype is not None \
                    and not isinstance(v.dtype, str):
                raise ProgramFormatError("block %d var %r: unknown dtype %s" % (i, v.name, v.dtype))
