"""`paddle_faults: fix` rewrites that act on the program before it is planned (the other fixes
are choices of the plans and passes: plan/faults.py lists them all)."""
from __future__ import annotations

from ..ir.program import Program
from ..ir.tables import LOOKUP_GRAD_TYPES, LOOKUP_TABLE_TYPES


def serve_table_by_rows(main: Program, table: str) -> Program:
    """Fix classic-dist-table-optimizer / fleet-large-scale-adam: the distributed table's
    lookups (and their grads) become remote-prefetch lookups of a sparse table, so the split
    slices the table into row blocks, looks rows up from them and trains each block with the
    program's own optimizer on the averaged gradient. `main` is not modified."""
    prog = main.copy()
    for block in prog.blocks:
        for i, op in enumerate(block.ops):
            if op.type in LOOKUP_TABLE_TYPES + LOOKUP_GRAD_TYPES and \
                    op.input("W")[:1] == [table] and op.attr("is_distributed") is True:
                new = block.ops[i] = op.copy()
                new.set_attr("is_distributed", False)
                new.set_attr("remote_prefetch", True)
    return prog
