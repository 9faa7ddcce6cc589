"""Classic style, trainer side: the trainer's main and startup programs.

The trainer keeps forward and backward, sends each grad (split per pserver block) after the op
that last writes it, waits at a barrier (sync), receives each parameter block and concatenates
the blocks back; the optimizer and LR-schedule ops leave for the pservers. Its startup program
receives the pserver's initial values so that every trainer starts from the same parameters.

The passes run as pipelines (MAIN, STARTUP); each returns a new program.
"""
from __future__ import annotations

import itertools
from typing import Optional
from dataclasses import dataclass, field

from ...core.errors import RefusedError
from ...ir import roles
from ...ir.program import Program, select
from ...ir.roles import optimizer_only_vars
from ...ir.tables import LOOKUP_TABLE_TYPES, ids_not_2d, ids_refusal
from ...plan.classic import DistributionPlan
from .. import common
from ..build import OpOrder, make_op, new_control_var, rename_uses, rename_var, tensor_like
from ..pipeline import PassEnv, PassState, Pipeline, named


@dataclass
class TrainerVars:
    """Names the trainer main program uses for one trainer: the split param / grad vars."""
    params: dict = field(default_factory=dict)    # param -> [trainer-side block var names]
    grads: dict = field(default_factory=dict)     # param -> [names the grad blocks are sent as]


def trainer_vars(plan: DistributionPlan, trainer_id: int) -> TrainerVars:
    tv = TrainerVars()
    for p in plan.params:
        tv.params[p.name] = [b.name for b in p.blocks]
        tv.grads[p.name] = [plan.sent_grad_name(g, trainer_id) for g in p.grad_blocks]
    return tv


def _send_barrier_attrs(plan, trainer_id, half_async):
    return {"endpoints": list(plan.endpoints), "trainer_id": trainer_id,
            "half_async": half_async, roles.ROLE_ATTR: roles.RPC}


# --- main ------------------------------------------------------------------------------------
# Passes `(program, env) -> program` (passes/pipeline.py), env.plan a DistributionPlan. What one
# leaves for a later one on the same trainer is in env.state, a ClassicTrainerState.

@dataclass
class ClassicTrainerState(PassState):
    """What a classic trainer's main passes leave for later ones."""
    table_grads: Optional[list] = None      # the distributed table's grad, one per pserver
    send_out: Optional[dict] = None         # param -> the control var its send writes
    barrier: Optional[str] = None           # send_barrier's control var
    table_dep: Optional[str] = None         # the distributed table's send's (None: no table)
    recv_outputs: Optional[list] = None     # what the recvs write (fetch_barrier's outputs)


def demote_clip_ops(main: Program, env: PassEnv) -> Program:
    """The @CLIP ops stay on the trainer as backward ops."""
    return common.demote_clip_ops(main, env.plan.clip_ops)


def declare_split_vars(main: Program, env: PassEnv) -> Program:
    """Declare the param / grad block vars (and the distributed table's per-pserver grads); an
    unsliced grad is renamed where the pservers need to tell the trainers apart."""
    plan, trainer_id = env.plan, env.trainer_id
    prog = main.shallow_copy()
    block = prog.global_block
    table = plan.distributed_table
    table_grads = []
    if table is not None:
        gvar = block.var(table.grad)
        for i in range(len(plan.endpoints)):
            name = plan.table_sent_name(i, trainer_id)
            block.add_var(tensor_like(gvar, name, gvar.shape, None, stop_gradient=False))
            table_grads.append(name)
    env.state.table_grads = table_grads
    _declare_split_vars(block, plan, trainer_vars(plan, trainer_id))
    return prog


def insert_sends(main: Program, env: PassEnv) -> Program:
    """After the last writer of each grad: split it into blocks (unless the communicator
    does) and send it."""
    prog = main.shallow_copy()
    env.state.send_out = _insert_sends(prog.global_block, env.plan,
                                       trainer_vars(env.plan, env.trainer_id))
    return prog


def append_barrier_and_recvs(main: Program, env: PassEnv) -> Program:
    """The async LR-decay counter's send, the send_barrier (sync, half_async), then a recv of
    every parameter (its blocks, or the whole one the communicator splits)."""
    plan, trainer_id = env.plan, env.trainer_id
    prog = main.shallow_copy()
    block = prog.global_block
    send_out = env.state.send_out
    # Paddle declares the barrier's output even in async mode, where nothing uses it.
    barrier = env.state.barrier = new_control_var(block, stop_gradient=False)
    table_dep = env.state.table_dep = new_control_var(block, stop_gradient=False) \
        if plan.distributed_table is not None else None
    deps = list(send_out.values()) + ([table_dep] if table_dep else [])
    if plan.lr_counter is not None and plan.lr_ops:
        # after everything (Paddle appends it behind the optimizer ops it later deletes)
        name = plan.counter_name(trainer_id)
        cv = new_control_var(block, stop_gradient=False)
        block.ops.append(make_op(
            "send", {"X": [name]}, {"Out": [cv]},
            {"epmap": list(plan.endpoints), "sections": [],
             "send_varnames": [name] if plan.runtime_split else [], "merge_add": True,
             "use_send_handler": False, roles.ROLE_ATTR: roles.RPC,
             roles.ROLE_VAR_ATTR: [name, name]}))
        deps.append(cv)
    if plan.sync or plan.mode == "half_async":
        block.ops.append(make_op("send_barrier", {"X": deps}, {"Out": [barrier]},
                                 _send_barrier_attrs(plan, trainer_id, not plan.sync)))
    tv = trainer_vars(plan, trainer_id)
    recv_outputs = env.state.recv_outputs = []
    for p in plan.params:
        if p.remote_prefetch:
            continue
        outs = list(tv.params[p.name])
        recv_varnames = []
        if plan.runtime_split:
            recv_varnames, outs = outs, [p.name]
        recv_outputs += outs
        grads = tv.grads[p.name]
        block.ops.append(make_op(
            "recv", {"X": [barrier if plan.sync else send_out[p.name]]}, {"Out": outs},
            {"epmap": [b.endpoint for b in p.blocks], "recv_varnames": recv_varnames,
             "trainer_id": trainer_id, roles.ROLE_ATTR: roles.RPC,
             roles.ROLE_VAR_ATTR: [p.name, grads[0] if len(grads) == 1 else p.grad]}))
    return prog


def insert_distributed_lookups(main: Program, env: PassEnv) -> Program:
    """The remote-prefetch lookups of each table become one distributed_lookup_table."""
    prog = main.shallow_copy()
    block = prog.global_block
    _insert_distributed_lookups(block, env.plan, select(block.ops, env.plan.remote_prefetch_ops),
                                env.trainer_id)
    return prog


def fetch_parameters(main: Program, env: PassEnv) -> Program:
    """Sync: a fetch_barrier after the recvs; the sliced parameters concatenated back (unless
    the communicator does it)."""
    plan = env.plan
    prog = main.shallow_copy()
    block = prog.global_block
    if plan.sync:
        block.ops.append(make_op(
            "fetch_barrier", {"X": [env.state.barrier]},
            {"Out": env.state.recv_outputs},
            {"endpoints": list(plan.endpoints), "trainer_id": env.trainer_id,
             roles.ROLE_ATTR: roles.RPC}))
    if not plan.runtime_split:
        tv = trainer_vars(plan, env.trainer_id)
        for p in plan.params:
            if p.sliced and not p.remote_prefetch:
                block.ops.append(make_op("concat", {"X": tv.params[p.name]},
                                         {"Out": [p.name]},
                                         {"axis": 0, roles.ROLE_ATTR: roles.DIST}))
    return prog


def prefetch_distributed_table(main: Program, env: PassEnv) -> Program:
    """The distributed table: its lookups become split_ids -> prefetch -> merge_ids, its grad
    is split by id and sent to every pserver."""
    if env.plan.distributed_table is None:
        return main
    prog = main.shallow_copy()
    _prefetch_distributed_table(prog.global_block, env.plan, env.state.table_grads,
                                env.state.table_dep, env.trainer_id)
    return prog


def delete_optimizer_ops(main: Program, env: PassEnv) -> Program:
    """The optimizer and the LR schedule now run on the pservers: their ops and the vars only
    the optimizer reads leave the trainer."""
    plan = env.plan
    prog = main.shallow_copy()
    block = prog.global_block
    opt_ops = select(block.ops, plan.optimize_ops)
    drop = set(plan.optimize_ops) | set(plan.lr_ops)
    block.ops = [op for op in block.ops if op.uid not in drop]
    for name in optimizer_only_vars(opt_ops):
        block.vars.pop(name, None)
    return prog


MAIN = Pipeline("trainer main", (
    named(demote_clip_ops), named(declare_split_vars, writes=("table_grads",)),
    named(insert_sends, writes=("send_out",)),
    named(append_barrier_and_recvs, reads=("send_out",),
          writes=("barrier", "table_dep", "recv_outputs")),
    named(insert_distributed_lookups), named(fetch_parameters, reads=("barrier", "recv_outputs")),
    named(prefetch_distributed_table, reads=("table_grads", "table_dep")),
    named(delete_optimizer_ops)), state=ClassicTrainerState)


def _declare_split_vars(block, plan: DistributionPlan, tv: TrainerVars) -> None:
    """Declare the param / grad block vars; an unsliced grad is renamed in place when the
    pservers need to tell trainers apart."""
    renames = {}
    for p in plan.params:
        pvar = block.var(p.name)
        if p.sliced:
            for b in p.blocks:
                block.add_var(tensor_like(pvar, b.name, b.shape, False, stop_gradient=True))
        gvar = block.var(p.grad)
        sent = tv.grads[p.name]
        if not p.sliced:
            if sent[0] != p.grad:
                rename_var(block, p.grad, sent[0])
                renames[p.grad] = sent[0]
            continue
        for name, b in zip(sent, p.blocks):
            block.add_var(tensor_like(gvar, name, b.shape, False, stop_gradient=False))
    rename_uses(block, renames)


def _insert_sends(block, plan: DistributionPlan, tv: TrainerVars) -> dict:
    """After the last writer of each grad: split it into blocks (unless the communicator does)
    and send it. Returns param -> the send's control var, in send order.

    The new ops are placed by sort keys, not list inserts (a walk over the program per grad):
    an op inserted right after op X gets X's key plus a decreasing counter, so that it goes
    before the ops inserted after X earlier, as a list insert would put it.
    """
    out = {}
    last_writer = {}
    for i, op in enumerate(block.ops):
        for name in op.output_names():
            last_writer[name] = i
    keys = [(i,) for i in range(len(block.ops))]
    new_ops = []
    counter = itertools.count(1)

    def insert_after(key, op):
        key = key + (-next(counter),)
        new_ops.append((key, op))
        return key

    for pname in plan.send_order:
        p = plan.param(pname)
        sent = tv.grads[pname]
        whole = sent[0] if not p.sliced else p.grad
        at = (last_writer.get(whole, -1),)
        if p.sliced and not plan.runtime_split:
            rows = [b.rows for b in p.blocks]
            if p.grad_kind == "SELECTED_ROWS":
                split = make_op("split_selected_rows", {"X": [p.grad]}, {"Out": sent},
                                {"height_sections": rows, roles.ROLE_ATTR: roles.DIST})
            else:
                split = make_op("split_byref", {"X": [p.grad]}, {"Out": sent},
                                {"sections": rows, roles.ROLE_ATTR: roles.DIST})
            at = insert_after(at, split)
        cv = new_control_var(block, stop_gradient=False)
        out[pname] = cv
        if plan.runtime_split:
            inputs, sections = [whole], [b.rows for b in p.blocks]
            send_varnames = list(sent)
        else:
            inputs, sections, send_varnames = list(sent), [], []
        insert_after(at, make_op(
            "send", {"X": inputs}, {"Out": [cv]},
            {"epmap": [b.endpoint for b in p.blocks], "sections": sections,
             "send_varnames": send_varnames, roles.ROLE_ATTR: roles.RPC,
             roles.ROLE_VAR_ATTR: [pname, whole]}))
    placed = list(zip(keys, block.ops)) + new_ops
    placed.sort(key=lambda e: e[0])
    block.ops = [op for _, op in placed]
    return out


def _insert_distributed_lookups(block, plan: DistributionPlan, remote_ops: list,
                                trainer_id: int) -> None:
    """Replace the remote-prefetch lookups of each table by one distributed_lookup_table op
    that fetches the rows from the pservers holding the table's blocks."""
    if not any(p.remote_prefetch for p in plan.params):
        return
    readers: dict = {}          # var -> the remote lookups reading it, in program order
    for op in remote_ops:
        for name in dict.fromkeys(op.input_names()):
            readers.setdefault(name, []).append(op)
    order = OpOrder(block.ops)
    for p in plan.params:
        if not p.remote_prefetch:
            continue
        ops, op_type = [], None
        for op in readers.get(p.name, ()):
            if id(op) in order.live and op_type in (None, op.type):
                op_type = op.type
                ops.append(op)
        if op_type not in LOOKUP_TABLE_TYPES:
            continue
        ids = [op.input("Ids")[0] for op in ops]
        outs = [op.output("Out")[0] for op in ops]
        padding_idx = ops[0].attr("padding_idx")
        for op in ops:
            order.remove(op)
        # Paddle's placement: right after the last op writing any of the ids, provided every
        # output is still read later on.
        defs = order.keys(order.producers, ids)
        uses = [order.keys(order.consumers, [name]) for name in outs]
        if not all(uses) or defs and min(max(u) for u in uses) <= max(defs):
            raise RefusedError("something wrong with distribute_transpiler, submit a issue is "
                               "recommended (Paddle's _update_remote_sparse_update_op can not "
                               "place the distributed lookup of %r: its ids are computed after "
                               "its output is used)" % p.name)
        bad = ids_not_2d(block, ops)
        if bad:
            raise RefusedError(ids_refusal(p.name, bad, "Paddle's "
                                           "_update_remote_sparse_update_op inserting it"))
        order.add(make_op(
            "distributed_lookup_table", {"Ids": ids, "W": [p.name]}, {"Outputs": outs},
            {"table_names": [b.name for b in p.blocks],
             "height_sections": [b.rows for b in p.blocks],
             "endpoints": [b.endpoint for b in p.blocks], "padding_idx": padding_idx,
             "trainer_id": trainer_id, "lookup_table_version": op_type,
             roles.ROLE_ATTR: roles.FORWARD}),
            order.after(max(defs) if defs else order.BEFORE_ALL))
    block.ops = order.ops()


def _prefetch_distributed_table(block, plan: DistributionPlan, table_grads: list,
                                table_dep: str, trainer_id: int) -> None:
    """The distributed table: its lookups become split_ids -> prefetch -> merge_ids, and its
    grad is split by id and sent to every pserver."""
    table = plan.distributed_table
    ids, outs, first = [], [], -1
    kept = []
    for i, op in enumerate(block.ops):
        if op.type in LOOKUP_TABLE_TYPES and op.input("W") == [table.name]:
            if op.attr("is_distributed") is not True:
                raise RefusedError("lookup_table ops on the distributed table %r must all set "
                                   "is_distributed" % table.name)
            if first < 0:
                first = len(kept)
            ids.append(op.input("Ids")[0])
            outs.append(op.output("Out")[0])
        else:
            kept.append(op)
    if first < 0:
        raise RefusedError("distributed table %r has no lookup_table op" % table.name)
    block.ops = kept
    n = len(plan.endpoints)
    ids_var, out_var = block.var(ids[0]), block.var(outs[0])
    pin = ["prefetch_compress_in_tmp_%d" % i for i in range(n)]
    pout = ["prefetch_compress_out_tmp_%d" % i for i in range(n)]
    for a, b in zip(pin, pout):
        block.add_var(tensor_like(ids_var, a, ids_var.shape, None, stop_gradient=False))
        block.add_var(tensor_like(out_var, b, out_var.shape, None, stop_gradient=False))
    fwd = {roles.ROLE_ATTR: roles.FORWARD}
    block.ops[first:first] = [
        make_op("split_ids", {"Ids": ids}, {"Out": pin}, dict(fwd)),
        make_op("prefetch", {"X": pin}, {"Out": pout},
                {"epmap": list(plan.endpoints), **fwd}),
        make_op("merge_ids", {"Ids": ids, "Rows": pin, "X": pout}, {"Out": outs}, dict(fwd))]

    at = next((i for i, op in enumerate(block.ops) if table.grad in op.output_names()), None)
    if at is None:
        raise RefusedError("no op computes the grad %r of the distributed table" % table.grad)
    block.ops[at + 1:at + 1] = [
        make_op("split_ids", {"Ids": [table.grad]}, {"Out": table_grads},
                {roles.ROLE_ATTR: roles.DIST}),
        make_op("send", {"X": table_grads}, {"Out": [table_dep] if plan.sync else []},
                {"epmap": list(plan.endpoints), "trainer_id": trainer_id,
                 roles.ROLE_ATTR: roles.RPC, roles.ROLE_VAR_ATTR: [table.name, table.grad]})]


# --- startup ------------------------------------------------------------------------------------
def receive_parameters(startup: Program, env: PassEnv) -> Program:
    """After the local init, receive every (non-table) parameter from the pservers, wait for
    all of them, and concatenate the sliced ones back."""
    plan, trainer_id = env.plan, env.trainer_id
    prog = startup.copy()
    block = prog.global_block
    mblock = env.main.global_block
    tables = set(plan.fake_init_tables)
    for p in plan.params:
        if p.name in tables:
            continue
        names = [b.name for b in p.blocks]
        if p.sliced:
            pvar = mblock.var(p.name)
            for b in p.blocks:
                if block.var(b.name) is None:
                    block.add_var(tensor_like(pvar, b.name, b.shape, False, lod_level=0))
        block.ops.append(make_op("recv", {"X": []}, {"Out": names},
                                 {"epmap": [b.endpoint for b in p.blocks],
                                  "trainer_id": trainer_id, roles.ROLE_ATTR: roles.RPC}))
    cv = new_control_var(block, stop_gradient=False)
    block.ops.append(make_op("fetch_barrier", {}, {"Out": [cv]},
                             {"endpoints": list(plan.endpoints), "trainer_id": trainer_id,
                              roles.ROLE_ATTR: roles.RPC}))
    for p in plan.params:
        if p.name in tables or not p.sliced:
            continue
        if block.var(p.name) is None:
            v = mblock.var(p.name)
            block.add_var(tensor_like(v, p.name, v.shape, v.persistable))
        block.ops.append(make_op("concat", {"X": [b.name for b in p.blocks]},
                                 {"Out": [p.name]},
                                 {"axis": 0, roles.ROLE_ATTR: roles.FORWARD}))
    return prog


def delete_optimizer_state_inits(startup: Program, env: PassEnv) -> Program:
    """The inits (and vars) of what only the optimizer reads: it lives on the pservers."""
    dead = set(optimizer_only_vars(select(env.main.global_block.ops, env.plan.optimize_ops)))
    prog = startup.shallow_copy()
    block = prog.global_block
    block.ops = [op for op in block.ops if not dead & set(op.output_names())]
    for name in dead:
        block.vars.pop(name, None)
    return prog


def fake_init_tables(startup: Program, env: PassEnv) -> Program:
    """The sparse tables live on the pservers: each one's init becomes a fake_init."""
    prog = startup.shallow_copy()
    block = prog.global_block
    tables = sorted(env.plan.fake_init_tables)
    if not tables:
        return prog
    wanted = set(tables)
    writers: dict = {}          # table -> the ops writing it, in program order (one scan)
    for op in block.ops:
        for name in wanted.intersection(op.output_names()):
            writers.setdefault(name, []).append(op)
    removed: set = set()        # ids of the inits replaced so far
    fake_inits = []
    for name in tables:
        if block.var(name) is None:
            raise RefusedError("sparse table %r is not declared in the startup program" % name)
        inits = [op for op in writers.get(name, ()) if id(op) not in removed]
        if len(inits) != 1:
            raise RefusedError("sparse table %r must have exactly one init op in the startup "
                               "program, found %d" % (name, len(inits)))
        removed.add(id(inits[0]))
        fake_inits.append(make_op("fake_init", {}, {"Out": [name]},
                                  {"shape": list(inits[0].attr("shape") or []),
                                   roles.ROLE_ATTR: roles.FORWARD}))
    block.ops = [op for op in block.ops if id(op) not in removed] + fake_inits
    return prog


STARTUP = Pipeline("trainer startup", tuple(map(named, (
    receive_parameters, delete_optimizer_state_inits, fake_init_tables))))
