"""A style's plan read as style-neutral PlacedParams: each parameter (or table) with its blocks,
their endpoints and its optimizer accumulators, whatever the style; and what each endpoint holds.

The one reader of the classic `DistributionPlan` and the `FleetPlan` that the figures need:
placement.py and compare.py weigh placements with it, plan.json (output/planjson.py) prints it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..core.jsonfmt import MadeItems
from ..ir.optimizers import FLEET_UNSLICED_SLOTS, fleet_sliced_state_slots
from ..ir.program import DTYPE_BYTES, Program, uid_index
from .slicing import VarBlock


@dataclass
class PlacedParam:
    """One parameter (or table) as the pservers hold it, whatever the style."""
    name: str
    grad: str
    shape: tuple
    dtype: Optional[str]
    grad_kind: str
    optimizer: Optional[str]
    optimizer_op: Optional[int]      # the index of its optimizer op in the original program
    blocks: tuple                    # VarBlock, with endpoints
    merged: tuple                    # per block: the grad's name on the pserver
    sent: "SentNames"                # per block: the names trainer 0, 1, ... send it under
    accumulators: list = field(default_factory=list)
    table: Optional[dict] = None     # sparse-table facts, None for a dense param


class SentNames(MadeItems):
    """Per block of a param, the names trainer 0, 1, ... send its grad under (a tuple made
    when it is read): name_of(key, trainer) for each of `keys`; `names_of(keys, trainer)`,
    when given, makes them for all the keys at once (the same names)."""

    __slots__ = ("keys", "name_of", "trainers", "names_of")

    def __init__(self, keys, name_of, trainers: int, names_of=None):
        super().__init__(len(keys))
        self.keys, self.name_of, self.trainers = keys, name_of, trainers
        self.names_of = names_of

    def item(self, i: int) -> tuple:
        key, name_of = self.keys[i], self.name_of
        return tuple([name_of(key, t) for t in range(self.trainers)])

    def rows(self) -> list:
        """Every item, in order (made trainer by trainer with names_of when there is one)."""
        if self.names_of is None or not self.trainers:
            return list(self)
        return list(zip(*[self.names_of(self.keys, t) for t in range(self.trainers)]))


def nbytes(shape, dtype) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n * DTYPE_BYTES.get(dtype, 0)


class StateBlocks(MadeItems):
    """An accumulator's blocks as plan.json lists them ({"name", "endpoint", "shape",
    "bytes"} per block of its parameter), each made when it is read: a split to many pservers
    has a hundred thousand of them. bytes_at(i) and endpoint_at(i) read one without making
    it."""

    __slots__ = ("blocks", "sliced", "shape", "dtype", "whole", "name_of")

    def __init__(self, blocks, sliced: bool, shape: tuple, dtype, name_of):
        super().__init__(len(blocks))
        self.blocks, self.sliced, self.shape, self.dtype = blocks, sliced, shape, dtype
        self.whole = nbytes(shape, dtype)
        self.name_of = name_of

    def bytes_at(self, i: int) -> int:
        return nbytes(self.blocks[i].shape, self.dtype) if self.sliced else self.whole

    def endpoint_at(self, i: int) -> str:
        return self.blocks[i].endpoint

    def item(self, i: int) -> dict:
        b = self.blocks[i]
        return {"name": self.name_of(b), "endpoint": b.endpoint,
                "shape": list(b.shape if self.sliced else self.shape),
                "bytes": nbytes(b.shape, self.dtype) if self.sliced else self.whole}


def state_bytes(state: dict, i: int) -> int:
    """The bytes of block i of an accumulator entry (_state's, or plan.json's as read)."""
    blocks = state["blocks"]
    return blocks.bytes_at(i) if isinstance(blocks, StateBlocks) else blocks[i]["bytes"]


def state_endpoint(state: dict, i: int) -> str:
    """The endpoint of block i of an accumulator entry (see state_bytes)."""
    blocks = state["blocks"]
    return blocks.endpoint_at(i) if isinstance(blocks, StateBlocks) else blocks[i]["endpoint"]


def _state(slot, var, sliced, blocks, name_of) -> dict:
    """An accumulator entry: its blocks follow the param's, sliced or whole."""
    shape = tuple(var.shape or ())
    return {"slot": slot, "name": var.name, "dtype": var.dtype, "shape": list(shape),
            "sliced": sliced, "blocks": StateBlocks(blocks, sliced, shape, var.dtype, name_of)}


# --- the style readers (DistributionPlan.placed_params, FleetPlan.placed_params) ---------------
def classic_params(plan, main: Program) -> list:
    """The classic DistributionPlan's parameters and distributed table as PlacedParams."""
    gb = main.global_block
    at = uid_index(gb.ops)
    params = []
    for p in plan.params:
        sent = SentNames(p.grad_blocks, plan.sent_grad_name, plan.trainers,
                         plan.sent_grad_names)
        acc = [_state(s.slot, gb.var(s.name), s.sliced, p.blocks,
                      lambda b, s=s, p=p: plan.state_name(p, s.name, b)) for s in p.states]
        table = None
        if p.grad_kind == "SELECTED_ROWS":
            table = {"split": "blocks", "remote_prefetch": p.remote_prefetch,
                     "distributed": False, "fake_init": p.name in plan.fake_init_tables,
                     "table_id": None}
        params.append(PlacedParam(p.name, p.grad, p.shape, p.dtype, p.grad_kind,
                                  p.optimizer_type, at.get(p.optimizer_op), p.blocks,
                                  p.grad_blocks,
                                  sent, acc, table))
    t = plan.distributed_table
    if t is not None:
        # every pserver holds rows_per_pserver rows of it; Paddle updates it with sgd
        shape = (t.rows_per_pserver,) + tuple(t.shape[1:])
        blocks = tuple(VarBlock(t.name, t.name, i, i * t.rows_per_pserver, shape, t.dtype, ep,
                                "SELECTED_ROWS") for i, ep in enumerate(plan.endpoints))
        n = len(plan.endpoints)
        params.append(PlacedParam(
            t.name, t.grad, t.shape, t.dtype, "SELECTED_ROWS", "sgd", at.get(t.optimizer_op),
            blocks,
            tuple(plan.table_merged_name(i) for i in range(n)),
            SentNames(range(n), plan.table_sent_name, plan.trainers), [],
            {"split": "rows_per_pserver", "remote_prefetch": False, "distributed": True,
             "fake_init": True, "table_id": None}))
    return params


def fleet_params(plan, main: Program) -> list:
    """The FleetPlan's pairs as PlacedParams."""
    gb = main.global_block
    at = uid_index(gb.ops)
    gvars = gb.vars
    geo = plan.is_geo
    params = []
    for pair in plan.pairs:
        blocks = plan.param_slices[pair.param]
        merged = tuple(plan.merged_grad_names(pair.param))
        sent = SentNames(merged, plan.sent_grad_name, plan.trainers, plan.sent_grad_names)
        upd = at.get(plan.update_ops.get(pair.param))
        op = gb.ops[upd] if upd is not None else None
        acc = []
        if op is not None and not geo:
            sliced = fleet_sliced_state_slots(op.type, pair.sparse)
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


def placed_params(plan, main: Program) -> list:
    """A style's plan as style-neutral PlacedParams, in the plan's order."""
    return plan.placed_params(main)


def holdings(params: list, endpoints) -> dict:
    """Per endpoint: the parameter blocks it holds, their bytes and their accumulators'."""
    holds = {ep: {"blocks": [], "param_bytes": 0, "state_bytes": 0} for ep in endpoints}
    for p in params:
        for b in p.blocks:
            holds[b.endpoint]["blocks"].append(b.name)
            holds[b.endpoint]["param_bytes"] += b.nbytes()
        for s in p.accumulators:
            blocks = s["blocks"]
            for i in range(len(blocks)):
                holds[state_endpoint(s, i)]["state_bytes"] += state_bytes(s, i)
    for h in holds.values():
        h["param_blocks"] = len(h["blocks"])
        h["bytes"] = h["param_bytes"] + h["state_bytes"]
    return holds
