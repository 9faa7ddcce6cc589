"""plan.json: what went where, in one schema for both styles (documented in docs/plan-json.md).

`plan_json` reads a style's plan (classic `DistributionPlan` or `FleetPlan`) through a small
reader per style that yields style-neutral `PlacedParam`s and `RemovedOp`s; the rest (grads,
endpoints' bytes and imbalance, the pserver block each moved op landed in, per-program op
counts) is shared. It decides nothing: placement comes from the plan, pserver block indices from
the built programs' listen_and_serv (grad_to_block_id, lr_decay_block_id).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from .ir.optimizers import FLEET_SLICED_STATE_SLOTS, FLEET_UNSLICED_SLOTS
from .ir.program import DTYPE_BYTES, Program
from .result import SplitResult, endpoint_dir, op_type_counts
from .slicing import FLEET_MIN_BLOCK_SIZE, VarBlock

SCHEMA = "pstranspile-plan"
VERSION = 1


@dataclass
class PlacedParam:
    """One parameter (or table) as the pservers hold it, whatever the style."""
    name: str
    grad: str
    shape: tuple
    dtype: Optional[str]
    grad_kind: str
    optimizer: Optional[str]
    optimizer_op: Optional[int]
    blocks: tuple                    # VarBlock, with endpoints
    merged: tuple                    # per block: the grad's name on the pserver
    sent: tuple                      # per block: the names trainer 0, 1, ... send it under
    accumulators: list = field(default_factory=list)
    table: Optional[dict] = None     # sparse-table facts, None for a dense param


@dataclass
class RemovedOp:
    """An op of the original main that the trainer no longer runs."""
    index: int
    why: str                         # optimize | lr_sched | global_step | sparse_lookup ...
    param: Optional[str] = None      # moved with this param's blocks
    lr: bool = False                 # moved to every pserver's LR-decay block
    replaced_by: Optional[str] = None


def _nbytes(shape, dtype) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n * DTYPE_BYTES.get(dtype, 0)


def _state(slot, var, sliced, blocks, name_of) -> dict:
    """An accumulator entry: its blocks follow the param's, sliced or whole."""
    shape = tuple(var.shape or ())
    dtype = var.dtype
    whole = _nbytes(shape, dtype)
    return {"slot": slot, "name": var.name, "dtype": dtype, "shape": list(shape),
            "sliced": sliced,
            "blocks": [{"name": name_of(b), "endpoint": b.endpoint,
                        "shape": list(b.shape if sliced else shape),
                        "bytes": _nbytes(b.shape, dtype) if sliced else whole}
                       for b in blocks]}


# --- the style readers -----------------------------------------------------------------------
def _classic_params(plan, main: Program) -> list:
    gb = main.global_block
    params = []
    for p in plan.params:
        sent = tuple(tuple(plan.sent_grad_name(g, t) for t in range(plan.trainers))
                     for g in p.grad_blocks)
        acc = [_state(s.slot, gb.var(s.name), s.sliced, p.blocks,
                      lambda b, s=s, p=p: plan.state_name(p, s.name, b)) for s in p.states]
        table = None
        if p.grad_kind == "SELECTED_ROWS":
            table = {"split": "blocks", "remote_prefetch": p.remote_prefetch,
                     "distributed": False, "fake_init": p.name in plan.fake_init_tables,
                     "table_id": None}
        params.append(PlacedParam(p.name, p.grad, p.shape, p.dtype, p.grad_kind,
                                  p.optimizer_type, p.optimizer_op, p.blocks, p.grad_blocks,
                                  sent, acc, table))
    t = plan.distributed_table
    if t is not None:
        # every pserver holds rows_per_pserver rows of it; Paddle updates it with sgd
        shape = (t.rows_per_pserver,) + tuple(t.shape[1:])
        blocks = tuple(VarBlock(t.name, t.name, i, i * t.rows_per_pserver, shape, t.dtype, ep,
                                "SELECTED_ROWS") for i, ep in enumerate(plan.endpoints))
        n = len(plan.endpoints)
        params.append(PlacedParam(
            t.name, t.grad, t.shape, t.dtype, "SELECTED_ROWS", "sgd", t.optimizer_op, blocks,
            tuple(plan.table_merged_name(i) for i in range(n)),
            tuple(tuple(plan.table_sent_name(i, k) for k in range(plan.trainers))
                  for i in range(n)), [],
            {"split": "rows_per_pserver", "remote_prefetch": False, "distributed": True,
             "fake_init": True, "table_id": None}))
    return params


def _classic(plan, main: Program):
    gb = main.global_block
    params = _classic_params(plan, main)
    t = plan.distributed_table
    removed = []
    by_param = {p.name for p in params}
    for i in plan.optimize_ops:
        rv = gb.ops[i].attr("op_role_var") or []
        removed.append(RemovedOp(i, "optimize", rv[0] if rv and rv[0] in by_param else None))
    removed += [RemovedOp(i, "lr_sched", lr=True) for i in plan.lr_ops]
    removed += [RemovedOp(i, "remote_prefetch", replaced_by="distributed_lookup_table")
                for i in plan.remote_prefetch_ops]
    if t is not None:
        removed += [RemovedOp(i, "distributed_table", replaced_by="prefetch")
                    for i in t.lookup_ops]
    lr_var = None
    if plan.params:
        lr_var = (gb.ops[plan.params[0].optimizer_op].input("LearningRate") or [None])[0]
    step = next((gb.ops[i].output("Out")[0] for i in plan.lr_ops
                 if gb.ops[i].type == "increment"), None)
    counters = [plan.counter_name(k) for k in range(plan.trainers)] if plan.lr_counter else []
    lr = {"var": lr_var, "global_step": step, "counters": counters}
    effective = {"min_block_size": plan.min_block_size,
                 "split_method": effective_split_method(plan, "classic"),
                 "slice_var_up": plan.slice_var_up}
    return params, removed, list(plan.clip_ops), lr, effective, []


def _fleet_params(plan, main: Program) -> list:
    gb = main.global_block
    gvars = gb.vars
    geo = plan.is_geo
    params = []
    for pair in plan.pairs:
        blocks = plan.param_slices[pair.param]
        merged = tuple(plan.merged_grad_names(pair.param))
        sent = tuple(tuple(plan.sent_grad_name(m, t) for t in range(plan.trainers))
                     for m in merged)
        upd = plan.update_ops.get(pair.param)
        op = gb.ops[upd] if upd is not None else None
        acc = []
        if op is not None and not geo:
            sliced = FLEET_SLICED_STATE_SLOTS.get(op.type, ())
            for slot, args in op.inputs.items():
                var = gvars.get(args[0]) if args and slot not in FLEET_UNSLICED_SLOTS else None
                if var:
                    acc.append(_state(slot, var, slot in sliced, blocks,
                                      lambda b, a=args[0]: a))
        gvar = gb.var(pair.grad)
        table = None
        if pair.sparse:
            table = {"split": "rows_evenly", "remote_prefetch": True,
                     "distributed": pair.distributed, "fake_init": True,
                     "table_id": plan.table_ids.get(pair.param)}
        elif gvar.kind == "SELECTED_ROWS":
            table = {"split": "blocks", "remote_prefetch": False, "distributed": False,
                     "fake_init": pair.param in plan.sparse_tables, "table_id": None}
        pvar = gb.var(pair.param)
        params.append(PlacedParam(pair.param, pair.grad, tuple(pvar.shape or ()), pvar.dtype,
                                  gvar.kind, op.type if op is not None else None, upd, blocks,
                                  merged, sent, acc, table))
    return params


def _fleet(plan, main: Program):
    from .passes.fleet_plan import STEP_COUNTER
    from .passes.fleet_trainer import trainer_send_queues
    gb = main.global_block
    params = _fleet_params(plan, main)
    removed, clip = [], []
    if not plan.is_geo:
        clip = list(plan.clip_ops)
        for i in plan.optimize_ops:
            rv = gb.ops[i].attr("op_role_var") or []
            removed.append(RemovedOp(i, "optimize", rv[0] if rv else None))
        for i in plan.lr_ops:
            moved = i in plan.pserver_lr_ops
            removed.append(RemovedOp(i, "lr_sched" if moved else "global_step", lr=moved))
        for i in plan.sparse_lookup_ops:
            grad = gb.ops[i].type.endswith("_grad")
            removed.append(RemovedOp(i, "sparse_lookup", replaced_by="distributed_push_sparse"
                                     if grad else "distributed_lookup_table"))
    queues = [q for q, _ in trainer_send_queues(plan)]
    lr = {"var": plan.lr_var,
          "global_step": "@LR_DECAY_COUNTER@" if plan.need_global_step else None,
          "counters": [STEP_COUNTER] if STEP_COUNTER in queues else []}
    effective = {"min_block_size": FLEET_MIN_BLOCK_SIZE,
                 "split_method": effective_split_method(plan, "fleet"), "slice_var_up": True}
    return params, removed, clip, lr, effective, list(plan.notes)


def placed_params(plan, main: Program, style: str) -> list:
    """The style's plan as style-neutral PlacedParams, in the plan's order."""
    return (_classic_params if style == "classic" else _fleet_params)(plan, main)


def effective_split_method(plan, style: str) -> str:
    """The split method the style used: classic the config's; Fleet round robin, as Paddle
    does, unless `balanced` was asked for."""
    if style == "classic":
        return plan.split_method
    return "balanced" if getattr(plan, "split_method", "") == "balanced" else "round_robin"


def holdings(params: list, endpoints) -> dict:
    """Per endpoint: the parameter blocks it holds, their bytes and their accumulators'."""
    holds = {ep: {"blocks": [], "param_bytes": 0, "state_bytes": 0} for ep in endpoints}
    for p in params:
        for b in p.blocks:
            holds[b.endpoint]["blocks"].append(b.name)
            holds[b.endpoint]["param_bytes"] += b.nbytes()
        for s in p.accumulators:
            for sb in s["blocks"]:
                holds[sb["endpoint"]]["state_bytes"] += sb["bytes"]
    for h in holds.values():
        h["param_blocks"] = len(h["blocks"])
        h["bytes"] = h["param_bytes"] + h["state_bytes"]
    return holds


def _balance(plan, style: str, params, endpoints, holds, effective: str) -> dict:
    """The best imbalance these blocks allow and, for comparison, round robin's placement."""
    from .balance import best_placement, imbalance, round_robin_loads
    if effective == "round_robin":
        rr = {ep: holds[ep]["bytes"] for ep in endpoints}
    else:
        rr = round_robin_loads(params, plan, style)
    best, exact = best_placement(params, endpoints)
    return {"best_imbalance": best, "best_exact": exact,
            "round_robin": {"bytes": rr, "imbalance": imbalance([rr[ep] for ep in endpoints])}}


# --- the shared part -------------------------------------------------------------------------
def _pserver_blocks(result: SplitResult, endpoints) -> dict:
    """Per endpoint: {grad name: optimize block index} and the LR-decay block index."""
    out = {}
    for ep in endpoints:
        summary = result.summaries.get(endpoint_dir(ep) + "/main")
        out[ep] = (summary.grad_to_block, summary.lr_block) if summary else ({}, -1)
    return out


def _block_dict(b: VarBlock) -> dict:
    return {"name": b.name, "index": b.index, "row_offset": b.row_offset,
            "offset_elements": b.offset_elements, "rows": b.rows, "shape": list(b.shape),
            "dtype": b.dtype, "bytes": b.nbytes(), "endpoint": b.endpoint}


def op_changes(before: Program, after: Program) -> tuple[int, int]:
    """(ops removed, ops inserted) from `before` to `after`: a multiset difference of op types
    over all blocks (a rewritten op counts as one removed and one inserted)."""
    return _type_changes(op_type_counts(before), op_type_counts(after))


def _type_changes(a: Counter, b: Counter) -> tuple[int, int]:
    return sum((a - b).values()), sum((b - a).values())


def _programs(result: SplitResult, main: Program, startup: Program) -> dict:
    out = {}
    origins: dict = {}           # the original programs' op types, counted once
    for key in sorted(result.summaries):
        summary = result.summaries[key]
        if key.startswith("trainer_"):
            which = "main" if key.endswith("/main") else "startup"
            origin = origins.get(which)
            if origin is None:
                origin = origins[which] = op_type_counts(main if which == "main" else startup)
        else:
            origin = Counter()
        removed, inserted = _type_changes(origin, summary.op_types)
        out[key] = {"blocks": summary.blocks, "ops": summary.ops,
                    "removed": removed, "inserted": inserted}
    return out


def plan_json(plan, main: Program, startup: Program, config, result: SplitResult,
              trainer_ids) -> dict:
    """The plan.json dict of a split (`main` / `startup`: the original programs)."""
    style = config.style
    reader = _classic if style == "classic" else _fleet
    params, removed, clip, lr, effective, notes = reader(plan, main)
    endpoints = list(plan.endpoints)
    where = _pserver_blocks(result, endpoints)
    ops = main.global_block.ops

    def block_of(ep, merged):
        return where[ep][0].get(merged)

    holds = holdings(params, endpoints)
    grads = []
    for p in params:
        grads.append({"name": p.grad, "param": p.name, "kind": p.grad_kind, "blocks": [
            {"merged": m, "endpoint": b.endpoint, "block": block_of(b.endpoint, m),
             "sent": {str(t): name for t, name in enumerate(sent)}}
            for b, m, sent in zip(p.blocks, p.merged, p.sent)]})
    total = sum(h["bytes"] for h in holds.values())
    mean = total / float(len(endpoints)) if endpoints else 0
    imbalance = round(max(h["bytes"] for h in holds.values()) / mean, 4) if mean else None
    balance = _balance(plan, style, params, endpoints, holds, effective["split_method"])

    by_name = {p.name: p for p in params}
    removed_out = []
    for r in removed:
        moved = []
        if r.param in by_name:
            p = by_name[r.param]
            moved = [{"endpoint": b.endpoint, "block": block_of(b.endpoint, m)}
                     for b, m in zip(p.blocks, p.merged)]
        elif r.lr:
            moved = [{"endpoint": ep, "block": where[ep][1]} for ep in endpoints]
        entry = {"index": r.index, "type": ops[r.index].type, "why": r.why, "moved_to": moved}
        if r.param:
            entry["param"] = r.param
        if r.replaced_by:
            entry["replaced_by"] = r.replaced_by
        removed_out.append(entry)
    removed_out.sort(key=lambda e: e["index"])

    return {
        "schema": SCHEMA, "version": VERSION, "style": style, "mode": plan.mode,
        "config": config.to_dict(), "effective": effective,
        "trainer_ids": list(trainer_ids),
        "params": [{"name": p.name, "shape": list(p.shape), "dtype": p.dtype,
                    "bytes": _nbytes(p.shape, p.dtype), "grad": p.grad,
                    "sparse": p.table is not None, "optimizer": p.optimizer,
                    "optimizer_op": p.optimizer_op,
                    "blocks": [_block_dict(b) for b in p.blocks],
                    "accumulators": p.accumulators} for p in params],
        "sparse_tables": [dict(p.table, name=p.name, grad=p.grad,
                               endpoints=[b.endpoint for b in p.blocks])
                          for p in params if p.table is not None],
        "grads": grads,
        "lr": dict(lr, decay_ops=[{"index": i, "type": ops[i].type}
                                  for i in sorted(plan.lr_ops)]),
        "ops": {"removed": removed_out,
                "kept_as_backward": [{"index": i, "type": ops[i].type} for i in clip]},
        "endpoints": holds, "total_bytes": total, "imbalance": imbalance, "balance": balance,
        "programs": _programs(result, main, startup),
        "notes": notes,
    }
