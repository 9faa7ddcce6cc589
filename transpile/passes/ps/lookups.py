"""distributed_ops_pass (passes/ps_trainer_pass.py): the trainer pulls the rows of each sparse
table with one `distributed_lookup_table` and pushes their grads with one
`distributed_push_sparse`.

Pull: the lookups of one table (its W) become one op fed with all their ids, placed right
after the last producer of those ids, provided every consumer of the looked-up rows comes
later; if not, each lookup is replaced in place. Before that, Paddle tries to make room: it
hoists the producers of the ids (and what they need) above the first consumer of the rows
(dag_check_up_and_reorder), which is reproduced here step by step, stale indices included.
Push: the lookup grads of a table are removed and one push op is appended at the end, with the
show / click vars Paddle makes for it.
"""
from __future__ import annotations

from ...core.errors import UserError
from ...ir.program import Attr, Op, Program
from ...ir.tables import LOOKUP_GRAD_TYPES, is_remote_prefetch
from ...plan.ps import PsPlan
from ..build import OpOrder
from ..common import show_click_vars
from .opmake import ps_op


def lookup_groups(ops: list):
    """({W: [lookup ops]}, {W: [their grad ops]}, use_cvm_op) in first-appearance order: the
    lookups with remote_prefetch, and the lookup grads of the same W and ids."""
    pulls: dict = {}
    ids: dict = {}
    use_cvm = False
    for op in ops:
        if is_remote_prefetch(op) and op.input("W"):
            w = op.input("W")[0]
            pulls.setdefault(w, []).append(op)
            ids.setdefault(w, []).append(op.input("Ids")[0])
        if op.type == "cvm":
            use_cvm = True
    pushes: dict = {}
    for op in ops:
        if op.type in LOOKUP_GRAD_TYPES and op.input("W"):
            w = op.input("W")[0]
            if w in ids and op.input("Ids")[:1] and op.input("Ids")[0] in ids[w]:
                pushes.setdefault(w, []).append(op)
    return pulls, pushes, use_cvm


def reorder(ops: list, inputs: list, outputs: list) -> None:
    """dag_check_up_and_reorder, in place on the op list: as Paddle does it, step by step
    (fuse_pulls calls it only when it would move something)."""
    ins, outs = set(inputs), set(outputs)
    n = len(ops)
    in_flag = [0] * n
    out_flag = [0] * n
    max_in, min_out = -1, n
    for i, op in enumerate(ops):
        if any(a in ins for a in op.output_names()):
            in_flag[i] = 1
            max_in = max(max_in, i)
        if any(a in outs for a in op.input_names()):
            out_flag[i] = 1
            min_out = min(min_out, i)
    if any(a and b for a, b in zip(in_flag, out_flag)):
        return              # an op both reads the rows and makes ids: Paddle warns, no move
    if not min_out < max_in:
        return
    moves = [(ops[i], i) for i in range(min_out + 1, n) if in_flag[i]]
    for first, pos0 in moves:
        queue = [pos0]
        visited = {id(first)}
        start = 0
        while start < len(queue):
            op = ops[queue[start]]
            needed = set(op.input_names())
            for j in range(queue[start] - 1, min_out - 1, -1):
                other = ops[j]
                if id(other) in visited:
                    continue
                if any(a in needed for a in other.output_names()):
                    if out_flag[j]:
                        return          # Paddle warns and stops; moves made so far stay
                    queue.append(j)
                    visited.add(id(other))
            start += 1
        for index in sorted(queue):
            ops.insert(min_out, ops.pop(index))
            in_flag.insert(min_out, in_flag.pop(index))
            out_flag.insert(min_out, out_flag.pop(index))
            min_out += 1


def _lookup_attrs(first: Op, table_id: int) -> dict:
    return {"is_distributed": Attr("BOOLEAN", bool(first.attr("is_distributed"))),
            "padding_idx": Attr("LONG", int(first.attr("padding_idx", -1))),
            "table_id": Attr("INT", table_id),
            "lookup_table_version": Attr("STRING", first.type),
            "op_device": Attr("STRING", ""), "dtype": Attr("INT", 5),
            "is_test": Attr("BOOLEAN", False)}


def fuse_by_index(ops: list, w: str, group: list, attrs: dict) -> None:
    """One table's lookups fused as Paddle writes it, with list indices (in place)."""
    inputs = [op.input("Ids")[0] for op in group]
    outputs = [op.output("Out")[0] for op in group]
    pos = {id(op): i for i, op in enumerate(ops)}
    op_idxs = [pos[id(op)] for op in group]
    for i in sorted(op_idxs, reverse=True):
        del ops[i]
    in_idx = [-1] * len(inputs)
    out_idx = [len(ops) + 1] * len(outputs)
    for i, op in enumerate(ops):
        made, read = set(op.output_names()), set(op.input_names())
        for k, name in enumerate(inputs):
            if name in made:
                in_idx[k] = i
        for k, name in enumerate(outputs):
            if name in read and out_idx[k] > i:
                out_idx[k] = i
    if min(out_idx) - max(in_idx) >= 1:
        at = min(op_idxs) if max(in_idx) == -1 else max(in_idx) + 1
        ops.insert(at, ps_op("distributed_lookup_table", {"Ids": inputs, "W": [w]},
                             {"Outputs": outputs}, attrs))
    else:
        for k in range(len(inputs)):
            ops.insert(op_idxs[k], ps_op("distributed_lookup_table",
                                         {"Ids": [inputs[k]], "W": [w]},
                                         {"Outputs": [outputs[k]]}, dict(attrs)))


def _needs_reorder(order: OpOrder, inputs: list, outputs: list) -> bool:
    """Whether dag_check_up_and_reorder would move anything: no op both makes ids and reads
    rows, and a reader of the rows comes before a maker of the ids."""
    makers = [op for name in inputs for op in order.producers.get(name, ())
              if id(op) in order.live]
    readers = [op for name in outputs for op in order.consumers.get(name, ())
               if id(op) in order.live]
    if not makers or not readers or {id(op) for op in makers} & {id(op) for op in readers}:
        return False
    return min(order.key[id(op)] for op in readers) < max(order.key[id(op)] for op in makers)


def fuse_pulls(ops: list, pulls: dict, plan: PsPlan) -> list:
    """_pull_sparse_fuse, table by table; the new op list.

    Positions are OpOrder keys rather than list indices, so a table costs what its ids and
    rows touch, not a walk over the program: inserting at `max producer index + 1` is placing
    right after the last producer (before what an earlier insert put there, as a list insert
    would), inserting at a removed lookup's index is taking its key. Only when Paddle would
    reorder, or a reorder left the table's lookups out of order, is the list materialized and
    Paddle's algorithm run as it is (reorder, fuse_by_index)."""
    order = OpOrder(ops)
    for w, group in pulls.items():
        table_id = plan.table_ids[w]
        inputs = [op.input("Ids")[0] for op in group]
        outputs = [op.output("Out")[0] for op in group]
        if _needs_reorder(order, inputs, outputs):
            ops = order.ops()
            reorder(ops, inputs, outputs)
            order = OpOrder(ops)
        keys = [order.key[id(op)] for op in group]
        attrs = _lookup_attrs(group[0], table_id)
        if keys != sorted(keys):
            # a reorder moved lookups of this table past each other: Paddle's stale indices
            # then put the ops where only its own list arithmetic says
            ops = order.ops()
            fuse_by_index(ops, w, group, attrs)
            order = OpOrder(ops)
            continue
        for op in group:
            order.remove(op)
        made = order.keys(order.producers, inputs)
        read = order.keys(order.consumers, outputs)
        if not made or not read or max(made) < min(read):
            at = min(keys) if not made else order.after(max(made))
            order.add(ps_op("distributed_lookup_table", {"Ids": inputs, "W": [w]},
                            {"Outputs": outputs}, attrs), at)
        else:
            for k in range(len(inputs)):
                order.add(ps_op("distributed_lookup_table", {"Ids": [inputs[k]], "W": [w]},
                                {"Outputs": [outputs[k]]}, dict(attrs)), keys[k])
    return order.ops()


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
    gone = {id(op) for group in pushes.values() for op in group}
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
        block.ops = fuse_pulls(block.ops, pulls, plan)
    fuse_pushes(block, pushes, plan, emb_size, use_cvm)
    return prog
