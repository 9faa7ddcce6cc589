"""Finding, in a program, the Paddle faults of gradient clips and weight decay over sparse
tables and of lookups whose ids are not 2-D (the kinds are in faults.py).

- classic-clip-on-pserver: a Paddle 2.x clip (a `clip` / `clip_by_norm` into a new var the
  update reads, or a global-norm clip's `squared_l2_norm`s) in a classic program;
- fleet- / ps-sparse-clip-dropped: a clip-scope op reading a remote table's gradient, which the
  trainer pushes from the lookups' gradients instead;
- fleet-sparse-decay-whole-table: a regularization op reading a remote table sliced over more
  than one pserver;
- *-lookup-ids-not-2d: a remote-prefetch lookup whose ids are not 2-D (found only under
  `paddle_faults: fix`: Paddle refuses these programs, and so does `split` by default).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from ..ir import roles
from ..ir.program import Program
from ..ir.tables import LOOKUP_TABLE_TYPES, ids_blocker, ids_not_2d, is_remote_prefetch
from .faults import (CLASSIC_CLIP_ON_PSERVER, FLEET_GEO_DENSE_TABLE_GRAD, FLEET_SPARSE_CLIP_DROPPED,
                     FLEET_DECAY_WHOLE_PARAM, FLEET_SPARSE_DECAY_WHOLE_TABLE, Fault, fault)

CLIP_SCOPE = roles.FLEET_CLIP_NAME_SCOPE
# per-gradient clips a pserver can run on the gradient (block) it holds
ELEMENTWISE_CLIPS = ("clip",)
PER_PARAM_CLIPS = ("clip_by_norm",)
GLOBAL_NORM_OPS = ("squared_l2_norm",)
# what a geo split whose trainers push only the rows the lookups touched still does differently
GEO_ROWS_DIFFER = ("geo pushes only the rows the table's lookups touched: the decay of its "
                   "other rows stays with each trainer, where the original decays every row")
# what a split whose trainers clip their own gradients still does differently in sync mode
CLIPPED_PER_TRAINER = ("in sync mode each trainer clips its own gradient before the pservers "
                       "add the trainers' up; the original clips their average")


def new_var_clips(main: Program) -> dict:
    """{param: (its clip op, the raw grad it reads)} of the clips that give the update a new
    var (Paddle 2.x's ClipGradByValue / ClipGradByNorm: `clip` / `clip_by_norm` of
    `<param>@GRAD` into the var the update reads; op_role_var names that var)."""
    out = {}
    kinds = ELEMENTWISE_CLIPS + PER_PARAM_CLIPS
    for op in main.global_block.ops:
        if op.type not in kinds:
            continue            # (before its attr is read: most ops are no clip)
        rv = op.attr(roles.ROLE_VAR_ATTR) or []
        if len(rv) == 2 and op.input("X") and op.output("Out") == [rv[1]] and \
                op.input("X") != op.output("Out"):
            out[rv[0]] = (op, op.input("X")[0])
    return out


def _clip_scope_ops(main: Program) -> list:
    return [op for op in main.global_block.ops if roles.is_clip_op(op, CLIP_SCOPE)]


def _blocker(ops: list, sliced: set) -> Optional[str]:
    """Why the clip ops of these gradients can not run on the pservers (None: they can)."""
    for op in ops:
        if op.type in GLOBAL_NORM_OPS:
            return "a global-norm clip needs every gradient at once"
        if op.type in PER_PARAM_CLIPS and (op.attr(roles.ROLE_VAR_ATTR) or [""])[0] in sliced:
            return "a norm clip of %s, which more than one pserver holds" % (
                op.attr(roles.ROLE_VAR_ATTR)[0])
    return None


def classic_clip_fault(main: Program, config, sliced: set) -> Optional[Fault]:
    """classic-clip-on-pserver (`sliced`: the params cut into more than one block). Its fix
    clips on the pservers where each can (classic_clip_on_trainer None), else on the trainers,
    which in sync mode clip their own gradients before the pservers average them."""
    clips = new_var_clips(main)
    ops = _clip_scope_ops(main)
    if not clips and not any(op.type in GLOBAL_NORM_OPS for op in ops):
        return None
    on_trainer = classic_clip_on_trainer(main, sliced)
    kinds = sorted({op.type for op in ops if op.type in ELEMENTWISE_CLIPS + PER_PARAM_CLIPS
                    + GLOBAL_NORM_OPS})
    return fault(CLASSIC_CLIP_ON_PSERVER, "%s clip of %d parameter(s)" % (
        "/".join(kinds), len({(op.attr(roles.ROLE_VAR_ATTR) or [""])[0] for op in ops})),
        config.fix_faults, None,
        CLIPPED_PER_TRAINER if on_trainer and config.sync_mode and config.trainers > 1 else "")


def classic_clip_on_trainer(main: Program, sliced: set) -> Optional[str]:
    """Why a classic split's clip can not run on the pservers (a global-norm clip needs every
    gradient at once; a norm over a sliced parameter more than a pserver holds): then the
    trainers clip (passes/fixes.py clip_on_trainer); None when the pservers can."""
    return _blocker(_clip_scope_ops(main), sliced)


@dataclass(frozen=True)
class TableClip:
    """How the original clips a remote table's gradient `grad` (`<table>@GRAD`, its lookup
    grads summed), for a trainer that clips the rows it pushes (passes/sparseclip.py):
    `kind` "value" (`clip`: min, max), "norm" (`clip_by_norm`: max_norm) or "global" (the
    global norm's `elementwise_mul` of the gradient by `scale`); `op`: that op's uid."""
    table: str
    kind: str
    grad: str
    op: int
    min: float = 0.0
    max: float = 0.0
    max_norm: float = 0.0
    scale: str = ""


def table_clips(main: Program, tables) -> tuple:
    """The TableClip of each of `tables` a clip reads the gradient of, in `tables`' order;
    a table whose gradient a clip op of another kind reads raises ValueError (its name)."""
    by_table = sparse_clip_tables(main, set(tables))
    out = []
    for table in tables:
        ops = by_table.get(table)
        if not ops:
            continue
        grad = table + "@GRAD"
        clip = _table_clip(table, grad, ops)
        if clip is None:
            raise ValueError("%s of %s" % ("/".join(sorted({op.type for op in ops})), grad))
        out.append(clip)
    return tuple(out)


def _table_clip(table: str, grad: str, ops: list) -> Optional[TableClip]:
    for op in ops:
        if op.input("X") != [grad]:
            continue
        if op.type == "clip":
            return TableClip(table, "value", grad, op.uid, min=float(op.attr("min")),
                             max=float(op.attr("max")))
        if op.type == "clip_by_norm":
            return TableClip(table, "norm", grad, op.uid, max_norm=float(op.attr("max_norm")))
        if op.type == "elementwise_mul" and op.output("Out") == [grad] and op.input("Y"):
            return TableClip(table, "global", grad, op.uid, scale=op.input("Y")[0])
    return None


def sparse_clip_tables(main: Program, remote: set) -> dict:
    """{remote table: [the clip-scope ops reading its gradient]}."""
    out: dict = {}
    if not remote:
        return out              # (before any op is looked at)
    for op in _clip_scope_ops(main):
        for name in op.input_names():
            table = name[:-len("@GRAD")] if name.endswith("@GRAD") else None
            if table in remote:
                out.setdefault(table, []).append(op)
    return out


def sparse_clip_fault(main: Program, config, remote: set, fault_id: str) -> Optional[Fault]:
    """fleet- / ps-sparse-clip-dropped: the remote tables (`remote`, pushed from their lookups'
    gradients) whose gradient a clip reads; geo keeps the optimizer on the trainer. Fixable
    where the clip is one a trainer can run on the rows it pushes (table_clips)."""
    if config.mode == "geo":
        return None
    tables = sparse_clip_tables(main, remote)
    if not tables:
        return None
    blocked = None
    try:
        table_clips(main, sorted(tables))
    except ValueError as e:
        blocked = "a clip the trainer cannot run on the rows it pushes (%s)" % e
    return fault(fault_id, "table%s %s" % ("s" * (len(tables) > 1), ", ".join(sorted(tables))),
                 config.fix_faults, blocked)


def pserver_clip_blocker(main: Program, remote: set, sliced: set) -> Optional[str]:
    """Why the pservers cannot clip the clipped remote tables' gradient blocks they receive
    (then the trainer clips the rows it pushes), or None when they can."""
    tables = sparse_clip_tables(main, remote)
    blocked = _blocker([op for ops in tables.values() for op in ops], sliced)
    if blocked is None and any(op.type in GLOBAL_NORM_OPS for op in _clip_scope_ops(main)):
        blocked = "a global-norm clip needs every gradient at once"
    return blocked


def decayed_sliced_tables(main: Program, remote: set, sliced: set) -> list:
    """The remote tables sliced over the pservers that a regularization op reads (Paddle's
    L2Decay on a sparse grad: `scale(<table>)`, `sum(<table>@GRAD, ...)`)."""
    return [p for p in decayed_sliced(main, sliced) if p in remote]


# the name scope of a regularization op (Paddle's append_regularization_ops)
_REGULARIZATION = "regularization"
_REGULARIZATION_BYTES = _REGULARIZATION.encode()


def decayed_sliced(main: Program, sliced: set) -> list:
    """The params sliced over the pservers (remote tables or dense) that a regularization op
    reads."""
    out: set = set()
    if not sliced:
        return []
    for op in main.global_block.ops:
        if roles.role(op) != roles.OPTIMIZE or op.lacks_text(_REGULARIZATION_BYTES) or \
                _REGULARIZATION not in str(op.attr("op_namescope", "") or ""):
            continue
        for name in op.input_names():
            base = name[:-len("@GRAD")] if name.endswith("@GRAD") else name
            if base in sliced:
                out.add(base)
    return sorted(out)


def ids_fault(main: Program, config, fault_id: str,
              types=LOOKUP_TABLE_TYPES) -> Optional[Fault]:
    """*-lookup-ids-not-2d under `paddle_faults: fix` (without it the split refuses, as
    Paddle does): the remote lookups whose ids are not 2-D, when the fix can make them so."""
    if not config.fix_faults or config.mode == "geo":
        return None
    block = main.global_block
    bad = ids_not_2d(block, [op for op in block.ops if is_remote_prefetch(op, types)])
    if not bad:
        return None
    blocked = next((b for b in (ids_blocker(op.type, shape) for op, _, shape in bad) if b),
                   None)
    tables = sorted({op.input("W")[0] for op, _, _ in bad})
    return fault(fault_id, "%d lookup(s) of %s" % (len(bad), ", ".join(tables)), True, blocked)


def fleet_table_faults(main, config, plan) -> list:
    """fleet-sparse-clip-dropped, fleet-sparse-decay-whole-table and fleet-decay-whole-param
    of the fleet plan."""
    remote = {p.param for p in plan.sparse_pairs}
    if plan.is_geo:
        dense = geo_dense_table_fault(main, config, remote, FLEET_GEO_DENSE_TABLE_GRAD)
        return [dense] if dense is not None else []
    sliced = {p for p, blocks in plan.param_slices.items() if len(blocks) > 1}
    out = []
    clip = sparse_clip_fault(main, config, remote, FLEET_SPARSE_CLIP_DROPPED)
    if clip is not None and clip.fixed and plan.trainer_clips and plan.is_sync and \
            plan.trainers > 1:
        clip = replace(clip, differs=CLIPPED_PER_TRAINER)
    if clip is not None:
        out.append(clip)
    decayed = decayed_sliced(main, sliced)
    tables = [p for p in decayed if p in remote]
    if tables:
        out.append(fault(FLEET_SPARSE_DECAY_WHOLE_TABLE, "table%s %s" % (
            "s" * (len(tables) > 1), ", ".join(tables)), config.fix_faults))
    dense = [p for p in decayed if p not in remote]
    if dense:
        out.append(fault(FLEET_DECAY_WHOLE_PARAM, "parameter%s %s" % (
            "s" * (len(dense) > 1), ", ".join(dense)), config.fix_faults))
    return out


def geo_dense_table_fault(main: Program, config, remote: set, fault_id: str):
    """fleet- / ps-geo-dense-table-grad: geo, a remote table's update reads a gradient an op
    made dense (a weight decay over the table), which no geo split can push."""
    from ..ir.dataflow import dense_at
    from ..ir.optimizers import is_optimizer_update
    if config.mode != "geo":
        return None
    found = sorted({op.input("Param")[0] for _, op, _ in dense_at(main, wanted=lambda o: (
        is_optimizer_update(o) and o.input("Param")[:1] != [] and o.input("Param")[0] in remote))})
    if not found:
        return None
    return fault(fault_id, "table%s %s" % ("s" * (len(found) > 1), ", ".join(found)),
                 config.fix_faults, None, GEO_ROWS_DIFFER)


def geo_raw_row_tables(main: Program, config, remote: set, fault_id: str) -> tuple:
    """The tables whose geo send carries the lookups' raw gradient rows (fixing fleet- /
    ps-geo-dense-table-grad: passes/common.py send_table_rows)."""
    f = geo_dense_table_fault(main, config, remote, fault_id)
    return tuple(f.where.split(" ", 1)[1].split(", ")) if f is not None and f.fixed else ()


def push_ids_lod2_fault(main: Program, config, remote: set, fault_id: str):
    """ps-push-ids-lod2: sync / async, a remote table looked up with ids of lod_level 2, which
    the push that replaces its lookup grads hands Paddle's client (it walks their first LoD
    level as their rows: the trainer fails at its first push)."""
    if config.mode == "geo":
        return None
    block = main.global_block
    found = sorted({(op.input("W")[0], op.input("Ids")[0]) for op in block.ops
                    if is_remote_prefetch(op) and op.input("W")[:1] and op.input("Ids")[:1]
                    and op.input("W")[0] in remote
                    and (getattr(main.find_var(op.input("Ids")[0], 0), "lod_level", 0) or 0)
                    >= 2})
    if not found:
        return None
    return fault(fault_id, ", ".join("%s by %s" % wi for wi in found), config.fix_faults,
                 "Paddle's client needs ids whose first LoD level is their rows; no rewrite "
                 "of the push is verified on Paddle's runtime yet")
