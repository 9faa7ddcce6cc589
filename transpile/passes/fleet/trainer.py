"""Fleet trainer passes (ir/trainer_pass.py): the trainer's main and startup programs.

Passes `(program, env) -> program` (passes/pipeline.py), env.plan a FleetPlan; a pass's input
is left as it was.

Main (sync / async / half_async):
  demote_clip_ops -> delete_optimizer_ops -> fuse_sparse_lookups -> clip_pushed_rows
  -> append_sends
Startup:
  fake_init_tables -> init_from_server -> delete_optimizer_state_inits
Geo: the trainer keeps its optimizer; its clip ops are backward ops as in the other modes
(Paddle's CompileTimeStrategy re-labels them whatever the mode); main gets one send per sparse
table and one for the step counter, startup is unchanged.
"""
from __future__ import annotations

from ...core.errors import UserError
from ...ir.program import Attr, Op, Program, select
from ...ir.roles import BACKWARD, RPC, optimizer_only_vars
from ...plan.faults import (FLEET_CLIP_BEFORE_MERGE, FLEET_ORPHAN_SPARSE_GRAD_SUM,
                            FLEET_SPARSE_CLIP_DROPPED)
from ...plan.fleet import (FleetPlan, orphan_sums, remote_lookup_groups, sum_ops,
                           trainer_send_queues)
from .. import common, sparseclip
from ..build import make_op, new_control_var, role_attrs
from ..fuse import fuse_pulls
from ..pipeline import PassEnv, Pipeline, named


# --- main ------------------------------------------------------------------------------------
def demote_clip_ops(main: Program, env: PassEnv) -> Program:
    """Gradient-clip ops run on the trainer as backward ops (Fleet re-labels them so). Fixing
    fleet-clip-before-merge, each becomes an assign of the unclipped gradient to the var the
    trainer sends: the pservers clip the averaged gradient (passes/fleet/pserver.py)."""
    plan = env.plan
    fix = FLEET_CLIP_BEFORE_MERGE in plan.fixes
    # (a table whose rows the trainer clips keeps its clip: clip_pushed_rows replaces it)
    own = {c.op for c in plan.trainer_clips}
    prog = common.demote_clip_ops(main, [u for u in plan.clip_ops if u not in own],
                                  _unclipped if fix else None)
    if own:
        prog = common.demote_clip_ops(prog, [u for u in plan.clip_ops if u in own])
    if FLEET_SPARSE_CLIP_DROPPED in plan.fixes:
        # fixing fleet-sparse-clip-dropped: the pservers clip the pushed table's gradient; the
        # trainer's clip of it, whose result nothing sends, goes
        grads = {p.grad for p in plan.sparse_pairs}
        outs = {op.output("Out")[0] for op in select(env.main.global_block.ops, plan.clip_ops)
                if op.input("X")[:1] and op.input("X")[0] in grads and op.output("Out")}
        prog.global_block.ops = [op for op in prog.global_block.ops if not (
            op.type in ("clip", "clip_by_norm", "assign") and op.output("Out")[:1]
            and op.output("Out")[0] in outs)]
    return prog


def _unclipped(clip: Op) -> Op:
    """The assign that replaces a clip op when the pservers clip the averaged gradient."""
    return make_op("assign", {"X": clip.input("X")}, {"Out": clip.output("Out")},
                   role_attrs(BACKWARD))


def delete_optimizer_ops(main: Program, env: PassEnv) -> Program:
    """Remove optimizer and LR-schedule ops and the vars only they read."""
    plan = env.plan
    doomed = set(plan.optimize_ops) | set(plan.lr_ops)
    drop_vars = optimizer_only_vars(select(env.main.global_block.ops, doomed))
    prog = main.shallow_copy()
    block = prog.global_block
    block.ops = [op for op in block.ops if op.uid not in doomed]
    for name in drop_vars:
        block.vars.pop(name, None)
    if plan.has_lr_scheduler and plan.lr_var:
        # the scheduler feeds the learning rate on the trainer: keep the var
        lr = env.main.global_block.vars[plan.lr_var].copy()
        lr.persistable = True
        block.add_var(lr)
    return prog


def _table_id(plan: FleetPlan, table: str) -> int:
    if table not in plan.table_ids:
        raise UserError("embedding table %s is looked up with remote_prefetch but no optimizer "
                        "updates it: can not find a sparse table for it" % table)
    return plan.table_ids[table]


def fuse_sparse_lookups(main: Program, env: PassEnv) -> Program:
    """One distributed_lookup_table per remote table, one distributed_push_sparse for its grads.

    The pull fusion is passes/fuse.py's (Paddle's _pull_sparse_fuse, its reordering included;
    a table whose ids are not 2-D is refused there, as Paddle's InferShape refuses it).
    """
    plan = env.plan
    prog = main.shallow_copy()
    block = prog.global_block
    pulls, pushes = remote_lookup_groups(block.ops)
    if not pulls:
        return prog
    emb_size = {}
    for table, group in pulls.items():
        w = block.vars.get(table)
        if w is None:
            raise UserError("embedding table %s is not declared in the program" % table,
                            op=group[0])
        emb_size[table] = int(w.shape[1]) if w.shape and len(w.shape) > 1 else 0
        _table_id(plan, table)

    def lookup(table: str, ids: list, outs: list) -> Op:
        return make_op("distributed_lookup_table", {"Ids": ids, "W": [table]},
                       {"Outputs": outs}, _lookup_attrs(pulls[table][0], plan.table_ids[table]))

    block.ops = fuse_pulls(block, pulls, lookup, False, "Paddle's distributed_ops_pass")
    if pushes:
        _fuse_pushes(block, pushes, plan, emb_size)
    return prog


def _lookup_attrs(first: Op, table_id: int) -> dict:
    """The attrs of a table's distributed_lookup_table, from its first lookup."""
    return {"dtype": Attr("INT", 5),
            "is_distributed": Attr("BOOLEAN", bool(first.attr("is_distributed"))),
            "is_test": Attr("BOOLEAN", False),
            "lookup_table_version": Attr("STRING", first.type),
            "padding_idx": common.copy_attr(first, "padding_idx", Attr("LONG", -1)),
            "table_id": Attr("INT", table_id), **role_attrs(0)}


def _fill(name: str, value: float) -> Op:
    """The fill_constant of a new show / clk var (INT64 [1]), as Paddle 2.0 writes it."""
    return make_op("fill_constant", {}, {"Out": [name]}, {
        "dtype": Attr("INT", 3), "force_cpu": Attr("BOOLEAN", False),
        "place_type": Attr("INT", -1), "shape": Attr("LONGS", [1]),
        "str_value": Attr("STRING", ""), "value": Attr("FLOAT", value), **role_attrs(0)})


def _fuse_pushes(block, pushes: dict, plan: FleetPlan, emb_size: dict) -> None:
    """Each table's lookup grads replaced by one distributed_push_sparse at the end (and,
    fixing fleet-orphan-sparse-grad-sum, the `sum` of them that would be left reading nothing)."""
    show, clk = common.show_click_vars(block, next(iter(pushes.values()))[0], "INT64", _fill)
    # a table whose rows the trainer clips keeps its lookup grads and their sum
    # (passes/sparseclip.py)
    kept = {c.table for c in plan.trainer_clips}
    gone = {id(op) for t, group in pushes.items() if t not in kept for op in group}
    if FLEET_ORPHAN_SPARSE_GRAD_SUM in plan.fixes:
        sums = sum_ops(block.ops)
        gone |= {id(op) for t, group in pushes.items() if t not in kept
                 for op in orphan_sums(sums, group)}
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
                "padding_idx": common.copy_attr(first, "padding_idx", Attr("LONG", -1)),
                "push_sparse_version": Attr("STRING", "push_sparse"),
                "size": Attr("INT", emb_size[table]),
                "table_id": Attr("INT", plan.table_ids[table]),
                "use_cvm_op": Attr("BOOLEAN", False), **role_attrs(0)}))


def clip_pushed_rows(main: Program, env: PassEnv) -> Program:
    """Fixing fleet-sparse-clip-dropped where no pserver can clip (a global-norm clip, a norm
    over a sliced table): the trainer clips each clipped table's rows before its push
    (passes/sparseclip.py)."""
    if not env.plan.trainer_clips:
        return main
    return sparseclip.clip_pushed_rows(main, env.plan.trainer_clips, env.plan.table_ids,
                                       sparseclip.lookup_types(env.main))


def append_sends(main: Program, env: PassEnv) -> Program:
    """A send per communicator queue; in sync / half_async each send yields a control var and a
    send_barrier waits for all of them."""
    plan = env.plan
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
            "trainer_id": Attr("INT", env.trainer_id), **role_attrs(RPC)}))
    return prog


# --- startup ---------------------------------------------------------------------------------
def fake_init_tables(startup: Program, env: PassEnv) -> Program:
    """Tables live on the pservers: the trainer only declares them (fake_init, same shape)."""
    plan = env.plan
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


def init_from_server(startup: Program, env: PassEnv) -> Program:
    """Every trainer pulls the dense params from the pservers, then waits for all of them."""
    plan = env.plan
    prog = startup.shallow_copy()
    block = prog.global_block
    block.ops.append(make_op("recv", {}, {}, {
        "recv_varnames": Attr("STRINGS", [p.param for p in plan.dense_pairs]),
        "trainer_id": Attr("INT", env.trainer_id), "op_role": Attr("INT", RPC)}))
    cv = new_control_var(block, persistable=False, stop_gradient=True)
    block.ops.append(make_op("fetch_barrier", {}, {"Out": [cv]}, {
        "endpoints": Attr("STRINGS", list(plan.endpoints)),
        "trainer_id": Attr("INT", env.trainer_id), **role_attrs(RPC)}))
    return prog


def delete_optimizer_state_inits(startup: Program, env: PassEnv) -> Program:
    """Drop the inits (and vars) of optimizer state: it lives on the pservers now."""
    return common.delete_optimizer_state_inits(startup, env.main, env.plan.optimize_ops)


MAIN = Pipeline("trainer main", tuple(map(named, (
    demote_clip_ops, delete_optimizer_ops, fuse_sparse_lookups, clip_pushed_rows,
    append_sends))))
STARTUP = Pipeline("trainer startup", tuple(map(named, (
    fake_init_tables, init_from_server, delete_optimizer_state_inits))))
def send_table_rows(main: Program, env: PassEnv) -> Program:
    """Geo, fixing fleet-geo-dense-table-grad: a table's send carries its lookups' raw
    gradient rows (passes/common.py)."""
    return common.send_table_rows(main, env.plan.geo_table_rows)


GEO_MAIN = Pipeline("trainer main", tuple(map(named, (demote_clip_ops, append_sends,
                                                      send_table_rows))))
GEO_STARTUP = Pipeline("trainer startup", ())
