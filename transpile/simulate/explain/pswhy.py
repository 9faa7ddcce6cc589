"""Why a ps-trained model differs from the original as written: the ps reference (psref.py)
against the original's run, each difference named (docs/simulate.md, "Style ps").

Per parameter, the ids that apply to it, each with its size: for an effect the reference can
undo (a variant of the reference run without it: the program's initial rows, rows that exist
before their first push, no batch scale, sparse pushes averaged over the trainers, lookups that
do not see the same step's earlier pushes, no weight bounds, no embedx threshold), the largest
change of the parameter when that effect alone is undone; for the others (the table's rule, its
hyper-parameters, dense Adam's bias correction, the learning rate schedule, float32 tables) a
description of what differs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .compare import Judge, ParamDiff, movement, noise
from ..model.values import LazyTable, dense

# effect id -> (what it is, how the reference undoes it: a variant flag, a text edit, or
# "init": the program's initial rows)
ABLATIONS = {
    "ps-sparse-init": "init",
    "ps-sparse-lazy-rows": "variant",
    "ps-embedx-threshold": "text",
    "ps-weight-bounds": "text",
    "ps-sparse-grad-batch-scale": "variant",
    "ps-sparse-trainer-sum": "variant",
    "ps-sparse-turns": "variant",
    "ps-sparse-rule": "text",        # an sgd program's tables run SparseNaiveSGDRule instead
}
ADAM_DEFAULTS = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}


@dataclass(frozen=True)
class Ablation:
    """How the reference is trained again with one effect undone: `rerun(variant, texts,
    init_rows)` (a new ps reference), the descriptor `texts` it ran on and the `config`."""
    rerun: object
    texts: dict
    config: object


@dataclass
class Why:
    id: str
    detail: str
    size: Optional[float] = None        # the largest change when the effect alone is undone


def _text_variant(effect, texts) -> Optional[dict]:
    """The reference's server_desc.txt texts with `effect` undone (None: nothing to undo)."""
    out = {}
    for ep, t in texts.items():
        if effect == "ps-weight-bounds":
            new = re.sub(r"\n\s*weight_bounds: [-0-9.eE+]+", "", t)
        elif effect == "ps-sparse-rule":
            new = re.sub(r'name: "SparseAdamSGDRule"(\n\s*)adam \{',
                         r'name: "SparseNaiveSGDRule"\1naive {', t)
            new = re.sub(r"\n\s*(beta1_decay_rate|beta2_decay_rate|ada_epsilon): [-0-9.eE+]+",
                         "", new)
        else:
            new = re.sub(r"embedx_threshold: [-0-9.eE+]+", "embedx_threshold: 0", t)
        out[ep] = new
    return None if out == texts else out


# --- values compared ----------------------------------------------------------------------
def _rows(v, keys):
    if isinstance(v, LazyTable):
        return np.asarray(v.get(keys), dtype=np.float64)
    return np.asarray(dense(v), dtype=np.float64)[keys]


def sparse_view(psref, w, keys):
    """The rows a trainer pulls for `keys` (zeros for rows never created)."""
    if not len(keys):
        return np.zeros((0, 0))
    return np.asarray(psref.pull_sparse(w, np.asarray(keys)), dtype=np.float64)


def ref_value(psref, name):
    """The reference's dense value of `name`: trainer 0's (each trainer's own state: mean)."""
    vals = [t.scope.get(name) for t in psref.trainers]
    vals = [np.asarray(v.to_dense() if isinstance(v, LazyTable) else dense(v), np.float64)
            for v in vals if v is not None]
    if not vals:
        return None
    return vals[0] if name in psref.plan_params else sum(vals) / len(vals)


def _diff(name, shape, a, b, moved, rtol, f32) -> ParamDiff:
    from .pscompare import diff_of
    return diff_of(name, shape, b, a, moved, rtol, f32, "the ps reference")


def compare_original(main, plan, psref, orig_scope, init, rtol, f32) -> list:
    """A ParamDiff per parameter: the ps reference against the original's run, relative to
    how far the original moved it (sparse tables: on the rows the reference touched)."""
    from ...ir.optimizers import trainable_params
    train = trainable_params(main)
    psref.plan_params = set(train)
    out = []
    for var in main.parameters():
        name, shape = var.name, tuple(var.shape or ())
        orig = orig_scope.get(name)
        if name in plan.table_ids:
            keys = np.asarray(sorted(psref.touched.get(name, ())), dtype=np.int64)
            a = sparse_view(psref, name, keys)
            b = _rows(orig, keys) if len(keys) else np.zeros_like(a)
            moved = float(np.abs(b - _rows(init[name], keys)).max()) \
                if len(keys) and name in init else None
        else:
            a, b = ref_value(psref, name), orig
            if a is None or b is None:
                out.append(ParamDiff(name, shape, float("nan"), float("nan"), False,
                                     "not held by both runs"))
                continue
            b = np.asarray(dense(b), dtype=np.float64)
            moved = movement(init.get(name), orig) if name in init else None
        d = _diff(name, shape, a, b, moved, rtol, f32)
        d.trainable = name in train
        d.changed = None if moved is None else moved > noise(1.0, f32)
        out.append(d)
    return out


def _final(psref, name, keys):
    if keys is not None:
        return sparse_view(psref, name, keys)
    return ref_value(psref, name)


def ablation_sizes(main, plan, psref, ablate: Ablation, program_init) -> dict:
    """effect id -> {param: the largest change of the parameter when the effect is undone}."""
    rerun, texts, config = ablate.rerun, ablate.texts, ablate.config
    sparse = [w for w in plan.table_ids if w in psref.touched]
    if not sparse:
        # every effect undone here is one of the sparse tables (their rows, pushes, lookups,
        # accessor): with no sparse row looked up or pushed, no rerun can change a value
        return {}
    dense_names = [v.name for v in main.parameters() if v.name not in plan.table_ids]
    out = {}
    sgd_only = all(op.type == "sgd" for op in main.global_block.ops
                   if op.input("Param") and op.input("Grad")
                   and op.input("Param")[0] in plan.table_ids)
    for effect, how in ABLATIONS.items():
        if not _applies(effect, psref, config, program_init):
            continue
        if effect == "ps-sparse-rule" and not sgd_only:
            continue
        new_texts = _text_variant(effect, texts) if how == "text" else None
        if how == "text" and new_texts is None:
            continue
        other = rerun(frozenset([effect]) if how == "variant" else frozenset(), new_texts,
                      how == "init")
        sizes = {}
        for w in sparse:
            keys = np.asarray(sorted(psref.touched[w] | other.touched.get(w, set())),
                              dtype=np.int64)
            a, b = _final(psref, w, keys), _final(other, w, keys)
            sizes[w] = float(np.abs(a - b).max()) if a.size else 0.0
        other.plan_params = psref.plan_params
        for n in dense_names:
            a, b = _final(psref, n, None), _final(other, n, None)
            if a is not None and b is not None and np.shape(a) == np.shape(b):
                sizes[n] = float(np.abs(a - b).max()) if np.size(a) else 0.0
        out[effect] = sizes
    return out


def _applies(effect, psref, config, program_init) -> bool:
    trainers = len(psref.trainers)
    if effect == "ps-sparse-init":
        return not program_init
    if effect in ("ps-sparse-trainer-sum", "ps-sparse-turns"):
        return trainers > 1 and (effect != "ps-sparse-turns" or psref.sync)
    return True


def explain(main, plan, psref, orig_scope, judge: Judge, ablate: Optional[Ablation]):
    """(ParamDiffs of the reference against the original, {param: [Why]}: none without
    `ablate`)."""
    from .psexplain import static_reasons
    diffs = compare_original(main, plan, psref, orig_scope, judge.init, judge.rtol, judge.f32)
    if ablate is None:
        return diffs, {}
    program_init = psref.servers and psref.servers[0].options.program_init is not None
    sizes = ablation_sizes(main, plan, psref, ablate, program_init)
    reasons = static_reasons(main, plan, psref, ablate.config, program_init)
    out = {}
    for d in diffs:
        lst = []
        for effect, per in sizes.items():
            s = per.get(d.name)
            if s is not None and s > 0:
                lst.append(Why(effect, reasons.get((effect, d.name), ""), s))
        for (effect, name), detail in sorted(reasons.items()):
            if name == d.name and effect not in ABLATIONS:
                lst.append(Why(effect, detail))
        out[d.name] = sorted(lst, key=lambda w: (-(w.size or 0.0), w.id))
    return diffs, out
