"""What Paddle 2.6.2 accepts in the ps settings but ignores, or writes into descriptors its
server cannot run: the problems `config check` reports (the first that a server cannot run as
an error naming the key, the ones Paddle ignores as warnings: NoEffect), that `split` notes, and
that `check` finds in a descriptor's tables.

  table_problems    one table's settings (a table_parameters entry as written, or a table
                    of a descriptor as plain data): a table class, accessor or SGD rule the
                    server does not register, a rule without the block of parameters it
                    reads, weight bounds that are not two ordered numbers, negative
                    thresholds, rates out of range;
  config_problems   the config as written: keys that name no field (PaddleRec's setter skips
                    them without a word), fields the_one_ps never reads, a table name with a
                    '.', values of the wrong shape, a rule's missing name or fields, an
                    fs_client_param without uri, and each table's table_problems.
"""
from __future__ import annotations

import difflib

from .ps_strategy import FS_CLIENT_KEYS, SCHEMA
from .yamlread import shown

# the classes Paddle 2.6.2's parameter server registers (REGISTER_PSCORE_CLASS)
SPARSE_TABLE_CLASSES = ("MemorySparseTable", "SSDSparseTable")
SPARSE_ACCESSORS = ("CtrCommonAccessor", "CtrDoubleAccessor", "CtrDymfAccessor",
                    "SparseAccessor")
SGD_RULES = {"SparseNaiveSGDRule": "naive", "SparseAdaGradSGDRule": "adagrad",
             "StdAdaGradSGDRule": "adagrad", "SparseAdaGradV2SGDRule": "adagrad",
             "SparseAdamSGDRule": "adam", "SparseSharedAdamSGDRule": "adam"}
# the rules Accessor._set fills in (the others get nothing: every field must be written)
FILLED_RULES = ("SparseNaiveSGDRule", "SparseAdaGradSGDRule", "StdAdaGradSGDRule",
                "SparseAdamSGDRule", "SparseSharedAdamSGDRule")
RULE_FIELDS = {"naive": ("learning_rate", "initial_range", "weight_bounds"),
               "adagrad": ("learning_rate", "initial_g2sum", "initial_range", "weight_bounds"),
               "adam": ("learning_rate", "initial_range", "beta1_decay_rate",
                        "beta2_decay_rate", "ada_epsilon", "weight_bounds")}
# the adam parameters Accessor._set writes over whatever the config set (with the optimizer's
# own values when the table's optimizer is adam and the field is unset)
OVERWRITTEN = {"beta1_decay_rate": "0.9", "beta2_decay_rate": "0.999", "ada_epsilon": "1e-08"}
# TableParameter fields a table_parameters entry may set that SparseTable._set never reads
UNREAD = ("table_id", "table_name", "type", "compress_in_save")
NON_NEGATIVE = ("nonclk_coeff", "click_coeff", "base_threshold", "delta_threshold",
                "delta_keep_days", "delete_threshold", "delete_after_unseen_days",
                "ssd_unseenday_threshold")
# value ranges: (field, low, high, low open, high open)
RANGES = {"show_click_decay_rate": (0.0, 1.0, False, False),
          "sparse_table_cache_rate": (0.0, 1.0, False, False),
          "shard_merge_rate": (0.0, 1.0, True, False),
          "learning_rate": (0.0, None, False, False), "initial_range": (0.0, None, False, False),
          "initial_g2sum": (0.0, None, True, False),
          "beta1_decay_rate": (0.0, 1.0, False, True),
          "beta2_decay_rate": (0.0, 1.0, False, True), "ada_epsilon": (0.0, None, False, False)}


class NoEffect(str):
    """A problem that is a setting Paddle accepts and never uses (skipped, overwritten or
    ignored): worth a warning, not a refusal (`config check --strict` refuses it too)."""


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _range_problem(name: str, v):
    lo, hi, lo_open, hi_open = RANGES[name]
    if not _is_number(v):
        return None
    if v < lo or (lo_open and v == lo) or (hi is not None and (v > hi or hi_open and v == hi)):
        return "%s is %r: must be in %s%s, %s%s" % (name, v, "(" if lo_open else "[", lo,
                                                   "inf" if hi is None else hi,
                                                   ")" if hi_open or hi is None else "]")
    return None


def rule_problems(rule: dict, key: str, written: bool) -> list:
    """[(key, problem)] of one embed_sgd_param / embedx_sgd_param. `written`: the settings as
    the user wrote them (Paddle fills in the name and the parameters of most rules later)."""
    out = []
    name = rule.get("name")
    blocks = [b for b in ("naive", "adagrad", "adam") if isinstance(rule.get(b), dict)]
    if name is None:
        stray = [b for b in blocks if b != "adam"]
        if written and stray:
            out.append((key + ".name", NoEffect("missing: Paddle names the rule "
                        "SparseAdamSGDRule, which reads adam:, and ignores %s:" % stray[0])))
        return out
    if not isinstance(name, str):
        return [(key + ".name", "expected the name of an SGD rule (%s), got %s"
                 % (", ".join(SGD_RULES), shown(name)))]
    if name not in SGD_RULES:
        close = difflib.get_close_matches(str(name), SGD_RULES, n=1)
        return [(key + ".name", "%r is no SGD rule of Paddle 2.6.2's server (%s)%s"
                 % (name, ", ".join(SGD_RULES), "; did you mean %r?" % close[0] if close
                    else ""))]
    block = SGD_RULES[name]
    others = [b for b in blocks if b != block]
    if others and (written or block not in blocks):
        out.append((key + "." + others[0], NoEffect("%s reads %s:, not %s: (these values "
                    "are never used)" % (name, block, others[0]))))
    params = rule.get(block) if isinstance(rule.get(block), dict) else {}
    if written and block == "adam" and name in FILLED_RULES:
        for f in OVERWRITTEN:
            if f in params:
                out.append((key + ".adam." + f, NoEffect(
                    "Paddle writes %s over it (Accessor._set: a value set here never survives)"
                    % OVERWRITTEN[f])))
    if written and name not in FILLED_RULES:
        missing = [f for f in RULE_FIELDS[block] if f not in params]
        if missing:
            out.append((key + "." + block + "." + missing[0], "missing: Paddle fills in no "
                        "parameter of %s (the server takes the field's proto default)" % name))
    bounds = params.get("weight_bounds")
    if bounds is not None:
        if not isinstance(bounds, list) or len(bounds) != 2 or \
                not all(_is_number(b) for b in bounds):
            out.append((key + "." + block + ".weight_bounds", "%s: must be two numbers, "
                        "[min, max]" % shown(bounds)))
        elif bounds[0] > bounds[1]:
            out.append((key + "." + block + ".weight_bounds", "%r: min above max (every "
                        "weight would be clipped)" % (bounds,)))
    for f, v in params.items():
        problem = _range_problem(f, v) if f in RANGES else None
        if problem:
            out.append((key + "." + block + "." + f, problem))
    return out


def table_problems(table: dict, key: str, written: bool = False) -> list:
    """[(key, problem)] of one sparse table's settings (see the module doc); `key` prefixes
    the keys ("table_parameters.emb" or "table 0 (emb)")."""
    out = []
    cls = table.get("table_class")
    if isinstance(cls, str) and cls not in SPARSE_TABLE_CLASSES:
        out.append((key + ".table_class", "%r is no sparse table class of Paddle 2.6.2's "
                    "server (%s)" % (cls, ", ".join(SPARSE_TABLE_CLASSES))))
    if _is_number(table.get("shard_num")) and table["shard_num"] < 1:
        out.append((key + ".shard_num", "must be at least 1"))
    for f in ("sparse_table_cache_rate", "shard_merge_rate"):
        problem = _range_problem(f, table.get(f))
        if problem:
            out.append((key + "." + f, problem))
    acc = table.get("accessor")
    if not isinstance(acc, dict):
        return out
    cls = acc.get("accessor_class")
    if isinstance(cls, str) and cls not in SPARSE_ACCESSORS:
        close = difflib.get_close_matches(cls, SPARSE_ACCESSORS, n=1)
        out.append((key + ".accessor.accessor_class", "%r is no sparse accessor of Paddle "
                    "2.6.2's server (%s)%s" % (cls, ", ".join(SPARSE_ACCESSORS),
                                               "; did you mean %r?" % close[0] if close
                                               else "")))
    ctr = acc.get("ctr_accessor_param")
    if isinstance(ctr, dict):
        for f in NON_NEGATIVE:
            if _is_number(ctr.get(f)) and ctr[f] < 0:
                out.append((key + ".accessor.ctr_accessor_param." + f,
                            "is %r: must not be negative" % ctr[f]))
        problem = _range_problem("show_click_decay_rate", ctr.get("show_click_decay_rate"))
        if problem:
            out.append((key + ".accessor.ctr_accessor_param.show_click_decay_rate", problem))
    for r in ("embed_sgd_param", "embedx_sgd_param"):
        if isinstance(acc.get(r), dict):
            out += rule_problems(acc[r], key + ".accessor." + r, written)
    return out


def _shape_problems(node, msg: str, key: str, repeated_item: bool = False) -> list:
    """Keys of a table_parameters mapping that name no field of `msg`, and values of the
    wrong shape (what the strategy's setter silently skips or cuts)."""
    if not isinstance(node, dict):
        return [(key, "expected a mapping (the fields of %s), got %s" % (msg, shown(node)))]
    fields = {f: (kind, rep) for f, kind, rep in SCHEMA[msg]}
    out = []
    for k, v in node.items():
        sub = "%s.%s" % (key, k)
        if k == "num" and repeated_item:
            continue
        if k not in fields:
            close = difflib.get_close_matches(str(k), fields, n=1)
            out.append((sub, "no field of %s: Paddle skips it without a word%s"
                        % (msg, "; did you mean %r?" % close[0] if close else "")))
            continue
        kind, rep = fields[k]
        if kind in SCHEMA and rep:
            if not isinstance(v, dict) or "num" not in v:
                out.append((sub + ".num", "missing: Paddle adds the entries of %s only "
                            "with num (how many)" % k))
            else:
                out += _shape_problems(v, kind, sub, True)
        elif kind in SCHEMA:
            out += _shape_problems(v, kind, sub)
        elif rep and not isinstance(v, list):
            out.append((sub, "expected a list, got %s" % shown(v)))
        elif not rep and isinstance(v, list) and not repeated_item:
            out.append((sub, "one value expected, got a list (Paddle takes its first item)"))
    return out


def config_problems(cfg) -> list:
    """[(key, problem)] of a config's ps settings (see the module doc), in config order."""
    out = fs_client_problems(cfg.fs_client_param) if cfg.fs_client_param is not None else []
    if cfg.mode == "geo":
        for key in ("table_parameters", "fleet_desc_configs"):
            if getattr(cfg, key):
                out.append((key, NoEffect("geo mode: every sparse table is a "
                                          "MemorySparseGeoTable with CommMergeAccessor, and "
                                          "Paddle's GeoSparseTable reads none of it")))
        if cfg.adam_d2sum:
            out.append(("adam_d2sum", NoEffect("geo mode: the dense table's rule is sum, "
                                               "whatever adam_d2sum says")))
    for name, table in (cfg.table_parameters or {}).items():
        key = "table_parameters.%s" % name
        if "." in str(name):
            out.append((key, "PaddleRec splits keys at '.': this entry would be for table "
                        "%r, and reaches no table" % str(name).split(".")[0]))
            continue
        shape = _shape_problems(table, "TableParameter", key)
        out += shape
        for f in UNREAD:
            if isinstance(table, dict) and f in table:
                out.append((key + "." + f, NoEffect(
                    "the_one_ps never reads it into the descriptors" if f != "table_name"
                    else "renames the entry: it applies to table %r, not %r" % (table[f], name))))
        if not shape:
            out += table_problems(table, key, written=True)
    from .fleet_desc import OPTIMIZERS
    for name, table in (cfg.fleet_desc_configs or {}).items():
        if not isinstance(table, dict):
            continue
        for k in sorted(table):
            f = k.split("sparse_", 1)[-1]
            if f in OVERWRITTEN:
                out.append(("fleet_desc_configs.%s.%s" % (name, k), NoEffect(
                    "Paddle writes %s over it (Accessor._set: a value set here never survives)"
                    % OVERWRITTEN[f])))
        for k in ("sparse_optimizer", "embed_sparse_optimizer", "embedx_sparse_optimizer"):
            if k in table and table[k] not in OPTIMIZERS:
                out.append(("fleet_desc_configs.%s.%s" % (name, k), "%r is none of %s (Paddle "
                            "writes it as the rule's name, which its server does not know)"
                            % (table[k], ", ".join(OPTIMIZERS))))
    return out


def fs_client_problems(raw) -> list:
    """[(key, problem)] of fs_client_param as written."""
    if not isinstance(raw, dict):
        return []
    out = [("fs_client_param." + str(k), "not read (PaddleRec reads %s)"
            % ", ".join(FS_CLIENT_KEYS)) for k in raw if k not in FS_CLIENT_KEYS]
    if raw.get("uri") is None:
        out.append(("fs_client_param.uri", NoEffect("missing: without it PaddleRec sets no fs "
                                                    "client and the other values are "
                                                    "ignored")))
    return out
