"""The ps trainer programs (CpuSyncPsProgramBuilder / CpuAsyncPsProgramBuilder /
GeoPsProgramBuilder): each pass takes a program and the plan and returns a new program.

Main, sync / async:
  demote_clip_ops -> distributed_ops (lookups.py) -> delete_optimizer -> append_sends
Startup, sync / async:
  delete_optimizer_state_inits -> fake_init_tables
Geo: the optimizer stays; main gets a send per sparse table, startup is unchanged.
(add_lr_decay_table_pass is applied by Paddle to no program at all: nothing to do.)
"""
from __future__ import annotations

from ...ir.program import Attr, Program
from ...ir.roles import BACKWARD, RPC, ROLE_VAR_ATTR
from ...ir.lr_schedule import SCHEDULER_LR_VAR
from ...plan.ps import PsPlan, table_writers
from ..build import new_control_var
from .lookups import distributed_ops
from .opmake import ps_op

# send_barrier's registered default endpoints: Paddle does not set the cluster's
BARRIER_ENDPOINTS = ["127.0.0.1:6164"]


# --- main ------------------------------------------------------------------------------------
def demote_clip_ops(main: Program, plan: PsPlan) -> Program:
    """Gradient-clip ops stay on the trainer as backward ops (get_optimize_ops re-labels
    them)."""
    prog = main.shallow_copy()
    ops = prog.global_block.ops
    for i in plan.clip_ops:
        ops[i] = ops[i].copy()
        ops[i].set_attr("op_role", BACKWARD)
    return prog


def removed_vars(ops) -> list:
    """The inputs of `ops` that none of them names in op_role_var (delete_optimizer_pass)."""
    inputs, role_vars = set(), set()
    for op in ops:
        inputs.update(op.input_names())
        role_vars.update(op.attr(ROLE_VAR_ATTR) or [])
    return sorted(inputs - role_vars)


def delete_optimizer(main: Program, origin: Program, plan: PsPlan) -> Program:
    """Optimizer and LR-schedule ops out, with the vars only they read; an LR scheduler's
    learning_rate_0 declared again, persistable."""
    doomed_idx = set(plan.optimize_ops) | set(plan.lr_ops)
    doomed = [origin.global_block.ops[i] for i in sorted(doomed_idx)]
    doomed_ids = {id(op) for op in doomed}
    prog = main.shallow_copy()
    block = prog.global_block
    block.ops = [op for op in block.ops if id(op) not in doomed_ids]
    for name in removed_vars(doomed):
        block.vars.pop(name, None)
    if plan.lr_scheduler:
        lr = origin.global_block.vars[SCHEDULER_LR_VAR]
        var = lr.copy()
        var.persistable = True
        var.stop_gradient = None
        var.need_check_feed = None
        var.is_parameter = None
        block.add_var(var)
    return prog


def append_sends(main: Program, plan: PsPlan, trainer_id: int) -> Program:
    """sync / async: one send of every dense grad to the merged dense table (a control var and
    a send_barrier in sync); geo: one send per sparse table."""
    prog = main.shallow_copy()
    block = prog.global_block
    controls = []
    for ctx in plan.ctxs:
        if ctx.is_sparse != plan.is_geo:
            continue
        out = []
        if plan.is_sync:
            out = [new_control_var(block, stop_gradient=False)]
            controls += out
        is_sparse = (2 if ctx.distributed else 1) if ctx.is_sparse else 0
        block.ops.append(ps_op("send", {"X": list(ctx.grads)}, {"Out": out}, {
            "send_varnames": Attr("STRINGS", [ctx.name]), "is_sparse": Attr("INT", is_sparse),
            "table_id": Attr("INT", ctx.table_id)}, role=RPC))
    if plan.is_sync:
        block.ops.append(ps_op("send_barrier", {"X": controls}, {"Out": []}, {
            "trainer_id": Attr("INT", trainer_id), "half_async": Attr("BOOLEAN", True),
            "endpoints": Attr("STRINGS", list(BARRIER_ENDPOINTS))}, role=RPC))
    return prog


def trainer_main(main: Program, plan: PsPlan, trainer_id: int) -> Program:
    if plan.is_geo:
        return append_sends(main, plan, trainer_id)
    prog = demote_clip_ops(main, plan)
    prog = distributed_ops(prog, plan)
    prog = delete_optimizer(prog, main, plan)
    return append_sends(prog, plan, trainer_id)


# --- startup ---------------------------------------------------------------------------------
def delete_optimizer_state_inits(startup: Program, main: Program, plan: PsPlan) -> Program:
    """delete_extra_optimizer_pass: the inits (and vars) of what only the optimizer reads,
    learning_rate_0 excepted; LR-schedule ops are not looked at here."""
    doomed = set(removed_vars([main.global_block.ops[i] for i in plan.optimize_ops]))
    doomed.discard(SCHEDULER_LR_VAR)
    prog = startup.shallow_copy()
    block = prog.global_block
    block.ops = [op for op in block.ops if not doomed.intersection(op.output_names())]
    for name in sorted(doomed):
        block.vars.pop(name, None)
    return prog


def fake_init_tables(startup: Program, plan: PsPlan) -> Program:
    """fake_init_ops_pass: each sparse table's init op replaced by a fake_init of its shape,
    appended at the end (Paddle walks a set of names; here they go by name)."""
    prog = startup.shallow_copy()
    block = prog.global_block
    writers = table_writers(prog, plan.fake_init_tables)
    fakes, gone = [], set()
    for table in plan.fake_init_tables:
        (init,) = writers[table]        # plan.check_table_inits made sure
        shape = init.find_attr("shape")
        fakes.append(ps_op("fake_init", {}, {"Out": [table]}, {
            "shape": Attr("LONGS", [int(d) for d in shape.value] if shape else [])}))
        gone.add(id(init))
    block.ops = [op for op in block.ops if id(op) not in gone] + fakes
    return prog


def trainer_startup(startup: Program, main: Program, plan: PsPlan) -> Program:
    if plan.is_geo:
        return startup.shallow_copy()
    prog = delete_optimizer_state_inits(startup, main, plan)
    return fake_init_tables(prog, plan)
