"""A sparse table's settings outside geo, as Paddle 2.6's SparseTable._set and Accessor._set
work them out (ps/the_one_ps.py) from the strategy's table entries and the program.

  - the entry: the first of the strategy's downpour_table_param whose table_name is the
    table's param (core/ps_strategy.py: table_parameters', then fleet_desc_configs'), else
    none: an entry naming no table is never read;
  - table_class and shard_num: the entry's, else MemorySparseTable and 1000;
    sparse_table_cache_file_num: the number of servers when there are fewer than 16 (the
    field's default), then the entry's cache / revert / merge settings where it sets them;
  - the accessor: the entry's whole accessor, then Paddle's defaults where it sets nothing:
    SparseAccessor; fea_dim / embedx_dim from the embedding width (SparseAccessor: w + 2 and
    w - 1, any other class: w and w - 3); embedx_threshold 0; graph_sgd_param 9008 / 0.05;
    the nine ctr_accessor_param values (zero_init false when embedx_dim is 0); each SGD rule
    named SparseAdamSGDRule, and per rule its parameters: adagrad 0.05 / 3.0 / 0.0001,
    naive and adam the program's learning rate and the param initializer's last number,
    adam's beta1 / beta2 / epsilon the adam op's (or 0.9 / 0.999 / 1e-08 when the table's
    optimizer is no adam or the entry sets them: a value set there never survives); weight
    bounds [-10, 10]. A rule of another name gets no defaults;
  - check_embedding_dim refuses an accessor whose fea_dim / embedx_dim do not fit the
    embedding, with Paddle's message.

Every value gets its origin (`origins[path]` = (kind, text), kind config | default | program |
startup) for the check's findings and the report.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Optional

from ..core.errors import RefusedError

DEFAULT_CACHE_FILE_NUM = 16        # TableParameter.sparse_table_cache_file_num's default
# the TableParameter fields SparseTable._set copies from the entry, in field-number order
TABLE_FIELDS = ("enable_sparse_table_cache", "sparse_table_cache_rate",
                "sparse_table_cache_file_num", "enable_revert", "shard_merge_rate")
CTR_DEFAULTS = (("nonclk_coeff", 0.1), ("click_coeff", 1.0), ("base_threshold", 0.0),
                ("delta_threshold", 0.0), ("delta_keep_days", 16.0),
                ("show_click_decay_rate", 1.0), ("delete_threshold", 0.0),
                ("delete_after_unseen_days", 30.0), ("ssd_unseenday_threshold", 1))
WEIGHT_BOUNDS = [-10.0, 10.0]
ADAGRAD_DEFAULTS = (("learning_rate", 0.05), ("initial_g2sum", 3.0), ("initial_range", 0.0001))
ADAM_ATTRS = ("beta1_decay_rate", "beta2_decay_rate", "ada_epsilon")
ADAM_FALLBACK = (0.9, 0.999, 1e-08)
# the rules Accessor._set fills in, and the block of parameters each reads
RULE_BLOCKS = {"SparseAdaGradSGDRule": "adagrad", "StdAdaGradSGDRule": "adagrad",
               "SparseNaiveSGDRule": "naive", "SparseAdamSGDRule": "adam",
               "SparseSharedAdamSGDRule": "adam"}
UINT32_MAX = 2 ** 32 - 1
DEFAULT = ("default", "Paddle's default")


@dataclass(frozen=True)
class SparseSettings:
    table_class: str
    shard_num: int
    table_fields: tuple             # ((field, value), ...) of TABLE_FIELDS set, in order
    accessor: dict                  # the TableAccessorParameter: {field: value}, nested
    origins: dict = field(default_factory=dict)     # path tuple -> (kind, text)
    source: Optional[str] = None    # the entry: "table_parameters.emb", "fleet_desc_configs.emb"

    @property
    def accessor_class(self) -> str:
        return self.accessor["accessor_class"]


@dataclass(frozen=True)
class ProgramRule:
    """What Accessor._set reads of the table's optimizer rule (CommonAccessor)."""
    rule: str                       # sgd | adam
    initializers: Optional[tuple]   # None: the startup program is not known
    attrs: tuple                    # "beta1&0.9", ...


def _entry_origins(entry: dict, source: str, out: dict, path=()) -> None:
    for k, v in entry.items():
        p = path + (k,)
        if isinstance(v, dict):
            _entry_origins(v, source, out, p)
            continue
        if isinstance(v, list) and v and isinstance(v[0], dict):
            for i, sub in enumerate(v):
                _entry_origins(sub, source, out, p + (i,))
            continue
        if source.startswith("table_parameters."):
            out[p] = ("config", ".".join((source,) + tuple(str(x) for x in p)))
        else:
            out[p] = ("config", source)


class _Filler:
    """Sets the defaults where the message has nothing, noting where each comes from."""

    def __init__(self, accessor: dict, origins: dict):
        self.acc, self.origins = accessor, origins

    def default(self, node: dict, path: tuple, key: str, value, origin=DEFAULT) -> None:
        if key not in node:
            node[key] = value
            self.origins[path + (key,)] = origin

    def force(self, node: dict, path: tuple, key: str, value, origin) -> None:
        node[key] = value
        self.origins[path + (key,)] = origin


def _program_value(rule: ProgramRule, which: int, part: int, what: str, table: str):
    """float(initializers[which].split("&")[part]) as Accessor._set reads it."""
    if rule.initializers is None:
        return 0.0, ("startup", what)
    text = rule.initializers[which]
    parts = text.split("&")
    try:
        value = parts[part]
    except IndexError:
        raise RefusedError("list index out of range (%s)" % _reading(what, table, text)) from None
    try:
        return float(value), ("program", "%s (%s)" % (what, text))
    except ValueError as e:
        raise RefusedError("%s (%s)" % (e, _reading(what, table, text))) from None


def _reading(what: str, table: str, text: str) -> str:
    """Where Paddle's refusal comes from: which value of which table it read, from what."""
    unread = ("; Paddle writes '' for an initializer op it does not read, such as Assign's "
              "assign_value" if text == "" else "")
    return "Paddle reads %s for table %s's rule from the initializer %r%s" % (
        what, table, text, unread)


def _fill_rule(f: _Filler, key: str, rule: ProgramRule, table: str) -> None:
    sgd = f.acc.setdefault(key, {})
    path = (key,)
    f.default(sgd, path, "name", "SparseAdamSGDRule")
    name = sgd["name"]
    block_name = RULE_BLOCKS.get(name)
    if block_name is None:
        return
    block = sgd.setdefault(block_name, {})
    bpath = path + (block_name,)
    if block_name == "adagrad":
        for k, v in ADAGRAD_DEFAULTS:
            f.default(block, bpath, k, v)
    else:
        if "learning_rate" not in block:
            f.force(block, bpath, "learning_rate", *_program_value(
                rule, -1, 1, "the program's learning rate", table))
        if "initial_range" not in block:
            f.force(block, bpath, "initial_range", *_program_value(
                rule, 0, -1, "the last number of %s's initializer" % table, table))
    if block_name == "adam":
        for i, k in enumerate(ADAM_ATTRS):
            if k not in block and rule.rule == "adam":
                value = float(rule.attrs[i].split("&")[1])
                f.force(block, bpath, k, value, ("program", "the adam op's %s"
                                                 % rule.attrs[i].split("&")[0]))
            else:
                why = "set in the config, but Paddle writes 0.9 / 0.999 / 1e-08 over it" \
                    if k in block else "Paddle's value when the optimizer is no adam"
                f.force(block, bpath, k, ADAM_FALLBACK[i], ("default", why))
    if not block.get("weight_bounds"):
        f.force(block, bpath, "weight_bounds", list(WEIGHT_BOUNDS), DEFAULT)


def fill_accessor(accessor: dict, origins: dict, emb: int, rule: ProgramRule,
                  table: str) -> None:
    """Accessor._set: Paddle's defaults where `accessor` sets nothing (in place)."""
    f = _Filler(accessor, origins)
    f.default(accessor, (), "accessor_class", "SparseAccessor")
    sparse = accessor["accessor_class"] == "SparseAccessor"
    dims = (("fea_dim", emb + 2 if sparse else emb, "+ 2" if sparse else ""),
            ("embedx_dim", emb - 1 if sparse else emb - 3, "- 1" if sparse else "- 3"))
    for key, value, how in dims:
        if key not in accessor and not 0 <= value <= UINT32_MAX:
            raise RefusedError("Value out of range: %d (the %s of %s: its width %d %s)"
                               % (value, key, table, emb, how))
        f.default(accessor, (), key, value, ("program", "the width of %s, %d%s" % (
            table, emb, (" " + how) if how else "")))
    f.default(accessor, (), "embedx_threshold", 0)
    graph = accessor.setdefault("graph_sgd_param", {})
    f.default(graph, ("graph_sgd_param",), "nodeid_slot", 9008)
    f.default(graph, ("graph_sgd_param",), "feature_learning_rate", 0.05)
    ctr = accessor.setdefault("ctr_accessor_param", {})
    if accessor["embedx_dim"] == 0:
        f.force(ctr, ("ctr_accessor_param",), "zero_init", False,
                ("default", "Paddle's value when embedx_dim is 0"))
    for key, value in CTR_DEFAULTS:
        f.default(ctr, ("ctr_accessor_param",), key, value)
    for key in ("embed_sgd_param", "embedx_sgd_param"):
        _fill_rule(f, key, rule, table)


def check_embedding_dim(accessor: dict, emb: int) -> None:
    """Paddle's check_embedding_dim: the accessor's dims must fit the embedding width."""
    sparse = accessor["accessor_class"] == "SparseAccessor"
    fea, embedx = accessor["fea_dim"], accessor["embedx_dim"]
    if sparse and fea != emb + 2:
        raise RefusedError("The fea_dim is wrong, it will be sparse_embedding_dim + 2: %d, "
                           "but got %d" % (emb + 2, fea))
    if not sparse and fea != emb:
        raise RefusedError("The fea_dim is wrong, it will be sparse_embedding_dim: %d, but "
                           "got %d" % (emb, fea))
    if sparse and embedx != emb - 1:
        raise RefusedError("The embedx_dim is wrong, it will be sparse_embedding_dim - 1: "
                           "%d, but got %d" % (emb - 1, embedx))
    if not sparse and embedx != emb - 3:
        raise RefusedError("The embedx_dim is wrong, it will be sparse_embedding_dim - 3: "
                           "%d, but got %d" % (emb - 3, embedx))


def sparse_settings(table: str, emb: int, rule: ProgramRule, entries: list,
                    n_ps: int) -> SparseSettings:
    """SparseTable._set's table settings and accessor for `table` (see the module doc)."""
    source, entry = None, {}
    for kind, name, e in entries:
        if e.get("table_name") == table:
            source, entry = "%s.%s" % (kind, name), e
            break
    origins: dict = {}
    if source:
        _entry_origins(entry, source, origins)
    fields = []
    if DEFAULT_CACHE_FILE_NUM > n_ps:
        fields.append(["sparse_table_cache_file_num", n_ps])
        origins[("sparse_table_cache_file_num",)] = (
            "program", "the number of servers, %d (fewer than 16)" % n_ps)
    for key in TABLE_FIELDS:
        if key in entry:
            fields = [f for f in fields if f[0] != key] + [[key, entry[key]]]
    fields.sort(key=lambda f: TABLE_FIELDS.index(f[0]))
    for key in ("table_class", "shard_num"):
        if key not in entry:
            origins[(key,)] = DEFAULT
    accessor = copy.deepcopy(entry.get("accessor", {}))
    acc_origins = {p[1:]: o for p, o in origins.items() if p[:1] == ("accessor",)}
    fill_accessor(accessor, acc_origins, emb, rule, table)
    for p, o in acc_origins.items():
        origins[("accessor",) + p] = o
    check_embedding_dim(accessor, emb)
    return SparseSettings(entry.get("table_class", "MemorySparseTable"),
                          entry.get("shard_num", 1000), tuple(tuple(f) for f in fields),
                          accessor, origins, source)
