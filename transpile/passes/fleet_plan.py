"""The fleet-style distribution plan: computed once from (main, startup, config), then read-only.

It answers the questions Fleet's CompileTimeStrategy answers (ir/public.py), without mutating
anything: which (param, grad) pairs the optimizer updates and which of them are sparse tables,
how each param / grad is sliced into blocks, which endpoint owns each block, which ops are
optimizer and learning-rate ops. Every fleet pass reads this plan; none recomputes placement.

Fleet differs from the classic DistributeTranspiler in ways that are deliberate here:
  - the minimum block size is Fleet's fixed 81920 elements (the config's min_block_size,
    slice_var_up and split_method belong to the classic style; Fleet always slices and always
    dispatches round robin);
  - sparse tables (embeddings with remote_prefetch) are sliced uniformly by rows, one block per
    endpoint, and their dispatch restarts at the first endpoint for every table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Optional

from ..config import ClusterConfig
from ..errors import RefusedError, UserError
from ..program import Op, Program, Var

FLEET_MIN_BLOCK_SIZE = 81920
STEP_COUNTER = "@PS_STEP_COUNTER@"
LR_DECAY_COUNTER = "@LR_DECAY_COUNTER@"
CLIP_NAME_SCOPE = "gradient_clip"
LOOKUP_OPS = ("lookup_table", "lookup_table_v2")
LOOKUP_GRAD_OPS = ("lookup_table_grad", "lookup_table_v2_grad")

ROLE_BACKWARD = 1
ROLE_OPTIMIZE = 2
ROLE_RPC = 4
ROLE_LRSCHED = 16

MODES = {"sync": ("SYNC", 0), "async": ("ASYNC", 1), "half_async": ("HALF_ASYNC", 2),
         "geo": ("GEO", 3)}


def _role(op: Op) -> int:
    return int(op.attr("op_role", 0) or 0)


def is_clip_op(op: Op) -> bool:
    """Gradient-clip ops carry the optimize role but stay on the trainer (Fleet demotes them)."""
    return CLIP_NAME_SCOPE in str(op.attr("op_namescope", "") or "")


def is_optimize_role_op(op: Op) -> bool:
    """Fleet's notion of an optimize op: op_role exactly Optimize and not a gradient clip."""
    return "op_role" in op.attrs and _role(op) == ROLE_OPTIMIZE and not is_clip_op(op)


def is_lr_op(op: Op) -> bool:
    return _role(op) in (ROLE_LRSCHED, ROLE_LRSCHED | ROLE_OPTIMIZE)


def is_optimizer_op(op: Op) -> bool:
    """An op that updates a parameter (sgd, adam, ...), as opposed to clip / decay helpers."""
    return bool(op.input("Param")) and bool(op.input("LearningRate"))


def orig_varname(name: str) -> str:
    """`w.block1.trainer_0` -> `w`: strip the block and trainer suffixes the slicing adds."""
    t = name.find(".trainer_")
    end = t if t >= 0 else len(name)
    b = name.find(".block")
    if b >= 0:
        end = min(end, b)
    return name[:end]


def same_or_split_var(p_name: str, var_name: str) -> bool:
    return p_name == var_name or p_name.startswith(var_name + ".block")


def is_sparse_lookup(op: Op) -> bool:
    if op.type in LOOKUP_OPS:
        return op.attr("is_sparse") is True and op.attr("is_distributed") is False
    return op.type == "distributed_lookup_table" and op.attr("is_distributed") is False


def is_distributed_lookup(op: Op) -> bool:
    return op.type in LOOKUP_OPS + ("distributed_lookup_table",) and \
        op.attr("is_distributed") is True


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


@dataclass(frozen=True)
class Slice:
    """One block of a sliced var (or the whole var when it is not split)."""
    name: str
    origin: str
    index: int
    shape: tuple
    dtype: Optional[str]
    kind: str
    lod_level: Optional[int]
    endpoint: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "origin": self.origin, "index": self.index,
                "shape": list(self.shape), "endpoint": self.endpoint}


@dataclass(frozen=True)
class Pair:
    """A parameter the optimizer updates and the grad it is updated with (op_role_var)."""
    param: str
    grad: str
    sparse: bool = False          # an embedding table looked up with remote_prefetch
    distributed: bool = False     # ... a large-scale (is_distributed) one


@dataclass(frozen=True)
class FleetPlan:
    mode: str                                   # sync | async | half_async | geo
    endpoints: tuple
    trainers: int
    dense_pairs: tuple
    sparse_pairs: tuple
    param_slices: Mapping[str, tuple]           # origin param name -> Slices
    grad_slices: Mapping[str, tuple]            # origin grad name -> Slices
    ep_params: Mapping[str, tuple]              # endpoint -> param Slices, dispatch order
    ep_grads: Mapping[str, tuple]               # endpoint -> grad Slices, dispatch order
    optimize_ops: tuple                         # block-0 op indices (clip ops excluded)
    clip_ops: tuple                             # block-0 op indices of gradient-clip ops
    lr_ops: tuple                               # block-0 op indices of LR-schedule ops
    sparse_tables: tuple                        # tables of is_sparse, non-distributed lookups
    distributed_tables: tuple                   # tables of is_distributed lookups
    table_ids: Mapping[str, int]                # sparse param -> the-one-ps table id
    need_global_step: bool
    has_lr_scheduler: bool
    lr_var: Optional[str] = None
    notes: tuple = field(default=())

    # --- questions the passes ask -----------------------------------------------------------
    @property
    def mode_name(self) -> str:
        return MODES[self.mode][0]

    @property
    def mode_id(self) -> int:
        return MODES[self.mode][1]

    @property
    def is_geo(self) -> bool:
        return self.mode == "geo"

    @property
    def is_sync(self) -> bool:
        return self.mode == "sync"

    @property
    def pairs(self) -> tuple:
        return self.dense_pairs + self.sparse_pairs

    def pair_of_param(self, param: str) -> Optional[Pair]:
        return next((p for p in self.pairs if p.param == param), None)

    def grad_to_param(self) -> dict:
        return {p.grad: p.param for p in self.pairs}

    def endpoint_of(self, slice_name: str) -> list:
        """Endpoints holding a param or grad slice of that name (Paddle's build_ctx lookup)."""
        eps = []
        for ep in self.endpoints:
            if any(s.name == slice_name for s in self.ep_params[ep] + self.ep_grads[ep]):
                eps.append(ep)
        return eps

    def to_dict(self) -> dict:
        return {
            "style": "fleet", "mode": self.mode, "endpoints": list(self.endpoints),
            "trainers": self.trainers, "min_block_size": FLEET_MIN_BLOCK_SIZE,
            "dense_pairs": [[p.param, p.grad] for p in self.dense_pairs],
            "sparse_pairs": [{"param": p.param, "grad": p.grad, "distributed": p.distributed,
                              "table_id": self.table_ids.get(p.param)}
                             for p in self.sparse_pairs],
            "endpoints_hold": {ep: {"params": [s.to_dict() for s in self.ep_params[ep]],
                                    "grads": [s.to_dict() for s in self.ep_grads[ep]]}
                               for ep in self.endpoints},
            "optimize_ops": list(self.optimize_ops), "lr_ops": list(self.lr_ops),
            "clip_ops": list(self.clip_ops),
            "need_global_step": self.need_global_step,
            "has_lr_scheduler": self.has_lr_scheduler,
            "notes": list(self.notes),
        }


# --- slicing ---------------------------------------------------------------------------------
def _dense_block_sizes(shape: tuple, slice_count: int) -> list:
    """Element counts of the blocks a dense var is cut into (Fleet's _slice_variable)."""
    numel = _prod(shape)
    split_count = slice_count
    max_count = int(math.floor(numel / float(FLEET_MIN_BLOCK_SIZE))) or 1
    if max_count < slice_count:
        split_count = max_count
    block_size = int(math.ceil(numel / float(split_count)))
    if len(shape) >= 2:
        # blocks are whole rows
        dim1 = _prod(shape[1:])
        if block_size % dim1:
            block_size += dim1 - block_size % dim1
    split_count = int(math.ceil(numel / float(block_size))) if block_size else 1
    return [min(block_size, numel - i * block_size) for i in range(split_count)]


def _sparse_block_sizes(shape: tuple, slice_count: int) -> list:
    """Element counts of the row blocks of a sparse table: one per endpoint, the remainder rows
    going to the first blocks. Paddle computes the rows with true division and truncates the
    element counts when formatting them; reproduced so odd shapes give the same blocks."""
    rows = shape[0] / slice_count
    remainder = shape[0] % slice_count
    dim0s = [rows] * (remainder if rows == 0 else slice_count)
    for i in range(remainder):
        dim0s[i] += 1
    dim1 = _prod(shape[1:])
    return [int(d * dim1) for d in dim0s]


def _slices(var: Var, sizes: list) -> list:
    shape = tuple(var.shape or ())
    if len(sizes) == 1:
        return [Slice(var.name, var.name, 0, shape, var.dtype, var.kind, var.lod_level)]
    dim1 = _prod(shape[1:]) if len(shape) >= 2 else 1
    out = []
    for i, size in enumerate(sizes):
        sliced = (size // dim1,) + shape[1:]
        out.append(Slice("%s.block%d" % (var.name, i), var.name, i, sliced, var.dtype,
                         var.kind, var.lod_level))
    return out


def _var(main: Program, name: str, why: str) -> Var:
    v = main.global_block.vars.get(name)
    if v is None:
        raise UserError("the program names %r (%s) but declares no such var" % (name, why))
    if v.kind not in ("LOD_TENSOR", "SELECTED_ROWS"):
        raise UserError("%s: a %s var can not be distributed (LOD_TENSOR or SELECTED_ROWS only)"
                        % (name, v.kind))
    return v


# --- the plan --------------------------------------------------------------------------------
def make_plan(main: Program, startup: Program, config: ClusterConfig, *,
              lr_scheduler: bool = False) -> FleetPlan:
    """Compute the fleet plan; raises RefusedError where Paddle refuses the program.

    `lr_scheduler`: the program's learning rate is set by a Python LRScheduler each step.
    A ProgramDesc does not record that (Paddle 2.6 even initialises the var in startup as it
    does a constant rate), so it has to be said; Fleet then keeps the LR var on the trainer.
    """
    ops = main.global_block.ops
    endpoints = tuple(config.pservers)

    remote = []        # params of lookups with remote_prefetch: Fleet's "sparse" params
    sparse_tables, dist_tables = [], []
    for op in ops:
        table = op.input("W")[:1]
        if not table:
            continue
        if op.type in LOOKUP_OPS and op.attr("remote_prefetch") is True:
            _add(remote, table[0])
        if is_sparse_lookup(op):
            _add(sparse_tables, table[0])
        if is_distributed_lookup(op):
            _add(dist_tables, table[0])

    optimize_ops, clip_ops, lr_ops = [], [], []
    dense, sparse, seen = [], [], set()
    for i, op in enumerate(ops):
        if is_lr_op(op):
            lr_ops.append(i)
        if "op_role" not in op.attrs or _role(op) != ROLE_OPTIMIZE:
            continue
        if is_clip_op(op):
            clip_ops.append(i)
            continue
        optimize_ops.append(i)
        rv = op.attr("op_role_var") or []
        if len(rv) >= 2 and rv[0] not in seen:
            seen.add(rv[0])
            _var(main, rv[0], "a parameter in op_role_var")
            _var(main, rv[1], "a gradient in op_role_var")
            if rv[0] in remote:
                sparse.append(Pair(rv[0], rv[1], True, rv[0] in dist_tables))
            else:
                dense.append(Pair(rv[0], rv[1]))

    _check_ops(ops, optimize_ops, dense + sparse, remote)

    if config.mode == "geo":
        if not sparse:
            raise RefusedError("geo mode needs a sparse parameter (an embedding looked up with "
                               "is_sparse and remote_prefetch); this program has none")
        if dist_tables:
            raise RefusedError("geo mode can not handle large-scale embedding tables "
                               "(is_distributed lookups: %s); use a plain sparse embedding"
                               % ", ".join(dist_tables))

    n = len(endpoints)
    param_slices, grad_slices = {}, {}
    for pairs, sizes_of in ((dense, _dense_block_sizes), (sparse, _sparse_block_sizes)):
        for p in pairs:
            pv, gv = main.global_block.vars[p.param], main.global_block.vars[p.grad]
            param_slices.setdefault(p.param, _slices(pv, sizes_of(tuple(pv.shape or ()), n)))
            grad_slices.setdefault(p.grad, _slices(gv, sizes_of(tuple(gv.shape or ()), n)))

    # round robin: dense blocks continue from one var to the next, each sparse table restarts
    ep_params = {ep: [] for ep in endpoints}
    ep_grads = {ep: [] for ep in endpoints}
    step = 0
    placed_params, placed_grads = {}, {}
    for pairs, restart in ((dense, False), (sparse, True)):
        for p in pairs:
            if p.grad in placed_grads:
                continue
            if restart:
                step = 0
            gs, ps = grad_slices[p.grad], param_slices[p.param]
            if len(gs) != len(ps):
                raise UserError("%s and its grad %s have different shapes: %s vs %s"
                                % (p.param, p.grad, ps[0].shape, gs[0].shape))
            new_g, new_p = [], []
            for g, s in zip(gs, ps):
                ep = endpoints[step]
                step = (step + 1) % n
                new_p.append(_at(s, ep))
                new_g.append(_at(g, ep))
                ep_params[ep].append(new_p[-1])
                ep_grads[ep].append(new_g[-1])
            placed_params[p.param], placed_grads[p.grad] = tuple(new_p), tuple(new_g)

    dense_offset = 1 if dense else 0
    table_ids = {p.param: dense_offset + i for i, p in enumerate(sparse)}

    need_global_step = any(ops[i].type == "increment" and ops[i].input("X")[:1] ==
                           [LR_DECAY_COUNTER] for i in lr_ops)
    lr_var = _lr_var(main, optimize_ops)
    notes = []
    if lr_scheduler:
        notes.append("the learning rate %s is fed by an LR scheduler: the trainer keeps it as a "
                     "persistable var" % lr_var)

    return FleetPlan(
        mode=config.mode, endpoints=endpoints, trainers=config.trainers,
        dense_pairs=tuple(dense), sparse_pairs=tuple(sparse),
        param_slices=MappingProxyType(placed_params), grad_slices=MappingProxyType(placed_grads),
        ep_params=MappingProxyType({k: tuple(v) for k, v in ep_params.items()}),
        ep_grads=MappingProxyType({k: tuple(v) for k, v in ep_grads.items()}),
        optimize_ops=tuple(optimize_ops), clip_ops=tuple(clip_ops), lr_ops=tuple(lr_ops),
        sparse_tables=tuple(sparse_tables), distributed_tables=tuple(dist_tables),
        table_ids=MappingProxyType(table_ids), need_global_step=need_global_step,
        has_lr_scheduler=lr_scheduler, lr_var=lr_var, notes=tuple(notes))


def _check_ops(ops: list, optimize_ops: list, pairs: list, remote: list) -> None:
    """The slots and attrs the fleet passes rely on are there (a saved program that lost them
    would otherwise fail deep inside a pass)."""
    def need(op, io, slot):
        if not (op.inputs if io == "input" else op.outputs).get(slot):
            raise UserError("%s op: %s %s is missing or empty" % (op.type, io, slot))

    for i in optimize_ops:
        op = ops[i]
        rv = op.attr("op_role_var") or []
        if len(rv) == 1 or len(rv) % 2:
            raise UserError("%s op (optimize role): op_role_var %r should name a (param, grad) "
                            "pair" % (op.type, rv))
        if is_optimizer_op(op):
            need(op, "input", "Grad")
            if op.type == "adam":
                for slot in ("Moment1", "Moment2", "Beta1Pow", "Beta2Pow"):
                    need(op, "input", slot)
    for p in pairs:
        if not any(is_optimizer_op(ops[i]) and ops[i].input("Param")[0] == p.param
                   for i in optimize_ops):
            raise UserError("parameter %s has optimize ops (op_role_var) but no optimizer op "
                            "(with Param and LearningRate) updates it" % p.param)
    for op in ops:
        if op.type in LOOKUP_OPS and op.input("W")[:1] and op.input("W")[0] in remote:
            need(op, "input", "Ids")
            need(op, "output", "Out")
        if op.type in LOOKUP_GRAD_OPS and op.input("W")[:1] and op.input("W")[0] in remote:
            need(op, "input", "Ids")
            need(op, "input", "Out@GRAD")
            need(op, "output", "W@GRAD")


def _add(items: list, x) -> None:
    if x not in items:
        items.append(x)


def _at(s: Slice, ep: str) -> Slice:
    return Slice(s.name, s.origin, s.index, s.shape, s.dtype, s.kind, s.lod_level, ep)


def _lr_var(main: Program, optimize_ops) -> Optional[str]:
    """The learning-rate var the optimizer ops read (the first one, when they differ)."""
    for i in optimize_ops:
        lr = main.global_block.ops[i].input("LearningRate")
        if lr:
            return lr[0]
    return None
