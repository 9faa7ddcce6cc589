"""distributed_ops_pass (passes/ps_trainer_pass.py): the trainer pulls the rows of each sparse
table with one `distributed_lookup_table` and pushes their grads with one
`distributed_push_sparse`.

Pull: passes/fuse.py (Paddle's _pull_sparse_fuse, shared with the fleet style).
Push: the lookup grads of a table are removed and one push op is appended at the end, with the
show / click vars Paddle makes for it.
"""
from __future__ import annotations

from ...core.errors import UserError
from ...ir.program import Attr, Op, Program
from ...ir.tables import lookup_groups
from ...plan.ps import PsPlan
from ..common import show_click_vars
from ..fuse import fuse_pulls
from .opmake import ps_op


def _make_lookup(plan: PsPlan, groups: dict):
    """The MakeLookup of the ps pass: attrs from the table's first lookup, its table id."""
    def make(w: str, ids: list, outs: list) -> Op:
        return ps_op("distributed_lookup_table", {"Ids": ids, "W": [w]}, {"Outputs": outs},
                     _lookup_attrs(groups[w][0], plan.table_ids[w]))
    return make


def _lookup_attrs(first: Op, table_id: int) -> dict:
    return {"is_distributed": Attr("BOOLEAN", bool(first.attr("is_distributed"))),
            "padding_idx": Attr("LONG", int(first.attr("padding_idx", -1))),
            "table_id": Attr("INT", table_id),
            "lookup_table_version": Attr("STRING", first.type),
            "op_device": Attr("STRING", ""), "dtype": Attr("INT", 5),
            "is_test": Attr("BOOLEAN", False)}


def _fill(name: str, value: float) -> Op:
    """The fill_constant of a new show / clk var (FP32 [1]), as Paddle 2.6 writes it."""
    return ps_op("fill_constant", {"ShapeTensor": [], "ShapeTensorList": [], "ValueTensor": []},
                 {"Out": [name]}, {
                     "shape": Attr("LONGS", [1]), "dtype": Attr("INT", 5),
                     "value": Attr("FLOAT", value), "str_value": Attr("STRING", ""),
                     "force_cpu": Attr("BOOLEAN", False), "place_type": Attr("INT", -1),
                     "use_mkldnn": Attr("BOOLEAN", False)})


def fuse_pushes(block, pushes: dict, plan: PsPlan, emb_size: dict, use_cvm: bool) -> None:
    """_push_sparse_fuse: per table, its lookup grads out, one distributed_push_sparse at the
    end (inputs Ids, Shows, Clicks: Paddle's W and Outputs inputs are not registered slots)."""
    if not pushes:
        return
    show, clk = show_click_vars(block, next(iter(pushes.values()))[0], "FP32", _fill)
    # a table whose rows the trainer clips keeps its lookup grads (passes/sparseclip.py)
    kept = {c.table for c in plan.trainer_clips}
    gone = {id(op) for w, group in pushes.items() if w not in kept for op in group}
    block.ops = [op for op in block.ops if id(op) not in gone]
    for w, group in pushes.items():
        first = group[0]
        block.ops.append(ps_op(
            "distributed_push_sparse",
            {"Ids": [op.input("Ids")[0] for op in group], "Shows": [show], "Clicks": [clk]},
            {"Outputs": [op.input("Out@GRAD")[0] for op in group]}, {
                "is_distributed": Attr("BOOLEAN", bool(first.attr("is_distributed"))),
                "padding_idx": Attr("LONG", int(first.attr("padding_idx", -1))),
                "table_id": Attr("INT", plan.table_ids[w]),
                "size": Attr("INT", emb_size[w]),
                "use_cvm_op": Attr("BOOLEAN", use_cvm),
                "slots": Attr("INTS", [int(op.attr("slot", 0) or 0) for op in group]),
                "dtype": Attr("INT", 5), "is_test": Attr("BOOLEAN", False),
                "push_sparse_version": Attr("STRING", "push_sparse")}))


def distributed_ops(main: Program, plan: PsPlan) -> Program:
    """The sparse lookups and their grads fused per table (distributed_ops_pass)."""
    prog = main.shallow_copy()
    block = prog.global_block
    pulls, pushes, use_cvm = lookup_groups(block.ops)
    emb_size = {}
    for w in pulls:
        var = block.vars.get(w)
        if var is None or not var.shape or len(var.shape) < 2:
            raise UserError("embedding table %s is not declared as a [rows, dim] var" % w)
        emb_size[w] = int(var.shape[1])
    if pulls:
        block.ops = fuse_pulls(block, pulls, _make_lookup(plan, pulls), True,
                               "Paddle's distributed_ops_pass")
    fuse_pushes(block, pushes, plan, emb_size, use_cvm)
    return prog
