"""`paddle_faults: fix` rewrites that act on the program before it is planned (the other fixes
are choices of the plans and passes: plan/faults.py lists them all)."""
from __future__ import annotations

from ..ir.program import Attr, Op, Program, tensor_type
from ..ir.roles import (BACKWARD, FORWARD, OPTIMIZE, ROLE_ATTR, ROLE_VAR_ATTR, is_clip_op,
                        role)
from ..ir.tables import LOOKUP_GRAD_TYPES, LOOKUP_TABLE_TYPES, ids_not_2d, is_remote_prefetch
from .build import make_op, new_tensor, role_attrs


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


def lookups_2d(main: Program, types=LOOKUP_TABLE_TYPES) -> Program:
    """Fix *-lookup-ids-not-2d: each remote lookup_table_v2 (of `types`, remote_prefetch)
    whose ids are not 2-D reads them made 2-D — `unsqueeze2` of [-1] to [-1, 1] or `reshape2`
    of [-1, a, b] to [-1, b], right after the op that makes the ids (first, for a feed) — and
    its rows, which then come with the fused lookup's shape (a var of their own), are made
    back into the original var (`squeeze2` / `reshape2`) right before its first reader, so that
    every rule of the lookup's placement reads the same readers; its grad ops name the same 2-D ids, which the
    push then sends. `main` is not modified."""
    prog = main.copy()
    block = prog.global_block
    bad = ids_not_2d(block, [op for op in block.ops if is_remote_prefetch(op, types)])
    made: dict = {}             # ids name -> its 2-D var
    for op, ids, shape in bad:
        if ids not in made:
            made[ids] = _ids_2d(block, ids, shape)
        out = op.output("Out")[0]
        op.outputs["Out"] = [_rows_back(block, out, shape)]
        op.inputs["Ids"] = [made[ids]]
        for g in block.ops:
            if g.type in LOOKUP_GRAD_TYPES and g.input("W") == op.input("W") and \
                    g.input("Ids") == [ids] and g.input("Out@GRAD") == [out + "@GRAD"]:
                g.inputs["Ids"] = [made[ids]]
    return prog


def _insert(block, op: Op, after=None, before=None) -> None:
    """Insert `op` right after the last op writing `after`, or right before the first op
    reading `before` (the front / the end when there is none)."""
    ops = block.ops
    if after is not None:
        at = max((i + 1 for i, o in enumerate(ops) if after in o.output_names()), default=0)
    else:
        at = next((i for i, o in enumerate(ops) if before in o.input_names()), len(ops))
    ops.insert(at, op)


def _ids_2d(block, ids: str, shape: list) -> str:
    """The 2-D ids var of `ids`, made right after its producer."""
    var = block.vars[ids]
    name = ids + "@2D"
    to = [-1, 1] if len(shape) == 1 else [-1, shape[-1]]
    block.add_var(new_tensor(name, tuple(to), var.dtype, lod_level=0))
    block.add_var(new_tensor(name + "@XSHAPE", tuple([0] + list(shape)), var.dtype,
                             lod_level=0))
    kind, attrs = ("unsqueeze2", {"axes": Attr("INTS", [1])}) if len(shape) == 1 else \
        ("reshape2", {"shape": Attr("INTS", to)})
    _insert(block, make_op(kind, {"X": [ids]}, {"Out": [name], "XShape": [name + "@XSHAPE"]},
                           {**attrs, **role_attrs(FORWARD)}), after=ids)
    return name


def _rows_back(block, out: str, shape: list) -> str:
    """The var the lookup of `out` (by ids of `shape`, made 2-D) writes instead, declared with
    the shape Paddle's kernel gives it ([-1, 1, width] / [-1, b, width]), made back into
    `out` right before the first reader of `out`."""
    var = block.vars[out]
    width = int(var.shape[-1])
    lead = [-1, 1] if len(shape) == 1 else [-1, shape[-1]]
    name = out + "@2D"
    block.add_var(new_tensor(name, tuple(lead + [width]), var.dtype, lod_level=0))
    xshape = name + "@XSHAPE"
    block.add_var(new_tensor(xshape, tuple([0] + lead + [width]), var.dtype, lod_level=0))
    kind, attrs = ("squeeze2", {"axes": Attr("INTS", [1])}) if len(shape) == 1 else \
        ("reshape2", {"shape": Attr("INTS", [-1] + [int(d) for d in shape[1:]] + [width])})
    _insert(block, make_op(kind, {"X": [name]}, {"Out": [out], "XShape": [xshape]},
                           {**attrs, **role_attrs(FORWARD)}), before=out)
    return name
