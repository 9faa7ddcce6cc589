"""Fleet trainer passes (ir/trainer_pass.py): the trainer's main and startup programs.

Each pass takes a program and the plan and returns a new program; its input is left as it was.

Main (sync / async / half_async):
  delete_optimizer_ops -> fuse_sparse_lookups -> append_sends
Startup:
  fake_init_tables -> init_from_server -> delete_optimizer_state_inits
Geo: the trainer keeps its optimizer; main gets one send per sparse table and one for the step
counter, startup is unchanged.
"""
from __future__ import annotations

from ...core.errors import UserError
from ...ir.program import Attr, Op, Program, Var
from ...ir.roles import BACKWARD, RPC, optimizer_only_vars
from ...plan.faults import FLEET_CLIP_BEFORE_MERGE, FLEET_ORPHAN_SPARSE_GRAD_SUM
from ...plan.fleet import (FleetPlan, orphan_sum_indices, remote_lookup_groups,
                           trainer_send_queues)
from ..build import OpOrder, make_op, new_control_var, role_attrs


# --- main ------------------------------------------------------------------------------------
def demote_clip_ops(main: Program, plan: FleetPlan) -> Program:
    """Gradient-clip ops run on the trainer as backward ops (Fleet re-labels them so). Fixing
    fleet-clip-before-merge, each becomes an assign of the unclipped gradient to the var the
    trainer sends: the pservers clip the averaged gradient (passes/fleet/pserver.py)."""
    prog = main.shallow_copy()
    ops = prog.global_block.ops
    for i in plan.clip_ops:
        if FLEET_CLIP_BEFORE_MERGE in plan.fixes:
            ops[i] = make_op("assign", {"X": ops[i].input("X")}, {"Out": ops[i].output("Out")},
                             role_attrs(BACKWARD))
            continue
        ops[i] = ops[i].copy()
        ops[i].set_attr("op_role", BACKWARD)
    return prog


def delete_optimizer_ops(main: Program, plan: FleetPlan) -> Program:
    """Remove optimizer and LR-schedule ops and the vars only they read."""
    doomed = set(plan.optimize_ops) | set(plan.lr_ops)
    drop_vars = optimizer_only_vars([main.global_block.ops[i] for i in sorted(doomed)])
    prog = main.shallow_copy()
    block = prog.global_block
    block.ops = [op for i, op in enumerate(block.ops) if i not in doomed]
    for name in drop_vars:
        block.vars.pop(name, None)
    if plan.has_lr_scheduler and plan.lr_var:
        # the scheduler feeds the learning rate on the trainer: keep the var
        lr = main.global_block.vars[plan.lr_var].copy()
        lr.persistable = True
        block.add_var(lr)
    return prog


def _table_id(plan: FleetPlan, table: str) -> int:
    if table not in plan.table_ids:
        raise UserError("embedding table %s is looked up with remote_prefetch but no optimizer "
                        "updates it: can not find a sparse table for it" % table)
    return plan.table_ids[table]


def fuse_sparse_lookups(main: Program, plan: FleetPlan) -> Program:
    """One distributed_lookup_table per remote table, one distributed_push_sparse for its grads.

    The fused lookup goes right after the last producer of its ids (or where the first lookup
    was), provided every consumer of the looked-up rows comes later; otherwise each lookup is
    replaced in place. (Paddle first tries to move ops to make room; that reordering is not
    reproduced: such programs get one lookup per original op, which computes the same thing.)
    """
    prog = main.shallow_copy()
    block = prog.global_block
    pulls, pushes = remote_lookup_groups(block.ops)
    if not pulls:
        return prog
    order = OpOrder(block.ops)
    emb_size = {}
    for table, group in pulls.items():
        w = block.vars.get(table)
        if w is None:
            raise UserError("embedding table %s is not declared in the program" % table)
        emb_size[table] = int(w.shape[1]) if w.shape and len(w.shape) > 1 else 0
        table_id = _table_id(plan, table)
        first = group[0]
        ids = [op.input("Ids")[0] for op in group]
        outs = [op.output("Out")[0] for op in group]
        for op in group:
            order.remove(op)
        produced = order.keys(order.producers, ids)
        consumed = order.keys(order.consumers, outs)

        def lookup(id_names, out_names):
            return make_op("distributed_lookup_table", {"Ids": id_names, "W": [table]},
                           {"Outputs": out_names}, {
                               "dtype": Attr("INT", 5),
                               "is_distributed": Attr("BOOLEAN",
                                                      bool(first.attr("is_distributed"))),
                               "is_test": Attr("BOOLEAN", False),
                               "lookup_table_version": Attr("STRING", first.type),
                               "padding_idx": _copy_attr(first, "padding_idx",
                                                         Attr("LONG", -1)),
                               "table_id": Attr("INT", table_id),
                               **role_attrs(0)})

        if not produced or not consumed or min(consumed) > max(produced):
            # right after the last producer of the ids, or where the first lookup was
            at = order.key[id(first)] if not produced else order.after(max(produced))
            order.add(lookup(ids, outs), at)
        else:
            for k, op in enumerate(group):
                order.add(lookup([ids[k]], [outs[k]]), order.key[id(op)])
    block.ops = order.ops()

    if pushes:
        show, clk = _show_click(block, next(iter(pushes.values()))[0])
        gone = {id(op) for group in pushes.values() for op in group}
        if FLEET_ORPHAN_SPARSE_GRAD_SUM in plan.fixes:
            ops = block.ops
            gone |= {id(ops[i]) for group in pushes.values()
                     for i in orphan_sum_indices(ops, group)}
        block.ops = [op for op in block.ops if id(op) not in gone]
        for table, group in pushes.items():
            first = group[0]
            ids = [op.input("Ids")[0] for op in group]
            grads_out = [op.input("Out@GRAD")[0] for op in group]
            block.ops.append(make_op(
                "distributed_push_sparse",
                {"Ids": ids, "W": [first.output("W@GRAD")[0]], "Outputs": grads_out,
                 "Shows": [show], "Clicks": [clk]},
                {"Outputs": grads_out}, {
                    "slots": Attr("INTS", []), "dtype": Attr("INT", 5),
                    "is_distributed": Attr("BOOLEAN", bool(first.attr("is_distributed"))),
                    "is_test": Attr("BOOLEAN", False),
                    "padding_idx": _copy_attr(first, "padding_idx", Attr("LONG", -1)),
                    "push_sparse_version": Attr("STRING", "push_sparse"),
                    "size": Attr("INT", emb_size[table]),
                    "table_id": Attr("INT", plan.table_ids[table]),
                    "use_cvm_op": Attr("BOOLEAN", False), **role_attrs(0)}))
    return prog


def _copy_attr(op: Op, name: str, default: Attr) -> Attr:
    a = op.find_attr(name)
    return Attr(a.type, a.value) if a is not None else default


def _show_click(block, first_grad_op: Op):
    """The show / click vars the push reports: from a `show_click_entry:<show>:<click>` entry
    when both vars exist, else constant 1 / 0 vars filled at the top of the program."""
    entry = str(first_grad_op.attr("entry", "") or "").split(":")
    if len(entry) == 3 and entry[0] == "show_click_entry" and \
            entry[1] in block.vars and entry[2] in block.vars:
        return entry[1], entry[2]
    for name, value in (("show", 1.0), ("clk", 0.0)):
        block.add_var(Var.tensor(name, "INT64", (1,), lod_level=None, persistable=False,
                                 stop_gradient=True))
        block.ops.insert(0, make_op("fill_constant", {}, {"Out": [name]}, {
            "dtype": Attr("INT", 3), "force_cpu": Attr("BOOLEAN", False),
            "place_type": Attr("INT", -1), "shape": Attr("LONGS", [1]),
            "str_value": Attr("STRING", ""), "value": Attr("FLOAT", value), **role_attrs(0)}))
    return "show", "clk"


def append_sends(main: Program, plan: FleetPlan, trainer_id: int) -> Program:
    """A send per communicator queue; in sync / half_async each send yields a control var and a
    send_barrier waits for all of them."""
    prog = main.shallow_copy()
    block = prog.global_block
    barrier = plan.mode in ("sync", "half_async")
    eps = list(plan.endpoints)
    dummies = []
    for queue, sent in trainer_send_queues(plan):
        out = [new_control_var(block, persistable=False)] if barrier else []
        dummies += out
        block.ops.append(make_op("send", {"X": sent}, {"Out": out}, {
            "endpoints": Attr("STRINGS", eps), "is_sparse": Attr("INT", 0),
            "merge_add": Attr("BOOLEAN", True), "send_varnames": Attr("STRINGS", [queue]),
            "table_id": Attr("INT", 0), "use_send_handler": Attr("BOOLEAN", False),
            **role_attrs(RPC)}))
    if barrier:
        block.ops.append(make_op("send_barrier", {"X": dummies}, {"Out": []}, {
            "endpoints": Attr("STRINGS", eps), "half_async": Attr("BOOLEAN", True),
            "trainer_id": Attr("INT", trainer_id), **role_attrs(RPC)}))
    return prog


def trainer_main(main: Program, plan: FleetPlan, trainer_id: int) -> Program:
    if plan.is_geo:
        return append_sends(main, plan, trainer_id)
    prog = demote_clip_ops(main, plan)
    prog = delete_optimizer_ops(prog, plan)
    prog = fuse_sparse_lookups(prog, plan)
    return append_sends(prog, plan, trainer_id)


# --- startup ---------------------------------------------------------------------------------
def fake_init_tables(startup: Program, plan: FleetPlan) -> Program:
    """Tables live on the pservers: the trainer only declares them (fake_init, same shape)."""
    prog = startup.shallow_copy()
    block = prog.global_block
    tables = sorted(set(plan.sparse_tables) | set(plan.distributed_tables))
    writers: dict = {t: [] for t in tables}
    for op in block.ops:
        for name in op.output_names():
            if name in writers and (not writers[name] or writers[name][-1] is not op):
                writers[name].append(op)
    removed = set()
    # Paddle walks a set here; the order is made stable by name
    for table in tables:
        if table not in block.vars:
            raise UserError("embedding table %s is not declared in the startup program" % table)
        inits = [op for op in writers[table] if id(op) not in removed]
        if len(inits) != 1:
            raise UserError("embedding table %s: the startup program should initialise it with "
                            "exactly one op, found %d" % (table, len(inits)))
        shape = inits[0].find_attr("shape")
        block.ops.append(make_op("fake_init", {}, {"Out": [table]}, {
            "shape": Attr(shape.type, list(shape.value)) if shape else Attr("LONGS", []),
            **role_attrs(0)}))
        removed.add(id(inits[0]))
    block.ops = [op for op in block.ops if id(op) not in removed]
    return prog


def init_from_server(startup: Program, plan: FleetPlan, trainer_id: int) -> Program:
    """Every trainer pulls the dense params from the pservers, then waits for all of them."""
    prog = startup.shallow_copy()
    block = prog.global_block
    block.ops.append(make_op("recv", {}, {}, {
        "recv_varnames": Attr("STRINGS", [p.param for p in plan.dense_pairs]),
        "trainer_id": Attr("INT", trainer_id), "op_role": Attr("INT", RPC)}))
    cv = new_control_var(block, persistable=False, stop_gradient=True)
    block.ops.append(make_op("fetch_barrier", {}, {"Out": [cv]}, {
        "endpoints": Attr("STRINGS", list(plan.endpoints)),
        "trainer_id": Attr("INT", trainer_id), **role_attrs(RPC)}))
    return prog


def delete_optimizer_state_inits(startup: Program, main: Program, plan: FleetPlan) -> Program:
    """Drop the inits (and vars) of optimizer state: it lives on the pservers now."""
    doomed = set(optimizer_only_vars([main.global_block.ops[i] for i in plan.optimize_ops]))
    prog = startup.shallow_copy()
    block = prog.global_block
    block.ops = [op for op in block.ops if not doomed & set(op.output_names())]
    for name in sorted(doomed):
        block.vars.pop(name, None)
    return prog


def trainer_startup(startup: Program, main: Program, plan: FleetPlan,
                    trainer_id: int) -> Program:
    if plan.is_geo:
        return startup.shallow_copy()
    prog = fake_init_tables(startup, plan)
    prog = init_from_server(prog, plan, trainer_id)
    return delete_optimizer_state_inits(prog, main, plan)
