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
from ..ir.program import Program, Var, indexed, uids
from ..ir.tables import (CLASSIC_FAKE_INIT_TYPES, CLASSIC_REMOTE_PREFETCH_TYPES, LOOKUP_TABLE_TYPES,
                         is_remote_prefetch, table_of)
from .placed import classic_params
from .slicing import (VarBlock, block_name, dispatch, paddle_shuffle, slice_variable, split_var,
                      trainer_copy_name, trainer_copy_names)

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
    optimizer_op: int           # the uid (ir.program.Op.uid) of its optimizer update
    optimizer_type: str
    ops: tuple                  # uids of every optimize op that belongs to this param
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
    optimizer_op: int               # uid of its optimizer update
    rows_per_pserver: int
    lookup_ops: tuple = ()          # uids of its lookup_table ops (prefetched instead)


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
    optimize_ops: tuple                     # uids: every op moved to the pservers
    lr_ops: tuple                           # uids: the LR schedule ops
    fake_init_tables: tuple                 # sparse tables the trainer does not initialise
    local_tables: tuple                     # tables Paddle fake_inits that the trainer reads
    remote_prefetch_ops: tuple              # uids of lookup ops with remote_prefetch
    distributed_table: Optional[DistributedTable] = None
    clip_ops: tuple = ()                    # uids: @CLIP ops kept on the trainer as backward
    # async: the LR decay counter's increment op and counter var; every trainer sends its
    # own increments and the pservers sum them (None in sync mode or without LR decay)
    lr_counter: Optional[tuple] = None      # (op uid, counter var name)

    def placed_params(self, main: Program) -> list:
        """The params and the distributed table as style-neutral PlacedParams (placed.py)."""
        return classic_params(self, main)

    @property
    def dense_order(self) -> tuple:
        """The params in the order their blocks are dispatched: the send order (shuffled as
        Paddle does without slice_var_up)."""
        return self.send_order

    def counter_name(self, trainer_id: int) -> str:
        return trainer_copy_name(self.lr_counter[1], trainer_id)

    @property
    def sync(self) -> bool:
        return self.mode == "sync"

    def trainer_copies(self) -> int:
        """The gradient copies the pservers declare, one per trainer and gradient block (sync
        mode), or 0."""
        return self.trainers * sum(len(p.grad_blocks) for p in self.params) if self.sync else 0

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

    def sent_grad_names(self, merged, trainer_id: int) -> list:
        """[sent_grad_name(m, trainer_id) for m in merged], made in one go (not interned)."""
        if self.sync and self.trainers > 1:
            return trainer_copy_names(merged, trainer_id)
        return list(merged)

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
    opt, clip_ops, lr = roles.classified_ops(main, CLIP_NAME_SCOPE)
    pairs = roles.params_grads(opt)
    if not pairs:
        raise RefusedError("no optimizer op names its (param, grad) in op_role_var")
    table = find_distributed_table(main)
    _check_table_grad(table, dict(pairs))
    remote_ops = [op for op in block.ops
                  if is_remote_prefetch(op, CLASSIC_REMOTE_PREFETCH_TYPES)]
    remote_params = {a for op in remote_ops for a in op.input_names()}
    update_of, ops_of = _updates(block, opt)
    raw = _sizes(block, config, pairs, table, update_of)
    # Dispatch: blocks in grad order (shuffled as Paddle does without slice_var_up); a grad
    # block always goes where its parameter block goes.
    order = [r[0] for r in raw]
    if not config.slice_var_up:
        order = paddle_shuffle(order)
    eps = _dispatch(block, config, raw, order, update_of)
    params = [_param_plan(block, pname, gname, sizes, eps, update_of[pname],
                          ops_of.get(pname, ()), pname in remote_params)
              for pname, gname, sizes in raw]
    dist_table = _distributed_table(block, table, dict(pairs), update_of, len(endpoints))
    fake, local = _fake_init_tables(block, params, remote_ops, table, config.fix_faults)
    counter = None
    if config.mode != "sync":
        counter = next(((op.uid, op.output("Out")[0]) for op in lr if op.type == "increment"),
                       None)
    return DistributionPlan(
        lr_counter=counter, endpoints=endpoints, trainers=config.trainers, mode=config.mode,
        split_method=config.split_method, slice_var_up=config.slice_var_up,
        min_block_size=config.min_block_size, params=tuple(params), send_order=tuple(order),
        optimize_ops=uids(opt), lr_ops=uids(lr), fake_init_tables=tuple(sorted(fake)),
        local_tables=local, remote_prefetch_ops=uids(remote_ops),
        distributed_table=dist_table, clip_ops=uids(clip_ops))


def _check_table_grad(table: Optional[str], grads: dict) -> None:
    """Paddle's _init_splited_vars takes the distributed table out of the params and
    `<table>@GRAD` out of the grads: a table updated with another grad (a clip's output) leaves
    one grad without its param, and its assertion that both lists slice into as many blocks
    fails."""
    if table is None or grads.get(table) in (None, table + "@GRAD"):
        return
    raise RefusedError("AssertionError (Paddle's _init_splited_vars, len(grad_blocks) == "
                       "len(param_blocks): the distributed table %s is updated with %s, not "
                       "%s@GRAD, which stays among the grads once the table leaves the params)"
                       % (table, grads[table], table))


def _updates(block, opt: list) -> tuple:
    """({param: its optimizer update op}, {param: [uids of every optimize op attributed to
    it]})."""
    update_of: dict = {}
    ops_of: dict = {}
    for i, op in indexed(block.ops, uids(opt)):
        rv = op.attr(roles.ROLE_VAR_ATTR) or []
        if rv:
            ops_of.setdefault(rv[0], []).append(op.uid)
        if is_optimizer_update(op):
            if len(op.input("Grad")) != 1 or len(op.input("Param")) != 1:
                raise RefusedError("optimizer op %d (%s) needs exactly one Param and one Grad "
                                   "input, it has Param=%s Grad=%s" % (
                                       i, op.type, op.input("Param"), op.input("Grad")))
            _check_declared_inputs(i, op, block)
            update_of.setdefault(op.input("Param")[0], op)
    return update_of, ops_of


# the inputs of an update a pserver does not declare as the origin declares them: its grad and
# param (merged / sliced), the beta tensors (read by name)
_NOT_DECLARED = ("Grad", "Param", "Beta1Tensor", "Beta2Tensor")


def _check_declared_inputs(i: int, op, block) -> None:
    """Each pserver declares the update's learning rate and states as tensors of the origin's
    kind and shape: a var of another kind, or without a shape, can not be (Paddle's
    create_var fails on it)."""
    for slot, args in op.inputs.items():
        v = block.vars.get(args[0]) if args and slot not in _NOT_DECLARED else None
        if v is not None and (v.kind not in ("LOD_TENSOR", "SELECTED_ROWS") or v.shape is None):
            raise RefusedError("optimizer op %d (%s): its %s %s is a %s var, not a tensor a "
                               "pserver can declare" % (i, op.type, slot, args[0], v.kind))


def _sizes(block, config: ClusterConfig, pairs: list, table, update_of: dict) -> list:
    """[(param, grad, element sizes of its blocks)] of every (param, grad) but the
    distributed table's."""
    slice_count = len(config.pservers) if config.slice_var_up else 1
    raw = []
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
    return raw


def _dispatch(block, config: ClusterConfig, raw: list, order: list, update_of: dict) -> dict:
    """{block name: endpoint} of every parameter block."""
    by_name = {r[0]: r for r in raw}
    block_names = []
    for pname in order:
        sizes = by_name[pname][2]
        block_names += [pname] if len(sizes) == 1 else \
            [block_name(pname, i) for i in range(len(sizes))]
    if config.split_method == "balanced":
        from .placement import classic_placement
        return classic_placement(block, raw, order, update_of, tuple(config.pservers))
    return dict(zip(block_names, dispatch(block_names, tuple(config.pservers),
                                          config.split_method)))


def _param_plan(block, pname: str, gname: str, sizes: list, eps: dict, upd, op_uids,
                remote: bool) -> ParamPlan:
    """The plan of one parameter: its blocks where `eps` puts them, its optimizer states."""
    p = block.var(pname)
    g = block.var(gname)
    blocks = split_var(pname, p.shape, sizes, p.dtype, p.kind, endpoints=eps)
    grad_blocks = tuple(block_name(gname, i) for i in range(len(sizes))) \
        if len(sizes) > 1 else (gname,)
    slots = sliced_state_slots(upd.type)
    states = []
    for slot, args in upd.inputs.items():
        if slot in UNSLICED_SLOTS or not args:
            continue
        v = _require_var(block, args[0], "optimizer input")
        states.append(OptState(slot, v.name, tuple(v.shape or ()), v.dtype, slot in slots))
    return ParamPlan(pname, gname, tuple(p.shape), p.dtype, g.kind, tuple(blocks), grad_blocks,
                     upd.uid, upd.type, tuple(op_uids), tuple(states),
                     g.kind == "SELECTED_ROWS" and remote)


def _distributed_table(block, table, grads: dict, update_of: dict,
                       n: int) -> Optional[DistributedTable]:
    if table is None:
        return None
    gname = grads.get(table)
    if gname is None or table not in update_of:
        raise RefusedError("distributed table %r has no optimizer op" % table)
    t = block.var(table)
    lookups = uids(op for op in block.ops
                   if op.type in LOOKUP_TABLE_TYPES and op.input("W") == [table])
    return DistributedTable(table, gname, tuple(t.shape), t.dtype, update_of[table].uid,
                            int(math.ceil(t.shape[0] / float(n))), lookups)


def _fake_init_tables(block, params: list, remote_ops: list, table, fix: bool) -> tuple:
    """(the tables the trainer startup fake_inits, the local tables among them, sorted).

    Paddle collects the tables to fake_init (`_get_sparse_table_names`) from the trainer program
    *after* `transpile` swapped each remote-prefetch table's lookups for one
    distributed_lookup_table, so those tables count too, whatever their lookup type (v2 ops
    are otherwise not looked at). It swaps a table when the first remote op reading it is a
    lookup (an nce first keeps the table). Tables fake_init'ed although the trainer reads them
    itself (a local lookup) are never filled (fault classic-local-table-fake-init); fixing it
    receives them instead."""
    first_reader = _first_remote_reader_types(remote_ops)
    fake = {p.name for p in params if p.remote_prefetch
            and first_reader.get(p.name) in LOOKUP_TABLE_TYPES}
    for op in block.ops:
        if op.type in CLASSIC_FAKE_INIT_TYPES and op.attr("is_sparse") is True:
            fake.add(table_of(op))
        if op.type == "distributed_lookup_table":
            fake.add(op.input("W")[0])
    if table is not None:
        fake.add(table)
    read_here = _tables_read_locally(block)
    local = tuple(sorted(t for t in fake if t in read_here))
    if fix:
        fake -= set(local)
    return fake, local


def _first_remote_reader_types(remote_ops: list) -> dict:
    """{var name: the type of the first remote-prefetch op that reads it (any input)}."""
    out: dict = {}
    for op in remote_ops:
        for name in op.input_names():
            out.setdefault(name, op.type)
    return out


def _tables_read_locally(block) -> set:
    """The tables some lookup reads on the trainer itself (not remote prefetch, not
    distributed)."""
    return {op.input("W")[0] for op in block.ops
            if op.type in LOOKUP_TABLE_TYPES and op.input("W")
            and op.attr("remote_prefetch") is not True and op.attr("is_distributed") is not True}
