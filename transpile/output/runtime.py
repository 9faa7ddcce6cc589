"""runtime.json: what a fleet trainer's communicator is started with (see docs/runtime-json.md).

Fleet's init_worker builds a Communicator(mode, kwargs, envs) and calls init_with_ctx(send_ctx,
recv_ctx); this module computes those arguments from the plan, as plain JSON values.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.program import Program
from ..ir.initializers import INITIALIZER_ATTRS, initializer_signature
from ..plan.fleet import STEP_COUNTER, FleetPlan, delta_name

# The dicts of runtime.json written in their own order, not sorted: Paddle's communicator gets
# them in this order (dense grads, then the sparse tables in program order, then the step
# counter), and a trainer's distributed_lookup_table / distributed_push_sparse names a sparse
# table by its place among the sparse entries (every context's own table_id is -1).
ORDERED_CONTEXTS = frozenset({"send_ctx", "recv_ctx"})


def runtime_bytes(runtime: dict) -> bytes:
    """The bytes of a runtime.json: keys sorted, but the contexts in their own order."""
    from .outdir import json_bytes
    return json_bytes(runtime, keep=ORDERED_CONTEXTS)

# Communicator flags per mode: TrainerRuntimeConfig's defaults (CPU_NUM=1, no FLAGS_* set).
_SYNC_ENVS = {"communicator_max_merge_var_num": "1", "communicator_send_wait_times": "5",
              "communicator_thread_pool_size": "5", "communicator_send_queue_size": "1"}
_ASYNC_ENVS = {"communicator_max_merge_var_num": "1", "communicator_send_queue_size": "1",
               "communicator_independent_recv_thread": "1",
               "communicator_min_send_grad_num_before_recv": "1",
               "communicator_thread_pool_size": "5", "communicator_send_wait_times": "5",
               "communicator_is_sgd_optimizer": "1", "rpc_deadline": "180000",
               "rpc_retry_times": "3"}


def envs(plan: FleetPlan, geo_push_nums: int) -> dict:
    if plan.mode == "async":
        return dict(_ASYNC_ENVS)
    if plan.is_geo:
        n = str(geo_push_nums)
        return {"communicator_thread_pool_size": "5", "communicator_send_wait_times": "5",
                "communicator_max_merge_var_num": n, "communicator_send_queue_size": n}
    return dict(_SYNC_ENVS)


@dataclass(frozen=True)
class ContextKind:
    """What a communicator context is besides its slices: a sparse (and distributed) table's,
    or a tensor table's (`table_id` its number)."""
    is_sparse: bool = False
    is_distributed: bool = False
    table_id: int = -1
    is_tensor_table: bool = False


def comm_context(name: str, names: list, endpoints: list, sections: list, origin: list,
                 trainer_id: int, kind: ContextKind = ContextKind()) -> dict:
    """One communicator context (Paddle's CommContext), field for field."""
    return {"var_name": name, "split_varnames": list(names), "split_endpoints": list(endpoints),
            "sections": list(sections), "origin_varnames": list(origin),
            "trainer_id": trainer_id, "aggregate": True, "is_sparse": kind.is_sparse,
            "is_distributed": kind.is_distributed, "table_id": kind.table_id,
            "is_tensor_table": kind.is_tensor_table, "is_datanorm_table": False,
            "program_id": -1, "remote_sparse_ids": []}


def _ctx(plan: FleetPlan, name: str, slices: tuple, trainer_id: int, *, is_grad: bool,
         is_send: bool, is_sparse: bool = False, is_distributed: bool = False) -> dict:
    names, eps, sections = [], [], []
    for s in slices:
        if plan.is_geo:
            names.append(delta_name(s.name) if is_send else s.name)
        elif is_grad:
            names.append(plan.sent_grad_name(s.name, trainer_id))
        else:
            names.append(s.name)
        sections.append(s.rows)
        eps.extend(plan.endpoint_of(s.name))
    return comm_context(name, names, eps, sections, [name], trainer_id,
                        ContextKind(is_sparse=is_sparse, is_distributed=is_distributed))


def step_context(plan: FleetPlan, trainer_id: int, table_id: int) -> dict:
    """The global-step queue: one counter on every pserver, a tensor table."""
    n = len(plan.endpoints)
    return comm_context(STEP_COUNTER, [STEP_COUNTER] * n, list(plan.endpoints), [1] * n,
                        [STEP_COUNTER], trainer_id,
                        ContextKind(table_id=table_id, is_tensor_table=True))


def send_contexts(plan: FleetPlan, trainer_id: int) -> dict:
    """Communicator send queues: grads (params' deltas in geo), sparse tables, step counter."""
    out = {}
    dist = set(plan.distributed_tables)
    # geo sends each param's delta under the param's name; the other modes send grads
    geo = plan.is_geo
    for pairs, sparse in ((plan.dense_pairs, False), (plan.sparse_pairs, True)):
        for p in pairs:
            name = p.param if geo else p.grad
            slices = plan.param_slices[name] if geo else plan.grad_slices[name]
            extra = {"is_sparse": True, "is_distributed": p.param in dist} if sparse else {}
            out[name] = _ctx(plan, name, slices, trainer_id, is_grad=not geo, is_send=True,
                             **extra)
    out[STEP_COUNTER] = step_context(plan, trainer_id, len(plan.sparse_pairs))
    return out


def recv_contexts(plan: FleetPlan, trainer_id: int) -> dict:
    """Params the trainer pulls: dense ones, plus the sparse tables in geo mode."""
    out = {}
    sparse = {p.param for p in plan.sparse_pairs}
    for p in plan.pairs:
        if p.param not in sparse:
            out[p.param] = _ctx(plan, p.param, plan.param_slices[p.param], trainer_id,
                                is_grad=False, is_send=False)
    if plan.is_geo:
        dist = set(plan.distributed_tables)
        tables = [p for p in plan.sparse_pairs if p.param not in dist] + \
            [p for p in plan.sparse_pairs if p.param in dist]
        for p in tables:
            out[p.param] = _ctx(plan, p.param, plan.param_slices[p.param], trainer_id,
                                is_grad=False, is_send=False, is_sparse=True,
                                is_distributed=p.param in dist)
    return out


def sparse_attrs(plan: FleetPlan, main: Program, startup: Program) -> str:
    """Geo: how each sparse table is initialised, `name:dim0,dim1:init_op&attr&attr` joined
    by `#` (a table whose startup init is none of INITIALIZER_ATTRS is left out, as Paddle
    does)."""
    out = []
    for table in sorted(plan.sparse_tables):
        var = main.global_block.vars.get(table)
        if var is None:
            continue
        for op in startup.global_block.ops:
            if op.type in INITIALIZER_ATTRS and op.output("Out")[:1] == [table]:
                init = initializer_signature(op)
                out.append(":".join([table, ",".join(str(d) for d in var.shape or ()), init]))
                break
    return "#".join(out)


def runtime_json(plan: FleetPlan, main: Program, startup: Program, trainer_id: int,
                 geo_push_nums: int) -> dict:
    """The runtime.json dict of one trainer."""
    kwargs: dict = {"need_global_step": "1" if plan.need_global_step else "0"}
    if plan.is_geo:
        kwargs["trainers"] = plan.trainers
        kwargs["sparse_attrs"] = sparse_attrs(plan, main, startup)
    if plan.is_sync:
        kwargs["pserver_endpoints"] = list(plan.endpoints)
        kwargs["trainer_id"] = trainer_id
    return {"mode": plan.mode_name, "mode_id": plan.mode_id, "kwargs": kwargs,
            "envs": envs(plan, geo_push_nums), "send_ctx": send_contexts(plan, trainer_id),
            "recv_type": 4 if plan.is_geo else 1, "recv_ctx": recv_contexts(plan, trainer_id)}
