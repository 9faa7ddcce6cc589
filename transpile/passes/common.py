"""Trainer rewrites the fleet and ps styles share (Paddle's ps passes kept them from one
generation to the next), parametrised where the two generations write different ops."""
from __future__ import annotations

from typing import Callable, Iterable

from ..ir.program import Attr, Op, Program, Var, select
from ..ir.roles import BACKWARD, optimizer_only_vars


def demote_clip_ops(main: Program, clip_uids, replace: Callable[[Op], Op] = None) -> Program:
    """The gradient-clip ops (`clip_uids`) stay on the trainer as backward ops; `replace`, when
    given, makes each one's replacement instead (the fleet-clip-before-merge fix)."""
    prog = main.shallow_copy()
    wanted = set(clip_uids)
    ops = prog.global_block.ops
    for i, op in enumerate(ops):
        if op.uid not in wanted:
            continue
        if replace is not None:
            ops[i] = replace(op)
            continue
        ops[i] = op.copy()
        ops[i].set_attr("op_role", BACKWARD)
    return prog


def delete_optimizer_state_inits(startup: Program, main: Program, optimize_uids,
                                 keep: Iterable[str] = ()) -> Program:
    """The startup's inits (and vars) of what only the optimizer ops (`optimize_uids` of
    `main`) read: that state lives on the pservers now. Vars in `keep` stay."""
    doomed = set(optimizer_only_vars(select(main.global_block.ops, optimize_uids)))
    doomed.difference_update(keep)
    prog = startup.shallow_copy()
    block = prog.global_block
    block.ops = [op for op in block.ops if not doomed.intersection(op.output_names())]
    for name in sorted(doomed):
        block.vars.pop(name, None)
    return prog


def show_click_vars(block, first_grad: Op, dtype: str, fill: Callable[[str, float], Op]) -> tuple:
    """The show / click vars a distributed_push_sparse reports: a `show_click_entry:<show>:
    <click>` entry's vars when both exist, else new vars `show` (1) and `clk` (0) of `dtype`,
    filled at the top of the program by `fill(name, value)`'s op."""
    entry = str(first_grad.attr("entry", "") or "").split(":")
    if len(entry) == 3 and entry[0] == "show_click_entry" and \
            entry[1] in block.vars and entry[2] in block.vars:
        return entry[1], entry[2]
    for name, value in (("show", 1.0), ("clk", 0.0)):
        block.add_var(Var.tensor(name, dtype, (1,), lod_level=None, persistable=False,
                                 stop_gradient=True))
        block.ops.insert(0, fill(name, value))
    return "show", "clk"


def copy_attr(op: Op, name: str, default: Attr) -> Attr:
    """A copy of `op`'s attr `name`, or `default` when it has none."""
    a = op.find_attr(name)
    return Attr(a.type, a.value) if a is not None else default


def send_table_rows(main: Program, tables) -> Program:
    """Fixing fleet- / ps-geo-dense-table-grad: each geo send of one of `tables`' gradients
    that an op made dense (a weight decay's sum) sends the table's raw gradient instead,
    `<table>@GRAD`, the SelectedRows of the rows its lookups touched, whose rows the geo
    communicator records; it pushes their deltas (the local update, decay included)."""
    from ..ir.dataflow import dense_at
    if not tables:
        return main
    block = main.global_block
    update = {op.input("Grad")[0]: op.input("Param")[0] for op in block.ops
              if op.input("Param") and op.input("Grad")}
    swap = {}
    for _, _, name in dense_at(main):
        table = update.get(name)
        if table in tables and block.var(table + "@GRAD") is not None:
            swap[name] = table + "@GRAD"
    if not swap:
        return main
    prog = main.shallow_copy()
    ops = prog.global_block.ops
    for i, op in enumerate(ops):
        if op.type == "send" and set(op.input("X")) & set(swap):
            ops[i] = op.copy({**op.inputs, "X": [swap.get(x, x) for x in op.input("X")]})
    return prog

