"""The classic style's distribution plan: which parameter goes where, computed once, read by
every classic pass (Paddle's fluid DistributeTranspiler).

`make_plan(main, config)` is a pure function of the training program and the cluster config. It
finds the optimizer ops (and the regularization / clip ops that run with them), the
learning-rate schedule ops, the (param, grad) pairs, slices each parameter into dim-0 blocks and
dispatches the blocks to the pserver endpoints. The arithmetic lives in slicing.py, the
op predicates in transpile/ir/roles.py; transpile/output/planjson.py renders the plan as
plan.json.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Optional

from ..core.config import ClusterConfig
from ..core.errors import RefusedError
from ..ir import roles
from ..ir.optimizers import UNSLICED_SLOTS, is_optimizer_update, sliced_state_slots
from ..ir.program import Program, Var
from ..ir.tables import (CLASSIC_FAKE_INIT_TYPES, CLASSIC_REMOTE_PREFETCH_TYPES, LOOKUP_TABLE_TYPES,
                         is_remote_prefetch, table_of)
from .slicing import (VarBlock, block_name, dispatch, paddle_shuffle, slice_variable, split_var,
                      trainer_copy_name)

CLIP_NAME_SCOPE = roles.CLASSIC_CLIP_NAME_SCOPE


# --- the plan ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OptState:
    """An optimizer input other than param/grad: an accumulator or a hyper-parameter tensor."""
    slot: str
    name: str
    shape: tuple
    dtype: str
    sliced: bool        # one value per parameter entry: the pserver holds the block's rows


@dataclass(frozen=True)
class ParamPlan:
    """A trainable parameter: its blocks, its grad and how the grad travels."""
    name: str
    grad: str                   # the grad var of the origin program (fc_w@GRAD)
    shape: tuple
    dtype: str
    grad_kind: str              # LOD_TENSOR or SELECTED_ROWS
    blocks: tuple               # VarBlock of the parameter, in order
    grad_blocks: tuple          # the merged grad name of each block on the pserver
    optimizer_op: int           # index of its optimizer update in the origin global block
    optimizer_type: str
    ops: tuple                  # indices of every optimize op that belongs to this param
    states: tuple               # OptState
    remote_prefetch: bool       # looked up with remote_prefetch: no recv, distributed lookups

    @property
    def sliced(self) -> bool:
        return len(self.blocks) > 1

    @cached_property
    def state_by_slot(self) -> dict:
        """{slot: OptState}: made once, read by every pserver for each block of the param."""
        return {s.slot: s for s in self.states}


@dataclass(frozen=True)
class DistributedTable:
    """The one `is_distributed` lookup table: rows split evenly over every pserver."""
    name: str
    grad: str
    shape: tuple
    dtype: str
    optimizer_op: int
    rows_per_pserver: int
    lookup_ops: tuple = ()          # indices of its lookup_table ops (prefetched instead)


@dataclass(frozen=True)
class DistributionPlan:
    endpoints: tuple
    trainers: int
    mode: str
    split_method: str
    slice_var_up: bool
    min_block_size: int
    params: tuple                           # ParamPlan, in Paddle's param order
    send_order: tuple                       # param names in the order their grads are sent
    optimize_ops: tuple                     # indices: every op moved to the pservers
    lr_ops: tuple                           # indices: the LR schedule ops
    fake_init_tables: tuple                 # sparse tables the trainer does not initialise
    local_tables: tuple                     # tables Paddle fake_inits that the trainer reads
    remote_prefetch_ops: tuple              # indices of lookup ops with remote_prefetch
    distributed_table: Optional[DistributedTable] = None
    clip_ops: tuple = ()                    # @CLIP ops kept on the trainer as backward ops
    # async: the LR decay counter's increment op and counter var; every trainer sends its
    # own increments and the pservers sum them (None in sync mode or without LR decay)
    lr_counter: Optional[tuple] = None      # (op index, counter var name)

    def counter_name(self, trainer_id: int) -> str:
        return trainer_copy_name(self.lr_counter[1], trainer_id)

    @property
    def sync(self) -> bool:
        return self.mode == "sync"

    @property
    def runtime_split(self) -> bool:
        """async / half_async: the communicator splits and merges; no split_byref / concat."""
        return self.mode in ("async", "half_async")

    @property
    def distributed_mode(self) -> int:
        """listen_and_serv's distributed_mode: 0 sync, 1 async (half_async too: Paddle derives it
        from sync_mode / runtime_split_send_recv only)."""
        return 0 if self.sync else 1

    def param(self, name: str) -> ParamPlan:
        p = self._param_index.get(name)
        if p is None:
            raise KeyError(name)
        return p

    @cached_property
    def _param_index(self) -> dict:
        out = {}
        for p in self.params:
            out.setdefault(p.name, p)
        return out

    def sent_grad_name(self, merged: str, trainer_id: int) -> str:
        """The name trainer `trainer_id` sends a grad block under (sync with several trainers
        appends .trainer_<id>, so the pserver can tell the copies apart)."""
        if self.sync and self.trainers > 1:
            return trainer_copy_name(merged, trainer_id)
        return merged

    def blocks_on(self, endpoint: str) -> list[tuple[ParamPlan, VarBlock]]:
        """The parameter blocks an endpoint holds, in the order their grads are sent."""
        return list(self._blocks_by_endpoint.get(endpoint, ()))

    @cached_property
    def _blocks_by_endpoint(self) -> dict:
        by: dict = {}
        for pname in self.send_order:
            p = self.param(pname)
            for b in p.blocks:
                by.setdefault(b.endpoint, []).append((p, b))
        return by

    @cached_property
    def _shared_endpoints(self) -> dict:
        """param name -> the endpoints holding more than one of its blocks."""
        out = {}
        for p in self.params:
            seen, shared = set(), set()
            for b in p.blocks:
                (shared if b.endpoint in seen else seen).add(b.endpoint)
            out.setdefault(p.name, frozenset(shared))
        return out

    def table_sent_name(self, pserver_index: int, trainer_id: int) -> str:
        """The name a trainer sends the distributed table's grad rows for one pserver under."""
        grad = self.distributed_table.grad
        if self.sync:
            return "%s.trainer_%d.pserver_%d" % (grad, trainer_id, pserver_index)
        return "%s.pserver_%d" % (grad, pserver_index)

    def table_merged_name(self, pserver_index: int) -> str:
        """The distributed table's grad on a pserver: summed over the trainers' copies (sync)
        or received as it was sent (async)."""
        grad = self.distributed_table.grad
        return grad if self.sync else "%s.pserver_%d" % (grad, pserver_index)

    def several_blocks_on(self, p: ParamPlan, endpoint: str) -> bool:
        """The endpoint holds more than one block of `p` (hash_name can do that)."""
        return endpoint in self._shared_endpoints[p.name]

    def state_name(self, p: ParamPlan, name: str, b: VarBlock) -> str:
        """The pserver name of an optimizer state (or other block-local var) of block `b`: its
        origin name, suffixed `.block<i>` when the endpoint holds several blocks of `p`, so that
        they do not collide."""
        return name + (".block%d" % b.index if self.several_blocks_on(p, b.endpoint) else "")


# --- building it --------------------------------------------------------------------------------
def find_distributed_table(program: Program) -> Optional[str]:
    """The W of the lookup_table ops with is_distributed (Paddle supports one such table)."""
    table = None
    for op in program.global_block.ops:
        if op.type != "lookup_table":
            continue
        w = op.input("W")[0]
        if op.attr("is_distributed") is True:
            if table is None:
                table = w
            elif table != w:
                raise RefusedError("all distributed lookup_table ops must use one table "
                                   "(found %s and %s)" % (table, w))
    return table


def _require_var(block, name, what) -> Var:
    v = block.var(name)
    if v is None:
        raise RefusedError("%s %r is not declared in the global block" % (what, name))
    return v


def make_plan(main: Program, config: ClusterConfig) -> DistributionPlan:
    """Compute the distribution plan of `main` for `config` (pure; `main` is not modified)."""
    if config.mode == "geo":
        raise RefusedError("geo mode is not supported by the classic DistributeTranspiler "
                           "(it has its own GeoSgdTranspiler); use style: fleet")
    block = main.global_block
    endpoints = tuple(config.pservers)
    opt = roles.optimize_ops(main, CLIP_NAME_SCOPE)
    clip = tuple(roles.clip_ops(main, CLIP_NAME_SCOPE))
    pairs = roles.params_grads(main, opt)
    if not pairs:
        raise RefusedError("no optimizer op names its (param, grad) in op_role_var")
    table = find_distributed_table(main)
    remote_ops = tuple(i for i, op in enumerate(block.ops)
                       if is_remote_prefetch(op, CLASSIC_REMOTE_PREFETCH_TYPES))
    remote_params = {a for i in remote_ops for a in block.ops[i].input_names()}

    # the optimizer update of each param, and every optimize op attributed to it
    update_of: dict = {}
    ops_of: dict = {}
    for i in opt:
        op = block.ops[i]
        rv = op.attr(roles.ROLE_VAR_ATTR) or []
        if rv:
            ops_of.setdefault(rv[0], []).append(i)
        if is_optimizer_update(op):
            if len(op.input("Grad")) != 1 or len(op.input("Param")) != 1:
                raise RefusedError("optimizer op %d (%s) needs exactly one Param and one Grad "
                                   "input, it has Param=%s Grad=%s" % (
                                       i, op.type, op.input("Param"), op.input("Grad")))
            update_of.setdefault(op.input("Param")[0], i)

    slice_count = len(endpoints) if config.slice_var_up else 1
    raw = []            # (pname, gname, sizes)
    for pname, gname in pairs:
        if pname == table:
            continue
        p = _require_var(block, pname, "parameter")
        g = _require_var(block, gname, "gradient")
        if pname not in update_of:
            raise RefusedError("parameter %r has no optimizer op" % pname)
        if any(d < 0 for d in p.shape or ()):
            raise RefusedError("parameter %r has a dynamic shape %s" % (pname, list(p.shape)))
        sizes = slice_variable(p.shape, slice_count, config.min_block_size)
        gsizes = slice_variable(g.shape, slice_count, config.min_block_size)
        if len(sizes) != len(gsizes):
            raise RefusedError("parameter %r and its grad %r slice differently (%s vs %s)"
                               % (pname, gname, list(p.shape), list(g.shape)))
        raw.append((pname, gname, sizes))

    # Dispatch: blocks in grad order (shuffled as Paddle does without slice_var_up); a grad
    # block always goes where its parameter block goes.
    order = [r[0] for r in raw]
    if not config.slice_var_up:
        order = paddle_shuffle(order)
    by_name = {r[0]: r for r in raw}
    block_names = []
    for pname in order:
        sizes = by_name[pname][2]
        block_names += [pname] if len(sizes) == 1 else \
            [block_name(pname, i) for i in range(len(sizes))]
    if config.split_method == "balanced":
        from .placement import classic_placement
        eps = classic_placement(block, raw, order, update_of, endpoints)
    else:
        eps = dict(zip(block_names, dispatch(block_names, endpoints, config.split_method)))

    params = []
    for pname, gname, sizes in raw:
        p = block.var(pname)
        g = block.var(gname)
        blocks = [b.at(eps[b.name]) for b in split_var(pname, p.shape, sizes, p.dtype, p.kind)]
        grad_blocks = tuple(block_name(gname, i) for i in range(len(sizes))) \
            if len(sizes) > 1 else (gname,)
        upd = block.ops[update_of[pname]]
        slots = sliced_state_slots(upd.type)
        states = []
        for slot, args in upd.inputs.items():
            if slot in UNSLICED_SLOTS or not args:
                continue
            v = _require_var(block, args[0], "optimizer input")
            states.append(OptState(slot, v.name, tuple(v.shape or ()), v.dtype,
                                   slot in slots))
        params.append(ParamPlan(
            pname, gname, tuple(p.shape), p.dtype, g.kind, tuple(blocks), grad_blocks,
            update_of[pname], upd.type, tuple(ops_of.get(pname, ())), tuple(states),
            g.kind == "SELECTED_ROWS" and pname in remote_params))

    dist_table = None
    if table is not None:
        gname = dict(pairs).get(table)
        if gname is None or table not in update_of:
            raise RefusedError("distributed table %r has no optimizer op" % table)
        t = block.var(table)
        lookups = tuple(i for i, op in enumerate(block.ops)
                        if op.type in LOOKUP_TABLE_TYPES and op.input("W") == [table])
        dist_table = DistributedTable(table, gname, tuple(t.shape), t.dtype, update_of[table],
                                      int(math.ceil(t.shape[0] / float(len(endpoints)))),
                                      lookups)

    # Paddle collects the tables to fake_init (`_get_sparse_table_names`) from the trainer program
    # *after* `transpile` swapped each remote-prefetch table's lookups for one
    # distributed_lookup_table, so those tables count too, whatever their lookup type (v2 ops
    # are otherwise not looked at). It swaps a table when the first remote op reading it is a
    # lookup (an nce first keeps the table).
    fake = {p.name for p in params if p.remote_prefetch
            and _first_remote_reader_type(block, remote_ops, p.name) in LOOKUP_TABLE_TYPES}
    for op in block.ops:
        if op.type in CLASSIC_FAKE_INIT_TYPES and op.attr("is_sparse") is True:
            fake.add(table_of(op))
        if op.type == "distributed_lookup_table":
            fake.add(op.input("W")[0])
    if table is not None:
        fake.add(table)
    # tables fake_init'ed although the trainer reads them itself (a local lookup): Paddle never
    # fills them (fault classic-local-table-fake-init); fixing it receives them instead
    local = tuple(sorted(t for t in fake if _read_locally(block, t)))
    if config.fix_faults:
        fake -= set(local)

    lr = roles.lr_sched_ops(main)
    counter = None
    if config.mode != "sync":
        for i in lr:
            if block.ops[i].type == "increment":
                counter = (i, block.ops[i].output("Out")[0])
                break

    return DistributionPlan(
        lr_counter=counter, endpoints=endpoints, trainers=config.trainers, mode=config.mode,
        split_method=config.split_method, slice_var_up=config.slice_var_up,
        min_block_size=config.min_block_size, params=tuple(params), send_order=tuple(order),
        optimize_ops=tuple(opt), lr_ops=tuple(lr),
        fake_init_tables=tuple(sorted(fake)), local_tables=local, remote_prefetch_ops=remote_ops,
        distributed_table=dist_table, clip_ops=clip)


def _first_remote_reader_type(block, remote_ops: tuple, name: str) -> Optional[str]:
    """The type of the first remote-prefetch op that reads `name` (any input), or None."""
    for i in remote_ops:
        if name in block.ops[i].input_names():
            return block.ops[i].type
    return None


def _read_locally(block, table: str) -> bool:
    """Some lookup reads `table` on the trainer itself (not remote prefetch, not distributed)."""
    return any(op.type in LOOKUP_TABLE_TYPES and op.input("W")[:1] == [table]
               and op.attr("remote_prefetch") is not True and op.attr("is_distributed") is not True
               for op in block.ops)
