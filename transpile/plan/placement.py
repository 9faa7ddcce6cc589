"""Placement balance: what a block costs its endpoint, the `balanced` placement of each style,
and the figures of a placement (imbalance, the best any placement can reach, round robin's
loads); compare.py puts them side by side for every split method.

A block costs its endpoint its own bytes plus those of its optimizer accumulators: a sliced
accumulator (adam's moments, momentum's velocity, ...) has the block's rows, an unsliced one
(adam's beta powers) is a whole copy on every endpoint holding a block. That is what plan.json's
`endpoints.*.bytes` adds up, so the imbalance `balanced` minimizes is the one plan.json, the
split summary and report.md print. Grads are not counted: a grad block travels to its
parameter block's endpoint and is merged there, whatever the placement.

Tables placed by their own rules (Fleet's remote tables, cut evenly by rows; classic's
distributed table, on every pserver) are not moved by `balanced`: they are the load the
endpoints start from.
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..ir.optimizers import (FLEET_UNSLICED_SLOTS, UNSLICED_SLOTS, fleet_sliced_state_slots,
                             is_optimizer_update, sliced_state_slots)
from ..ir.program import DTYPE_BYTES, Block, Op, Program, numel
from .placed import state_bytes
from .slicing import balanced_dispatch, block_name

# Tables whose placement no split_method changes (plan.json's sparse_tables[].split).
FIXED_TABLE_SPLITS = ("rows_evenly", "rows_per_pserver")


# --- what a block costs ----------------------------------------------------------------------
def accumulators(block: Block, op: Op, sliced_slots: Sequence[str],
                 skip_slots: Sequence[str]) -> list[tuple[bool, int, Optional[str]]]:
    """(sliced, elements, dtype) of each optimizer state `op` reads: every input slot but
    `skip_slots` (param, grad, learning rate, ...), sliced when in `sliced_slots`."""
    out = []
    for slot, args in op.inputs.items():
        if slot in skip_slots or not args:
            continue
        v = block.var(args[0])
        if v is not None:
            out.append((slot in sliced_slots, numel(v.shape), v.dtype))
    return out


def block_weights(sizes: Sequence[int], dtype: Optional[str], accs) -> list[int]:
    """Bytes each block of a parameter (of `sizes` elements each) costs its endpoint."""
    def cost(n, dt):
        return n * DTYPE_BYTES.get(dt, 0)
    return [cost(s, dtype) + sum(cost(s if sliced else n, dt) for sliced, n, dt in accs)
            for s in sizes]


# --- the balanced placement of each style ------------------------------------------------------
def classic_placement(block: Block, raw: Sequence[tuple], order: Sequence[str],
                      update_of: dict, endpoints: Sequence[str]) -> dict:
    """Classic `balanced`: {block name: endpoint} of every parameter block.

    `raw`: (param, grad, element sizes of its blocks); `order`: the params in dispatch order
    (what breaks ties between equal blocks); `update_of`: param -> its optimizer op.
    """
    sizes_of = {r[0]: r[2] for r in raw}
    names, weights, groups = [], [], []
    for pname in order:
        sizes = sizes_of[pname]
        op = update_of[pname]
        accs = accumulators(block, op, sliced_state_slots(op.type), UNSLICED_SLOTS)
        weights += block_weights(sizes, block.var(pname).dtype, accs)
        names += [pname] if len(sizes) == 1 else [block_name(pname, i)
                                                  for i in range(len(sizes))]
        groups += [pname] * len(sizes)
    return dict(zip(names, balanced_dispatch(weights, endpoints, groups)))


def fleet_placement(main: Program, dense: Sequence, sparse: Sequence, param_slices: dict,
                    optimize_ops: Sequence[Op], endpoints: Sequence[str],
                    geo: bool) -> list[str]:
    """Fleet `balanced`: the endpoint of each dense param block, in the order of `dense`'s
    blocks (Pairs, unplaced `param_slices` VarBlocks).

    The remote tables (`sparse`, one block per endpoint from the first, as Fleet places them)
    are the preload. Geo keeps the optimizer on the trainers: no accumulators on the pservers.
    """
    gb = main.global_block
    tables = {p.param for p in sparse}
    update = {}
    for op in optimize_ops:
        if is_optimizer_update(op):
            update.setdefault(op.input("Param")[0], op)

    def weights(param):
        blocks = param_slices[param]
        op = update.get(param)
        accs = [] if geo or op is None else accumulators(
            gb, op, fleet_sliced_state_slots(op.type, param in tables), FLEET_UNSLICED_SLOTS)
        return block_weights([numel(b.shape) for b in blocks], blocks[0].dtype, accs)

    n = len(endpoints)
    preload = [0] * n
    seen = {p.grad for p in dense}
    for p in sparse:
        if p.grad in seen:
            continue
        seen.add(p.grad)
        for i, w in enumerate(weights(p.param)):
            preload[i % n] += w
    ws, groups = [], []
    for p in dense:
        w = weights(p.param)
        ws += w
        groups += [p.param] * len(w)
    return balanced_dispatch(ws, endpoints, groups, preload)


# --- the figures -------------------------------------------------------------------------------
def imbalance(loads: Sequence[int]) -> Optional[float]:
    """max / mean of the endpoints' bytes, to 4 decimals (None when nothing is held)."""
    if not loads or not sum(loads):
        return None
    return round(max(loads) * len(loads) / float(sum(loads)), 4)


# The exact search below runs on programs of at most this many movable blocks and gives up
# after this many nodes; beyond either it falls back to a lower bound.
SEARCH_BLOCKS = 48
SEARCH_BUDGET = 20_000


def _loads_of(weights: Sequence[int], preload: Sequence[int]) -> list[int]:
    """The endpoint loads greedy byte balancing gives (no grouping): a first upper bound."""
    eps = list(range(len(preload)))
    loads = list(preload)
    for w, k in zip(weights, balanced_dispatch(weights, eps, preload=preload)):
        loads[k] += w
    return loads


def min_max_load(weights: Sequence[int], preload: Sequence[int],
                 budget: int = SEARCH_BUDGET) -> tuple[int, bool]:
    """The smallest possible largest endpoint load when placing `weights` on endpoints that
    already hold `preload`, and whether it is exact.

    Exact: a branch and bound over the blocks, heaviest first, finished within `budget` nodes
    (to the 4 decimals an imbalance is shown with: within 0.00005 of the lower bound ends the
    search). Otherwise the lower bound: no endpoint below the mean, nor below its own preload,
    nor below the heaviest block plus the lightest preload.
    """
    n = len(preload)
    w = sorted(weights, reverse=True)
    total = sum(w) + sum(preload)
    low = max([-(-total // n), max(preload)] + ([min(preload) + w[0]] if w else []))
    slack = total * 0.00005 / n
    best = max(_loads_of(w, preload))
    if best <= low + slack:
        return best, True
    if len(w) > SEARCH_BLOCKS:
        return low, False
    loads = list(preload)
    nodes = 0

    class _Budget(Exception):
        pass

    def search(i: int, top: int) -> None:
        nonlocal best, nodes
        nodes += 1
        if nodes > budget:
            raise _Budget
        if i == len(w):
            best = top
            return
        tried = set()
        for k in sorted(range(n), key=lambda k: (loads[k], k)):
            if loads[k] + w[i] >= best - slack:
                break
            if loads[k] in tried:        # endpoints with equal loads are interchangeable
                continue
            tried.add(loads[k])
            loads[k] += w[i]
            search(i + 1, max(top, loads[k]))
            loads[k] -= w[i]
            if best <= low + slack:
                return

    try:
        search(0, max(preload))
    except _Budget:
        return low, False
    return best, True


def block_costs(params):
    """(param, block, bytes it costs its endpoint, pinned?) of every block of PlacedParams
    (placed.py); pinned: a table placed by its own rules, which no split method moves."""
    for p in params:
        pinned = bool(p.table) and p.table.get("split") in FIXED_TABLE_SPLITS
        for i, b in enumerate(p.blocks):
            yield p, b, b.nbytes() + sum(state_bytes(a, i) for a in p.accumulators), pinned


def best_placement(params, endpoints: Sequence[str]) -> tuple[Optional[float], bool]:
    """(the best imbalance any placement of these blocks can reach, exact?).

    `params`: PlacedParams (placed.py). Their slicing is taken as it is (it does not depend on
    the split method) and pinned tables stay where their rules put them. Exact when the search
    finishes (programs of up to a few dozen blocks, or whenever greedy balancing meets the
    lower bound), else that lower bound.
    """
    n = len(endpoints)
    fixed = {ep: 0 for ep in endpoints}
    movable = []
    for _, b, w, pinned in block_costs(params):
        if pinned:
            fixed[b.endpoint] += w
        else:
            movable.append(w)
    total = sum(movable) + sum(fixed.values())
    if not total or not n:
        return None, True
    top, exact = min_max_load(movable, [fixed[ep] for ep in endpoints])
    return round(top * n / float(total), 4), exact


def round_robin_loads(params, plan) -> dict:
    """Per endpoint, the bytes it would hold had these blocks been placed round robin (the
    style's round_robin dispatch over the same blocks in the same order; pinned tables where
    they are): what `balanced` is compared with, without planning the program twice."""
    from .slicing import dispatch
    eps = list(plan.endpoints)
    loads = {ep: 0 for ep in eps}
    movable = {}
    for p, b, w, pinned in block_costs(params):
        if pinned:
            loads[b.endpoint] += w
        else:
            movable.setdefault(p.name, []).append(w)
    # the order the style dispatches its dense params in (plan.dense_order)
    order = plan.dense_order
    ws = [w for name in order for w in movable.pop(name, [])]
    ws += [w for rest in movable.values() for w in rest]
    for w, ep in zip(ws, dispatch(list(range(len(ws))), eps, "round_robin")):
        loads[ep] += w
    return loads
