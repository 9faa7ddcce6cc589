"""What each ps difference id means for one parameter of one program: the descriptions that go
with pswhy.py's sizes, and the differences the reference cannot undo (their description is
their size).
"""
from __future__ import annotations

import numpy as np

from ...ir import roles

ADAM_DEFAULTS = (("beta1", 0.9), ("beta2", 0.999), ("epsilon", 1e-8))


def _optimizer_ops(main) -> dict:
    """param -> the original's update op."""
    out = {}
    for op in main.global_block.ops:
        if op.input("Param") and op.input("Grad"):
            out.setdefault(op.input("Param")[0], op)
    return out


def _rule_text(rule) -> str:
    name = type(rule).__name__
    lr = getattr(rule, "lr", None)
    return "%s%s" % (name, "" if lr is None else " (learning rate %g)" % float(lr))


def _sparse_reasons(w, table, op, psref, config, program_init) -> dict:
    acc = table.accessor
    out = {}
    if not program_init:
        out["ps-sparse-init"] = (
            "rows start from %s's Create: embed_w %s, embedx_w uniform in +-initial_range "
            "(the table's generator), not the program's initializer"
            % (acc.name, "0 (zero_init)" if acc.zero_init else "uniform in +-initial_range"))
    out["ps-sparse-lazy-rows"] = (
        "a row exists from its first push: lookups before it read zeros, and the push that "
        "creates embedx_w loses its embedx gradient")
    if float(acc.embedx_threshold) > 0:
        out["ps-embedx-threshold"] = (
            "embedx_w is created (and read as 0 until then) once the row's show/click score "
            "reaches embedx_threshold %g" % float(acc.embedx_threshold))
    bounds = [(r.min_bound, r.max_bound) for r in (acc.embed_rule, acc.embedx_rule)]
    if any(np.isfinite(b).all() and b[1] < 3e38 for b in bounds):
        out["ps-weight-bounds"] = "values are clipped to weight_bounds %s" % list(
            map(float, bounds[0]))
    out["ps-sparse-grad-batch-scale"] = (
        "pushed gradients are multiplied by the trainer's batch size (the sum over the "
        "batch of a mean loss's per-sample gradients)")
    if len(psref.trainers) > 1:
        out["ps-sparse-trainer-sum"] = (
            "each trainer's push is applied by itself: the %d trainers' gradients add up, "
            "not averaged" % len(psref.trainers))
        if psref.sync:
            out["ps-sparse-turns"] = (
                "a trainer's lookups see the pushes of the trainers before it in the same step")
    if table.table_id in psref.cut_pushes:
        out["ps-cvm-push-layout"] = (
            "%s pushes [slot, show, click, embed_g, embedx_g] (%d floats) but the program has "
            "no cvm op: its push values are %d wide and the client sends their first %d, so "
            "embed_g is the gradient of the pulled show column and every embedx_g is shifted"
            % (acc.name, acc.update_dim, acc.update_dim + 2, acc.update_dim))
    if acc.name != "SparseAccessor":
        out["ps-ctr-pull-counts"] = (
            "%s pulls [show, click, embed_w, embedx_w]: the trainer's embedding columns 0 and "
            "1 are the row's show and click counts, not trained weights" % acc.name)
    rules = "embed %s, embedx %s" % (_rule_text(acc.embed_rule), _rule_text(acc.embedx_rule))
    prog = op.type if op is not None else "no optimizer"
    out["ps-sparse-rule"] = "the table runs %s; the program updates %s with %s%s" % (
        rules, w, prog, " (size: with SparseNaiveSGDRule instead)" if prog == "sgd" else "")
    if any("Adam" in type(r).__name__ for r in (acc.embed_rule, acc.embedx_rule)):
        counts = psref.push_counts.get(w, {})
        if counts:
            lo, hi = min(counts.values()), max(counts.values())
            out["ps-sparse-adam-row-beta-pow"] = (
                "the Adam rule's bias correction counts each row's pushes (here %d to %d), "
                "not the training steps" % (lo, hi))
    return out


def _dense_reasons(name, table, op, plan) -> dict:
    out = {}
    rule = table.rule_name
    if rule == "adam":
        if op is not None:
            prog = [(k, op.attr(k)) for k, _ in ADAM_DEFAULTS]
            if any(v is not None and abs(float(v) - d) > 1e-7 * max(1.0, d)
                   for (k, v), (_, d) in zip(prog, ADAM_DEFAULTS)):
                out["ps-dense-adam-betas"] = (
                    "the dense Adam runs beta1 0.9, beta2 0.999, epsilon 1e-8; the program "
                    "says %s" % ", ".join("%s %s" % (k, v) for k, v in prog))
        out["ps-dense-adam-beta-pow"] = (
            "the dense Adam's beta powers advance before use, once per bucket of each "
            "pserver's slice (10 per push)")
    if rule == "summary":
        out["ps-summary-decay"] = (
            "data_norm's statistics are a summary table: each push of the batch's statistics "
            "is added (Param * 0.999999 + push), not applied by %s"
            % ("the program's %s" % op.type if op is not None else "an optimizer"))
    if rule == "sgd" and op is not None and op.type not in ("sgd",):
        out["ps-dense-rule"] = "the dense table runs sgd; the program updates %s with %s" % (
            name, op.type)
    if plan.lr_ops:
        lr = table.values.get("LearningRate")
        out["ps-dense-lr-constant"] = (
            "the pservers use the learning rate of the descriptor's initializer (%s); the "
            "program computes its rate with LR-schedule ops (a schedule, per-parameter "
            "factors) that the split drops" % ("?" if lr is None else "%g" % float(lr[0])))
    return out


def _dropped_ops(main, plan) -> dict:
    """param -> the optimize-role ops (other than its update) the split drops for it."""
    from ...ir.program import select
    dropped = select(main.global_block.ops, set(plan.optimize_ops))
    opt = _optimizer_ops(main)
    out: dict = {}
    for p, up in opt.items():
        g = up.input("Grad")[0]
        for op in dropped:
            if op is up or op.input("Param"):
                continue
            if g in op.output_names() and roles.role(op) & roles.OPTIMIZE:
                out.setdefault(p, []).append(op.type)
    return out


def static_reasons(main, plan, psref, config, program_init) -> dict:
    """{(id, param): detail} of every difference that applies to a parameter."""
    opt = _optimizer_ops(main)
    server = psref.servers[0]
    out = {}
    for w, tid in plan.table_ids.items():
        t = server.tables.get(tid)
        if t is None or not hasattr(t, "accessor"):
            continue
        for k, v in _sparse_reasons(w, t, opt.get(w), psref, config, program_init).items():
            out[(k, w)] = v
    for tid, (params, _) in psref.dense.items():
        t = server.tables.get(tid)
        if t is None:
            continue
        for p in params:
            for k, v in _dense_reasons(p, t, opt.get(p), plan).items():
                out[(k, p)] = v
    for p, types in _dropped_ops(main, plan).items():
        out[("ps-regularization-dropped", p)] = (
            "the split drops the optimize-role ops that change %s's gradient (%s): the tables "
            "never see them" % (p, ", ".join(sorted(set(types)))))
    if psref.sync and len(psref.trainers) > 1 and plan.clip_ops:
        for v in main.parameters():
            if v.name in opt:
                out[("ps-clip-before-merge", v.name)] = (
                    "each trainer clips its own gradient before the pservers average (dense) "
                    "or add up (sparse) the trainers'; the original clips their average "
                    "(Paddle fault ps-clip-before-merge, docs/faults.md)")
    for v in main.parameters():
        if v.name in opt:
            out.setdefault(("ps-float32-tables", v.name),
                           "the pservers keep float32 values; the trainers pull them")
    return out
