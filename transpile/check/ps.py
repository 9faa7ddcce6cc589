"""The checks of a ps-style split (ours or Paddle's): the descriptors against the original
program and against each other, the pserver programs; the trainer programs in ps_trainer.py.

  listen    every endpoint has its folder; sync / async pserver programs are empty, geo's hold
            one listen_and_serv for their own endpoint and index, Fanin = trainers, mode 3;
  tables    each trainer has worker_desc.txt, each pserver server_desc.txt, and they parse;
            the tables are the original's send contexts in order (sparse tables by param,
            then the merged dense table, then the barrier), ids 0, 1, ...; each sparse table
            has the dims of its embedding, the accessor of the mode and the config, the rule
            of its optimizer (sum in geo, adam_d2sum where the config asks); trainer_num and
            sync flags as the config says; a worker desc's worker half equals its server
            half; then every other field of every table, the service and the fs client
            (ps_fields.py);
  coverage  the dense table's shards (common.dims of Param) are Paddle's get_shard of the
            merged dense size, and over all servers cover it exactly once.
What the tables are supposed to be is read off the original main program (plan/ps.py's send
contexts); nothing of our own split is used.
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Optional

from ..core.errors import UserError
from ..format.psdesc import TABLE_TYPES, parse_text
from ..ir import roles
from ..ir.program import Program
from ..output.result import endpoint_dir
from ..plan.faults import KIND, PS_DENSE_EMPTY_INIT
from ..plan.pairs import Pair
from ..plan.ps import MODES, optimize_ops, remote_tables, send_contexts
from ..plan.ps_tables import TableSources, get_shard
from ..ir.tables import is_distributed_lookup, table_of
from .context import CheckContext
from .ps_fields import DENSE_SHARDED, FieldChecker, check_top, expected_tables
from .pserver import check_stray_folders

WORKER_DESC = "worker_desc.txt"
SERVER_DESC = "server_desc.txt"
TYPE_NAMES = {n: name for name, n in TABLE_TYPES.items()}


class PsExpect:
    """What the original main program says the tables are."""

    def __init__(self, main: Program, config, startup: Optional[Program] = None):
        opt = optimize_ops(main)
        remote = set(remote_tables(main))
        dist = {table_of(op) for op in main.global_block.ops if is_distributed_lookup(op)}
        sparse, dense = [], []
        for param, grad in roles.params_grads(opt):
            (sparse if param in remote else dense).append(
                Pair(param, grad, param in remote, param in dist))
        self.ctxs = send_contexts(main, sparse, dense)
        self.dense_grads = [p.grad for p in dense]
        self.sparse = sparse
        self.opt = opt
        self.main = main
        self.config = config
        self.n_ps = len(config.pservers)
        self.geo = config.mode == "geo"
        self.startup = startup
        self.tables: Optional[list] = None      # the PsTables Paddle would describe
        self._optimizer = None

    def optimizer_type(self, param: str) -> Optional[str]:
        if self._optimizer is None:
            self._optimizer = TableSources(self.main, Program.empty(), self.opt).optimizer
        found = self._optimizer.get(param)
        return None if found is None else found[1].type

    def emb_dim(self, table: str) -> Optional[int]:
        v = self.main.global_block.vars.get(table)
        return int(v.shape[1]) if v is not None and v.shape and len(v.shape) > 1 else None


def read_desc(ctx: CheckContext, folder: str, name: str, part: str):
    """The parsed descriptor of a split folder, its server tables and their bytes, or None
    (and a finding). Each distinct text is parsed once per check run (a split's server descs
    are mostly byte-identical: one message, shared, that the checks only read; the bytes key
    the checks of its tables); a text that does not parse is parsed again wherever it is,
    its error naming its own path."""
    path = os.path.join(ctx.split.root, folder, name)
    if not os.path.isfile(path):
        ctx.add("tables", part, None, None, "no %s" % name, "%s/%s" % (folder, name))
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return ctx.memo(("desc", text), lambda: _parsed(text, path))
    except (UserError, OSError, UnicodeDecodeError) as e:
        ctx.add("tables", part, None, None, "cannot read %s: %s" % (name, e))
        return None


def _parsed(text: str, path: str) -> tuple:
    d = parse_text(text, path)
    tables = list(d.server_param.downpour_server_param.downpour_table_param)
    return d, tables, [t.SerializeToString(deterministic=True) for t in tables]


def descriptors(ctx: CheckContext) -> dict:
    """{(kind, id): (part name, role id, [tables], [their bytes])} of every descriptor of the
    split: the worker descs by trainer id (their server half), the server descs by
    endpoint."""
    out = {}
    for tid in sorted(ctx.split.trainers):
        folder = "trainer_%d" % tid
        part = folder + "/" + WORKER_DESC
        got = read_desc(ctx, folder, WORKER_DESC, part)
        if got is None:
            continue
        d, server, raw = got
        worker = list(d.worker_param.downpour_worker_param.downpour_table_param)
        if [t.SerializeToString(deterministic=True) for t in worker] != raw:
            ctx.add("tables", part, None, None,
                    "worker_param's tables differ from server_param's",
                    "the same tables twice (build_worker_desc)")
        _check_service(ctx, part, d)
        out[("trainer", tid)] = (part, tid, server, raw)
    for i, ep in enumerate(ctx.config.pservers):
        if ep not in ctx.split.pservers:
            continue
        folder = endpoint_dir(ep)
        part = folder + "/" + SERVER_DESC
        got = read_desc(ctx, folder, SERVER_DESC, part)
        if got is None:
            continue
        d, server, raw = got
        if d.HasField("worker_param"):
            ctx.add("tables", part, None, None, "a server desc with worker_param",
                    "server_param only (build_server_desc)")
        _check_service(ctx, part, d)
        out[("pserver", ep)] = (part, i, server, raw)
    return out


def _check_service(ctx, part, d) -> None:
    if not d.server_param.downpour_server_param.HasField("service_param"):
        ctx.add("tables", part, None, None, "no service_param", "BrpcPsServer's settings")
    else:
        check_top(ctx, part, d)


def check_ps_listen(ctx: CheckContext) -> None:
    """Pserver folders and programs (see the module doc)."""
    cfg = ctx.config
    check_stray_folders(ctx)
    for i, ep in enumerate(cfg.pservers):
        p = ctx.split.pservers.get(ep)
        if p is None:
            ctx.add("listen", endpoint_dir(ep), None, None, "no program for pserver %s" % ep,
                    "%s/main.pb" % endpoint_dir(ep))
            continue
        main = p["main"]
        ops = main.prog.global_block.ops
        if cfg.mode != "geo":
            for part in (main, p["startup"]):
                n = sum(len(b.ops) for b in part.prog.blocks) if part else 0
                if n:
                    ctx.add("listen", part, 0, None, "%d ops in a %s-mode pserver program"
                            % (n, cfg.mode), "none: the server runs from server_desc.txt")
            continue
        las = [(j, op) for j, op in enumerate(ops) if op.type == "listen_and_serv"]
        if len(las) != 1 or len(ops) != 1:
            ctx.add("listen", main, 0, None, "%d ops, %d of them listen_and_serv"
                    % (len(ops), len(las)), "exactly one listen_and_serv")
        for j, op in las[:1]:
            for attr, want in (("endpoint", ep), ("Fanin", cfg.trainers),
                               ("pserver_id", i), ("distributed_mode", MODES["geo"][1])):
                got = op.attr(attr)
                if got != want:
                    ctx.add("listen", main, 0, j, "listen_and_serv %s is %r" % (attr, got),
                            repr(want))


def check_ps_tables(ctx: CheckContext, expect: PsExpect, descs: dict) -> None:
    """Every descriptor's tables against the original (see the module doc)."""
    cfg = ctx.config
    sync = cfg.mode == "sync"
    expect.tables = expected_tables(ctx, expect)
    fields = FieldChecker(ctx, expect.tables, expect.n_ps) if expect.tables else None
    for part, role, tables, raw in descs.values():
        want = len(expect.ctxs) + 1
        if len(tables) != want:
            ctx.add("tables", part, None, None, "%d tables" % len(tables),
                    "%d: %s, then the barrier table" % (want, ", ".join(
                        c.params[0] if c.is_sparse else c.name for c in expect.ctxs)))
        for k, t in enumerate(tables):
            if t.table_id != k:
                ctx.add("tables", part, None, None, "table %d has table_id %d" % (k, t.table_id),
                        "ids 0, 1, ... in order")
        for c in expect.ctxs:
            if c.table_id < len(tables):
                _check_table_fields(ctx, expect, fields, part, role, c, tables[c.table_id],
                                    raw[c.table_id])
        if len(tables) == want:
            b = tables[-1]
            if (b.table_class, b.common.table_name) != ("BarrierTable", "barrier_table"):
                ctx.add("tables", part, None, None, "the last table is %s %s"
                        % (b.table_class, b.common.table_name), "the BarrierTable")
            elif (b.common.trainer_num, b.common.sync) != (cfg.trainers, sync):
                ctx.add("tables", part, None, None, "barrier table: trainer_num %d, sync %s"
                        % (b.common.trainer_num, b.common.sync),
                        "trainer_num %d, sync %s" % (cfg.trainers, sync))
            if fields is not None and b.table_class == "BarrierTable":
                fields.check(part, role, want - 1, b, "the barrier table %d" % (want - 1))


def check_ps_inits(ctx: CheckContext, descs: dict) -> None:
    """ps-dense-empty-initializer: a server desc's dense table with an input whose initializer
    is empty, which Paddle's MemoryDenseTable::CreateInitializer cannot read (the pserver fails
    at its start). A Param's `paddle_faults: fix` can write (trainer 0 pushes over it)."""
    for (kind, _), (part, _, tables, _) in descs.items():
        if kind != "pserver":
            continue
        for t in tables:
            cm = t.common
            if t.table_class != "MemoryDenseTable":
                continue
            empty = [p for p, init in zip(cm.params, cm.initializers) if not init]
            if not empty:
                continue
            fixable = empty == ["Param"]
            ctx.add("tables", part, None, None,
                    "Paddle fault %s: table %d (%s): %s %s an empty initializer, which "
                    "Paddle's MemoryDenseTable::CreateInitializer cannot read: the pserver "
                    "fails at its start" % (PS_DENSE_EMPTY_INIT, t.table_id, cm.table_name,
                                            ", ".join(empty), "has" if len(empty) == 1
                                            else "have"),
                    ("an initializer the server reads; what `paddle_faults: fix` writes: %s"
                     % KIND[PS_DENSE_EMPTY_INIT].brief) if fixable else
                    "an initializer the server reads; no split can give %s one: the split "
                    "must not be used" % ", ".join(p for p in empty if p != "Param"),
                    PS_DENSE_EMPTY_INIT)


def _check_table_fields(ctx, expect: PsExpect, fields, part, role, c, t, raw) -> None:
    """_check_table, then, when `t` is the table of `c`, every field of it and (sparse) its
    settings. What they find depends on the table's bytes `raw` and, for a dense table only,
    the role (its shard), never on which descriptor holds it (but for the part they name):
    so it is found once per distinct table and replayed, as a split's descriptors repeat
    their tables (every server desc lists every sparse table)."""
    sync = ctx.config.mode == "sync"

    def make():
        with ctx.collecting() as got:
            ok = _check_table(ctx, expect, part, role, c, t, sync)
            if ok and fields is not None:
                fields.check(part, role, c.table_id, t, _table_name(c))
        return got, fields.problems(t) if ok and fields is not None and c.is_sparse else []

    (found, warned), problems = ctx.memo(("ps table", c.table_id, None if c.is_sparse
                                          else role, raw), make)
    for kept, got in ((ctx.findings, found), (ctx.warnings, warned)):
        kept.extend(f if f.program == part else replace(f, program=part) for f in got)
    if problems:
        fields.settings(part, c.table_id, problems, _table_name(c))


def _table_name(c) -> str:
    return "table %d (%s)" % (c.table_id, c.params[0] if c.is_sparse else c.name)


def _check_table(ctx, expect: PsExpect, part, role, c, t, sync) -> bool:
    """The table's kind, dims, rule, shards and flags; False when it is not the table of `c`
    at all (then its fields are not compared)."""
    name = _table_name(c)
    cm = t.common
    want_t = expect.tables[c.table_id] if expect.tables else None

    def bad(what, want):
        ctx.add("tables", part, None, None, "%s: %s" % (name, what), want)

    if c.is_sparse:
        if t.type != TABLE_TYPES["PS_SPARSE_TABLE"] or cm.table_name != c.params[0]:
            bad("a %s of %r" % (TYPE_NAMES.get(t.type, t.type), cm.table_name),
                "the sparse table of %s" % c.params[0])
            return False
        rows, dim = c.sections
        emb = expect.emb_dim(c.params[0])
        if expect.geo:
            acc = ("CommMergeAccessor", rows, dim)
        elif want_t is not None:
            acc = (want_t.accessor_class, want_t.fea_dim, want_t.embedx_dim)
        else:
            acc = ("SparseAccessor", (emb or 0) + 2, (emb or 0) - 1)
        got = (t.accessor.accessor_class, t.accessor.fea_dim, t.accessor.embedx_dim)
        if got != acc:
            bad("accessor %s fea_dim %d embedx_dim %d" % got,
                "%s fea_dim %d embedx_dim %d (embedding %s is [%d, %d])"
                % (acc + (c.params[0], rows, dim)))
        if (cm.table_num, cm.table_dim) != (rows, dim):
            bad("table_num %d table_dim %d" % (cm.table_num, cm.table_dim),
                "%d %d" % (rows, dim))
        want_sync = sync and not expect.geo
        shard = dim
    else:
        if t.type != TABLE_TYPES["PS_DENSE_TABLE"] or cm.table_name != "MergedDense":
            bad("a %s of %r" % (TYPE_NAMES.get(t.type, t.type), cm.table_name),
                "the MergedDense table")
            return False
        total = c.sections[0]
        if (t.accessor.fea_dim, cm.table_num) != (total, total):
            bad("fea_dim %d, table_num %d" % (t.accessor.fea_dim, cm.table_num),
                "%d: the elements of %s" % (total, ", ".join(c.params)))
        want_sync = sync
        shard = get_shard(total, expect.n_ps, role)
    opt = expect.optimizer_type(c.params[0])
    rule = "sum" if expect.geo else "summary" if c.kind == "datanorm" else opt
    if want_t is not None and not want_t.empty:
        rule = want_t.rule
    if cm.name != rule:
        bad("rule %r" % cm.name, "%r (%s of %s)" % (rule, "geo" if expect.geo else
                                                     "the optimizer", c.params[0]))
    for formal, d in zip(cm.params, cm.dims):
        if formal in DENSE_SHARDED and d != shard:
            bad("%s dims %d" % (formal, d), "%d (%s)" % (
                shard, "the embedding dim" if c.is_sparse else
                "get_shard(%d, %d, %d)" % (c.sections[0], expect.n_ps, role)))
    if (cm.trainer_num, cm.sync) != (ctx.config.trainers, want_sync):
        bad("trainer_num %d, sync %s" % (cm.trainer_num, cm.sync),
            "trainer_num %d, sync %s" % (ctx.config.trainers, want_sync))
    return True


def check_ps_coverage(ctx: CheckContext, expect: PsExpect, descs: dict) -> None:
    """The dense shards of the servers cover the merged dense table exactly once."""
    servers = [(ep, descs.get(("pserver", ep))) for ep in ctx.config.pservers]
    for c in expect.ctxs:
        if c.is_sparse:
            continue
        total = c.sections[0]
        shards = []
        for ep, d in servers:
            tables = d[2] if d else []
            t = tables[c.table_id] if c.table_id < len(tables) else None
            if t is None or "Param" not in t.common.params:
                ctx.add("coverage", endpoint_dir(ep) + "/" + SERVER_DESC, None, None,
                        "no shard of the dense table %d (%d elements)" % (c.table_id, total))
                return
            shards.append(t.common.dims[list(t.common.params).index("Param")])
        if sum(shards) != total:
            ctx.add("coverage", "split", None, None,
                    "the dense shards %s add up to %d" % (shards, sum(shards)),
                    "%d: the merged dense parameters %s, each element once"
                    % (total, ", ".join(c.params)))
