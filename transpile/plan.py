"""The distribution plan: which parameter goes where, computed once, read by every pass.

`make_plan(main, config)` is a pure function of the training program and the cluster config. It
finds the optimizer ops (and the clip / regularization ops that run with them), the learning-rate
schedule ops, the (param, grad) pairs, slices each parameter into dim-0 blocks and dispatches the
blocks to the pserver endpoints. The result is a frozen `DistributionPlan`; `to_dict()` is its
JSON form (plan.json).

The generic arithmetic lives in small documented functions that the fleet style reuses:
`slice_variable`, `dispatch`, `optimize_ops`, `lr_sched_ops`, `params_grads`,
`sliced_state_slots`.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Optional, Sequence

from .config import ClusterConfig
from .errors import RefusedError
from .program import DTYPE_BYTES, Op, Program, Var
from . import roles

# Paddle's names for the pieces of a split variable.
BLOCK_SUFFIX = ".block"
TRAINER_SUFFIX = ".trainer_"

# Op types that read an embedding table (W) by ids; with is_sparse their grad is SELECTED_ROWS.
LOOKUP_TABLE_TYPES = ("lookup_table", "lookup_table_v2")
# Paddle's `_get_sparse_table_names` looks only at these types (lookup_table_v2 is not among
# them): their tables get a `fake_init` instead of a real initializer on the trainer.
FAKE_INIT_TABLE_TYPES = ("lookup_table", "nce")
# Ops that, with remote_prefetch, fetch the rows they need from the pservers.
REMOTE_PREFETCH_TYPES = ("lookup_table", "nce", "lookup_table_v2")
# The op_namescope that marks gradient-clip ops; the classic transpiler keeps them on the trainer.
CLIP_NAMESCOPE = "@CLIP"

# Optimizer input slots that are never sliced with the parameter: the parameter, its grad and
# the scalar hyper-parameter tensors.
UNSLICED_OPT_SLOTS = ("Param", "Grad", "LearningRate", "Beta1Tensor", "Beta2Tensor")

# Per optimizer: the accumulator input slots that hold one value per parameter entry and so are
# sliced with the parameter block on the pserver. This is Paddle's table
# (DistributeTranspiler._get_optimizer_input_shape) plus rmsprop's MeanGrad, which Paddle forgot
# (the corpus corrections give it the block shape too). Any other optimizer is refused.
SLICED_STATE_SLOTS = {
    "sgd": (),
    "adam": ("Moment1", "Moment2"),
    "adagrad": ("Moment",),
    "adamax": ("Moment", "InfNorm"),
    "momentum": ("Velocity",),
    "lars_momentum": ("Velocity",),
    "rmsprop": ("Moment", "MeanSquare", "MeanGrad"),
    "decayed_adagrad": ("Moment",),
    "ftrl": ("SquaredAccumulator", "LinearAccumulator"),
}


# --- generic helpers ---------------------------------------------------------------------------
def slice_variable(shape: Sequence[int], slice_count: int, min_block_size: int) -> list[int]:
    """Split a tensor of `shape` into at most `slice_count` dim-0 blocks; returns element counts.

    Paddle's rule: never make blocks smaller than `min_block_size` elements (so a small tensor
    stays whole), round the block size up to a whole number of dim-0 rows for tensors of rank
    >= 2 (1-D tensors split element-wise), and let the last block take the remainder. The
    number of blocks is therefore at most `slice_count` and may be smaller.
    """
    numel = 1
    for d in shape:
        numel *= int(d)
    split_count = slice_count
    max_count = int(math.floor(numel / float(min_block_size)))
    if max_count == 0:
        max_count = 1
    if max_count < slice_count:
        split_count = max_count
    block_size = int(math.ceil(numel / float(split_count)))
    if len(shape) >= 2:
        row = 1
        for d in shape[1:]:
            row *= int(d)
        remains = block_size % row
        if remains:
            block_size += row - remains
    count = int(math.ceil(numel / float(block_size))) if block_size else 1
    return [min(block_size, numel - i * block_size) for i in range(count)]


def block_shapes(shape: Sequence[int], sizes: Sequence[int]) -> list[tuple]:
    """The shapes of the dim-0 blocks of `shape` holding `sizes` elements each."""
    if len(sizes) == 1:
        return [tuple(shape)]
    row = 1
    for d in shape[1:]:
        row *= int(d)
    return [tuple([size // row] + list(shape[1:])) for size in sizes]


def hash_name_index(name: str, count: int) -> int:
    """hash_name dispatch: crc32 of the UTF-8 name modulo the endpoint count (stable across runs,
    unlike the salted hash() Paddle used)."""
    return zlib.crc32(name.encode("utf-8")) % count


def dispatch(block_names: Sequence[str], endpoints: Sequence[str], method: str) -> list[str]:
    """The endpoint of each block: `round_robin` in the order given, or `hash_name` by name."""
    if method == "hash_name":
        return [endpoints[hash_name_index(n, len(endpoints))] for n in block_names]
    if method != "round_robin":
        raise ValueError("unknown split method %r" % method)
    return [endpoints[i % len(endpoints)] for i in range(len(block_names))]


def paddle_shuffle(items: list, seed: int = 0) -> list:
    """The permutation numpy's legacy `np.random.seed(seed); np.random.shuffle(items)` gives.

    Paddle shuffles the grads this way (seeded by Program.random_seed, 0 unless set in Python,
    which a saved ProgramDesc does not record) before dispatching them when slice_var_up is off.
    """
    import numpy as np
    out = list(items)
    np.random.RandomState(seed).shuffle(out)
    return out


def is_clip_op(op: Op) -> bool:
    return CLIP_NAMESCOPE in str(op.attr("op_namescope", "") or "")


def optimize_ops(program: Program) -> list[int]:
    """Indices (global block) of the ops Paddle moves to the pservers: op_role exactly Optimize.

    That is the optimizer updates and the clip / regularization ops built under the optimizer's
    guard; ops in the @CLIP name scope stay on the trainer (Paddle turns them into backward ops).
    """
    out = []
    for i, op in enumerate(program.global_block.ops):
        if roles.role(op) == roles.OPTIMIZE and not is_clip_op(op):
            out.append(i)
    return out


def lr_sched_ops(program: Program) -> list[int]:
    """Indices (global block) of the learning-rate schedule ops (role LRSched or LRSched|Optimize)."""
    return [i for i, op in enumerate(program.global_block.ops)
            if roles.role(op) in (roles.LRSCHED, roles.LRSCHED | roles.OPTIMIZE)]


def is_optimizer_update(op: Op) -> bool:
    """An optimizer update op (sgd, adam...): it reads Param and LearningRate."""
    return "Param" in op.inputs and "LearningRate" in op.inputs


def params_grads(program: Program, opt_ops: Sequence[int]) -> list[tuple[str, str]]:
    """(param, grad) pairs in the order their first optimize op appears, from op_role_var."""
    seen = set()
    pairs = []
    block = program.global_block
    for i in opt_ops:
        rv = block.ops[i].attr(roles.ROLE_VAR_ATTR) or []
        if len(rv) >= 2 and rv[0] not in seen:
            seen.add(rv[0])
            pairs.append((rv[0], rv[1]))
    return pairs


def sliced_state_slots(op_type: str) -> tuple:
    """The accumulator slots of an optimizer that are sliced like its parameter."""
    if op_type not in SLICED_STATE_SLOTS:
        raise RefusedError("optimizer %r is not supported by parameter-server training "
                           "(Paddle supports sgd, momentum, adam, adagrad, adamax, rmsprop, "
                           "decayed_adagrad, ftrl, lars_momentum)" % op_type)
    return SLICED_STATE_SLOTS[op_type]


def varname_parts(name: str) -> tuple[str, str, str]:
    """Split "fc_w@GRAD.block1.trainer_0" into ("fc_w@GRAD", "block1", "trainer_0")."""
    trainer = ""
    t = name.find(TRAINER_SUFFIX)
    if t >= 0:
        trainer = name[t + 1:]
    else:
        t = len(name)
    block = ""
    b = name.find(BLOCK_SUFFIX)
    if b >= 0:
        block = name[b + 1:t]
    else:
        b = len(name)
    return name[:min(b, t)], block, trainer


# --- the plan ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VarBlock:
    """One dim-0 slice of a variable: its name on the pserver, where it starts, its shape."""
    name: str           # "fc_w.block0", or "fc_w" when the variable is not sliced
    index: int
    offset: int         # in elements of the flattened variable
    shape: tuple
    dtype: str
    endpoint: str

    @property
    def rows(self) -> int:
        return self.shape[0] if self.shape else 1

    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * DTYPE_BYTES.get(self.dtype, 0)

    def to_dict(self) -> dict:
        return {"name": self.name, "offset": self.offset, "shape": list(self.shape),
                "dtype": self.dtype, "bytes": self.nbytes(), "endpoint": self.endpoint}


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

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "grad": self.grad, "grad_kind": self.grad_kind,
                "blocks": [b.to_dict() for b in self.blocks],
                "grad_blocks": list(self.grad_blocks),
                "optimizer": self.optimizer_type, "optimizer_op": self.optimizer_op,
                "ops": list(self.ops), "remote_prefetch": self.remote_prefetch,
                "states": [{"slot": s.slot, "name": s.name, "dtype": s.dtype,
                            "blocks": [{"shape": list(s.shape if not s.sliced else b.shape),
                                        "endpoint": b.endpoint} for b in self.blocks]}
                           for s in self.states]}


@dataclass(frozen=True)
class DistributedTable:
    """The one `is_distributed` lookup table: rows split evenly over every pserver."""
    name: str
    grad: str
    shape: tuple
    dtype: str
    optimizer_op: int
    rows_per_pserver: int

    def to_dict(self) -> dict:
        return {"name": self.name, "grad": self.grad, "shape": list(self.shape),
                "dtype": self.dtype, "rows_per_pserver": self.rows_per_pserver}


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
    remote_prefetch_ops: tuple              # indices of lookup ops with remote_prefetch
    distributed_table: Optional[DistributedTable] = None
    clip_ops: tuple = ()                    # @CLIP ops kept on the trainer as backward ops
    # async: the LR decay counter's increment op and counter var; every trainer sends its
    # own increments and the pservers sum them (None in sync mode or without LR decay)
    lr_counter: Optional[tuple] = None      # (op index, counter var name)

    def counter_name(self, trainer_id: int) -> str:
        return "%s.trainer_%d" % (self.lr_counter[1], trainer_id)

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
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def sent_grad_name(self, merged: str, trainer_id: int) -> str:
        """The name trainer `trainer_id` sends a grad block under (sync with several trainers
        appends .trainer_<id>, so the pserver can tell the copies apart)."""
        if self.sync and self.trainers > 1:
            return "%s.trainer_%d" % (merged, trainer_id)
        return merged

    def blocks_on(self, endpoint: str) -> list[tuple[ParamPlan, VarBlock]]:
        """The parameter blocks an endpoint holds, in the order their grads are sent."""
        out = []
        for pname in self.send_order:
            p = self.param(pname)
            out.extend((p, b) for b in p.blocks if b.endpoint == endpoint)
        return out

    def to_dict(self) -> dict:
        d = {"endpoints": list(self.endpoints), "trainers": self.trainers, "mode": self.mode,
             "split_method": self.split_method, "slice_var_up": self.slice_var_up,
             "min_block_size": self.min_block_size,
             "params": [p.to_dict() for p in self.params],
             "send_order": list(self.send_order),
             "ops": {"optimize": list(self.optimize_ops), "lr_sched": list(self.lr_ops),
                     "clip_kept_on_trainer": list(self.clip_ops),
                     "remote_prefetch": list(self.remote_prefetch_ops)},
             "lr_counter": self.lr_counter[1] if self.lr_counter else None,
             "fake_init_tables": list(self.fake_init_tables),
             "pservers": {ep: [b.name for _, b in self.blocks_on(ep)] for ep in self.endpoints}}
        if self.distributed_table:
            d["distributed_table"] = self.distributed_table.to_dict()
        return d


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
    opt = optimize_ops(main)
    clip = tuple(i for i, op in enumerate(block.ops)
                 if roles.role(op) == roles.OPTIMIZE and is_clip_op(op))
    pairs = params_grads(main, opt)
    if not pairs:
        raise RefusedError("no optimizer op names its (param, grad) in op_role_var")
    table = find_distributed_table(main)
    remote_ops = tuple(i for i, op in enumerate(block.ops)
                       if op.type in REMOTE_PREFETCH_TYPES and op.attr("remote_prefetch") is True)
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
            update_of.setdefault(op.input("Param")[0], i)

    slice_count = len(endpoints) if config.slice_var_up else 1
    raw = []            # (pname, gname, sizes, shapes)
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
        raw.append((pname, gname, sizes, block_shapes(p.shape, sizes)))

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
            ["%s%s%d" % (pname, BLOCK_SUFFIX, i) for i in range(len(sizes))]
    eps = dict(zip(block_names, dispatch(block_names, endpoints, config.split_method)))

    params = []
    for pname, gname, sizes, shapes in raw:
        p = block.var(pname)
        g = block.var(gname)
        sliced = len(sizes) > 1
        blocks, offset = [], 0
        for i, (size, shape) in enumerate(zip(sizes, shapes)):
            bname = "%s%s%d" % (pname, BLOCK_SUFFIX, i) if sliced else pname
            blocks.append(VarBlock(bname, i, offset, shape, p.dtype, eps[bname]))
            offset += size
        grad_blocks = tuple("%s%s%d" % (gname, BLOCK_SUFFIX, i) for i in range(len(sizes))) \
            if sliced else (gname,)
        upd = block.ops[update_of[pname]]
        slots = sliced_state_slots(upd.type)
        states = []
        for slot, args in upd.inputs.items():
            if slot in UNSLICED_OPT_SLOTS or not args:
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
        dist_table = DistributedTable(table, gname, tuple(t.shape), t.dtype, update_of[table],
                                      int(math.ceil(t.shape[0] / float(len(endpoints)))))

    fake = set()
    for op in block.ops:
        if op.type in FAKE_INIT_TABLE_TYPES and op.attr("is_sparse") is True:
            fake.add(op.input("W")[0])
        if op.type == "distributed_lookup_table":
            fake.add(op.input("W")[0])
    if table is not None:
        fake.add(table)

    lr = lr_sched_ops(main)
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
        fake_init_tables=tuple(sorted(fake)), remote_prefetch_ops=remote_ops,
        distributed_table=dist_table, clip_ops=clip)
