"""`fleet_desc_configs:` of the cluster config: DistributedStrategy.fleet_desc_configs of
Paddle 2.6 (fleet/base/distributed_strategy.py), which fills in EVERY field of each table it
names from `sparse_*` keys and its own defaults, into the strategy's downpour_table_param list
that the_one_ps reads like a table_parameters entry.

  - keys other than SUPPORTED, a table class other than DownpourSparseTable /
    DownpourSparseSSDTable and an accessor class other than ACCESSORS are refused with the
    setter's message;
  - DownpourCtrAccessor and DownpourCtrDoubleAccessor take both SGD rules from `sparse_*`
    keys, the others from `embed_sparse_*` / `embedx_sparse_*` (an embed_ adagrad rule gets
    initial_range 0 whatever the key says);
  - a top-level `use_cvm: false` makes every table's accessor SparseAccessor; top-level
    values that are no mapping, and the tables `dense_table` / `datanorm_table`, are skipped.
"""
from __future__ import annotations

from .ps_strategy import Bad, coerce
from .yamlread import shown

SUPPORTED = (
    "sparse_table_class", "sparse_compress_in_save", "sparse_shard_num",
    "sparse_accessor_class", "sparse_learning_rate", "sparse_initial_g2sum",
    "sparse_initial_range", "sparse_weight_bounds", "sparse_fea_dim", "sparse_embedx_dim",
    "sparse_embedx_threshold", "sparse_nonclk_coeff", "sparse_click_coeff",
    "sparse_base_threshold", "sparse_delta_threshold", "sparse_delta_keep_days",
    "sparse_delete_after_unseen_days", "sparse_show_click_decay_rate",
    "sparse_delete_threshold", "sparse_converter", "sparse_deconverter", "sparse_enable_cache",
    "sparse_cache_rate", "sparse_cache_file_num", "sparse_beta1_decay_rate",
    "sparse_beta2_decay_rate", "sparse_ada_epsilon", "sparse_optimizer",
    "sparse_ssd_unseenday_threshold", "embed_sparse_optimizer", "embed_sparse_learning_rate",
    "embed_sparse_weight_bounds", "embed_sparse_initial_range", "embed_sparse_initial_g2sum",
    "embed_sparse_beta1_decay_rate", "embed_sparse_beta2_decay_rate",
    "embedx_sparse_optimizer", "embedx_sparse_learning_rate", "embedx_sparse_weight_bounds",
    "embedx_sparse_initial_range", "embedx_sparse_initial_g2sum",
    "embedx_sparse_beta1_decay_rate", "embedx_sparse_beta2_decay_rate",
    "feature_learning_rate", "nodeid_slot", "sparse_load_filter_slots",
    "sparse_save_filter_slots")
TABLE_CLASSES = {"DownpourSparseTable": "MemorySparseTable",
                 "DownpourSparseSSDTable": "SSDSparseTable"}
ACCESSORS = ("DownpourSparseValueAccessor", "DownpourCtrAccessor", "DownpourCtrDoubleAccessor",
             "DownpourUnitAccessor", "DownpourDoubleUnitAccessor", "DownpourCtrDymfAccessor")
SKIPPED_TABLES = ("dense_table", "datanorm_table")
# sparse_optimizer -> (rule name, its block, default learning rate)
OPTIMIZERS = {"naive": ("SparseNaiveSGDRule", "naive", 0.05),
              "adagrad": ("SparseAdaGradSGDRule", "adagrad", 0.05),
              "adagrad_v2": ("SparseAdaGradV2SGDRule", "adagrad", 0.05),
              "std_adagrad": ("StdAdaGradSGDRule", "adagrad", 0.05),
              "adam": ("SparseAdamSGDRule", "adam", 0.001),
              "shared_adam": ("SparseSharedAdamSGDRule", "adam", 0.001)}
# the ctr_accessor_param fields: (key, field, default, kind)
CTR = (("sparse_nonclk_coeff", "nonclk_coeff", 0.1, "float"),
       ("sparse_click_coeff", "click_coeff", 1, "float"),
       ("sparse_base_threshold", "base_threshold", 1.5, "float"),
       ("sparse_delta_threshold", "delta_threshold", 0.25, "float"),
       ("sparse_delta_keep_days", "delta_keep_days", 16, "float"),
       ("sparse_show_click_decay_rate", "show_click_decay_rate", 0.98, "float"),
       ("sparse_delete_threshold", "delete_threshold", 0.8, "float"),
       ("sparse_delete_after_unseen_days", "delete_after_unseen_days", 30, "float"),
       ("sparse_ssd_unseenday_threshold", "ssd_unseenday_threshold", 1, "int32"))


class _Table:
    """One table's keys, read with the setter's defaults; a bad value names its key."""

    def __init__(self, name: str, config: dict, err):
        self.name, self.config, self.err = name, config, err

    def get(self, key: str, default, kind: str):
        try:
            return coerce(kind, self.config.get(key, default))
        except Bad as e:
            raise self.err("fleet_desc_configs.%s.%s" % (self.name, key), e) from None

    def floats(self, key: str, default) -> list:
        v = self.config.get(key, default)
        if not isinstance(v, list):
            raise self.err("fleet_desc_configs.%s.%s" % (self.name, key),
                           Bad("expected a list, got %s" % shown(v),
                               "TypeError: Value must be iterable"))
        return [self.get_value(key, x) for x in v]

    def get_value(self, key, x):
        try:
            return coerce("float", x)
        except Bad as e:
            raise self.err("fleet_desc_configs.%s.%s" % (self.name, key), e) from None

    def refuse(self, key: str, problem: str, paddle: str):
        return self.err("fleet_desc_configs.%s%s" % (self.name, "." + key if key else ""),
                        Bad(problem, paddle))


def _rule(t: _Table, prefix: str) -> dict:
    """sparse_optimizer_config: one SGD rule from the keys `prefix`sparse_*."""
    opt = t.get(prefix + "sparse_optimizer", "adagrad", "string")
    known = OPTIMIZERS.get(opt)
    if known is None:
        return {"name": opt}
    name, block, lr = known
    p = {"learning_rate": t.get(prefix + "sparse_learning_rate", lr, "double"),
         "initial_range": t.get(prefix + "sparse_initial_range", 1e-4, "double")}
    if block == "adagrad":
        if prefix == "embed_":
            p["initial_range"] = 0.0
        p["initial_g2sum"] = t.get(prefix + "sparse_initial_g2sum", 3, "double")
    if block == "adam":
        p["beta1_decay_rate"] = t.get(prefix + "sparse_beta1_decay_rate", 0.9, "double")
        p["beta2_decay_rate"] = t.get(prefix + "sparse_beta2_decay_rate", 0.999, "double")
        p["ada_epsilon"] = t.get(prefix + "sparse_ada_epsilon", 1e-8, "double")
    p["weight_bounds"] = t.floats(prefix + "sparse_weight_bounds", [-10, 10])
    return {"name": name, block: p}


def _table(t: _Table, use_cvm: bool) -> dict:
    """set_sparse_table_config: the whole entry of one table."""
    for key in t.config:
        if key not in SUPPORTED:
            raise t.refuse(key, "not a fleet_desc_configs key (%s)" % ", ".join(SUPPORTED[:4])
                           + ", ...", "ValueError: strategy key '%s' not support" % key)
    table_class = t.get("sparse_table_class", "DownpourSparseTable", "string")
    if table_class not in TABLE_CLASSES:
        raise t.refuse("sparse_table_class", "must be DownpourSparseTable or "
                       "DownpourSparseSSDTable, got %r" % table_class,
                       "ValueError: support sparse_table_class: ['DownpourSparseTable, "
                       "DownpourSparseSSDTable'], but actual %s" % table_class)
    entry = {"table_class": TABLE_CLASSES[table_class],
             "shard_num": t.get("sparse_shard_num", 1000, "uint64"),
             "enable_sparse_table_cache": t.get("sparse_enable_cache", True, "bool"),
             "sparse_table_cache_rate": t.get("sparse_cache_rate", 0.00055, "double"),
             "sparse_table_cache_file_num": t.get("sparse_cache_file_num", 16, "uint32")}
    accessor = t.get("sparse_accessor_class", "DownpourCtrAccessor", "string")
    if accessor not in ACCESSORS:
        raise t.refuse("sparse_accessor_class", "must be one of %s, got %r"
                       % (", ".join(ACCESSORS), accessor),
                       "ValueError: support sparse_accessor_class: ['%s'], but actual %s"
                       % ("', '".join(ACCESSORS), accessor))
    cls = "CtrDoubleAccessor" if "Double" in accessor else \
        "CtrDymfAccessor" if "Dymf" in accessor else "CtrCommonAccessor"
    embedx_dim = t.get("sparse_embedx_dim", 8, "uint32")
    acc = {"accessor_class": cls if use_cvm else "SparseAccessor", "embedx_dim": embedx_dim,
           "fea_dim": embedx_dim + 3,
           "embedx_threshold": t.get("sparse_embedx_threshold", 10, "uint32")}
    ctr = {"show_scale": accessor != "DownpourUnitAccessor"}
    for key, field, default, kind in CTR:
        ctr[field] = t.get(key, default, kind)
    for key in ("load_filter_slots", "save_filter_slots"):
        slots = t.floats("sparse_" + key, [])
        if slots:
            ctr[key] = slots
    acc["ctr_accessor_param"] = ctr
    converter = t.get("sparse_converter", "", "string")
    deconverter = t.get("sparse_deconverter", "", "string")
    acc["table_accessor_save_param"] = [
        {"param": p, "converter": converter, "deconverter": deconverter} for p in (1, 2)]
    both = accessor in ("DownpourCtrAccessor", "DownpourCtrDoubleAccessor")
    acc["embed_sgd_param"] = _rule(t, "" if both else "embed_")
    acc["embedx_sgd_param"] = _rule(t, "" if both else "embedx_")
    acc["graph_sgd_param"] = {
        "feature_learning_rate": t.get("feature_learning_rate", 0.05, "float"),
        "nodeid_slot": t.get("nodeid_slot", 9008, "uint32")}
    entry["accessor"] = acc
    return entry


def fleet_desc_entries(configs, err) -> list:
    """[(table name, entry)] the fleet_desc_configs setter adds, in the order of `configs`."""
    if not isinstance(configs, dict):
        raise err("fleet_desc_configs", Bad("expected a mapping of table name to sparse_* "
                                            "keys, got %s" % shown(configs), ""))
    out = []
    use_cvm = configs.get("use_cvm", True)          # the setter: `if not use_cvm`
    if not isinstance(use_cvm, int) or isinstance(use_cvm, float):
        raise err("fleet_desc_configs.use_cvm", Bad("expected true or false, got %s"
                                                    % shown(use_cvm), ""))
    for name, config in configs.items():
        if name in SKIPPED_TABLES or not isinstance(config, dict):
            continue
        if not isinstance(name, str):
            raise err("fleet_desc_configs", Bad("table name %r is not a string" % (name,),
                                                "TypeError: bad argument type for built-in "
                                                "operation"))
        entry = {"table_name": name}
        entry.update(_table(_Table(name, config, err), use_cvm))
        out.append((name, entry))
    return out
