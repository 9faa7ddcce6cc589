"""simulate's prediction of a style-ps split trained on Paddle's runtime: the split's own
programs and descriptors run by simulate's in-process ps cluster (simulate/ps/cluster.py; geo:
ps/georun.py's PsGeoCluster) in float32, under the schedule `run --local` holds the runtime to.

Feeds (simulate's synthetic feeds, made from trainer 0's program) and initial values (trainer
0's values after its startup) are kept, so the runtime's trainers start and train from the
same. The prediction is what each trainer holds at the end: its dense parameters and, for
each sparse table, the rows of every key the pservers hold (geo: each trainer's own copy of
the table on those keys).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..core.errors import UserError
from ..simulate.model.feeds import Feeder
from ..simulate.runs.runner import train_steps
from ..simulate.ps.tables import PserverRefuses, TableError, TableOptions
from ..simulate.model.values import SimError, Unallocated

F32 = np.float32
SPARSE = ("MemorySparseTable", "SSDSparseTable")


@dataclass
class Prediction:
    """What the runtime's trainers should end with, and what they start from."""
    feeds: dict = field(default_factory=dict)       # "s<step>.t<trainer>.<var>" -> array
    init: dict = field(default_factory=dict)        # trainer 0's persistable values
    values: dict = field(default_factory=dict)      # "trainer_<t>" -> {"dense/x": array, ...}
    keys: dict = field(default_factory=dict)        # table id (str) -> sorted keys
    widths: dict = field(default_factory=dict)      # table id (str) -> width of a pulled row
    names: dict = field(default_factory=dict)       # table id (str) -> its parameter's name
    spread: dict = field(default_factory=dict)      # value key -> the prediction's own spread
    start: dict = field(default_factory=dict)       # value key -> its initial value
    geo: Optional[dict] = None                      # the communicator's tables (rolegeo.py)
    error: Optional[str] = None                     # the prediction failed to execute
    notes: list = field(default_factory=list)
    empty_inits: list = field(default_factory=list)  # (table id, slot): no pserver starts


def make_feeds(main, steps, batch, seed, trainers) -> dict:
    """Every step's shard of every trainer: simulate's synthetic feeds of `main`."""
    feeder = Feeder(main, batch, seed, F32, trainers=trainers)
    out = {}
    for s in range(steps):
        glob = feeder.feed(s)
        for t in range(trainers):
            for name, (arr, lod) in feeder.shard(glob, t, trainers).items():
                if lod:
                    raise UserError("feed %s has a LoD (a sequence): run feeds dense tensors "
                                    "only; give --feeds module:function" % name)
                out["s%d.t%d.%s" % (s, t, name)] = np.asarray(arr)
    return out


def shards(feeds, step, trainers) -> list:
    out = [dict() for _ in range(trainers)]
    head = "s%d." % step
    for k, v in feeds.items():
        if k.startswith(head):
            t, name = k[len(head):].split(".", 1)
            out[int(t[1:])][name] = (v, None)
    return out


class RecordedFeeds:
    """The feeds Paddle's `trainers` ran (`s<step>.t<trainer>.<name>`, as shards() reads
    them), served as runner.train_steps asks a feeder: a step's feed is its trainers' shards."""

    def __init__(self, feeds: dict, trainers: int):
        self.feeds, self.trainers = feeds, trainers

    def feed(self, step: int) -> list:
        return shards(self.feeds, step, self.trainers)

    def shard(self, glob: list, trainer: int, trainers: int) -> dict:
        return glob[trainer]


class _Alone:
    """The split's trainers stepping with no exchange (_train_geo_dense_only)."""

    def __init__(self, cluster):
        self.cluster = cluster

    def step(self, step: int, shards: list, per: int):
        for tr, feed in zip(self.cluster.trainers, shards):
            tr.feed(feed)
            tr.ex.begin_step(step, per, tr.tid * per)
            tr.run_main()


def _init_of(trainer) -> dict:
    from ..simulate.model.values import LazyTable
    init = {}
    for name, v in trainer.scope.vars.items():
        var = trainer.main.find_var(name) or trainer.ex_startup.program.find_var(name)
        if var is None or not var.is_persistable:
            continue
        if isinstance(v, LazyTable):        # a big table (geo: the trainer holds it whole)
            v = v.to_dense()
        if isinstance(v, np.ndarray):
            init[name] = np.array(v)
    return init


@dataclass(frozen=True)
class Training:
    """What a prediction trains: `steps` steps of a global `batch`, the feeds and initial
    values from `seed`; geo: the communicator pushes every `push_every` steps (None: the
    default)."""
    steps: int
    batch: int
    seed: int = 0
    push_every: Optional[int] = None


def predict(sp, texts, config, *, training: Training, follow=None, fdt=F32):
    """The Prediction of split `sp` (SplitPrograms) with descriptor `texts`, trained as
    `training` says; the trainers compute in `fdt` (the tables keep float32 whatever it is);
    `follow` (a buckets.Follower) gives the dense Adam tables the bucket orders the runtime
    took."""
    from ..simulate.refs.schedule import make_schedule
    steps, batch, seed, push_every = training.steps, training.batch, training.seed, \
        training.push_every
    pred = Prediction()
    schedule = make_schedule(config, push_every)
    options = TableOptions(seed=seed, lenient_initializers=True)
    n = config.trainers
    first = sp.trainers[min(sp.trainers)]["main"]
    pred.feeds = make_feeds(first, steps, batch, seed, n)
    try:
        cluster = _cluster(sp, texts, config, schedule, options, seed, fdt)
    except (SimError, TableError) as e:
        raise UserError("the split cannot be simulated: %s" % e) from None
    for tr in cluster.trainers:     # the trainers' sparse kernels as Paddle's run
        tr.ex.paddle_sparse_kernels = True
    if follow is not None:
        follow.install(cluster)
    for tr in cluster.trainers:
        tr.ex_startup.run_block(0)
    for server in cluster.servers:     # what a pserver of Paddle's cannot start from
        for table in server.tables.values():
            pred.notes.extend(n for n in getattr(table, "notes", ()) if n not in pred.notes)
            pred.empty_inits.extend((table.table_id, s) for s in getattr(
                table, "empty_inits", ()) if (table.table_id, s) not in pred.empty_inits)
    pred.init = _init_of(cluster.trainers[0])
    try:
        _train(cluster, pred, schedule, steps, batch // max(1, n))
    except (SimError, PserverRefuses, TableError) as e:
        pred.error = str(e)
        return pred
    pred.notes.extend(cluster.notes)
    _values(cluster, pred)
    return pred


def _cluster(sp, texts, config, schedule, options, seed, fdt=F32):
    if config.mode == "geo":
        from ..simulate.ps.georun import PsGeoCluster
        return PsGeoCluster(sp, texts, config, schedule, float_dtype=fdt, seed=seed,
                            options=options)
    from ..simulate.ps.cluster import PsCluster
    return PsCluster(sp, texts, config, float_dtype=fdt, seed=seed, options=options)


def _train(cluster, pred, schedule, steps, per):
    n = len(cluster.trainers)
    geo = schedule.mode == "geo"
    if geo:
        for c in cluster.clients:
            c.init_params(cluster.clients[0])
        pred.geo = geo_tables(cluster, schedule.push_every)
        if not pred.geo["sparse"]:
            return _train_geo_dense_only(cluster, pred, steps, per)
    else:
        cluster.init_worker()
    train_steps(cluster, RecordedFeeds(pred.feeds, n), n, steps, per=per)


def _train_geo_dense_only(cluster, pred, steps, per):
    """A geo split with no geo sparse table has no `send` op: the GeoCommunicator's loop waits
    for a first send (its `waiting_`) that never comes, so the trainers train alone from
    trainer 0's start and never push or pull again (rolegeo.py)."""
    n = len(cluster.trainers)
    train_steps(_Alone(cluster), RecordedFeeds(pred.feeds, n), n, steps, per=per)
    pred.notes.append("geo with no sparse table: Paddle's GeoCommunicator never starts "
                      "exchanging (its loop waits for a first sparse send): each trainer "
                      "trains alone from trainer 0's start (docs/running.md, \"geo\")")


def geo_tables(cluster, push_every) -> dict:
    """The GeoCommunicator's contexts for rolegeo.py: each geo sparse table (its param, grad,
    table id, shape) and each dense table (its params in send order)."""
    client = cluster.clients[0]
    tr = cluster.trainers[0]
    sparse = []
    for param, tid in sorted(client.sparse.items(), key=lambda x: x[1]):
        v = tr.scope.get(param)
        shape = list(np.shape(v)) if v is not None and not isinstance(v, Unallocated) else \
            list(tr.main.find_var(param).shape)
        sparse.append({"param": param, "grad": param + "@GRAD", "table_id": int(tid),
                       "shape": [int(x) for x in shape]})
    dense = [{"table_id": int(tid), "params": list(params),
              "datanorm": any(p.endswith((".batch_size", ".batch_sum", ".batch_square_sum"))
                              for p in params)}
             for tid, params in sorted(client.dense.items())]
    return {"push_every": int(push_every), "sparse": sparse, "dense": dense}


def _values(cluster, pred):
    geo = pred.geo is not None
    for tr in cluster.trainers:
        vals = {}
        if geo:
            client = cluster.clients[cluster.trainers.index(tr)]
            names = [p for ps in client.dense.values() for p in ps]
        else:
            names = [p for ps in tr.dense.values() for p in ps]
        for name in names:
            vals["dense/" + name] = np.asarray(tr.scope.get(name), dtype=np.float64)
            if name in pred.init:
                pred.start["dense/" + name] = pred.init[name]
        pred.values["trainer_%d" % tr.tid] = vals
    if geo:
        return _geo_rows(cluster, pred)
    client = cluster.trainers[0].client
    for tid, param in sorted(client.items()):
        if param.table_class not in SPARSE:
            continue
        keys = sorted({k for s in cluster.servers for k in s.table(tid).keys()})
        key = str(tid)
        pred.names[key] = str(param.common.table_name)
        pred.widths[key] = int(cluster.servers[0].table(tid).accessor.select_dim)
        pred.keys[key] = [int(k) for k in keys]
        if keys:
            rows = np.concatenate([_pull(cluster, tid, param, [k]) for k in keys])
            pred.values["trainer_0"]["sparse/" + key] = rows.astype(np.float64)
            pred.start["sparse/" + key] = np.zeros(rows.shape)    # initial_range 0


def _geo_rows(cluster, pred):
    for s in pred.geo["sparse"]:
        tid, key = s["table_id"], str(s["table_id"])
        keys = sorted({int(k) for srv in cluster.servers for k in srv.table(tid).keys()})
        pred.names[key], pred.keys[key], pred.widths[key] = s["param"], keys, s["shape"][1]
        if not keys:
            continue
        ids = np.asarray(keys, dtype=np.int64)
        if s["param"] in pred.init:
            pred.start["local/" + key] = np.asarray(pred.init[s["param"]])[ids]
        for tr in cluster.trainers:
            table = tr.scope.get(s["param"])
            rows = table.get(ids) if hasattr(table, "to_dense") else np.asarray(table)[ids]
            pred.values["trainer_%d" % tr.tid]["local/" + key] = np.asarray(rows, np.float64)


def _pull(cluster, tid, param, keys):
    from ..simulate.ps.tables.server import sparse_server
    s = int(sparse_server(keys, int(param.shard_num) or 1, len(cluster.servers))[0])
    return cluster.servers[s].table(tid).pull(keys)


def adam_dense(texts) -> bool:
    """Whether a server descriptor has a dense table with the adam rule (whose 10 bucket
    threads race for the beta powers: docs/ps-runtime.md, section 6)."""
    import re
    return any(re.search(r'table_class: "MemoryDenseTable"(?:(?!downpour_table_param).)*'
                         r'name: "adam"', t, re.S) for k, t in texts.items()
               if k.endswith("server_desc.txt"))


def spread(a: Prediction, others: list) -> dict:
    """value key ("trainer_0 dense/x") -> the largest difference of `a` from other predictions
    of the same run."""
    out: dict = {}
    for b in others:
        for t, vals in a.values.items():
            for k, v in vals.items():
                w = b.values.get(t, {}).get(k)
                if w is not None and np.shape(w) == np.shape(v) and np.size(v):
                    d = float(np.max(np.abs(np.asarray(v) - np.asarray(w))))
                    out["%s %s" % (t, k)] = max(d, out.get("%s %s" % (t, k), 0.0))
    return out


def geo_contexts(sp, texts, config, push_every) -> dict:
    """The GeoCommunicator's tables of a geo split (geo_tables), for one role of a cluster."""
    from ..simulate.refs.schedule import make_schedule
    schedule = make_schedule(config, push_every)
    try:
        cluster = _cluster(sp, texts, config, schedule, TableOptions(lenient_initializers=True),
                           0)
    except (SimError, TableError) as e:
        raise UserError("the split's geo tables: %s" % e) from None
    return geo_tables(cluster, schedule.push_every)
