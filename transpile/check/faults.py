"""The Paddle faults a split reproduces (plan/faults.py), told from the split itself: a warning
naming the fault id for each (a split Paddle made, or ours under `paddle_faults: reproduce`,
trains differently from the original there; `paddle_faults: fix` writes one that does not).
Warnings, not findings: the split is what Paddle writes."""
from __future__ import annotations

from ..ir.tables import LOOKUP_TABLE_TYPES
from ..plan.classic import find_distributed_table
from ..plan.faults import (CLASSIC_CLIP_ON_PSERVER, CLASSIC_DIST_TABLE_OPTIMIZER,
                           CLASSIC_LOCAL_TABLE_FAKE_INIT,
                           FLEET_CLIP_BEFORE_MERGE, FLEET_LARGE_SCALE_ADAM,
                           FLEET_ORPHAN_SPARSE_GRAD_SUM, FLEET_SPARSE_CLIP_DROPPED,
                           FLEET_SYNC_STEP_COUNTER, KIND, PS_CLIP_BEFORE_MERGE,
                           PS_GEO_NO_SPARSE_TABLE)
from ..plan.slicing import origin_varname
from ..ir.validate import arg_names
from .ops import input_names, is_update_op, output_names

LR_DECAY_COUNTER = "@LR_DECAY_COUNTER@"
STEP_COUNTER = "@PS_STEP_COUNTER@"
FLEET_CLIP_SCOPE = "gradient_clip"


def _warn(ctx, fault_id, part, block, op, message):
    ctx.warn("fault", part, block, op, "Paddle fault %s: %s" % (fault_id, message),
             "what `paddle_faults: fix` writes: " + KIND[fault_id].fix.split(";")[0], fault_id)


def check_faults(ctx) -> None:
    """Warn of each known Paddle fault of the config's style the split reproduces."""
    for fault_id, find in FINDERS:
        if KIND[fault_id].style == ctx.config.style:
            find(ctx)


def _local_table(ctx) -> None:
    for tid in sorted(ctx.split.trainers):
        t = ctx.split.trainers[tid]
        if t["startup"] is None:
            continue
        sops = t["startup"].prog.global_block.ops
        faked = {n for op in sops if op.type == "fake_init" for n in op.output("Out")}
        received = {origin_varname(n) for op in sops if op.type in ("recv", "concat")
                    for n in output_names(op)}
        for j, op in enumerate(t["main"].prog.global_block.ops):
            w = op.input("W")[:1] if op.type in LOOKUP_TABLE_TYPES else []
            if w and w[0] in faked and w[0] not in received and \
                    op.attr("remote_prefetch") is not True:
                _warn(ctx, CLASSIC_LOCAL_TABLE_FAKE_INIT, t["main"], 0, j,
                      "the trainer looks %s up itself, but its startup fake_inits the table "
                      "and never receives it: the first step reads a table with no values"
                      % w[0])
                faked.discard(w[0])


def dist_table_target(ctx):
    """(the original's distributed table, the optimizer op type that trains it there or None),
    or None without such a table."""
    table = find_distributed_table(ctx.main)
    if table is None:
        return None
    return table, next((op.type for op in ctx.main.global_block.ops
                        if op.input("Param") == [table] and op.input("Grad")), None)


def _dist_table(ctx) -> None:
    target = dist_table_target(ctx)
    if target is None:
        return
    table, original = target
    for ep in ctx.config.pservers:
        p = ctx.split.pservers.get(ep)
        if p and not ctx.replay("dist_table", ep):
            dist_table_of(ctx, p, table, original)


def dist_table_of(ctx, p: dict, table: str, original) -> None:
    """_dist_table on one pserver (its entry `p`)."""
    average = ctx.config.sync_mode and ctx.config.trainers > 1
    prog = p["main"].prog
    for bi, block in enumerate(prog.blocks):
        for j, op in enumerate(block.ops):
            if not is_update_op(op) or op.input("Param") != [table]:
                continue
            why = []
            if original is not None and op.type != original:
                why.append("with %s, not the program's %s" % (op.type, original))
            if average and not _averaged(block.ops[:j], op.input("Grad")[:1]):
                why.append("on the trainers' summed gradients, not their average")
            if why:
                _warn(ctx, CLASSIC_DIST_TABLE_OPTIMIZER, p["main"], bi, j,
                      "the distributed table %s is trained %s" % (table, " and ".join(why)))


def _averaged(ops, grad: list) -> bool:
    """Whether the chain of `ops` that makes `grad` (through a clip or decay) scales the
    summed gradient."""
    names = set(grad)
    for o in reversed(ops):
        if names & set(output_names(o)):
            if o.type == "scale":
                return True
            names |= set(input_names(o))
    return False


def _in_namescope(op, scope: str) -> bool:
    """Whether `scope` is in the op's op_namescope (an op whose bytes lack it told without
    decoding the attr: a trainer's thousands of ops)."""
    return not op.lacks_text(scope.encode()) and scope in str(op.attr("op_namescope") or "")


def _classic_clip_residual(ctx) -> None:
    """classic-clip-on-pserver fixed on the trainers (a clip no pserver can run): in sync mode
    each trainer clips its own gradient before the pservers average them."""
    if not ctx.config.sync_mode or ctx.config.trainers < 2:
        return
    for tid in sorted(ctx.split.trainers):
        main = ctx.split.trainers[tid]["main"]
        at = next((j for j, op in enumerate(main.prog.global_block.ops)
                   if _in_namescope(op, FLEET_CLIP_SCOPE)), None)
        if at is not None:
            _warn_residual(ctx, CLASSIC_CLIP_ON_PSERVER, main, at,
                           "trainer %d clips its own gradient before the pservers average "
                           "the trainers'; the original clips their average" % tid)


def _clip_before_merge(ctx) -> None:
    if not ctx.config.sync_mode or ctx.config.trainers < 2:
        return
    for tid in sorted(ctx.split.trainers):
        main = ctx.split.trainers[tid]["main"]
        for j, op in enumerate(main.prog.global_block.ops):
            if op.type != "assign" and _in_namescope(op, FLEET_CLIP_SCOPE):
                _warn(ctx, FLEET_CLIP_BEFORE_MERGE, main, 0, j,
                      "trainer %d clips its own gradient (%s of %s) before the pservers "
                      "average the trainers' gradients" % (tid, op.type,
                                                           ", ".join(input_names(op))))
                break


def _clipped_pushes(main) -> list:
    """(op index, table grad) of each push of rows the trainer clipped itself (`<grad>@CLIPPED`,
    passes/sparseclip.py)."""
    return [(j, g) for j, op in enumerate(main.prog.global_block.ops)
            if op.type == "distributed_push_sparse"
            for g in (op.output("Outputs") or op.input("Outputs")) if g.endswith("@CLIPPED")]


def _sparse_clip_residual(ctx) -> None:
    """fleet-sparse-clip-dropped fixed on the trainer: in sync mode each trainer clips its own
    table rows before the pservers add them up (the original clips the average)."""
    if not ctx.config.sync_mode or ctx.config.trainers < 2:
        return
    for tid in sorted(ctx.split.trainers):
        main = ctx.split.trainers[tid]["main"]
        pushed = _clipped_pushes(main)
        if pushed:
            _warn_residual(ctx, FLEET_SPARSE_CLIP_DROPPED, main, pushed[0][0],
                           "trainer %d clips its own rows of the table it pushes (%s) before "
                           "the pservers add the trainers' up; the original clips their "
                           "average" % (tid, pushed[0][1][:-len("@CLIPPED")]))


def _ps_clip_before_merge(ctx) -> None:
    if not ctx.config.sync_mode or ctx.config.trainers < 2:
        return
    for tid in sorted(ctx.split.trainers):
        main = ctx.split.trainers[tid]["main"]
        clips = [j for j, op in enumerate(main.prog.global_block.ops)
                 if FLEET_CLIP_SCOPE in str(op.attr("op_namescope") or "")]
        at = clips[:1] or [j for j, _ in _clipped_pushes(main)][:1]
        if at:
            _warn(ctx, PS_CLIP_BEFORE_MERGE, main, 0, at[0],
                  "trainer %d clips its own gradient before the pservers average (dense) or "
                  "add up (sparse) the trainers' gradients; the original clips their average"
                  % tid)


def _geo_no_sparse_table(ctx) -> None:
    """ps-geo-no-sparse-table: a geo split whose trainers send nothing never exchanges."""
    if not ctx.geo or ctx.config.trainers < 2:
        return
    for tid in sorted(ctx.split.trainers):
        main = ctx.split.trainers[tid]["main"]
        if not any(op.type == "send" for op in main.prog.global_block.ops):
            _warn(ctx, PS_GEO_NO_SPARSE_TABLE, main, 0, None,
                  "trainer %d sends nothing (no sparse table): the geo communicator never "
                  "starts exchanging, each trainer trains alone" % tid)


def _warn_residual(ctx, fault_id, part, op, message) -> None:
    ctx.warn("fault", part, 0, op, "Paddle fault %s, fixed as far as a split can: %s"
             % (fault_id, message), "what the original computes: no split of this mode can",
             fault_id)


def _sync_step_counter(ctx) -> None:
    if not ctx.config.sync_mode:
        return
    sent = any(STEP_COUNTER in (op.attr("send_varnames") or [])
               for t in ctx.split.trainers.values()
               for op in t["main"].prog.global_block.ops if op.type == "send")
    if sent:
        return
    for ep in ctx.config.pservers:
        p = ctx.split.pservers.get(ep)
        if p and not ctx.replay("step_counter", ep):
            step_counter_of(ctx, p)


def step_counter_of(ctx, p: dict) -> None:
    """_sync_step_counter on one pserver (its entry `p`)."""
    prog = p["main"].prog
    if not any(LR_DECAY_COUNTER in arg_names(b.ops, "inputs") for b in prog.blocks):
        return                          # (looked for in C: the usual case, nothing reads it)
    reads = [(bi, j) for bi, b in enumerate(prog.blocks) for j, op in enumerate(b.ops)
             if LR_DECAY_COUNTER in input_names(op)]
    writes = any(LR_DECAY_COUNTER in output_names(op) for b in prog.blocks[1:]
                 for op in b.ops)
    if reads and not writes:
        _warn(ctx, FLEET_SYNC_STEP_COUNTER, p["main"], reads[0][0], reads[0][1],
              "the LR decay reads %s, which no pserver op increments and no trainer "
              "sends: the learning rate stays at its first value" % LR_DECAY_COUNTER)


def _orphan_sum(ctx) -> None:
    """A trainer `sum` of `<table>@GRAD@RENAME@...` vars that no op writes (the lookup grads
    that made them became a distributed_push_sparse)."""
    for tid in sorted(ctx.split.trainers):
        main = ctx.split.trainers[tid]["main"]
        ops = main.prog.global_block.ops
        if not any(op.type == "distributed_push_sparse" for op in ops):
            continue
        written = {n for op in ops for n in output_names(op)}
        for j, op in enumerate(ops):
            unwritten = [n for n in op.input("X") if "@GRAD@RENAME@" in n and n not in written]
            if op.type == "sum" and unwritten:
                _warn(ctx, FLEET_ORPHAN_SPARSE_GRAD_SUM, main, 0, j,
                      "trainer %d sums %s, which no op writes (the lookup grads that made "
                      "them became a distributed_push_sparse): empty gradients, which "
                      "Paddle's sum skips; harmless unless an op reads its rows"
                      % (tid, ", ".join(unwritten)))


def _large_scale_adam(ctx) -> None:
    for ep in ctx.config.pservers:
        p = ctx.split.pservers.get(ep)
        if p and not ctx.replay("large_scale_adam", ep):
            large_scale_adam_of(ctx, p)


def large_scale_adam_of(ctx, p: dict) -> None:
    """_large_scale_adam on one pserver (its entry `p`)."""
    for bi, block in enumerate(p["main"].prog.blocks):
        for j, op in enumerate(block.ops):
            if op.type == "lookup_sparse_table_fuse_adam":
                _warn(ctx, FLEET_LARGE_SCALE_ADAM, p["main"], bi, j,
                      "the large-scale table %s is trained by the fused adam, which moves "
                      "only each gradient's rows%s" % (
                          op.attr("tablename"),
                          " and, updating Beta1Pow / Beta2Pow in place first, corrects "
                          "the bias with the next step's powers"
                          if op.input("Beta1Pow") == op.output("Beta1PowOut") else ""))


# How each fault a split can reproduce is told from the split, in the order they are looked for.
FINDERS = ((CLASSIC_LOCAL_TABLE_FAKE_INIT, _local_table),
           (CLASSIC_DIST_TABLE_OPTIMIZER, _dist_table),
           (CLASSIC_CLIP_ON_PSERVER, _classic_clip_residual),
           (FLEET_ORPHAN_SPARSE_GRAD_SUM, _orphan_sum),
           (FLEET_LARGE_SCALE_ADAM, _large_scale_adam),
           (FLEET_CLIP_BEFORE_MERGE, _clip_before_merge),
           (FLEET_SYNC_STEP_COUNTER, _sync_step_counter),
           (FLEET_SPARSE_CLIP_DROPPED, _sparse_clip_residual),
           (PS_CLIP_BEFORE_MERGE, _ps_clip_before_merge),
           (PS_GEO_NO_SPARSE_TABLE, _geo_no_sparse_table))
# fleet- / ps-sparse-clip-dropped make the trainer fail: reads.py names them in its findings
