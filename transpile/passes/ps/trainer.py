"""The ps trainer programs (CpuSyncPsProgramBuilder / CpuAsyncPsProgramBuilder /
GeoPsProgramBuilder): passes `(program, env) -> program` (passes/pipeline.py), env.plan a
PsPlan.

Main, sync / async:
  demote_clip_ops -> distributed_ops (lookups.py) -> clip_pushed_rows -> delete_optimizer
  -> append_sends
Startup, sync / async:
  delete_optimizer_state_inits -> fake_init_tables
Geo: the optimizer stays; main gets a send per sparse table, startup is unchanged.
(add_lr_decay_table_pass is applied by Paddle to no program at all: nothing to do.)
"""
from __future__ import annotations

from ...ir.lr_schedule import SCHEDULER_LR_VAR
from ...ir.program import Attr, Program, select
from ...ir.roles import RPC, optimizer_only_vars
from ...plan.ps import table_writers
from .. import common, sparseclip
from ..build import new_control_var
from ..pipeline import PassEnv, Pipeline, named
from .lookups import distributed_ops
from .opmake import ps_op

# send_barrier's registered default endpoints: Paddle does not set the cluster's
BARRIER_ENDPOINTS = ["127.0.0.1:6164"]


# --- main ------------------------------------------------------------------------------------
def demote_clip_ops(main: Program, env: PassEnv) -> Program:
    """Gradient-clip ops stay on the trainer as backward ops (get_optimize_ops re-labels
    them)."""
    return common.demote_clip_ops(main, env.plan.clip_ops)


def clip_pushed_rows(main: Program, env: PassEnv) -> Program:
    """Fixing ps-sparse-clip-dropped: the trainer clips each clipped table's rows before its
    push (passes/sparseclip.py)."""
    if not env.plan.trainer_clips:
        return main
    return sparseclip.clip_pushed_rows(main, env.plan.trainer_clips, env.plan.table_ids,
                                       sparseclip.lookup_types(env.main))


def delete_optimizer(main: Program, env: PassEnv) -> Program:
    """Optimizer and LR-schedule ops out, with the vars only they read; an LR scheduler's
    learning_rate_0 declared again, persistable."""
    plan = env.plan
    doomed = select(env.main.global_block.ops, set(plan.optimize_ops) | set(plan.lr_ops))
    doomed_uids = {op.uid for op in doomed}
    prog = main.shallow_copy()
    block = prog.global_block
    block.ops = [op for op in block.ops if op.uid not in doomed_uids]
    for name in optimizer_only_vars(doomed):
        block.vars.pop(name, None)
    if plan.lr_scheduler:
        var = env.main.global_block.vars[SCHEDULER_LR_VAR].copy()
        var.persistable = True
        var.stop_gradient = None
        var.need_check_feed = None
        var.is_parameter = None
        block.add_var(var)
    return prog


def append_sends(main: Program, env: PassEnv) -> Program:
    """sync / async: one send of every dense grad to the merged dense table (a control var and
    a send_barrier in sync); geo: one send per sparse table."""
    plan = env.plan
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
            "trainer_id": Attr("INT", env.trainer_id), "half_async": Attr("BOOLEAN", True),
            "endpoints": Attr("STRINGS", list(BARRIER_ENDPOINTS))}, role=RPC))
    return prog


def fuse_lookups(main: Program, env: PassEnv) -> Program:
    """distributed_ops_pass: each table's lookups fused into distributed_lookup_table ops, its
    lookup grads into one distributed_push_sparse (lookups.py)."""
    return distributed_ops(main, env.plan)


# --- startup ---------------------------------------------------------------------------------
def delete_optimizer_state_inits(startup: Program, env: PassEnv) -> Program:
    """delete_extra_optimizer_pass: the inits (and vars) of what only the optimizer reads,
    learning_rate_0 excepted; LR-schedule ops are not looked at here."""
    return common.delete_optimizer_state_inits(startup, env.main, env.plan.optimize_ops,
                                               keep=(SCHEDULER_LR_VAR,))


def fake_init_tables(startup: Program, env: PassEnv) -> Program:
    """fake_init_ops_pass: each sparse table's init op replaced by a fake_init of its shape,
    appended at the end (Paddle walks a set of names; here they go by name)."""
    plan = env.plan
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


MAIN = Pipeline("trainer main", tuple(map(named, (
    demote_clip_ops, fuse_lookups, clip_pushed_rows, delete_optimizer, append_sends))))
STARTUP = Pipeline("trainer startup", tuple(map(named, (
    delete_optimizer_state_inits, fake_init_tables))))
def send_table_rows(main: Program, env: PassEnv) -> Program:
    """Geo, fixing ps-geo-dense-table-grad: a table's send carries its lookups' raw gradient
    rows (passes/common.py)."""
    return common.send_table_rows(main, env.plan.geo_table_rows)


GEO_MAIN = Pipeline("trainer main", tuple(map(named, (append_sends, send_table_rows))))
GEO_STARTUP = Pipeline("trainer startup", ())
