"""plan.json: what went where, in one schema for the classic and fleet styles (documented in
docs/plan-json.md; style ps writes its own: planjson_ps.py).

`classic_plan_parts` / `fleet_plan_parts` read a style's plan (`DistributionPlan` or `FleetPlan`)
as style-neutral `PlacedParam`s (transpile/plan/placed.py) and, through a small reader per
style, `RemovedOp`s;
the rest (grads, endpoints' bytes and imbalance, the pserver block each moved op landed in,
per-program op counts) is shared. It decides nothing: placement comes from the plan, pserver
block indices from the built programs' listen_and_serv (grad_to_block_id, lr_decay_block_id).
"""
from __future__ import annotations

from collections import Counter
from json.encoder import encode_basestring as _text
from dataclasses import dataclass
from typing import Optional

from ..core.jsonfmt import MadeItems
from ..ir.program import Program, indexed
from ..plan.fleet import STEP_COUNTER, trainer_send_queues
from ..plan.placed import SentNames, holdings, nbytes, placed_params
from ..plan.placement import best_placement, imbalance, round_robin_loads
from ..plan.slicing import FLEET_MIN_BLOCK_SIZE, VarBlock
from .result import SplitResult, endpoint_dir, op_type_counts

SCHEMA = "pstranspile-plan"
VERSION = 1


@dataclass
class RemovedOp:
    """An op of the original main that the trainer no longer runs."""
    index: int
    why: str                         # optimize | lr_sched | global_step | sparse_lookup ...
    param: Optional[str] = None      # moved with this param's blocks
    lr: bool = False                 # moved to every pserver's LR-decay block
    replaced_by: Optional[str] = None


# --- the style readers -----------------------------------------------------------------------
def _classic(plan, main: Program):
    ops = main.global_block.ops
    params = placed_params(plan, main)
    t = plan.distributed_table
    removed = []
    by_param = {p.name for p in params}
    for i, op in indexed(ops, plan.optimize_ops):
        rv = op.attr("op_role_var") or []
        removed.append(RemovedOp(i, "optimize", rv[0] if rv and rv[0] in by_param else None))
    removed += [RemovedOp(i, "lr_sched", lr=True) for i, _ in indexed(ops, plan.lr_ops)]
    removed += [RemovedOp(i, "remote_prefetch", replaced_by="distributed_lookup_table")
                for i, _ in indexed(ops, plan.remote_prefetch_ops)]
    if t is not None:
        removed += [RemovedOp(i, "distributed_table", replaced_by="prefetch")
                    for i, _ in indexed(ops, t.lookup_ops)]
    lr_var = None
    if plan.params:
        upd = indexed(ops, (plan.params[0].optimizer_op,))[0][1]
        lr_var = (upd.input("LearningRate") or [None])[0]
    step = next((op.output("Out")[0] for _, op in indexed(ops, plan.lr_ops)
                 if op.type == "increment"), None)
    counters = [plan.counter_name(k) for k in range(plan.trainers)] if plan.lr_counter else []
    lr = {"var": lr_var, "global_step": step, "counters": counters}
    effective = {"min_block_size": plan.min_block_size,
                 "split_method": plan.split_method, "slice_var_up": plan.slice_var_up}
    return params, removed, [i for i, _ in indexed(ops, plan.clip_ops)], lr, effective, []


def _fleet(plan, main: Program):
    ops = main.global_block.ops
    params = placed_params(plan, main)
    removed, clip = [], []
    if not plan.is_geo:
        clip = [i for i, _ in indexed(ops, plan.clip_ops)]
        for i, op in indexed(ops, plan.optimize_ops):
            rv = op.attr("op_role_var") or []
            removed.append(RemovedOp(i, "optimize", rv[0] if rv else None))
        on_pservers = set(plan.pserver_lr_ops)
        for i, op in indexed(ops, plan.lr_ops):
            moved = op.uid in on_pservers
            removed.append(RemovedOp(i, "lr_sched" if moved else "global_step", lr=moved))
        for i, op in indexed(ops, plan.sparse_lookup_ops):
            grad = op.type.endswith("_grad")
            removed.append(RemovedOp(i, "sparse_lookup", replaced_by="distributed_push_sparse"
                                     if grad else "distributed_lookup_table"))
    queues = [q for q, _ in trainer_send_queues(plan)]
    lr = {"var": plan.lr_var, "scheduler": plan.has_lr_scheduler,
          "global_step": "@LR_DECAY_COUNTER@" if plan.need_global_step else None,
          "counters": [STEP_COUNTER] if STEP_COUNTER in queues else []}
    effective = {"min_block_size": FLEET_MIN_BLOCK_SIZE,
                 "split_method": plan.split_method, "slice_var_up": True}
    return params, removed, clip, lr, effective, list(plan.notes)


def _balance(plan, params, endpoints, holds, effective: str) -> dict:
    """The best imbalance these blocks allow and, for comparison, round robin's placement."""
    if effective == "round_robin":
        rr = {ep: holds[ep]["bytes"] for ep in endpoints}
    else:
        rr = round_robin_loads(params, plan)
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


def _block_sizes(b: VarBlock) -> tuple:
    """(offset_elements, rows, bytes) of a block: VarBlock's row_numel, offset_elements, rows
    and nbytes, its shape read once for all."""
    shape = b.shape
    row = 1
    for d in shape[1:]:
        row *= int(d)
    return b.row_offset * row, int(shape[0]) if shape else 1, nbytes(shape, b.dtype)


def _block_dict(b: VarBlock) -> dict:
    offset, rows, size = _block_sizes(b)
    return {"name": b.name, "index": b.index, "row_offset": b.row_offset,
            "offset_elements": offset, "rows": rows, "shape": list(b.shape),
            "dtype": b.dtype, "bytes": size, "endpoint": b.endpoint}


# plan.json's lists of one entry per block (a param's blocks, a grad's, the blocks an update op
# moved to) are MadeItems: each entry made when it is read (written, rendered), so that a split
# to many pservers never holds them all (a hundred thousand dicts at 64 pservers)
class _ParamBlocks(MadeItems):
    __slots__ = ("blocks",)

    def __init__(self, blocks: tuple):
        super().__init__(len(blocks))
        self.blocks = blocks

    def item(self, i: int) -> dict:
        return _block_dict(self.blocks[i])

    def item_json(self, i: int, encode) -> str:
        return self._json(i, self.blocks[i], encode)

    def items_json(self, encode) -> list:
        return [self._json(i, b, encode) for i, b in enumerate(self.blocks)]

    def _json(self, i: int, b: VarBlock, encode) -> str:
        shape = b.shape
        offset, rows, size = _block_sizes(b)
        if not (_ints(shape) and b.index.__class__ is int and b.row_offset.__class__ is int
                and size.__class__ is int and b.name.__class__ is str and
                b.dtype.__class__ is str and b.endpoint.__class__ is str):
            return encode(self.item(i))
        return ('{"bytes": %d, "dtype": %s, "endpoint": %s, "index": %d, "name": %s, '
                '"offset_elements": %d, "row_offset": %d, "rows": %d, "shape": [%s]}' % (
                    size, _text(b.dtype), _text(b.endpoint), b.index, _text(b.name),
                    offset, b.row_offset, rows, ", ".join(map(int.__repr__, shape))))

    def column(self, key: str) -> list:
        if key == "endpoint":
            return [b.endpoint for b in self.blocks]
        if key == "bytes":
            return [b.nbytes() for b in self.blocks]
        return super().column(key)


class _GradBlocks(MadeItems):
    __slots__ = ("p", "where")

    def __init__(self, p, where: dict):
        super().__init__(min(len(p.blocks), len(p.merged), len(p.sent)))   # (as zip pairs)
        self.p, self.where = p, where

    def item(self, i: int) -> dict:
        p = self.p
        ep, m = p.blocks[i].endpoint, p.merged[i]
        return {"merged": m, "endpoint": ep, "block": self.where[ep][0].get(m),
                "sent": {str(t): name for t, name in enumerate(p.sent[i])}}

    def item_json(self, i: int, encode) -> str:
        p = self.p
        return self._json(i, p.blocks[i].endpoint, p.merged[i], p.sent[i], encode)

    def items_json(self, encode) -> list:
        p = self.p
        sent = p.sent
        rows = sent.rows() if isinstance(sent, SentNames) else list(sent)
        return [self._json(i, b.endpoint, m, names, encode)
                for i, b, m, names in zip(range(self.n), p.blocks, p.merged, rows)]

    def _json(self, i: int, ep, m, sent, encode) -> str:
        """Item i's text, its endpoint, merged name and sent names given."""
        block = self.where[ep][0].get(m)
        if not (ep.__class__ is str and m.__class__ is str and len(sent) <= 10 and
                (block is None or block.__class__ is int) and
                all(n.__class__ is str for n in sent)):
            return encode(self.item(i))         # (ten trainers or more: keys sort as text)
        return '{"block": %s, "endpoint": %s, "merged": %s, "sent": {%s}}' % (
            "null" if block is None else int.__repr__(block), _text(ep), _text(m),
            ", ".join(['"%d": %s' % (t, _text(n)) for t, n in enumerate(sent)]))

    def column(self, key: str) -> list:
        if key == "endpoint":
            return [self.p.blocks[i].endpoint for i in range(self.n)]
        return super().column(key)


class _MovedTo(MadeItems):
    __slots__ = ("p", "where")

    def __init__(self, p, where: dict):
        super().__init__(min(len(p.blocks), len(p.merged)))
        self.p, self.where = p, where

    def item(self, i: int) -> dict:
        ep = self.p.blocks[i].endpoint
        return {"endpoint": ep, "block": self.where[ep][0].get(self.p.merged[i])}

    def item_json(self, i: int, encode) -> str:
        return self._json(i, self.p.blocks[i].endpoint, self.p.merged[i], encode)

    def items_json(self, encode) -> list:
        p = self.p
        return [self._json(i, b.endpoint, m, encode)
                for i, b, m in zip(range(self.n), p.blocks, p.merged)]

    def _json(self, i: int, ep, m, encode) -> str:
        block = self.where[ep][0].get(m)
        if ep.__class__ is not str or not (block is None or block.__class__ is int):
            return encode(self.item(i))
        return '{"block": %s, "endpoint": %s}' % (
            "null" if block is None else int.__repr__(block), _text(ep))


def _ints(values) -> bool:
    """Whether every value is an int (not a bool, not a numpy integer): what %d writes as the
    encoder does."""
    return all(v.__class__ is int for v in values)


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


def classic_plan_parts(plan, main: Program, startup: Program, config, trainer_ids,
                       faults) -> "PlanParts":
    """The plan.json of a classic split (`main` / `startup`: the original programs)."""
    return PlanParts(_classic(plan, main), plan, main, startup, config, trainer_ids, faults)


def fleet_plan_parts(plan, main: Program, startup: Program, config, trainer_ids,
                     faults) -> "PlanParts":
    """The plan.json of a fleet split (`main` / `startup`: the original programs)."""
    return PlanParts(_fleet(plan, main), plan, main, startup, config, trainer_ids, faults)


class PlanParts:
    """plan.json in two steps: `early`, the entries the plan alone decides (made while the
    programs are built: on a split to many pservers, most of plan.json), and finish(result),
    the whole dict once the built programs say which pserver block each grad landed in and how
    many ops each program has."""

    # the entries finish() adds (all others are in `early`)
    LATE = ("grads", "ops", "programs")

    def __init__(self, read: tuple, plan, main: Program, startup: Program, config, trainer_ids,
                 faults):
        """`read`: a style reader's (params, removed ops, clip ops, lr, effective settings,
        notes)."""
        params, removed, clip, lr, effective, notes = read
        self.plan, self.main, self.startup = plan, main, startup
        self.params, self.removed, self.clip = params, removed, clip
        endpoints = list(plan.endpoints)
        holds = holdings(params, endpoints)
        total = sum(h["bytes"] for h in holds.values())
        mean = total / float(len(endpoints)) if endpoints else 0
        imbalance = round(max(h["bytes"] for h in holds.values()) / mean, 4) if mean else None
        balance = _balance(plan, params, endpoints, holds, effective["split_method"])
        ops = main.global_block.ops
        self.early = {
            "schema": SCHEMA, "version": VERSION, "style": config.style, "mode": plan.mode,
            "config": config.to_dict(), "effective": effective,
            "trainer_ids": list(trainer_ids),
            "params": [{"name": p.name, "shape": list(p.shape), "dtype": p.dtype,
                        "bytes": nbytes(p.shape, p.dtype), "grad": p.grad,
                        "sparse": p.table is not None, "optimizer": p.optimizer,
                        "optimizer_op": p.optimizer_op,
                        "blocks": _ParamBlocks(p.blocks),
                        "accumulators": p.accumulators} for p in params],
            "sparse_tables": [dict(p.table, name=p.name, grad=p.grad,
                                   endpoints=[b.endpoint for b in p.blocks])
                              for p in params if p.table is not None],
            "lr": dict(lr, decay_ops=[{"index": i, "type": op.type}
                                      for i, op in indexed(ops, plan.lr_ops)]),
            "endpoints": holds, "total_bytes": total, "imbalance": imbalance,
            "balance": balance,
            "faults": [f.to_dict() for f in faults],
            "notes": notes,
        }

    def finish(self, result: SplitResult) -> dict:
        """The plan.json dict (the entries of `early` as they are, in the same order as
        always)."""
        endpoints = list(self.plan.endpoints)
        where = _pserver_blocks(result, endpoints)
        ops = self.main.global_block.ops
        params = self.params

        grads = [{"name": p.grad, "param": p.name, "kind": p.grad_kind,
                  "blocks": _GradBlocks(p, where)} for p in params]

        by_name = {p.name: p for p in params}
        removed_out = []
        for r in self.removed:
            moved = []
            if r.param in by_name:
                moved = _MovedTo(by_name[r.param], where)
            elif r.lr:
                moved = [{"endpoint": ep, "block": where[ep][1]} for ep in endpoints]
            entry = {"index": r.index, "type": ops[r.index].type, "why": r.why,
                     "moved_to": moved}
            if r.param:
                entry["param"] = r.param
            if r.replaced_by:
                entry["replaced_by"] = r.replaced_by
            removed_out.append(entry)
        removed_out.sort(key=lambda e: e["index"])

        late = {"grads": grads,
                "ops": {"removed": removed_out,
                        "kept_as_backward": [{"index": i, "type": ops[i].type}
                                             for i in self.clip]},
                "programs": _programs(result, self.main, self.startup)}
        return in_order(_ORDER, self.early, late)


def in_order(order: tuple, early: dict, late: dict) -> dict:
    """The entries of `early` and `late` (plan.json's two steps) in `order`, a key in neither
    left out."""
    return {k: late[k] if k in late else early[k] for k in order if k in late or k in early}


# plan.json's entries in the order the dict has them
_ORDER = ("schema", "version", "style", "mode", "config", "effective", "trainer_ids", "params",
          "sparse_tables", "grads", "lr", "ops", "endpoints", "total_bytes", "imbalance",
          "balance", "programs", "faults", "notes")
