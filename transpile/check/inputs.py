"""What a Paddle process of the split would reject at its first step, told from the split:

  ids         a `distributed_lookup_table` / `distributed_push_sparse` fed ids that are not
              2-D (Paddle's InferShape refuses them: *-lookup-ids-not-2d);
  table ids   (fleet) the sparse entries of runtime.json's send_ctx number the sparse tables in
              their order (after table 0, the dense one, when there is one; every context's
              own table_id is -1): a trainer's lookup or push whose table_id names the entry of
              another table sends rows to that table;
  reads       (classic, fleet) a pserver's clip, regularization or update reading a var that
              pserver neither receives, nor initializes in its startup, nor computes before in
              the block (or in its LR-decay block); (classic) a trainer sending a var none of
              its ops writes. Where a known Paddle fault makes the split so, the finding names it
              (classic-clip-on-pserver, fleet-sparse-decay-whole-table, fleet-decay-whole-param).
"""
from __future__ import annotations

from ..ir import roles
from ..ir.tables import IDS_NOT_2D, is_remote_prefetch
from ..plan.clip_faults import GLOBAL_NORM_OPS, new_var_clips
from ..plan.faults import (CLASSIC_CLIP_ON_PSERVER, CLASSIC_DIST_TABLE_IDS_NOT_2D,
                           CLASSIC_LOOKUP_IDS_NOT_2D,
                           FLEET_DECAY_WHOLE_PARAM, FLEET_LOOKUP_IDS_NOT_2D,
                           FLEET_SPARSE_DECAY_WHOLE_TABLE, KIND,
                           PS_LOOKUP_IDS_NOT_2D)
from .ops import all_names, input_names, is_update_op, output_names

_IDS_FAULT = {KIND[f].style: f for f in (CLASSIC_LOOKUP_IDS_NOT_2D, FLEET_LOOKUP_IDS_NOT_2D,
                                         PS_LOOKUP_IDS_NOT_2D)}


def sparse_numbers(send_ctx: dict) -> dict:
    """{table number: context name} of runtime.json's sparse send contexts, as Paddle's
    distributed_ops_pass numbers them (get_the_one_send_context): in their order, counted from
    1 when there are dense contexts (table 0 is the dense one), a context's own table_id when
    it has one (>= 0)."""
    ctxs = [(n, c) for n, c in send_ctx.items() if isinstance(c, dict)]
    dense = any(not c.get("is_sparse") and not c.get("is_tensor_table") for _, c in ctxs)
    out = {}
    sparse = [(n, c) for n, c in ctxs if c.get("is_sparse") and not c.get("is_tensor_table")]
    for i, (n, c) in enumerate(sparse):
        tid = c.get("table_id", -1)
        out[int(tid) if tid is not None and int(tid) >= 0 else i + (1 if dense else 0)] = n
    return out


def table_grads(main) -> dict:
    """{table: the grads its sparse context may carry}: `<table>@GRAD` and the grad its update
    reads (a clip's output), from the original program's op_role_var."""
    out: dict = {}
    for op in main.global_block.ops:
        rv = op.attr(roles.ROLE_VAR_ATTR) or []
        if is_update_op(op) and len(rv) >= 2:
            out.setdefault(rv[0], {rv[0] + "@GRAD"}).add(rv[1])
    return out


def _table(op) -> str:
    w = (op.input("W") or [""])[0]
    return w.split("@GRAD")[0]


def check_inputs(ctx) -> None:
    """Run the checks above: the trainers' (check_trainer_inputs), then what each pserver's
    programs read (a style whose pservers are listen_and_serv programs)."""
    check_trainer_inputs(ctx)
    for ep in ctx.config.pservers:
        p = ctx.split.pservers.get(ep)
        if p:
            misses = ctx.recorded.get(("reads", ep))
            if misses is None:
                misses = pserver_reads(ctx, p)
            _add_misses(ctx, misses)


def check_trainer_inputs(ctx) -> None:
    """The trainers' lookup ids and table numbers."""
    fault = _IDS_FAULT.get(ctx.config.style, "")
    for tid in sorted(ctx.split.trainers):
        t = ctx.split.trainers[tid]
        _ids(ctx, t["main"], fault)
        if t.get("runtime") is not None and not ctx.geo:
            _table_numbers(ctx, t["main"], t["runtime"], tid)


def _ids(ctx, part, fault: str) -> None:
    block = part.prog.global_block
    for j, op in enumerate(block.ops):
        if op.type == "merge_ids":
            _merge_ids(ctx, part, block, j, op)
            continue
        if op.type not in ("distributed_lookup_table", "distributed_push_sparse"):
            continue
        for name in op.input("Ids"):
            v = block.var(name)
            if v is not None and v.shape is not None and len(v.shape) != 2:
                ctx.add("trainer", part, 0, j, "Paddle fault %s: %s of %s reads ids %s of "
                        "shape %s: %s" % (fault, op.type, _table(op), name, list(v.shape),
                                          IDS_NOT_2D), "2-D ids", fault=fault)


def _merge_ids(ctx, part, block, j: int, op) -> None:
    """(classic) a merge_ids by ids that are not 2-D gives [N, W] (its kernel counts the ids'
    first dim) where the program reads [N, n, W]: classic-dist-table-ids-not-2d."""
    for ids, out in zip(op.input("Ids"), op.output("Out")):
        v, o = block.var(ids), block.var(out)
        if v is None or v.shape is None or len(v.shape) == 2:
            continue
        ctx.add("trainer", part, 0, j, "Paddle fault %s: merge_ids of %s by ids %s of shape %s "
                "gives one row per entry of their first dim ([N, width]), where the program "
                "reads %s %s" % (CLASSIC_DIST_TABLE_IDS_NOT_2D, out, ids, list(v.shape), out,
                                 list(o.shape) if o is not None and o.shape else "?"),
                "2-D ids", fault=CLASSIC_DIST_TABLE_IDS_NOT_2D)


def _table_numbers(ctx, part, rt: dict, tid: int) -> None:
    numbers = sparse_numbers(rt.get("send_ctx") or {})
    grads = table_grads(ctx.main)
    rt_name = "trainer_%d/runtime.json" % tid
    for j, op in enumerate(part.prog.global_block.ops):
        if op.type not in ("distributed_lookup_table", "distributed_push_sparse") or \
                op.attr("table_id") is None or op.attr("endpoints"):
            continue
        table, n = _table(op), int(op.attr("table_id"))
        name = numbers.get(n)
        c = (rt.get("send_ctx") or {}).get(name) or {}
        carried = set(c.get("origin_varnames") or [name])
        if name is None or not carried & grads.get(table, {table + "@GRAD"}):
            own = next((k for k, v in numbers.items() if set(
                ((rt["send_ctx"].get(v) or {}).get("origin_varnames") or [v]))
                & grads.get(table, {table + "@GRAD"})), None)
            ctx.add("send", part, 0, j, "%s of %s names table %d, which %s's sparse send_ctx "
                    "entries number %s" % (op.type, table, n, rt_name,
                                           "as %s (another table)" % name if name else
                                           "as no table"),
                    "table %s (%s's entry is number %s in runtime.json's order)"
                    % (own, table, own) if own is not None else "a sparse entry of %s" % table)


def has_clip(ctx) -> bool:
    """The original has a Paddle 2.x gradient clip (plan/clip_faults.py)."""
    return bool(new_var_clips(ctx.main)) or any(
        op.type in GLOBAL_NORM_OPS and roles.is_clip_op(op, "gradient_clip")
        for op in ctx.main.global_block.ops)


def _clip_outputs(ctx) -> set:
    """The vars the original's gradient-clip ops write."""
    return {n for op in ctx.main.global_block.ops if roles.is_clip_op(op, "gradient_clip")
            for n in op.output("Out")}


def pserver_reads(ctx, p) -> list:
    """What a pserver has before its optimize blocks run: what it receives, initializes in
    its startup, and computes in its LR-decay block; each block is read from there."""
    prog = p["main"].prog
    start = p.get("startup")
    inited = set()
    if start is not None:
        inited = all_names(start.prog.global_block.ops, "outputs")
    received, blocks, lr_block, misses = set(), [], -1, []
    for op in prog.global_block.ops:
        if op.type != "listen_and_serv":
            continue
        received |= set(input_names(op))
        for entry in list(op.attr("grad_to_block_id") or []) + \
                list(op.attr("sparse_grad_to_param") or []):
            received.add(entry.split(":")[0])
        blocks += list(op.attr("optimize_blocks") or [])
        lr_block = op.attr("lr_decay_block_id") if op.has_attr("lr_decay_block_id") else -1
    early = set(inited) | received
    if isinstance(lr_block, int) and 0 < lr_block < len(prog.blocks):
        early |= {n for op in prog.blocks[lr_block].ops for n in output_names(op)}
    for bi in blocks:
        if not isinstance(bi, int) or not 0 < bi < len(prog.blocks) or bi == lr_block:
            continue
        _block_reads(p["main"], prog, bi, early, misses)
    return misses


def _block_reads(part, prog, bi: int, early: set, misses: list) -> None:
    """The reads of block `bi` that neither `early` nor the block's earlier ops provide (what
    the block adds is kept apart: `early` is shared by every block, and large)."""
    have = set()
    for j, op in enumerate(prog.blocks[bi].ops):
        # the clip / regularization ops a pserver runs are its optimize-role ops that are no
        # update (their name scope is gone there)
        update = is_update_op(op)
        chain = not update and roles.role(op) == roles.OPTIMIZE
        reads = input_names(op) if chain else (op.input("Grad") if update else ())
        for name in reads:
            if name in early or name in have:
                continue
            base = name.split(".trainer_")[0]
            if base in early or base in have:
                continue
            misses.append((part, bi, j, op.type, name))
            have.add(name)
        have.update(output_names(op))


def _add_misses(ctx, misses: list) -> None:
    """The findings of pserver_reads: (part, block, op index, op type, name) of each read."""
    for part, bi, j, op_type, name in misses:
        fault = _read_fault(ctx, name)
        ctx.add("optimize", part, bi, j, "%s%s reads %s, which this pserver neither "
                "receives, nor initializes, nor computes before it" % (
                    "Paddle fault %s: " % fault if fault else "", op_type, name),
                "a var of this pserver's", fault=fault)


def _sliced_tables(ctx) -> set:
    """The params a pserver holds in blocks (its listen_and_serv names `<param>.block<i>`)."""
    return {pb.param.split(".block")[0] for pbs in ctx.param_blocks.values() for pb in pbs
            if pb.param and ".block" in pb.param}


def _remote_tables(ctx) -> set:
    """The tables the original's remote-prefetch lookups read."""
    return {op.input("W")[0] for op in ctx.main.global_block.ops
            if is_remote_prefetch(op) and op.input("W")}


def _read_fault(ctx, name: str) -> str:
    style = ctx.config.style
    if KIND[CLASSIC_CLIP_ON_PSERVER].style == style and ctx.memo("has_clip",
                                                                 lambda: has_clip(ctx)):
        return CLASSIC_CLIP_ON_PSERVER
    base = name.split("@GRAD")[0]
    if KIND[FLEET_SPARSE_DECAY_WHOLE_TABLE].style == style and \
            base in ctx.memo("sliced_tables", lambda: _sliced_tables(ctx)):
        remote = ctx.memo("remote_tables", lambda: _remote_tables(ctx))
        return FLEET_SPARSE_DECAY_WHOLE_TABLE if base in remote else FLEET_DECAY_WHOLE_PARAM
    return ""
