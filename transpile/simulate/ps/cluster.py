"""Style ps in process: the split's trainer programs against Paddle 2.6.2's brpc tables
(tables/), each pserver built from its own `server_desc.txt`, each trainer's client from
its `worker_desc.txt`.

What a trainer's ops do (docs/ps-runtime.md, section 5):
- `distributed_lookup_table` (table_id): each id (padding ids aside: zeros) is pulled from the
  pserver its key routes to (the client's `shard_num`), the accessor's pull layout;
- `distributed_push_sparse`: per id occurrence `[slot, show, click, g * batch]`
  (tables/client.py), merged by key per pserver, pushed (rows created at their first push);
  the gradient is scaled in place in the trainer's scope, as Paddle's op does;
- `send` of dense grads (`is_sparse` 0, `table_id`): the grads in X order, flattened,
  concatenated, cut into the pservers' slices of the merged dense table and pushed;
- `send_barrier` (sync): the trainer arrives at every pserver's BarrierTable; when all have
  arrived the tables pour (a sync dense table averages its pushes and runs its rule once);
- `fake_init`: the table var gets a shape and no memory.

Start (`TheOnePSRuntime._init_worker`): every trainer runs its startup; trainer 0 pushes the
values of the dense params its sends name (`push_dense_params`), then every trainer pulls the
dense tables. After a step every trainer pulls the dense tables its sends name: in sync once
all have reached the barrier (the workable sync run of tools/engine: a flush, the barrier
table, a pull per step), in async at the end of its own turn.
"""
from __future__ import annotations

import numpy as np

from ...format import psdesc
from ..model.executor import Executor, Scope
from . import denseflat
from .tables import TableError, TableOptions
from .tables.client import Push, batch_size, fit_push, merge_by_key, push_values
from .tables.server import PsServer, sparse_server
from ..model.values import SimError, Unallocated, dense, shape_of

RPC_IGNORED = ("listen_and_serv", "checkpoint_notify", "recv_save", "fetch_barrier")


def _pad(op) -> int:
    pad = op.attr("padding_idx", -1)
    return -1 if pad is None else int(pad)


def grad_param(grad: str) -> str:
    """The parameter a dense grad of a send belongs to (`w@GRAD` -> `w`)."""
    return grad[:-len("@GRAD")] if grad.endswith("@GRAD") else grad


class PsTrainer:
    """One trainer: its programs, its scope, its client (worker_desc.txt)."""

    def __init__(self, cluster: "PsCluster", tid: int, main, startup, worker_text: str):
        self.cluster, self.tid, self.main = cluster, tid, main
        self.scope = Scope()
        kw = dict(float_dtype=cluster.float_dtype, seed=cluster.seed, rpc=cluster.rpc,
                  random_hook=cluster.random_hook)
        self.ex_startup = Executor(self.label + " startup", startup, self.scope, **kw)
        self.ex = Executor(self.label + " main", main, self.scope, **kw)
        self.ex.owner = self.ex_startup.owner = self
        if cluster.reference is not None:
            self.ex.lazy_policy = self.ex_startup.lazy_policy = cluster.reference.lazy_policy
        self.ex.free_temporaries()
        self.client = _client_tables(worker_text, "%s/worker_desc.txt" % self.label)
        self.dense = dense_tables(main)
        self.sent = sent_params(main)
        self.at_barrier = False

    def run_main(self):
        """Block 0 of the main program (a `sum` of lookup grads the ps passes removed adds
        empty SelectedRows, as Paddle's executor does: executor.py)."""
        ops = self.main.global_block.ops
        for i, op in enumerate(ops):
            self.ex.run_op(0, i, op)

    @property
    def label(self):
        return "trainer_%d" % self.tid

    def feed(self, feeds: dict):
        for name, (arr, lod) in feeds.items():
            self.scope.put(name, arr, lod)


def _client_tables(text, source) -> dict:
    """table id -> TableParameter of a worker_desc.txt (the client's view)."""
    if text is None:
        raise SimError("%s: the split has no such file (the trainer's client reads its tables "
                       "from it)" % source)
    desc = psdesc.parse_text(text, source)
    return {int(t.table_id): t for t in desc.worker_param.downpour_worker_param
            .downpour_table_param}


def dense_tables(main) -> dict:
    """table id -> the dense params (in send order) of a trainer program's dense sends."""
    out: dict = {}
    writer = {n: op for _, _, op in main.ops() for n in op.output_names()}
    for _, _, op in main.ops():
        if op.type == "send" and not op.attr("is_sparse", 0) and op.attr("table_id") is not None:
            out.setdefault(int(op.attr("table_id")), []).extend(
                grad_param(sent_grad(g, writer)) for g in op.input("X"))
    return out


def sent_params(main) -> dict:
    """{var a dense send sends: the param it is the gradient of}."""
    writer = {n: op for _, _, op in main.ops() for n in op.output_names()}
    return {g: grad_param(sent_grad(g, writer)) for _, _, op in main.ops()
            if op.type == "send" and not op.attr("is_sparse", 0) for g in op.input("X")}


def sent_grad(name: str, writer: dict) -> str:
    """The `<param>@GRAD` a sent var is made of: itself, or what the clip op writing it (a
    ClipGradByValue / ByNorm output the optimizer read) clips."""
    op = writer.get(name)
    if not name.endswith("@GRAD") and op is not None and op.type in ("clip", "clip_by_norm") \
            and op.input("X")[:1] and op.input("X")[0].endswith("@GRAD"):
        return op.input("X")[0]
    return name


class PsCluster:
    """Trainers and pservers of a style-ps split (`sp`: splitprograms.SplitPrograms;
    `descs`: "trainer_0/worker_desc.txt" / "pserver_<host>_<port>/server_desc.txt" -> text).
    `keep_rows`: big dense params kept by rows in the tables and the trainers (denseflat.py;
    simulate's run sets it, run --local's prediction reads the tables' arrays whole)."""
    keep_rows = False

    def __init__(self, sp, descs: dict, config, *, float_dtype, seed, reference=None,
                 options: TableOptions = TableOptions()):
        from ...output.result import endpoint_dir
        self.config, self.float_dtype, self.seed = config, float_dtype, seed
        self.reference = reference
        self.sync = config.mode == "sync"
        self.kept: dict = {}        # dense table id -> the params kept by rows (denseflat.py)
        self.bases: dict = {}       # dense table id -> {kept param: its untouched rows}
        self.notes = list(sp.notes)
        n = len(config.pservers)
        self.servers = []
        for i, ep in enumerate(config.pservers):
            src = "%s/server_desc.txt" % endpoint_dir(ep)
            text = descs.get(src)
            if text is None:
                raise SimError("%s: the split has no such file (pserver %s builds its tables "
                               "from it)" % (src, ep))
            self.servers.append(PsServer(psdesc.parse_text(text, src), i, n, options, src))
        self.trainers = []
        for tid, p in sorted(sp.trainers.items()):
            text = descs.get("trainer_%d/worker_desc.txt" % tid)
            if text is None and tid != min(sp.trainers):
                text = descs.get("trainer_%d/worker_desc.txt" % min(sp.trainers))
            self.trainers.append(PsTrainer(self, tid, p["main"], p["startup"], text))

    def note(self, msg):
        if msg not in self.notes:
            self.notes.append(msg)

    def random_hook(self, ex, name, value, op):
        if self.reference is None:
            return value
        return self.reference.align_random(ex.label, name, value, op, self.notes)

    # --- the trainer's ops ----------------------------------------------------------------
    def rpc(self, ex: Executor, block_idx: int, op):
        tr = getattr(ex, "owner", None)
        t = op.type
        try:
            if t in RPC_IGNORED:
                return None
            if t == "fake_init":
                for n in op.output("Out"):
                    ex.write(block_idx, n, Unallocated(op.attr("shape", []) or [],
                                                       "%s's fake_init" % ex.label))
                return None
            if t == "distributed_lookup_table":
                return self.lookup(tr, ex, block_idx, op)
            if t == "distributed_push_sparse":
                return self.push_sparse(tr, ex, block_idx, op)
            if t == "send" and not op.attr("is_sparse", 0):
                return self.send_dense(tr, ex, op)
            if t == "send_barrier":
                tr.at_barrier = True
                return None
        except TableError as e:
            raise SimError(str(e)) from None
        from ..model.values import NoKernelError
        raise NoKernelError("%s: %s is not simulated in style ps" % (ex.label, t))

    def _table(self, tr, op, what):
        tid = op.attr("table_id")
        if tid is None or int(tid) not in tr.client:
            raise SimError("%s of %s: table_id %s is no table of %s/worker_desc.txt (it has %s)"
                           % (op.type, what, tid, tr.label, sorted(tr.client)))
        return int(tid), tr.client[int(tid)]

    def _route(self, param, keys):
        return sparse_server(keys, int(param.shard_num) or 1, len(self.servers))

    def lookup(self, tr, ex, block_idx, op):
        w = (op.input("W") or ["?"])[0]
        tid, param = self._table(tr, op, w)
        v2 = op.attr("lookup_table_version", "lookup_table") == "lookup_table_v2"
        pad = _pad(op)
        for ids_name, out_name in zip(op.input("Ids"), op.output("Outputs")):
            ids = np.asarray(ex.read(ids_name)).astype(np.int64)
            flat = ids.reshape(-1)
            rows = None
            where = self._route(param, flat)
            for s, server in enumerate(self.servers):
                m = (where == s) & (flat != pad)
                if not m.any():
                    continue
                got = server.table(tid).pull(flat[m])
                if rows is None:
                    rows = np.zeros((flat.size, got.shape[1]), dtype=np.float32)
                rows[m] = got
            if rows is None:
                width = self.servers[0].table(tid).accessor.select_dim
                rows = np.zeros((flat.size, width), dtype=np.float32)
            lead = ids.shape if v2 else ids.shape[:-1]
            ex.write(block_idx, out_name, rows.reshape(tuple(lead) + rows.shape[1:]),
                     tr.scope.lods.get(ids_name))
            self.on_lookup(tr, w, flat[flat != pad])

    def on_lookup(self, tr, table, keys):
        """A hook: the keys a trainer looked up (the reference records them)."""

    def push_sparse(self, tr, ex, block_idx, op):
        w = (op.input("W") or op.input("Ids") or ["?"])[0]
        tid, param = self._table(tr, op, w)
        ids_names, grads = op.input("Ids"), op.input("Outputs") or op.output("Outputs")
        if len(ids_names) != len(grads):
            raise SimError("%s: %d Ids for %d gradients" % (op.type, len(ids_names), len(grads)))
        shows = np.asarray(dense(ex.read(op.input("Shows")[0]))) if op.input("Shows") else None
        clicks = np.asarray(dense(ex.read(op.input("Clicks")[0]))) if op.input("Clicks") \
            else None
        ids_list = [np.asarray(ex.read(n)) for n in ids_names]
        lods = [(tr.scope.lods.get(n) or [None])[0] for n in ids_names]
        batch = batch_size(ids_list, lods)
        slots = list(op.attr("slots", []) or [])
        emb = int(op.attr("size", 0) or 0)
        keys, vals = [], []
        for k, (ids, g_name) in enumerate(zip(ids_list, grads)):
            g = np.asarray(dense(ex.read(g_name)))
            width = emb or (g.size // max(ids.size, 1))
            kk, vv = push_values(ids, g, width, Push(
                batch, slot=slots[k] if k < len(slots) else 0, shows=shows, clicks=clicks,
                padding_idx=_pad(op), use_cvm_op=bool(op.attr("use_cvm_op", False)),
                lod=lods[k]))
            keys.append(kk)
            vals.append(vv)
            if batch is not None:        # Paddle scales the gradient tensor in place
                scaled = g.astype(np.float32) * np.float32(batch)
                ex.write(block_idx, g_name, scaled.astype(g.dtype), tr.scope.lods.get(g_name))
        self.push_rows(tid, param, np.concatenate(keys), np.concatenate(vals))

    def push_rows(self, tid, param, keys, values):
        """The client's sparse push: keys routed, merged by key per pserver, pushed."""
        where = self._route(param, keys)
        for s, server in enumerate(self.servers):
            m = where == s
            if not m.any():
                continue
            table = server.table(tid)
            cut = fit_push(values[m], table.accessor)
            if cut is not None:
                self.note("table %d: pushed values of %d floats, the %s takes %d: the client "
                          "sends the first %d (the gradient columns shifted: ps-cvm-push-layout)"
                          % (tid, values.shape[1], table.accessor.name,
                             table.accessor.update_dim, table.accessor.update_dim))
            k, v = merge_by_key(keys[m], values[m] if cut is None else cut, table.accessor)
            table.push(k, v)

    def send_dense(self, tr, ex, op):
        tid = op.attr("table_id")
        if tid is None:
            raise SimError("send of %s has no table_id" % op.input("X"))
        tid = int(tid)
        kept = self.kept.get(tid, frozenset())
        grads = [(tr.sent.get(g, g), ex.read(g)) for g in op.input("X")]
        shapes = {n: shape_of(tr.scope.get(n)) for n in kept}
        self.push_dense(tid, denseflat.grad_values(grads, kept, shapes))

    def push_dense(self, tid, values):
        for server, part in zip(self.servers, denseflat.split(values, len(self.servers))):
            server.table(tid).push(part)

    # --- start, steps, pulls ------------------------------------------------------------
    def dense_values(self, tr, tid):
        return [(n, tr.ex.read(n)) for n in tr.dense[tid]]

    def pull_dense(self, tr):
        """The trainer pulls every dense table its sends name into its params."""
        for tid, names in sorted(tr.dense.items()):
            try:
                got = denseflat.joined([s.table(tid).pull() for s in self.servers])
            except TableError as e:
                raise SimError("%s pulls dense table %d: %s" % (tr.label, tid, e)) from None
            lay = []
            for n in names:
                var = tr.main.find_var(n)
                v = tr.scope.get(n)
                shape = tuple(shape_of(v)) if v is not None \
                    and not isinstance(v, Unallocated) else tuple(var.shape or ())
                lay.append((n, shape, int(np.prod(shape)) if shape else 1))
            if sum(size for _, _, size in lay) > len(got):
                raise SimError("%s pulls dense table %d: %d values for params %s"
                               % (tr.label, tid, len(got), names))
            for n, v in denseflat.pulled_values(got, lay, self.bases.get(tid, {}),
                                                self.float_dtype):
                tr.scope.put(n, v)

    def startup(self):
        for tr in self.trainers:
            tr.ex_startup.run_block(0)
        self.init_worker()

    def init_worker(self):
        """Trainer 0 pushes its dense params, every trainer pulls them."""
        first = self.trainers[0]
        try:
            for tid in sorted(first.dense):
                values = self.dense_values(first, tid)
                self.kept[tid] = denseflat.kept_by_rows(
                    denseflat.layout(values), [s.table(tid) for s in self.servers]) \
                    if self.keep_rows else frozenset()
                start, self.bases[tid] = denseflat.start_values(values, self.kept[tid])
                for server, part in zip(self.servers, denseflat.split(start, len(self.servers))):
                    server.table(tid).push_param(part)
        except TableError as e:
            raise SimError("trainer_0 pushes its dense params: %s" % e) from None
        for tr in self.trainers:
            self.pull_dense(tr)

    def step(self, step: int, shards: list, per: int):
        for tr, feed in zip(self.trainers, shards):
            tr.feed(feed)
        for tr in self.trainers:
            tr.ex.begin_step(step, per, tr.tid * per)
            tr.at_barrier = False
            tr.run_main()
            if not self.sync:
                self.pull_dense(tr)
        if not self.sync:
            return
        if not all(tr.at_barrier for tr in self.trainers):
            self.note("sync mode, but %s reached no send_barrier: the pservers never pour "
                      "the dense pushes" % ", ".join(t.label for t in self.trainers
                                                     if not t.at_barrier))
        for tr in self.trainers:
            if tr.at_barrier:
                for server in self.servers:
                    self._barrier(server, tr)
        for tr in self.trainers:
            self.pull_dense(tr)

    def _barrier(self, server, tr):
        try:
            server.barrier(tr.tid)
        except TableError as e:
            raise SimError("%s at the barrier of pserver %d: %s"
                           % (tr.label, server.index, e)) from None
