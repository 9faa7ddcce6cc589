"""The DistributedStrategy settings of Paddle 2.6's ps pipeline that reach the descriptors,
read from the cluster config as a PaddleRec user writes them.

  table_parameters     PaddleRec's `table_parameters:` block (models/rank/slot_dnn/
                       config_online.yaml): table name -> settings. PaddleRec's static PS
                       trainer (tools/utils/static_ps/program_helper.py) flattens the YAML to
                       dotted keys, groups them by the key's second part (the table name) and
                       assigns them to `strategy.sparse_table_configs`, whose setter walks the
                       strategy's TableParameter message and sets each field its dotted key
                       names. Keys naming no field are skipped without a word, as there.
  fleet_desc_configs   `strategy.fleet_desc_configs`: per table the `sparse_*` keys, each table
                       filled in completely with that API's own defaults.
  fs_client_param      PaddleRec's `runner.fs_client`: applied when `uri` is given, user and
                       passwd defaulting to "", hadoop_bin to "hadoop".
  adam_d2sum           `strategy.adam_d2sum` (a bool; the strategy's default is false).

`ClusterConfig.strategy_tables()` is the strategy's `downpour_table_param` list those settings make:
[(table name, entry)], table_parameters' entries first, an entry a nested dict of the fields
set ({field: value}, a repeated field a list), values as protobuf holds them. A value the
strategy's setter would not take (a string where a number goes, a count out of range) is a
ConfigError naming the key, with Paddle's own error.
"""
from __future__ import annotations

import math
import struct
from typing import Optional

from .errors import ConfigError
from .yamlread import shown

# distributed_strategy.proto's TableParameter and what it holds, fields in declaration order
# (the order the setter walks them): (field, kind, repeated); a kind naming a message of
# SCHEMA is that sub-message
SCHEMA = {
    "TableParameter": (
        ("table_id", "uint64", False), ("table_name", "string", False),
        ("table_class", "string", False), ("shard_num", "uint64", False),
        ("type", "TableType", False), ("accessor", "TableAccessorParameter", False),
        ("compress_in_save", "bool", False), ("enable_sparse_table_cache", "bool", False),
        ("sparse_table_cache_rate", "double", False),
        ("sparse_table_cache_file_num", "uint32", False), ("enable_revert", "bool", False),
        ("shard_merge_rate", "float", False)),
    "TableAccessorParameter": (
        ("accessor_class", "string", False), ("fea_dim", "uint32", False),
        ("embedx_dim", "uint32", False), ("embedx_threshold", "uint32", False),
        ("ctr_accessor_param", "CtrAccessorParameter", False),
        ("table_accessor_save_param", "TableAccessorSaveParameter", True),
        ("embed_sgd_param", "SGDParameter", False), ("embedx_sgd_param", "SGDParameter", False),
        ("graph_sgd_param", "GraphSGDParameter", False)),
    "CtrAccessorParameter": (
        ("nonclk_coeff", "float", False), ("click_coeff", "float", False),
        ("base_threshold", "float", False), ("delta_threshold", "float", False),
        ("delta_keep_days", "float", False), ("show_click_decay_rate", "float", False),
        ("delete_threshold", "float", False), ("delete_after_unseen_days", "float", False),
        ("ssd_unseenday_threshold", "int32", False), ("show_scale", "bool", False),
        ("zero_init", "bool", False), ("load_filter_slots", "float", True),
        ("save_filter_slots", "float", True)),
    "TableAccessorSaveParameter": (
        ("param", "uint32", False), ("converter", "string", False),
        ("deconverter", "string", False)),
    "SGDParameter": (
        ("name", "string", False), ("naive", "SparseNaiveSGDRuleParameter", False),
        ("adagrad", "SparseAdagradSGDRuleParameter", False),
        ("adam", "SparseAdamSGDParameter", False)),
    "SparseNaiveSGDRuleParameter": (
        ("learning_rate", "double", False), ("initial_range", "double", False),
        ("weight_bounds", "float", True)),
    "SparseAdagradSGDRuleParameter": (
        ("learning_rate", "double", False), ("initial_g2sum", "double", False),
        ("initial_range", "double", False), ("weight_bounds", "float", True)),
    "SparseAdamSGDParameter": (
        ("learning_rate", "double", False), ("initial_range", "double", False),
        ("beta1_decay_rate", "double", False), ("beta2_decay_rate", "double", False),
        ("ada_epsilon", "double", False), ("weight_bounds", "float", True)),
    "GraphSGDParameter": (
        ("nodeid_slot", "uint32", False), ("feature_learning_rate", "float", False)),
}
TABLE_TYPES = {"PS_SPARSE_TABLE": 0, "PS_DENSE_TABLE": 1}
INT_RANGES = {"uint32": (0, 2 ** 32 - 1), "uint64": (0, 2 ** 64 - 1),
              "int32": (-2 ** 31, 2 ** 31 - 1)}
FS_CLIENT_KEYS = ("uri", "user", "passwd", "hadoop_bin")
FS_CLIENT_DEFAULTS = {"user": "", "passwd": "", "hadoop_bin": "hadoop"}   # PaddleRec's
FLOAT32_MAX = 3.4028234663852886e38
MAX_REPEATED = 100          # entries of a repeated message (`num`) a table's settings may make


class Bad(Exception):
    """A value the strategy's setter refuses: `problem` in our words, `paddle` Paddle's
    exception (what the setter raises)."""

    def __init__(self, problem: str, paddle: str):
        super().__init__(problem)
        self.problem, self.paddle = problem, paddle


def float32(x: float) -> float:
    """x as a protobuf FLOAT field holds it (rounded; beyond the float range, infinite)."""
    if math.isnan(x) or math.isinf(x):
        return x
    if abs(x) > FLOAT32_MAX:
        return math.copysign(math.inf, x)
    return struct.unpack("<f", struct.pack("<f", x))[0]


def coerce(kind: str, v):
    """`v` as protobuf stores it in a field of `kind` (upb's rules: a bool is an int, an int a
    float), or Bad."""
    what = type(v).__name__ if v is not None else "NoneType"
    if kind == "string":
        if isinstance(v, str):
            return v
        raise Bad("expected a string, got %s" % shown(v),
                  "TypeError: bad argument type for built-in operation")
    if isinstance(v, str) or v is None or isinstance(v, (list, dict)):
        hint = " (YAML reads a number without a dot, like 1e-8, as a string: write " \
               "1.0e-8)" if isinstance(v, str) and kind in ("float", "double") else ""
        need = {"bool": "true or false", "float": "a number", "double": "a number"}.get(
            kind, "an integer")
        paddle = "TypeError: must be real number, not %s" % what \
            if kind in ("float", "double") else \
            "TypeError: '%s' object cannot be interpreted as an integer" % what
        raise Bad("expected %s, got %s%s" % (need, shown(v), hint), paddle)
    if kind in ("float", "double"):
        x = float(v)
        if not math.isfinite(x):
            raise Bad("expected a finite number, got %s" % shown(v), "")
        if kind == "float" and abs(x) > FLOAT32_MAX:
            raise Bad("%s is beyond a float's range (%.8g)" % (shown(v), FLOAT32_MAX),
                      "")
        return float32(x) if kind == "float" else x
    if isinstance(v, float):
        raise Bad("expected %s, got %s" % ("true or false" if kind == "bool"
                                           else "an integer", shown(v)),
                  "TypeError: 'float' object cannot be interpreted as an integer")
    if kind == "bool":
        return bool(v)
    if kind == "TableType":
        if int(v) not in TABLE_TYPES.values():
            raise Bad("expected PS_SPARSE_TABLE or PS_DENSE_TABLE, got %s" % shown(v),
                      "ValueError: invalid enumerator %d" % int(v))
        return int(v)
    lo, hi = INT_RANGES[kind]
    if not lo <= int(v) <= hi:
        raise Bad("must be in %d..%d, got %d" % (lo, hi, int(v)),
                  "ValueError: Value out of range: %d" % int(v))
    return int(v)


def _enum_value(v):
    """The TableType field also takes a value's name."""
    return TABLE_TYPES[v] if isinstance(v, str) and v in TABLE_TYPES else v


# --- table_parameters: PaddleRec's flattening and the sparse_table_configs setter -------------
def flatten(tree: dict, prefix: str, where: dict) -> dict:
    """{dotted key: value} as PaddleRec's get_all_inters_from_yaml flattens a YAML mapping:
    mappings are walked, anything else (a list too) is a value. `where[dotted key]` gets each
    key's mapping-and-key, for the line of an error."""
    out: dict = {}
    for k, v in tree.items():
        if not isinstance(k, str):
            raise ConfigError("%s: key %r is not a name" % (prefix, k))
        key = prefix + "." + k
        where[key] = (tree, k)
        if isinstance(v, dict):
            out.update(flatten(v, key, where))
        else:
            out[key] = v
    return out


def _set_message(entry: dict, msg: str, prefix: str, configs: dict, index: int, err) -> None:
    """The strategy setter's set_table_config: every field of `msg` whose dotted key is in
    `configs` (a list value of a single field: its `index`-th item; a repeated message: `num`
    entries, the i-th taking item i of each list)."""
    for field, kind, repeated in SCHEMA[msg]:
        name = prefix + "." + field
        if kind in SCHEMA:
            if repeated:
                if name + ".num" not in configs:
                    continue
                num = configs[name + ".num"]
                if isinstance(num, float) or not isinstance(num, int):
                    raise err(name + ".num", Bad(
                        "expected an integer, got %s" % shown(num),
                        "TypeError: '%s' object cannot be interpreted as an integer"
                        % type(num).__name__))
                if num > MAX_REPEATED:
                    raise err(name + ".num", Bad("must be <= %d, got %d" % (MAX_REPEATED, num),
                                                 ""))
                items = entry.setdefault(field, [])
                for i in range(num):
                    sub: dict = {}
                    items.append(sub)
                    _set_message(sub, kind, name, configs, i, err)
            else:
                sub = entry.get(field, {})
                _set_message(sub, kind, name, configs, 0, err)
                if sub:
                    entry[field] = sub
            continue
        if name not in configs:
            continue
        v = configs[name]
        try:
            if repeated:
                if not isinstance(v, list):
                    raise Bad("expected a list, got %s" % shown(v),
                              "TypeError: Value must be iterable")
                entry[field] = entry.get(field, []) + [coerce(kind, x) for x in v]
                continue
            if type(v) is list:
                if index >= len(v):
                    raise Bad("a list of %d where entry %d is read" % (len(v), index),
                              "IndexError: list index out of range")
                v = v[index]
            entry[field] = coerce(kind, _enum_value(v) if kind == "TableType" else v)
        except Bad as e:
            raise err(name, e) from None


def table_parameter_entries(table_parameters, err, where: Optional[dict] = None) -> list:
    """[(table name, entry)] of sparse_table_configs = PaddleRec's grouping of
    `table_parameters`, in the order the tables first appear (`where`: see flatten)."""
    where = {} if where is None else where
    if not isinstance(table_parameters, dict):
        raise err("table_parameters", Bad(
            "expected a mapping of table name to settings, got %s" % shown(table_parameters),
            "IndexError: list index out of range"))
    flat = flatten(table_parameters, "table_parameters", where)
    groups: dict = {}
    for key, value in flat.items():
        groups.setdefault(key.split(".")[1], {})[key] = value
    out = []
    for name, configs in groups.items():
        entry = {"table_name": name}
        _set_message(entry, "TableParameter", "table_parameters." + name, configs, 0, err)
        out.append((name, entry))
    return out


def fs_client(param, err) -> Optional[dict]:
    """The strategy's fs_client_param as PaddleRec sets it, or None (no uri: not set)."""
    if not isinstance(param, dict):
        raise err("fs_client_param", Bad("expected a mapping (uri, user, passwd, "
                                         "hadoop_bin), got %s" % shown(param), ""))
    if param.get("uri") is None:
        return None
    out = {}
    for key in FS_CLIENT_KEYS:
        v = param.get(key, FS_CLIENT_DEFAULTS.get(key, ""))
        try:
            out[key] = coerce("string", v)
        except Bad as e:
            raise err("fs_client_param." + key, e) from None
    return out


def adam_d2sum(flag, err) -> bool:
    if not isinstance(flag, bool):
        raise err("adam_d2sum", Bad(
            "expected true or false, got %s" % shown(flag),
            "ValueError: The type of `flag` is invalid, expected type is bool, but received "
            "%s" % type(flag)))
    return flag
