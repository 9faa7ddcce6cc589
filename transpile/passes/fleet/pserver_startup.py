"""Fleet pserver startup programs (ir/pserver_pass.py build_pserver_startup_program_pass):
the inits of what an endpoint holds, sliced to its blocks, plus lookup_sparse_table_init with
the large-scale table metas."""
from __future__ import annotations

from ...ir.program import Attr, Block, Program
from ..build import (TRAINER_STARTUP_OPS, assigned_block, make_op, persistable_copy,
                     require_held_inputs)
from .pserver import ServerBuild


def table_param_slices(s: ServerBuild) -> list:
    """Param blocks of the large-scale tables held here: they live in the table, not as vars."""
    dist = set(s.plan.distributed_tables)
    return [e.split(":")[1] for e in s.sparse_grad_to_param
            if s.index.origin_name(e.split(":")[1]) in dist]


def build_startup(s: ServerBuild, startup: Program, metas: list,
                  fix_assign: bool = False) -> Program:
    """The origin inits of what this endpoint holds (sliced shapes), then the table init.
    `fix_assign`: fleet-assign-init-whole-param is fixed (assigned_block)."""
    prog = Program([Block(0, -1)])
    svars = prog.global_block.vars = {name: persistable_copy(v) for name, v in s.gvars.items()}
    # only the startup ops writing a var held here (visited in program order)
    get = s.index.startup_writers.get
    found = [i for name in s.gvars if (ops := get(name)) for i in ops]
    found += [i for name in s.sliced_block if (ops := get(name)) for i in ops]
    ops = startup.global_block.ops
    new_ops = prog.global_block.ops
    gvars, sliced_block = s.gvars, s.sliced_block
    for i in sorted(set(found)):
        info = s.index.startup_outputs[i]
        if info is None:
            continue
        slots, reshape = info
        outputs, out_block = {}, None
        for slot, first, args in slots:
            sliced = sliced_block.get(first)
            if sliced is not None:
                outputs[slot] = [sliced.name]
                out_block = sliced if slot == "Out" else out_block
            elif first in gvars:
                outputs[slot] = list(args)
        if not outputs:
            continue
        require_held_inputs(ops[i], i, gvars, s.endpoint)
        new = ops[i].copy(outputs=outputs)
        if reshape and "Out" in outputs and outputs["Out"][0] in svars:
            shape = svars[outputs["Out"][0]].shape or ()
            new.set_attr("shape", [int(d) for d in shape])
        if new.type == "assign_value" and out_block is not None:
            new = assigned_block(new, out_block, svars, fix_assign)
        new_ops.append(new)
    prog.global_block.ops.append(make_op("lookup_sparse_table_init", {}, {}, {
        "large_scale_metas": Attr("STRINGS", metas), "op_role": Attr("INT", 0)}))
    doomed = set(table_param_slices(s))
    if not doomed:          # (the filter below would keep every op)
        return prog
    prog.global_block.ops = [
        op for op in prog.global_block.ops
        if op.type in TRAINER_STARTUP_OPS or not any(args[:1] and args[0] in doomed
                                             for args in op.outputs.values())]
    for name in sorted(doomed):
        svars.pop(name, None)
    return prog


