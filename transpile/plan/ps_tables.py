"""What the ps descriptors say of each table: Paddle 2.6's SparseTable, GeoSparseTable,
DenseTable and BarrierTable (ps/the_one_ps.py), worked out from the original programs.

A `PsTable` holds every value of a `downpour_table_param` except the dense table's per-role
dims (`dims(n_ps, role_id)`): the accessor, the optimizer rule of the table's first parameter
(CommonAccessor.parse_by_optimizer: its inputs, their dims and their startup initializers as
`type&attr&...` strings), the entry of its lookups, and for a sparse table outside geo its
settings (ps_accessor.py: class, shard_num, cache fields and the whole accessor, from the
config's strategy settings and Paddle's defaults). output/psdesc.py turns it into the message.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core.errors import RefusedError
from ..ir.program import Op, Program
from ..ir.tables import is_distributed_lookup, is_sparse_lookup, table_of
from .ps_accessor import ProgramRule, SparseSettings, sparse_settings

# parse_by_optimizer's inputs per rule: (formal name, None = the table's dim / shard, or 1)
RULE_INPUTS = {
    "sgd": (("Param", None), ("LearningRate", 1)),
    "adam": (("Param", None), ("Moment1", None), ("Moment2", None), ("Beta1Pow", 1),
             ("Beta2Pow", 1), ("LearningRate", 1)),
    "adam_d2sum": (("Param", None), ("D2Sum", None), ("G2Sum", None), ("Moment", None),
                   ("MomentDecayRate", 1), ("AdaDecayRate", 1), ("AdaEpsilon", 1),
                   ("LearningRate", 1)),
    "sum": (("Param", None),),
    "summary": (("Param", None), ("SummaryDecayRate", 1)),      # data_norm's statistics
}
RULE_ATTRS = {"sgd": (), "sum": (), "adam": ("beta1", "beta2", "epsilon"),
              "adam_d2sum": ("beta1", "beta2", "epsilon"), "summary": ("summary_decay_rate",)}
# the fixed initializers of the summary and adam_d2sum rules (the others' come from the
# startup program: Param and LearningRate, and every input of sgd / adam)
FIXED_INITS = {"summary": {"SummaryDecayRate": "fill_constant&0.999999"},
               "adam_d2sum": {"MomentDecayRate": "fill_constant&0.99",
                              "AdaDecayRate": "fill_constant&0.9999",
                              "AdaEpsilon": "fill_constant&1.0e-8"}}
FROM_STARTUP = {"summary": ("Param",), "adam_d2sum": ("Param", "LearningRate")}
# the startup ops whose attrs make an initializer string (opt_init_map)
INIT_ATTRS = {"gaussian_random": ("seed", "mean", "std"), "fill_constant": ("value",),
              "uniform_random": ("seed", "min", "max"),
              "truncated_gaussian_random": ("seed", "mean", "std")}
LR_VAR = "learning_rate_0"
# `paddle_faults: fix`'s initializer of a dense table's Param Paddle leaves empty: any the
# server reads; trainer 0 pushes the parameters over it before any pull
FIXED_PARAM_INIT = "fill_constant&0.0"
# Paddle's refusal for any other optimizer (raised for sparse tables too)
ONLY_SGD_ADAM = "The dense optimizer in PS is only supported SGD or Adam!"


@dataclass(frozen=True)
class SgdRule:
    """A view of a sparse table's embed SGD rule: its name and the parameters it has."""
    name: str
    learning_rate: Optional[float] = None
    initial_range: Optional[float] = None
    beta1_decay_rate: Optional[float] = None
    beta2_decay_rate: Optional[float] = None
    ada_epsilon: Optional[float] = None
    initial_g2sum: Optional[float] = None
    weight_bounds: tuple = ()

    @classmethod
    def of(cls, sgd: dict) -> "SgdRule":
        block = next((sgd[b] for b in ("naive", "adagrad", "adam") if b in sgd), {})
        keys = ("learning_rate", "initial_range", "beta1_decay_rate", "beta2_decay_rate",
                "ada_epsilon", "initial_g2sum")
        return cls(sgd.get("name", ""), **{k: block[k] for k in keys if k in block},
                   weight_bounds=tuple(block.get("weight_bounds", ())))

    def to_dict(self) -> dict:
        d = {"name": self.name}
        for k in ("learning_rate", "initial_range", "beta1_decay_rate", "beta2_decay_rate",
                  "ada_epsilon", "initial_g2sum"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        return d


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
    rule: str = ""                  # common.name: sgd | adam | adam_d2sum | sum | summary
    params: tuple = ()              # the rule's inputs (Param, LearningRate, ...)
    param_dims: tuple = ()          # per input: None = the table's dim or dense shard, else 1
    initializers: tuple = ()
    attr: Optional[str] = None      # "beta1&...#beta2&...", "" (None: not set, barrier)
    entry: str = "none"
    trainer_num: int = 1
    sync: bool = False
    table_num: Optional[int] = None
    table_dim: Optional[int] = None
    settings: Optional[SparseSettings] = None    # sparse, sync / async: accessor and more
    grads: tuple = ()               # the grads sent to it
    model_params: tuple = ()        # their params
    optimizer: str = ""             # the optimizer op type of the first param
    optimizer_op: Optional[int] = None
    distributed: bool = False
    empty: bool = False             # Paddle's table._set returned early: an empty message
    empty_inits: tuple = ()         # (input, var) Paddle gives an empty initializer, which a
    #                                 dense table's server cannot read (ps-dense-empty-initializer)

    @property
    def is_sparse(self) -> bool:
        return self.kind == "sparse"

    @property
    def is_dense(self) -> bool:
        return self.kind in ("dense", "datanorm")

    @property
    def sgd_rule(self) -> Optional[SgdRule]:
        """The accessor's embed SGD rule (sparse tables outside geo)."""
        if self.settings is None:
            return None
        return SgdRule.of(self.settings.accessor.get("embed_sgd_param", {}))

    @property
    def embedx_threshold(self) -> Optional[int]:
        return None if self.settings is None else self.settings.accessor["embedx_threshold"]

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

      optimizer   param -> (index in block 0, op) of the first optimizer op (of `opt`)
                  whose Param it is
      inits       var -> the first startup op of INIT_ATTRS's types whose Out[0] it is;
                  init(var) its initializer string
      entries     table -> the entry of its first sparse or distributed lookup (parse_entry:
                  lookup_table's `entry` attr, "none" for lookup_table_v2)
    """

    def __init__(self, main: Program, startup: Program, opt: list):
        ops = main.global_block.ops
        self.optimizer: dict = {}
        wanted = {op.uid for op in opt}
        for i, op in enumerate(ops):
            p = op.input("Param")[:1] if op.uid in wanted else None
            if p:
                self.optimizer.setdefault(p[0], (i, op))
        self.inits: dict = {}
        self._init_texts: dict = {}         # var -> init(var), made once (tables share vars)
        for op in startup.global_block.ops:
            if op.type in INIT_ATTRS and op.output("Out")[:1]:
                self.inits.setdefault(op.output("Out")[0], op)
        self.entries: dict = {}
        for op in ops:
            if not (is_sparse_lookup(op) or is_distributed_lookup(op)) or \
                    table_of(op) in self.entries:
                continue
            if op.type == "lookup_table":
                self.entries[table_of(op)] = str(op.attr("entry", "none"))
            elif op.type == "lookup_table_v2":
                self.entries[table_of(op)] = "none"

    def init(self, var: str) -> str:
        """The initializer string of `var` ("" for none: get_initializer_attr), made when
        asked: the startup initializes every var, the tables read a few each."""
        text = self._init_texts.get(var)
        if text is None:
            op = self.inits.get(var)
            text = self._init_texts[var] = "" if op is None else initializer_attr(op)
        return text


def _rule_inputs(ctx, main: Program, index: TableSources, oop: Op, rule: str):
    """(params, param_dims, initializers, attrs) of parse_by_optimizer."""
    params, dims, inits = [], [], []
    gvars = main.global_block.vars
    for formal, dim in RULE_INPUTS[rule]:
        if rule in FROM_STARTUP and formal not in FROM_STARTUP[rule]:
            params.append(formal)
            dims.append(dim)
            inits.append(FIXED_INITS[rule].get(formal, "fill_constant&0"))
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
        inits.append(index.init(name))
    if rule == "summary":
        # the decay rate is read off the data_norm op of the first statistic, if any
        oop = next((op for op in main.global_block.ops if op.type == "data_norm"
                    and op.input("BatchSize")[:1] == [ctx.params[0]]), oop)
    attrs = ["%s&%s" % (a, oop.attr(a)) for a in RULE_ATTRS[rule]]
    return tuple(params), tuple(dims), tuple(inits), attrs


def table_rule(ctx, oop: Op, config) -> str:
    """common.name of a table: parse_by_optimizer's choice."""
    if config.mode == "geo":
        return "sum"
    if ctx.kind == "datanorm":
        return "summary"
    if config.adam_d2sum and oop.type == "adam" and not ctx.is_sparse:
        return "adam_d2sum"
    if oop.type in ("sgd", "adam"):
        return oop.type
    raise RefusedError(ONLY_SGD_ADAM + " (%s updates %s)" % (oop.type, ctx.params[0]))


def describe_table(ctx, main: Program, index: TableSources, config,
                   entries: Optional[list] = None, startup_known: bool = True) -> PsTable:
    """The table of one send context, as PsDescBuilder describes it; RefusedError where it
    fails (the optimizer is neither sgd nor adam outside geo, the accessor does not fit the
    embedding, ...). `entries`: the strategy's table entries (core/ps_strategy.py);
    `startup_known` false: the startup program is not known (check without --startup), the
    values read off its initializers are placeholders."""
    if not ctx.grads:       # a dense table of data_norm grads only leaves this one empty
        return PsTable(ctx.table_id, ctx.kind, "", 0, "", "", 0, 0, empty=True)
    found = index.optimizer.get(ctx.params[0])
    if found is None:
        raise RefusedError("can not find optimizer for %s" % ctx.grads[0])
    i, oop = found
    rule = table_rule(ctx, oop, config)
    params, dims, inits, attrs = _rule_inputs(ctx, main, index, oop, rule)
    empty = ()
    if not ctx.is_sparse and startup_known:
        empty = tuple((p, LR_VAR if p == "LearningRate" else oop.input(p)[0])
                      for p, init in zip(params, inits) if not init)
        if config.fix_faults and empty and all(p == "Param" for p, _ in empty):
            inits = tuple(FIXED_PARAM_INIT if p == "Param" else init
                          for p, init in zip(params, inits))
    common = dict(rule=rule, params=params, param_dims=dims, initializers=inits,
                  attr="#".join(attrs), trainer_num=config.trainers, grads=ctx.grads,
                  model_params=ctx.params, optimizer=oop.type, optimizer_op=i,
                  distributed=ctx.distributed, empty_inits=empty)
    if not ctx.is_sparse:
        return PsTable(ctx.table_id, ctx.kind, "MemoryDenseTable", 256, "MergedDense",
                       "CommMergeAccessor", ctx.sections[0], 1, entry="none",
                       sync=config.mode == "sync", table_num=ctx.sections[0], table_dim=1,
                       **common)
    table = ctx.params[0]
    entry = index.entries.get(table, "none")
    rows, dim = ctx.sections
    if config.mode == "geo":
        return PsTable(ctx.table_id, "sparse", "MemorySparseGeoTable", 256, table,
                       "CommMergeAccessor", rows, dim, entry=entry, sync=False,
                       table_num=rows, table_dim=dim, **common)
    if entries is None:
        entries = config.strategy_tables()
    w = main.global_block.vars.get(table)
    emb = int(w.shape[1]) if w is not None and w.shape and len(w.shape) > 1 else 0
    st = sparse_settings(table, emb, ProgramRule(rule, inits if startup_known else None,
                                                 tuple(attrs)),
                         entries, len(config.pservers))
    return PsTable(ctx.table_id, "sparse", st.table_class, st.shard_num, table,
                   st.accessor_class, st.accessor["fea_dim"], st.accessor["embedx_dim"],
                   entry=entry, sync=config.mode == "sync", table_num=rows, table_dim=dim,
                   settings=st, **common)


def barrier_table(table_id: int, config) -> PsTable:
    return PsTable(table_id, "barrier", "BarrierTable", 256, "barrier_table",
                   "CommMergeAccessor", 0, 0, entry="none", trainer_num=config.trainers,
                   sync=config.mode == "sync")
