"""The trainer checks of a ps-style split: its ops against the descriptors and the mode.

  send     sync / async: the dense grads of the original go out exactly once, by sends to the
           merged dense table (send_varnames Dense@GRAD_<id>, its table_id, as many elements
           as the table's fea_dim); sync: each send yields a control var and one send_barrier
           after the sends waits for all of them with this trainer's id; async: no barrier.
           geo: one send per sparse table (its grad, its table id, is_sparse 1, 2 when
           distributed), nothing dense, no barrier;
  tables   every distributed_lookup_table and distributed_push_sparse names a sparse table of
           the worker desc holding its W, with the embedding's dim; every remote lookup of the
           original is pulled and its grad pushed (sync / async);
  trainer  no optimizer op and no remote lookup left (sync / async; geo keeps its optimizer);
           the sparse tables are fake_init'ed with their shape in the startup (sync / async).
"""
from __future__ import annotations

from collections import Counter

from ..format.psdesc import TABLE_TYPES
from ..ir.optimizers import is_optimizer_update
from ..ir.roles import OPTIMIZE, role
from ..ir.tables import LOOKUP_GRAD_TYPES, is_remote_prefetch
from ..plan.faults import PS_PUSH_IDS_LOD2
from .context import CheckContext
from .ps import (PsExpect, check_ps_coverage, check_ps_inits, check_ps_listen,
                 check_ps_tables, descriptors)


def check_ps_trainers(ctx: CheckContext, expect: PsExpect, descs: dict) -> None:
    for tid in sorted(ctx.split.trainers):
        t = ctx.split.trainers[tid]
        d = descs.get(("trainer", tid))
        tables = d[2] if d else None
        main = t["main"]
        if expect.geo:
            _check_geo_sends(ctx, expect, main)
        else:
            _check_dense_sends(ctx, expect, main, tid, tables)
            _check_sparse_ops(ctx, expect, main, tables)
            _check_leftovers(ctx, expect, main)
            if t.get("startup") is not None:
                _check_fake_inits(ctx, expect, t["startup"])


def _sends(main):
    return [(j, op) for j, op in enumerate(main.prog.global_block.ops) if op.type == "send"]


def _check_dense_sends(ctx, expect: PsExpect, main, tid, tables) -> None:
    ops = main.prog.global_block.ops
    sent = Counter()
    dense = [c for c in expect.ctxs if not c.is_sparse]
    controls = []
    last_send = -1
    for j, op in _sends(main):
        last_send = j
        c = next((c for c in dense if c.table_id == op.attr("table_id")), None)
        if c is None or op.attr("send_varnames") != [c.name] or op.attr("is_sparse") != 0:
            ctx.add("send", main, 0, j, "send of %s to table %s as %s" % (
                op.input("X"), op.attr("table_id"), op.attr("send_varnames")),
                "a send to a dense table: %s" % ", ".join(
                    "table %d as %s" % (c.table_id, c.name) for c in dense) or "none")
            continue
        sent.update(op.input("X"))
        if tables is not None and c.table_id < len(tables):
            declared = main.prog.global_block.vars
            numel = sum(declared[x].numel() if x in declared else 0 for x in op.input("X"))
            if numel != tables[c.table_id].accessor.fea_dim:
                ctx.add("send", main, 0, j, "sends %d elements to table %d" % (numel,
                                                                               c.table_id),
                        "%d (its fea_dim)" % tables[c.table_id].accessor.fea_dim)
        out = op.output("Out")
        if ctx.config.mode == "sync":
            if len(out) != 1:
                ctx.add("send", main, 0, j, "sync send with outputs %s" % out,
                        "one control var for the send_barrier")
            controls += out
    for g in expect.dense_grads:
        if sent[g] != 1:
            ctx.add("send", main, 0, None, "dense grad %s is sent %d times" % (g, sent[g]),
                    "once, to the merged dense table")
    extra = sorted(set(sent) - set(expect.dense_grads))
    if extra:
        ctx.add("send", main, 0, None, "sends %s, not dense grads of the original"
                % ", ".join(extra), "only %s" % ", ".join(expect.dense_grads))
    barriers = [(j, op) for j, op in enumerate(ops) if op.type == "send_barrier"]
    if ctx.config.mode != "sync":
        for j, _ in barriers:
            ctx.add("send", main, 0, j, "send_barrier in async mode", "none")
        return
    if len(barriers) != 1:
        ctx.add("send", main, 0, None, "%d send_barrier ops" % len(barriers), "one")
        return
    j, op = barriers[0]
    if j < last_send:
        ctx.add("send", main, 0, j, "send_barrier before the send at op %d" % last_send,
                "after every send")
    if sorted(op.input("X")) != sorted(controls):
        ctx.add("send", main, 0, j, "send_barrier waits for %s" % op.input("X"),
                "the sends' control vars %s" % controls)
    if op.attr("trainer_id") != tid:
        ctx.add("send", main, 0, j, "send_barrier trainer_id %r" % op.attr("trainer_id"),
                str(tid))


def _check_geo_sends(ctx, expect: PsExpect, main) -> None:
    by_table: dict = {}
    for j, op in _sends(main):
        by_table.setdefault(op.attr("table_id"), []).append((j, op))
    for c in expect.ctxs:
        found = by_table.get(c.table_id, [])
        if not c.is_sparse:
            for j, _ in found:
                ctx.add("send", main, 0, j, "geo send to the dense table %d" % c.table_id,
                        "none: geo trainers send only sparse deltas")
            continue
        want = (list(c.grads), [c.name], 2 if c.distributed else 1)
        # (or its table's raw gradient: ps-geo-dense-table-grad's fix, passes/common.py)
        raw = ([c.params[0] + "@GRAD"], want[1], want[2])
        ok = [j for j, op in found
              if (op.input("X"), op.attr("send_varnames"), op.attr("is_sparse")) in (want, raw)]
        if len(ok) != 1:
            ctx.add("send", main, 0, found[0][0] if found else None,
                    "%d sends of sparse table %d (%s)" % (len(ok), c.table_id, c.params[0]),
                    "one send of %s, send_varnames %s, is_sparse %d" % want)
    for j, op in enumerate(main.prog.global_block.ops):
        if op.type == "send_barrier":
            ctx.add("send", main, 0, j, "send_barrier in geo mode", "none")


def _sparse_table(tables, table_id):
    if tables is None or not isinstance(table_id, int) or not 0 <= table_id < len(tables):
        return None
    t = tables[table_id]
    return t if t.type == TABLE_TYPES["PS_SPARSE_TABLE"] else None


def ids_aliases(ops) -> dict:
    """{2-D ids var `<ids>@2D`: the ids it reshapes} of the unsqueeze2 / reshape2 ops that make
    a lookup's ids 2-D (the *-lookup-ids-not-2d fix): a lookup by those is the original's by
    its ids (a reshape of the program's own is no alias)."""
    fed = {n for op in ops if op.type in ("distributed_lookup_table", "distributed_push_sparse")
           for n in op.input("Ids")}
    pulled = {n for op in ops if op.type == "distributed_lookup_table"
              for n in op.output("Outputs")}
    out = {op.output("Out")[0]: op.input("X")[0] for op in ops
           if op.type in ("unsqueeze2", "squeeze2", "reshape2") and op.output("Out")[:1]
           and op.output("Out")[0] in fed and op.input("X")[:1]
           and op.output("Out")[0] in (op.input("X")[0] + "@2D", op.input("X")[0] + "@ROWS")}
    # and {the fix's rows var `<out>@2D`: the original's rows var `<out>` made of it}
    out.update({op.input("X")[0]: op.output("Out")[0] for op in ops
                if op.type in ("squeeze2", "reshape2") and op.input("X")[:1]
                and op.input("X")[0] in pulled and op.output("Out")[:1]
                and op.input("X")[0] == op.output("Out")[0] + "@2D"})
    # and {a clipped grad `<grad>@CLIPPED` a push sends: the lookup's grad it clips}
    # (ps-sparse-clip-dropped's fix, passes/sparseclip.py)
    out.update({op.output("Out")[0]: op.input("X")[0] for op in ops
                if op.type in ("elementwise_mul", "elementwise_add") and op.input("X")[:1]
                and op.output("Out")[:1] and op.output("Out")[0] == op.input("X")[0] + "@CLIPPED"})
    return out


def _check_sparse_ops(ctx, expect: PsExpect, main, tables) -> None:
    gvars = main.prog.global_block.vars
    pulled, pushed = {}, {}
    alias = ids_aliases(main.prog.global_block.ops)
    for j, op in enumerate(main.prog.global_block.ops):
        if op.type not in ("distributed_lookup_table", "distributed_push_sparse"):
            continue
        tid = op.attr("table_id")
        t = _sparse_table(tables, tid)
        if op.type == "distributed_lookup_table":
            w = (op.input("W") or [None])[0]
            if tables is not None and (t is None or t.common.table_name != w):
                ctx.add("tables", main, 0, j, "lookup of %s reads table %r" % (w, tid),
                        "the sparse table of %s in worker_desc.txt" % w)
                continue
            v = gvars.get(w)
            dim = int(v.shape[1]) if v is not None and v.shape and len(v.shape) > 1 else None
            if t is not None and dim != t.common.table_dim:
                ctx.add("tables", main, 0, j, "%s is [.., %s], table %d has dim %d"
                        % (w, dim, tid, t.common.table_dim), "the same dim")
            for ids, out in zip(op.input("Ids"), op.output("Outputs")):
                pulled.setdefault(w, set()).add((alias.get(ids, ids), alias.get(out, out)))
        else:
            if tables is not None and t is None:
                ctx.add("tables", main, 0, j, "push to table %r" % tid,
                        "a sparse table of worker_desc.txt")
                continue
            if t is not None and op.attr("size") != t.common.table_dim:
                ctx.add("tables", main, 0, j, "push size %r to table %d of dim %d"
                        % (op.attr("size"), tid, t.common.table_dim), "the table's dim")
            name = t.common.table_name if t is not None else tid
            for ids, g in zip(op.input("Ids"), op.output("Outputs")):
                pushed.setdefault(name, set()).add((alias.get(ids, ids), alias.get(g, g)))
                if (getattr(gvars.get(ids), "lod_level", 0) or 0) >= 2:
                    ctx.add("tables", main, 0, j, "Paddle fault %s: push of %s by %s, ids of "
                            "lod_level %d: Paddle's client walks their first LoD level as "
                            "their rows, so the trainer fails at its first push" % (
                                PS_PUSH_IDS_LOD2, name, ids, gvars[ids].lod_level),
                            "ids of lod_level 0 or 1", PS_PUSH_IDS_LOD2)
    sparse = {p.param for p in expect.sparse}
    for op in expect.main.global_block.ops:
        if is_remote_prefetch(op) and op.input("W"):
            w, key = op.input("W")[0], (op.input("Ids")[0], op.output("Out")[0])
            if key not in pulled.get(w, ()):
                ctx.add("tables", main, 0, None, "the lookup of %s by %s is not pulled"
                        % (w, key[0]), "a distributed_lookup_table of %s" % w)
        if op.type in LOOKUP_GRAD_TYPES and op.input("W") and op.input("W")[0] in sparse:
            w, key = op.input("W")[0], (op.input("Ids")[0], op.input("Out@GRAD")[0])
            if key not in pushed.get(w, ()):
                ctx.add("tables", main, 0, None, "the grad of %s by %s is not pushed"
                        % (w, key[0]), "a distributed_push_sparse of %s" % w)


def _check_leftovers(ctx, expect: PsExpect, main) -> None:
    for j, op in enumerate(main.prog.global_block.ops):
        if role(op) == OPTIMIZE and is_optimizer_update(op):
            ctx.add("trainer", main, 0, j, "optimizer op %s left on the trainer" % op.type,
                    "none: the servers optimize (%s mode)" % ctx.config.mode)
        elif is_remote_prefetch(op):
            ctx.add("trainer", main, 0, j, "%s of %s left on the trainer"
                    % (op.type, op.input("W")), "a distributed_lookup_table")


def _check_fake_inits(ctx, expect: PsExpect, startup) -> None:
    block = startup.prog.global_block
    tables = {p.param for p in expect.sparse}
    by_table: dict = {}
    for j, op in enumerate(block.ops):
        for name in set(op.output_names()) & tables:
            by_table.setdefault(name, []).append((j, op))
    for p in expect.sparse:
        writers = by_table.get(p.param, [])
        v = expect.main.global_block.vars.get(p.param)
        shape = list(v.shape) if v is not None and v.shape else None
        fakes = [(j, op) for j, op in writers if op.type == "fake_init"]
        if len(writers) != 1 or len(fakes) != 1:
            ctx.add("trainer", startup, 0, writers[0][0] if writers else None,
                    "table %s is written by %s" % (p.param, [op.type for _, op in writers]
                                                   or "nothing"), "one fake_init")
        elif list(fakes[0][1].attr("shape") or []) != shape:
            ctx.add("trainer", startup, 0, fakes[0][0], "fake_init of %s has shape %s"
                    % (p.param, fakes[0][1].attr("shape")), str(shape))


def ps_checks() -> tuple:
    """The ps checks, as steps run one after the other on one CheckContext (they share what the
    original says of the tables and the descriptors read once)."""
    state: dict = {}

    def tables(ctx: CheckContext) -> None:
        state["expect"] = PsExpect(ctx.main, ctx.config, ctx.startup)
        state["descs"] = descriptors(ctx)
        check_ps_tables(ctx, state["expect"], state["descs"])
        check_ps_inits(ctx, state["descs"])

    def coverage(ctx: CheckContext) -> None:
        check_ps_coverage(ctx, state["expect"], state["descs"])

    def trainers(ctx: CheckContext) -> None:
        check_ps_trainers(ctx, state["expect"], state["descs"])

    return (check_ps_listen, tables, coverage, trainers)
