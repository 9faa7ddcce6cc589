"""`simulate` for style ps in geo mode: the split (PsGeoCluster: its trainer programs, its
descriptors) against the ps geo reference (PsGeoReference: the original program on every
trainer, the tables of the descriptors `split` writes for it), both under geo.py's
GeoCommunicator and the geo schedule; then the ps geo reference against the original trained
with classic geo-SGD (georef.py), each difference named.
"""
from __future__ import annotations

import numpy as np

from ...format import psdesc
from ..explain.compare import Judge, ParamDiff, movement, movement_chunked, noise
from ..model.executor import Executor, default_lazy_policy
from .cluster import PsCluster
from ..explain.pscompare import chunked, diff_chunked, diff_of, table_rows
from .geo import GeoClient, dense_groups, geo_dense_params, updated_params
from .ref import RefRun, RefTrainer
from ..runs.runner import train_steps
from .tables.server import PsServer
from ..refs.reference import snapshot
from ..model.values import LazyTable, SelectedRows, SimError, Unallocated, dense

GEO_TABLE = "MemorySparseGeoTable"


class PsGeoReference:
    """The original of `r` (ref.RefRun) on every trainer, its geo tables and dense tables from
    `server_texts` (our descriptors of the original), the plan's table ids and dense
    contexts, under the geo `schedule`."""

    def __init__(self, r: RefRun, server_texts, schedule, options):
        main, init, plan, config, fdt, seed = r.main, r.init, r.plan, r.config, r.fdt, r.seed
        self.main, self.plan, self.schedule = main, plan, schedule
        n = len(config.pservers)
        self.servers = [PsServer(psdesc.parse_text(server_texts[ep], "server_desc.txt"), i, n,
                                 options) for i, ep in enumerate(config.pservers)]
        self.grads = updated_params(main)
        sparse = {w: tid for w, tid in plan.table_ids.items()
                  if self.servers[0].tables.get(tid) is not None
                  and self.servers[0].tables[tid].table_class == GEO_TABLE}
        # a step's temporaries go after their last use but the sparse grads step() records
        # (match_pyramid's activations of a 500-word sentence held 1.4 GB to the step's end)
        keep = {n for w in sparse for n in (self.grads.get(w, w + "@GRAD"), w + "@GRAD")}
        self.trainers = [RefTrainer(t, main, init, fdt, seed, keep=keep)
                         for t in range(config.trainers)]
        dense_tables = {c.table_id: list(c.params) for c in plan.dense_ctxs}
        self.clients = [GeoClient(tr.ex.label, tr.tid, len(self.trainers), self.servers,
                                  sparse, dense_tables, tr.scope, fdt) for tr in self.trainers]
        self.touched: dict = {}

    def startup(self):
        for c in self.clients:
            c.init_params(self.clients[0])

    def release(self) -> None:
        """Trained: keep of each trainer's scope only the parameters the comparisons read;
        what each client last pulled goes (it is for its next push), and so do the dense
        tables (only the geo tables' rows are compared on the pservers)."""
        keep = {v.name for v in self.main.parameters()}
        for tr, client in zip(self.trainers, self.clients):
            tr.scope.keep_only(keep)
            client.old = {}
        for server in self.servers:
            for tid in [t for t, table in server.tables.items()
                        if table.table_class != GEO_TABLE]:
                del server.tables[tid]

    def step(self, step, shards, per):
        ops = self.main.global_block.ops
        for tr, client, feed in zip(self.trainers, self.clients, shards):
            for name, (arr, lod) in feed.items():
                tr.scope.put(name, arr, lod)
            tr.ex.begin_step(step, per, tr.tid * per)
            for i, op in enumerate(ops):
                tr.ex.run_op(0, i, op)
            for w in client.sparse:
                g = tr.scope.get(self.grads.get(w, w + "@GRAD"))
                if not isinstance(g, SelectedRows):
                    # a decay makes the update dense; the trainer's send carries the rows the
                    # lookups' gradient names
                    g = tr.scope.get(w + "@GRAD")
                if isinstance(g, SelectedRows):
                    client.record(w, g)
                    self.touched.setdefault(w, set()).update(int(r) for r in g.rows)
        if self.schedule.pushes_after(step):
            for c in self.clients:
                c.push_pull()


class PsGeoCluster(PsCluster):
    """The split's trainers, each with a GeoClient: geo tables and dense tables from its
    worker_desc.txt, the dense params of each table from its program's update ops."""

    def __init__(self, sp, descs, config, schedule, **kw):
        super().__init__(sp, descs, config, **kw)
        self.schedule = schedule
        # a geo trainer that sends nothing (no sparse table) never wakes Paddle's
        # GeoCommunicator: after trainer 0's start, no push, no pull (ps-geo-no-sparse-table)
        self.exchanges = any(op.type == "send" for tr in self.trainers
                             for op in tr.main.global_block.ops)
        if not self.exchanges:
            self.note("geo: the trainers send nothing (no sparse table): Paddle's geo "
                      "communicator never starts exchanging, each trainer trains alone from "
                      "trainer 0's start (ps-geo-no-sparse-table)")
        self.clients = [self._client(tr) for tr in self.trainers]

    def _client(self, tr):
        sparse = {}
        dense_ids = []
        for tid, param in sorted(tr.client.items()):
            if param.table_class == GEO_TABLE:
                sparse[str(param.common.table_name)] = tid
            elif param.table_class == "MemoryDenseTable":
                dense_ids.append(tid)
        params = [p for p in geo_dense_params(tr.main) if p not in sparse]
        groups = dense_groups(params)
        if len(groups) != len(dense_ids) and self.exchanges:
            raise SimError("geo: %s/worker_desc.txt has %d dense tables (%s), its program "
                           "updates %d groups of dense params (%s)"
                           % (tr.label, len(dense_ids), dense_ids, len(groups),
                              "; ".join(", ".join(g) for g in groups) or "none"))
        return GeoClient(tr.label, tr.tid, len(self.trainers), self.servers, sparse,
                         dict(zip(dense_ids, groups)), tr.scope, self.float_dtype)

    def rpc(self, ex: Executor, block_idx: int, op):
        if op.type == "send" and op.attr("is_sparse", 0):
            tr = ex.owner
            client = self.clients[self.trainers.index(tr)]
            tid = op.attr("table_id")
            table = tr.client.get(int(tid)) if tid is not None else None
            if table is None:
                raise SimError("%s: send of %s names table_id %s, no table of its "
                               "worker_desc.txt" % (tr.label, op.input("X"), tid))
            for x in op.input("X"):
                client.record(str(table.common.table_name), ex.read(x))
            return None
        return super().rpc(ex, block_idx, op)

    def startup(self):
        for tr in self.trainers:
            tr.ex_startup.run_block(0)
        if not self.exchanges:
            # InitParams: every trainer starts from trainer 0's values, and that is all
            first = self.trainers[0]
            for tr in self.trainers[1:]:
                for p in geo_dense_params(first.main):
                    v = first.scope.get(p)
                    if v is not None:
                        tr.scope.put(p, snapshot(v))
            if self.clients and self.clients[0].keep_rows:
                self._alone_by_rows(geo_dense_params(first.main))
            return
        for c in self.clients:
            c.init_params(self.clients[0])

    def _alone_by_rows(self, params):
        """Trainers that train alone keep a big dense param as a LazyTable over trainer 0's
        start (its row-local optimizer updates the rows a gradient or its state names: the
        same values; no trainer holds the table whole)."""
        for p in params:
            v = self.trainers[0].scope.get(p)
            if isinstance(v, np.ndarray) and default_lazy_policy(p, v.shape):
                table = LazyTable.over(snapshot(v))
                for tr in self.trainers:
                    tr.scope.put(p, table.copy())

    def step(self, step, shards, per):
        for tr, feed in zip(self.trainers, shards):
            tr.feed(feed)
            tr.ex.begin_step(step, per, tr.tid * per)
            tr.run_main()
        if self.schedule.pushes_after(step) and self.exchanges:
            for c in self.clients:
                c.push_pull()


# --- comparisons ------------------------------------------------------------------------
def _value(scope, name):
    v = scope.get(name)
    return None if v is None or isinstance(v, Unallocated) else v


def _rows(v, keys):
    if isinstance(v, LazyTable):
        return np.asarray(v.get(keys), dtype=np.float64)
    return np.asarray(dense(v), dtype=np.float64)[keys]


def _whole(v):
    return v.to_dense() if isinstance(v, LazyTable) else np.asarray(dense(v))


def _one_verdict(name, shape, diffs, trainable, missing):
    """A parameter's verdict from its per-trainer diffs: the worst of them (or a failure
    saying `missing` when none holds it), moved when any of them says it moved."""
    d = _worst(diffs) or ParamDiff(name, shape, float("nan"), float("nan"), False, missing)
    d.trainable = trainable
    known = [x.changed for x in diffs if x.changed is not None]
    d.changed = any(known) if known else None
    return d


def _worst(diffs):
    worst = None
    for d in diffs:
        if worst is None or (worst.ok and (not d.ok or d.max_abs > worst.max_abs)):
            worst = d
    return worst


def _trainer_diffs(name, shape, pairs, keys, judge: Judge, who):
    """A ParamDiff per (a scope, b scope, label) of `pairs` whose a holds `name` (on `keys`'
    rows when given), `who` after the label."""
    out = []
    for sa, sb, label in pairs:
        a, b = _value(sa, name), _value(sb, name)
        if a is None:
            continue
        if b is None:
            out.append(ParamDiff(name, shape, float("nan"), float("nan"), False,
                                 "%s holds no value" % label))
            continue
        init = judge.init
        if keys is not None:
            a, b = _rows(a, keys), _rows(b, keys)
            start = _rows(init[name], keys) if name in init else None
            moved = float(np.abs(a - start).max()) if start is not None and a.size else None
        elif chunked(a, b):
            start = init.get(name)
            moved = (movement_chunked(start, a) if chunked(start, a)
                     else movement(start, _whole(a))) if name in init else None
            d = diff_chunked(name, shape, a, b, moved, judge.rtol, judge.f32,
                             "%s%s" % (label, who))
            d.changed = None if moved is None else moved > noise(1.0, judge.f32)
            out.append(d)
            continue
        else:
            a, b = _whole(a), _whole(b)
            moved = movement(init.get(name), a) if name in init else None
        d = diff_of(name, shape, a, b, moved, judge.rtol, judge.f32, "%s%s" % (label, who))
        d.changed = None if moved is None else moved > noise(1.0, judge.f32)
        out.append(d)
    return out


def compare_geo_split(main, psref, cluster, init, rtol, f32) -> list:
    """Per parameter: each trainer's copy (a sparse table on the rows either run's pservers
    hold), and a geo table's rows on the pservers."""
    from ...ir.optimizers import trainable_params
    train = trainable_params(main)
    sparse = psref.clients[0].sparse
    out = []
    for var in main.parameters():
        name, shape = var.name, tuple(var.shape or ())
        keys, diffs = None, []
        if name in sparse:
            mine = table_rows(psref.servers, sparse[name])
            theirs = table_rows(cluster.servers, sparse[name])
            keys = np.array(sorted(set(mine) | set(theirs)), dtype=np.int64)
            if set(mine) != set(theirs):
                diffs.append(ParamDiff(name, shape, float("nan"), float("nan"), False,
                                       "the split's geo tables hold other rows (extra %s, "
                                       "missing %s)" % (sorted(set(theirs) - set(mine))[:5],
                                                        sorted(set(mine) - set(theirs))[:5])))
            elif keys.size:
                a = np.array([mine[k] for k in keys.tolist()], dtype=np.float64)
                b = np.array([theirs[k] for k in keys.tolist()], dtype=np.float64)
                diffs.append(diff_of(name, shape, a, b, None, rtol, f32, "the pservers' rows"))
        diffs += _trainer_diffs(name, shape, [(a.scope, b.scope, b.label) for a, b
                                              in zip(psref.trainers, cluster.trainers)],
                                keys if keys is not None and keys.size else None,
                                Judge(init, rtol, f32), "")
        out.append(_one_verdict(name, shape, diffs, name in train,
                                "no trainer of the reference holds it"))
    return out


def compare_geo_original(main, psref, run, init, rtol, f32) -> list:
    """Per parameter: the ps geo reference's trainers against the original's geo run
    (georef.GeoRun), relative to how far the original moved (sparse tables: on the rows the
    reference's trainers sent)."""
    from ...ir.optimizers import trainable_params
    train = trainable_params(main)
    out = []
    for var in main.parameters():
        name, shape = var.name, tuple(var.shape or ())
        keys = None
        if name in psref.clients[0].sparse:
            keys = np.array(sorted(psref.touched.get(name, ())), dtype=np.int64)
            if not keys.size:
                out.append(ParamDiff(name, shape, 0.0, 0.0, True, "no rows sent"))
                continue
        diffs = _trainer_diffs(name, shape, [(ex.scope, t.scope, "trainer_%d" % t.tid)
                                             for ex, t in zip(run.exs, psref.trainers)],
                               keys, Judge(init, rtol, f32), " of the ps reference")
        out.append(_one_verdict(name, shape, diffs, name in train, "not held by both runs"))
    return out


def geo_reasons(psref, diffs) -> dict:
    """{param: [Why]} for the parameters where the ps geo reference differs from the
    original's geo run."""
    from ..explain.pswhy import Why
    unsent = set().union(*(c.unsent_pulls for c in psref.clients))
    out = {}
    for d in diffs:
        lst = []
        if d.name in unsent:
            lst.append(Why("ps-geo-pull-unsent", "a trainer pulls the rows others pushed from "
                           "every pserver at each push, even one it sent no rows of this table "
                           "(RecvSparse follows every SendSparse); Paddle 2.0's geo pulls a "
                           "table only after sending rows of it"))
        if d.max_abs and d.max_abs == d.max_abs:
            lst.append(Why("ps-geo-float32", "the pservers keep float32: each pushed delta and "
                           "each pulled value is rounded to float32"))
        out[d.name] = lst
    return out


def run_geo(ctx, plan, *, texts, ref_texts, options, why, report):
    """run.run_ps for geo mode (`ctx`: runs/runner.py's RunContext; `plan`, the descriptor
    texts and table `options` run.run_ps made): `res.params` = the split against the ps geo
    reference, `res.ps` = the reference against the original's geo run (`ctx.run`), a
    `report()` (run.PsReport)."""
    res, main, config, sp, ref, run, feeder = ctx.res, ctx.main, ctx.config, ctx.sp, ctx.ref, \
        ctx.run, ctx.feeder
    steps, batch, seed, fdt, progress = res.steps, res.batch, ctx.seed, ctx.fdt, ctx.progress
    from ...core.errors import UserError
    from .tables import PserverRefuses, TableError
    schedule = run.schedule
    if not any(schedule.pushes_after(s) for s in range(steps)):
        raise UserError("geo: %d steps run no push (the trainers push after every %d steps): "
                        "nothing the split sends would be compared; give --steps %d or more, "
                        "or a smaller --push-every" % (steps, schedule.push_every,
                                                       schedule.push_every))
    n = config.trainers
    per = batch // max(1, n)
    run.release_servers()       # the original's pservers: style ps compares its trainers
    try:
        psref = PsGeoReference(RefRun(main, ref.init, plan, config, feeder, steps, batch, seed,
                                      fdt), ref_texts, schedule, options)
        for c in psref.clients:     # big dense params kept by rows (geo.py)
            c.keep_rows = True
        psref.startup()
        train_steps(psref, feeder, n, steps, per=per,
                    done=lambda s: progress(steps + s, 3 * steps))
        psref.release()
    except (SimError, TableError) as e:
        raise UserError("the ps geo reference (the original under its descriptors) does not "
                        "run: %s" % e) from None
    f32 = np.dtype(fdt) == np.float32
    # the reference against the original's geo run first: then the original goes, and the
    # split runs beside the reference alone (not beside three runs)
    original = compare_geo_original(main, psref, run, ref.init, res.rtol, f32)
    run.release_trainers()
    cluster = None
    try:
        cluster = PsGeoCluster(sp, texts, config, schedule, float_dtype=fdt, seed=seed,
                               reference=ref, options=options)
        if len(cluster.trainers) != n:
            raise SimError("the split has %d trainers, the config %d"
                           % (len(cluster.trainers), n))
        for c in cluster.clients:
            c.keep_rows = True
        cluster.startup()       # its trainers: trainer_0 .. n-1 (splitprograms.py)
        train_steps(cluster, feeder, n, steps, per=per,
                    done=lambda s: progress(2 * steps + s, 3 * steps))
    except (SimError, PserverRefuses, TableError) as e:
        res.error = str(e)
        if cluster is not None:
            res.notes.extend(x for x in cluster.notes if x not in res.notes)
        return res
    res.notes.extend(x for x in cluster.notes if x not in res.notes)
    res.params = compare_geo_split(main, psref, cluster, ref.init, res.rtol, f32)
    res.ps = report()
    res.ps.original = original
    res.ps.why = geo_reasons(psref, res.ps.original) if why else {}
    return res
