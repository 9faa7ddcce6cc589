"""plan.json of a ps-style split (documented in docs/plan-json.md, "Style ps").

The top level keeps the keys every style has (schema, version, style, mode, config,
trainer_ids, endpoints with bytes, total_bytes, imbalance, ops, programs, notes); the rest says
what the ps pipeline decided: the tables (id, kind, class, dims, rule and where the dense
table's shards are), and per trainer what it pulls, pushes and sends. It decides nothing:
everything is read off the plan and the original program.
"""
from __future__ import annotations

from collections import Counter

from ..format.psdesc import float32, shortest_float
from ..ir.program import Program, indexed, select
from ..ir.tables import lookup_groups
from ..plan.ps import PsPlan
from .planjson import SCHEMA, VERSION, in_order
from .result import SplitResult, op_type_counts

FLOAT_BYTES = 4         # every value a ps table holds is a float


def table_dict(plan: PsPlan, t) -> dict:
    """One table of plan.json."""
    n_ps = len(plan.endpoints)
    d = {"id": t.table_id, "kind": t.kind, "class": t.table_class, "name": t.table_name,
         "shard_num": t.shard_num,
         "accessor": {"class": t.accessor_class, "fea_dim": t.fea_dim,
                      "embedx_dim": t.embedx_dim}}
    if t.kind == "barrier":
        return d
    d.update({"rule": t.rule, "optimizer": t.optimizer, "optimizer_op": t.optimizer_op,
              "grads": list(t.grads), "params": list(t.model_params),
              "inputs": list(t.params), "initializers": list(t.initializers),
              "entry": t.entry, "sync": t.sync, "rows": t.table_num, "dim": t.table_dim})
    if t.is_sparse:
        d["distributed"] = t.distributed
        if t.sgd_rule is not None:
            d["sgd_rule"] = t.sgd_rule.to_dict()
        if t.settings is not None:
            d["accessor"].update(accessor_dict(t.settings.accessor))
            d["settings_from"] = t.settings.source
            d["table_settings"] = {k: v for k, v in t.settings.table_fields}
        # a sparse table is sharded by feature id over every server (shard_num shards)
        d["servers"] = list(plan.endpoints)
    else:
        d["shards"] = {ep: t.dims(n_ps, i)[0] for i, ep in enumerate(plan.endpoints)}
    return d


# the FLOAT (float32) fields of an accessor: shown as the descriptor prints them
FLOAT32_FIELDS = {"nonclk_coeff", "click_coeff", "base_threshold", "delta_threshold",
                  "delta_keep_days", "show_click_decay_rate", "delete_threshold",
                  "delete_after_unseen_days", "weight_bounds", "feature_learning_rate",
                  "load_filter_slots", "save_filter_slots"}


def _shown(key: str, v):
    if key in FLOAT32_FIELDS:
        if isinstance(v, list):
            return [shortest_float(float32(x)) for x in v]
        return shortest_float(float32(v))
    return v


def accessor_dict(acc: dict) -> dict:
    """plan.json's view of a sparse table's accessor beyond its class and dims: threshold,
    the two SGD rules (name and parameters), the ctr thresholds, the save params."""
    out = {"embedx_threshold": acc.get("embedx_threshold")}
    for key, short in (("embed_sgd_param", "embed_rule"), ("embedx_sgd_param", "embedx_rule")):
        rule = acc.get(key, {})
        r = {"name": rule.get("name")}
        for block in ("naive", "adagrad", "adam"):
            if block in rule:
                r[block] = {k: _shown(k, v) for k, v in rule[block].items()}
        out[short] = r
    out["ctr"] = {k: _shown(k, v) for k, v in acc.get("ctr_accessor_param", {}).items()}
    if acc.get("table_accessor_save_param"):
        out["save_params"] = list(acc["table_accessor_save_param"])
    if acc.get("graph_sgd_param"):
        out["graph"] = {k: _shown(k, v) for k, v in acc["graph_sgd_param"].items()}
    return out


def _endpoints(plan: PsPlan) -> dict:
    n_ps = len(plan.endpoints)
    dense = [t for t in plan.tables if t.is_dense and not t.empty]
    sparse = sum(1 for t in plan.tables if t.is_sparse)
    out = {}
    for i, ep in enumerate(plan.endpoints):
        values = sum(sum(t.dims(n_ps, i)) for t in dense)
        out[ep] = {"index": i,
                   "dense_shard": {str(t.table_id): t.dims(n_ps, i)[0] for t in dense},
                   "sparse_tables": sparse, "bytes": values * FLOAT_BYTES,
                   "param_blocks": len(dense) + sparse}
    return out


def _trainers(plan: PsPlan, groups: tuple, trainer_ids) -> dict:
    """Per trainer what it sends, pulls and pushes (`groups`: lookup_groups of the original's
    ops)."""
    pulls, pushes, _ = groups
    n_ps = len(plan.endpoints)
    out = {}
    for tid in trainer_ids:
        sends = [{"queue": c.name, "table_id": c.table_id, "vars": list(c.grads),
                  "is_sparse": (2 if c.distributed else 1) if c.is_sparse else 0}
                 for c in plan.ctxs if c.is_sparse == plan.is_geo]
        entry = {"send": sends, "barrier": plan.is_sync,
                 "dense_dims": {str(t.table_id): t.dims(n_ps, tid)[0]
                                for t in plan.tables if t.is_dense and not t.empty}}
        if plan.is_geo:
            entry["pull"], entry["push"] = [], []
        else:
            entry["pull"] = [{"table_id": plan.table_ids[w], "table": w,
                              "ids": [op.input("Ids")[0] for op in ops],
                              "outputs": [op.output("Out")[0] for op in ops]}
                             for w, ops in pulls.items() if w in plan.table_ids]
            entry["push"] = [{"table_id": plan.table_ids[w], "table": w,
                              "ids": [op.input("Ids")[0] for op in ops]}
                             for w, ops in pushes.items() if w in plan.table_ids]
        out[str(tid)] = entry
    return out


def _removed(plan: PsPlan, main: Program, groups: tuple) -> list:
    if plan.is_geo:
        return []
    ops = main.global_block.ops
    out = []
    for i, op in indexed(ops, plan.optimize_ops):
        rv = op.attr("op_role_var") or []
        e = {"index": i, "type": op.type, "why": "optimize", "moved_to": []}
        if rv:
            e["param"] = rv[0]
        out.append(e)
    out += [{"index": i, "type": op.type, "why": "lr_sched", "moved_to": []}
            for i, op in indexed(ops, plan.lr_ops)]
    pulls, pushes, _ = groups
    index = {id(op): i for i, op in enumerate(ops)}
    for groups, by in ((pulls, "distributed_lookup_table"), (pushes, "distributed_push_sparse")):
        for w, group in groups.items():
            out += [{"index": index[id(op)], "type": op.type, "why": "sparse_lookup",
                     "moved_to": [], "param": w, "replaced_by": by} for op in group]
    return sorted(out, key=lambda e: e["index"])


def _programs(result: SplitResult, main: Program, startup: Program) -> dict:
    origin = {"main": op_type_counts(main), "startup": op_type_counts(startup)}
    out = {}
    for key in sorted(result.summaries):
        s = result.summaries[key]
        which = "main" if key.endswith("/main") else "startup"
        before = origin[which] if key.startswith("trainer_") else Counter()
        removed = sum((before - s.op_types).values())
        inserted = sum((s.op_types - before).values())
        out[key] = {"blocks": s.blocks, "ops": s.ops, "removed": removed, "inserted": inserted}
    return out


class PsPlanParts:
    """plan.json of a ps split in two steps, as planjson.PlanParts: `early`, every entry but
    the programs' op counts (what the plan and the original program decide: made while the
    programs are built), and finish(result), the dict."""

    # the entries finish() adds (all others are in `early`)
    LATE = ("programs",)

    def __init__(self, plan: PsPlan, main: Program, startup: Program, config, trainer_ids,
                 faults):
        self.main, self.startup = main, startup
        endpoints = _endpoints(plan)
        held = [h["bytes"] for h in endpoints.values()]
        total = sum(held)
        mean = total / float(len(held)) if held else 0
        ops = main.global_block.ops
        groups = lookup_groups(ops)
        self.early = {
            "schema": SCHEMA, "version": VERSION, "style": config.style, "mode": plan.mode,
            "config": config.to_dict(), "trainer_ids": list(trainer_ids),
            "tables": [table_dict(plan, t) for t in plan.tables],
            "barrier_table_id": plan.barrier_table_id,
            "trainers": _trainers(plan, groups, trainer_ids),
            "endpoints": endpoints, "total_bytes": total,
            "imbalance": round(max(held) / mean, 4) if mean else None,
            "lr": {"var": plan_lr_var(plan, main), "scheduler": plan.lr_scheduler,
                   "decay_ops": [{"index": i, "type": op.type}
                                 for i, op in indexed(ops, plan.lr_ops)]},
            "ops": {"removed": _removed(plan, main, groups),
                    "kept_as_backward": [] if plan.is_geo else
                    [{"index": i, "type": op.type} for i, op in indexed(ops, plan.clip_ops)]},
            "fake_init": [] if plan.is_geo else list(plan.fake_init_tables),
            "notes": list(plan.notes),
        }
        if faults:          # only where a split meets one (plan-json.md)
            self.early["faults"] = [f.to_dict() for f in faults]

    def finish(self, result: SplitResult) -> dict:
        """The plan.json dict: `early` and each built program's op counts, in the order the
        dict has always had."""
        return in_order(_ORDER, self.early,
                        {"programs": _programs(result, self.main, self.startup)})


# a ps plan.json's entries in the order the dict has them ("faults" only where there are some)
_ORDER = ("schema", "version", "style", "mode", "config", "trainer_ids", "tables",
          "barrier_table_id", "trainers", "endpoints", "total_bytes", "imbalance", "lr", "ops",
          "fake_init", "programs", "notes", "faults")


def plan_lr_var(plan: PsPlan, main: Program):
    """The learning rate the optimizer ops read (the first one)."""
    for op in select(main.global_block.ops, plan.optimize_ops):
        lr = op.input("LearningRate")
        if lr:
            return lr[0]
    return None


def ps_plan_json(main: Program, startup, config) -> dict:
    """plan.json of the split `config` would make, without making it (no programs): what
    `pstranspile plan` shows for the ps style."""
    from ..ir.lr_schedule import resolve
    from ..plan.ps import make_plan
    startup = startup if startup is not None else Program.empty()
    plan = make_plan(main, startup, config,
                     lr_scheduler=resolve(config.lr_scheduler, main, startup))
    return PsPlanParts(plan, main, startup, config, config.trainer_ids(), []).finish(
        SplitResult())
