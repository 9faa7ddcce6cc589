"""`paddle_faults: fix` rewrites that act on the program before it is planned (the other fixes
are choices of the plans and passes: plan/faults.py lists them all)."""
from __future__ import annotations

from ..ir.program import Attr, Program, tensor_type
from ..ir.roles import BACKWARD, OPTIMIZE, ROLE_ATTR, ROLE_VAR_ATTR, is_clip_op, role
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
        var = block.vars.get(table)
        if var is not None and var.kind == "SELECTED_ROWS":
            # (static.nn.sparse_embedding declares its table SELECTED_ROWS: a row block the
            # pservers look up by row and update with a dense optimizer is a tensor)
            v = block.vars[table] = var.copy()
            v.type = tensor_type("LOD_TENSOR", var.dtype, var.shape, 0)
    return prog


def send_raw_grads(main: Program, clips: dict) -> Program:
    """Fix classic-clip-on-pserver: each clipped parameter's optimize ops name its raw grad in
    op_role_var, so the trainers send the raw grad and the pservers average it, then clip the
    average (the clip reads the merged block) before the update reads the clip's output.
    `main` is not modified."""
    prog = main.copy()
    for block in prog.blocks:
        for i, op in enumerate(block.ops):
            rv = op.attr(ROLE_VAR_ATTR) or []
            if len(rv) == 2 and rv[0] in clips and rv[1] != clips[rv[0]][1]:
                new = block.ops[i] = op.copy()
                a = new.find_attr(ROLE_VAR_ATTR)
                new.replace_attr(ROLE_VAR_ATTR, Attr(a.type, [rv[0], clips[rv[0]][1]], a.extra))
    return prog


def clip_on_trainer(main: Program, clip_scope: str) -> Program:
    """Fix classic-clip-on-pserver where a pserver cannot clip (a global-norm clip, a norm over
    a sliced parameter): every optimize-role op of the gradient clip's name scope becomes a
    backward op, so the trainers clip their own gradients and send the result (the update's
    op_role_var names it), and the pservers update with what they receive.
    `main` is not modified."""
    prog = main.copy()
    for block in prog.blocks:
        for i, op in enumerate(block.ops):
            if role(op) == OPTIMIZE and is_clip_op(op, clip_scope):
                new = block.ops[i] = op.copy()
                new.set_attr(ROLE_ATTR, BACKWARD)
    return prog
