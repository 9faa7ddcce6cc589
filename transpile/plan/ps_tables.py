"""What the ps descriptors say of each table: Paddle 2.6's SparseTable, GeoSparseTable,
DenseTable and BarrierTable (ps/the_one_ps.py), worked out from the original programs.

A `PsTable` holds every value of a `downpour_table_param` except the dense table's per-role
dims (`dims(n_ps, role_id)`): the accessor, the optimizer rule of the table's first parameter
(CommonAccessor.parse_by_optimizer: its inputs, their dims and their startup initializers as
`type&attr&...` strings), the entry of its lookups, and for a sparse table outside geo the SGD
rule of its accessor. output/psdesc.py turns it into the message.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core.errors import RefusedError
from ..ir.program import Op, Program
from ..ir.tables import is_distributed_lookup, is_sparse_lookup, table_of

# parse_by_optimizer's inputs per rule: (formal name, None = the table's dim / shard, or 1)
RULE_INPUTS = {
    "sgd": (("Param", None), ("LearningRate", 1)),
    "adam": (("Param", None), ("Moment1", None), ("Moment2", None), ("Beta1Pow", 1),
             ("Beta2Pow", 1), ("LearningRate", 1)),
    "sum": (("Param", None),),
    "summary": (("Param", None), ("SummaryDecayRate", 1)),      # data_norm's statistics
}
RULE_ATTRS = {"sgd": (), "sum": (), "adam": ("beta1", "beta2", "epsilon"),
              "summary": ("summary_decay_rate",)}
# the summary rule's fixed initializers (the Param's comes from the startup program)
SUMMARY_INITS = {"SummaryDecayRate": "fill_constant&0.999999"}
# the startup ops whose attrs make an initializer string (opt_init_map)
INIT_ATTRS = {"gaussian_random": ("seed", "mean", "std"), "fill_constant": ("value",),
              "uniform_random": ("seed", "min", "max"),
              "truncated_gaussian_random": ("seed", "mean", "std")}
LR_VAR = "learning_rate_0"
# Paddle's refusal for any other optimizer (raised for sparse tables too)
ONLY_SGD_ADAM = "The dense optimizer in PS is only supported SGD or Adam!"
# CtrAccessorParameter as the_one_ps.py fills it
CTR_ACCESSOR = (("nonclk_coeff", 0.1), ("click_coeff", 1.0), ("base_threshold", 0.0),
                ("delta_threshold", 0.0), ("delta_keep_days", 16.0),
                ("show_click_decay_rate", 1.0), ("delete_threshold", 0.0),
                ("delete_after_unseen_days", 30.0), ("ssd_unseenday_threshold", 1))
WEIGHT_BOUNDS = (-10.0, 10.0)
DEFAULT_CACHE_FILE_NUM = 16        # TableParameter.sparse_table_cache_file_num's default


@dataclass(frozen=True)
class SgdRule:
    """The accessor's embed / embedx SGD rule of a sparse table (both the same): always
    SparseAdamSGDRule (the_one_ps.py's if / else overwrites SparseNaiveSGDRule for sgd)."""
    learning_rate: float
    initial_range: float
    beta1_decay_rate: float
    beta2_decay_rate: float
    ada_epsilon: float
    name: str = "SparseAdamSGDRule"


@dataclass(frozen=True)
class PsTable:
    table_id: int
    kind: str                       # sparse | dense | datanorm | barrier
    table_class: str
    shard_num: int
    table_name: str                 # the param, MergedDense, barrier_table
    accessor_class: str
    fea_dim: int
    embedx_dim: int
    rule: str = ""                  # common.name: sgd | adam | sum | summary ("": barrier)
    params: tuple = ()              # the rule's inputs (Param, LearningRate, ...)
    param_dims: tuple = ()          # per input: None = the table's dim or dense shard, else 1
    initializers: tuple = ()
    attr: Optional[str] = None      # "beta1&...#beta2&...", "" (None: not set, barrier)
    entry: str = "none"
    trainer_num: int = 1
    sync: bool = False
    table_num: Optional[int] = None
    table_dim: Optional[int] = None
    embedx_threshold: Optional[int] = None       # sparse, sync / async
    sgd_rule: Optional[SgdRule] = None           # sparse, sync / async
    cache_file_num: Optional[int] = None         # sparse, sync / async, < 16 servers
    grads: tuple = ()               # the grads sent to it
    model_params: tuple = ()        # their params
    optimizer: str = ""             # the optimizer op type of the first param
    optimizer_op: Optional[int] = None
    distributed: bool = False
    empty: bool = False             # Paddle's table._set returned early: an empty message

    @property
    def is_sparse(self) -> bool:
        return self.kind == "sparse"

    @property
    def is_dense(self) -> bool:
        return self.kind in ("dense", "datanorm")

    def dims(self, n_ps: int, role_id: int) -> list:
        """common.dims as role `role_id` (trainer id or pserver index) writes them."""
        own = self.table_dim if self.is_sparse else get_shard(self.table_num or 0, n_ps,
                                                              role_id)
        return [own if d is None else d for d in self.param_dims]


def get_shard(total: int, shard_num: int, shard_id: int) -> int:
    """Paddle's CommonAccessor.get_shard: the dense table's share of server (or trainer)
    `shard_id`: blocks of int(total / n + 1), the last one short, 0 past the end."""
    block = int(total / shard_num + 1)
    if block * (shard_id + 1) <= total:
        return block
    if block * shard_id < total:
        return total - block * shard_id
    return 0


def initializer_attr(op: Op) -> str:
    """get_initializer_attr's string of an initializer op: `type&attr&...`, Python's str()
    of each attr."""
    return "&".join([op.type] + [str(op.attr(a)) for a in INIT_ATTRS[op.type]])


class TableSources:
    """What describe_table looks up in the original programs, indexed once (Paddle walks the
    programs for every table; a program with thousands of tables should not):

      optimizer   param -> index of the first optimizer op (of `opt`) whose Param it is
      inits       var -> the initializer string of the first startup op of INIT_ATTRS's types
                  whose Out[0] it is ("" for none: get_initializer_attr)
      entries     table -> the entry of its first sparse or distributed lookup (parse_entry:
                  lookup_table's `entry` attr, "none" for lookup_table_v2)
    """

    def __init__(self, main: Program, startup: Program, opt: list):
        ops = main.global_block.ops
        self.optimizer: dict = {}
        for i in opt:
            p = ops[i].input("Param")[:1]
            if p:
                self.optimizer.setdefault(p[0], i)
        self.inits: dict = {}
        for op in startup.global_block.ops:
            if op.type in INIT_ATTRS and op.output("Out")[:1] and \
                    op.output("Out")[0] not in self.inits:
                self.inits[op.output("Out")[0]] = initializer_attr(op)
        self.entries: dict = {}
        for op in ops:
            if not (is_sparse_lookup(op) or is_distributed_lookup(op)) or \
                    table_of(op) in self.entries:
                continue
            if op.type == "lookup_table":
                self.entries[table_of(op)] = str(op.attr("entry", "none"))
            elif op.type == "lookup_table_v2":
                self.entries[table_of(op)] = "none"


def _to_float(text: str) -> float:
    try:
        return float(text)
    except ValueError as e:
        raise RefusedError(str(e)) from None


def _rule_inputs(ctx, main: Program, index: TableSources, oop: Op, rule: str):
    """(params, param_dims, initializers, attrs) of parse_by_optimizer."""
    params, dims, inits = [], [], []
    gvars = main.global_block.vars
    for formal, dim in RULE_INPUTS[rule]:
        if rule == "summary" and formal != "Param":
            params.append(formal)
            dims.append(dim)
            inits.append(SUMMARY_INITS.get(formal, "fill_constant&0"))
            continue
        name = (oop.input(formal) or [None])[0]
        if name is None or name not in gvars:
            raise RefusedError("'%s': the %s op of %s has no %s var (Paddle's "
                               "parse_by_optimizer: KeyError)" % (name, oop.type,
                                                                ctx.params[0], formal))
        if formal == "LearningRate" and name != LR_VAR:
            # "will support decay soon": Paddle reads the program's first learning rate
            if LR_VAR not in gvars:
                raise RefusedError("'%s': the learning rate %s is not %s, which Paddle's "
                                   "parse_by_optimizer reads instead (KeyError)"
                                   % (LR_VAR, name, LR_VAR))
            name = LR_VAR
        params.append(formal)
        dims.append(dim)
        inits.append(index.inits.get(name, ""))
    if rule == "summary":
        # the decay rate is read off the data_norm op of the first statistic, if any
        oop = next((op for op in main.global_block.ops if op.type == "data_norm"
                    and op.input("BatchSize")[:1] == [ctx.params[0]]), oop)
    attrs = ["%s&%s" % (a, oop.attr(a)) for a in RULE_ATTRS[rule]]
    return tuple(params), tuple(dims), tuple(inits), attrs


def describe_table(ctx, main: Program, index: TableSources, config) -> PsTable:
    """The table of one send context, as PsDescBuilder describes it; RefusedError where it
    fails (the optimizer is neither sgd nor adam outside geo, ...)."""
    geo = config.mode == "geo"
    n_ps = len(config.pservers)
    if not ctx.grads:       # a dense table of data_norm grads only leaves this one empty
        return PsTable(ctx.table_id, ctx.kind, "", 0, "", "", 0, 0, empty=True)
    i = index.optimizer.get(ctx.params[0])
    if i is None:
        raise RefusedError("can not find optimizer for %s" % ctx.grads[0])
    oop = main.global_block.ops[i]
    if geo:
        rule = "sum"
    elif ctx.kind == "datanorm":
        rule = "summary"
    elif oop.type in ("sgd", "adam"):
        rule = oop.type
    else:
        raise RefusedError(ONLY_SGD_ADAM + " (%s updates %s)" % (oop.type, ctx.params[0]))
    params, dims, inits, attrs = _rule_inputs(ctx, main, index, oop, rule)
    common = dict(rule=rule, params=params, param_dims=dims, initializers=inits,
                  attr="#".join(attrs), trainer_num=config.trainers, grads=ctx.grads,
                  model_params=ctx.params, optimizer=oop.type, optimizer_op=i,
                  distributed=ctx.distributed)
    if not ctx.is_sparse:
        return PsTable(ctx.table_id, ctx.kind, "MemoryDenseTable", 256, "MergedDense",
                       "CommMergeAccessor", ctx.sections[0], 1, entry="none",
                       sync=config.mode == "sync", table_num=ctx.sections[0], table_dim=1,
                       **common)
    table = ctx.params[0]
    entry = index.entries.get(table, "none")
    rows, dim = ctx.sections
    if geo:
        return PsTable(ctx.table_id, "sparse", "MemorySparseGeoTable", 256, table,
                       "CommMergeAccessor", rows, dim, entry=entry, sync=False,
                       table_num=rows, table_dim=dim, **common)
    w = main.global_block.vars.get(table)
    emb = int(w.shape[1]) if w is not None and w.shape and len(w.shape) > 1 else 0
    lr_parts = inits[-1].split("&")
    if len(lr_parts) < 2:
        raise RefusedError("list index out of range (the learning rate of %s has no "
                           "initializer Paddle can read: %r)" % (table, inits[-1]))
    learning_rate = _to_float(lr_parts[1])
    initial_range = _to_float(inits[0].split("&")[-1])
    if rule == "adam":
        b1, b2, eps = (_to_float(a.split("&")[1]) for a in attrs)
    else:
        b1, b2, eps = 0.9, 0.999, 1e-08
    return PsTable(ctx.table_id, "sparse", "MemorySparseTable", 1000, table, "SparseAccessor",
                   emb + 2, emb - 1, entry=entry, sync=config.mode == "sync", table_num=rows,
                   table_dim=dim, embedx_threshold=0,
                   sgd_rule=SgdRule(learning_rate, initial_range, b1, b2, eps),
                   cache_file_num=n_ps if DEFAULT_CACHE_FILE_NUM > n_ps else None, **common)


def barrier_table(table_id: int, config) -> PsTable:
    return PsTable(table_id, "barrier", "BarrierTable", 256, "barrier_table",
                   "CommMergeAccessor", 0, 0, entry="none", trainer_num=config.trainers,
                   sync=config.mode == "sync")
