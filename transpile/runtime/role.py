"""One role of a style-ps split on Paddle 2.6.2's own brpc parameter server.

    python role.py SETUP_JSON pserver INDEX
    python role.py SETUP_JSON trainer ID

Started by `pstranspile run` under a Python that imports Paddle 2.6.2 (transpile/runtime/
local.py for `--local`, cluster.py for one role of a cluster); never imported by pstranspile
itself: it imports numpy, paddle and its sibling rolegeo.py only. SETUP_JSON (setup.py writes
it) says the mode, the pservers' endpoints, the split's folders, the steps and where the feeds
come from. No fleet build: `core.DistFleetWrapper` (the singleton the trainer's ops use) is
started with the split's own descriptors, and the trainer runs the split's own programs.

A trainer:
- runs its startup program, then (local runs) sets the values of init.npz (trainer 0's values
  in the prediction: Paddle's initializers draw from another generator);
- start (TheOnePSRuntime._init_worker): trainer 0 pushes the dense params of each dense table
  its sends name, every trainer pulls them (local runs: and all have pulled before trainer 0
  takes its first step); geo: rolegeo.py's GeoCommunicator start;
- per step: feeds its shard, runs its main program, flushes its client; async: pulls the dense
  tables; sync: arrives at the barrier table (which pours the dense tables once every trainer
  has), then pulls them. `send_barrier` is removed from the program: Paddle 2.6.2's op calls a
  Communicator that `the_one_ps` makes only in geo mode, and segfaults; a never-started SYNC
  communicator serves the barrier table instead (docs/running.md, "sync");
- local runs take turns (`schedule: turns`): trainer 0's step, then trainer 1's..., a file
  token passed on, as simulate schedules them; a cluster's trainers run free;
- at the end writes trainer<ID>.npz (its dense params, the rows of the sparse keys asked,
  geo: its own copy of each sparse table on those keys) and trainer<ID>.json (what it did);
  with `trace` (a dense Adam table) trace<ID>.npz, what each of its pulls read
  (`<pull>/<table id>`: the table's params concatenated in send order; buckets.py);
  a step that raises writes the op and Paddle's message there and exits 1.
"""
import json
import os
import re
import sys
import time
import traceback

T0 = time.time()
SETUP = json.load(open(sys.argv[1]))
KIND, INDEX = sys.argv[2], int(sys.argv[3])
RUN = SETUP["run_dir"]
TAG = "%s%d" % (KIND, INDEX)
REPORT = {"role": TAG, "step": None, "error": None, "op": None}


def log(*a):
    print("[%s %.1fs]" % (TAG, time.time() - T0), *a, flush=True)


def write_report():
    tmp = os.path.join(RUN, TAG + ".json.tmp")
    with open(tmp, "w") as f:
        json.dump(REPORT, f, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(RUN, TAG + ".json"))


def protobuf_ok():
    import google.protobuf as pb
    if not pb.__version__.startswith("4."):
        REPORT["error"] = ("protobuf %s imported; Paddle 2.6.2's fleet code needs protobuf 4.x "
                           "(pip install protobuf==4.25.5 into its environment)" % pb.__version__)
        write_report()
        sys.exit(2)


protobuf_ok()
import numpy as np  # noqa: E402
import paddle  # noqa: E402
from paddle.base import core  # noqa: E402

paddle.enable_static()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
HOSTS = [core.PSHost(ep.rsplit(":", 1)[0], int(ep.rsplit(":", 1)[1]), i).serialize_to_string()
         for i, ep in enumerate(SETUP["pservers"])]
TURNS = SETUP.get("schedule") == "turns"


# --- file tokens: the turns and barriers of a local run --------------------------------------
def wait_for(name, timeout=None):
    path = os.path.join(RUN, "sync", name)
    limit = SETUP.get("wait", 300) if timeout is None else timeout
    t = time.time()
    while not os.path.exists(path):
        if os.path.exists(os.path.join(RUN, "sync", "abort")):
            log("another role failed: stopping")
            os._exit(4)
        if time.time() - t > limit:
            raise RuntimeError("timed out after %d s waiting for %s" % (limit, name))
        time.sleep(0.005)


def mark(name):
    open(os.path.join(RUN, "sync", name), "w").close()


def all_reach(name):
    """A barrier of the trainers (local runs: a file each; a cluster: fleet's, as Paddle)."""
    if not TURNS:
        import paddle.distributed.fleet as fleet
        fleet.util.barrier()
        return
    mark("%s.%d" % (name, INDEX))
    for t in range(SETUP["trainers"]):
        wait_for("%s.%d" % (name, t))


# --- the pserver -------------------------------------------------------------------------------
def pserver():
    text = open(SETUP["pserver_descs"][INDEX]).read()
    s = core.DistFleetWrapper()
    s.init_server(text, HOSTS, INDEX, SETUP["trainers"], [])
    host, port = SETUP["pservers"][INDEX].rsplit(":", 1)
    REPORT["step"] = "serving"
    write_report()
    log("serving on", SETUP["pservers"][INDEX])
    s.run_server(host, int(port))
    log("stopped")


# --- the trainer -------------------------------------------------------------------------------
def load(path):
    with open(path, "rb") as f:
        return paddle.static.Program.parse_from_string(f.read())


def selected_rows_vars(prog):
    """The names of the program's SelectedRows vars."""
    return {v.name for v in prog.list_vars()
            if v.type == core.VarDesc.VarType.SELECTED_ROWS}


def remove_ops(prog, op_type):
    blk = prog.global_block()
    for i in range(len(blk.ops) - 1, -1, -1):
        if blk.ops[i].type == op_type:
            blk._remove_op(i)


def dense_grads(prog):
    """table id -> the vars the trainer program's dense sends push, in send order."""
    out = {}
    for op in prog.global_block().ops:
        if op.type == "send" and not op.attr("is_sparse"):
            out.setdefault(op.attr("table_id"), []).extend(op.input("X"))
    return out


def dense_tables(prog):
    """table id -> the dense params of the trainer program's dense sends, in send order (a
    sent ClipGradByValue / ByNorm output is its clipped `<param>@GRAD`'s)."""
    ops = prog.global_block().ops
    writer = {n: op for op in ops for n in op.output_arg_names}
    out = {}
    for op in ops:
        if op.type == "send" and not op.attr("is_sparse"):
            for g in op.input("X"):
                w = writer.get(g)
                if not g.endswith("@GRAD") and w is not None and \
                        w.type in ("clip", "clip_by_norm") and w.input("X")[0].endswith("@GRAD"):
                    g = w.input("X")[0]
                out.setdefault(op.attr("table_id"), []).append(
                    g[:-5] if g.endswith("@GRAD") else g)
    return out


def lookup_ids(prog):
    """table id -> the Ids vars of the program's lookups of each table: its
    distributed_lookup_table ops; geo: the lookup_table(_v2) ops of each geo table's param."""
    geo = {s["param"]: str(s["table_id"]) for s in (SETUP.get("geo") or {}).get("sparse", [])}
    out = {}
    for op in prog.global_block().ops:
        if op.type == "distributed_lookup_table":
            out.setdefault(str(op.attr("table_id")), []).extend(op.input("Ids"))
        elif op.type in ("lookup_table", "lookup_table_v2") and op.input("W")[0] in geo:
            out.setdefault(geo[op.input("W")[0]], []).extend(op.input("Ids"))
    return out


def barrier_communicator(desc, scope):
    """FleetWrapper::BarrierWithTable calls Communicator::GetInstance(), which the_one_ps
    never makes in sync mode: a SYNC communicator with no send or recv context, never
    started, only for its barrier."""
    from paddle.distributed.communicator import Communicator
    from paddle.distributed.ps.utils.public import DistributedMode
    kw = {"need_global_step": "0", "trainer_id": INDEX, "trainers": SETUP["trainers"],
          "barrier_table_id": SETUP["barrier_table_id"], "pserver_endpoints": SETUP["pservers"]}
    flags = {"communicator_max_merge_var_num": "1", "communicator_send_wait_times": "5",
             "communicator_thread_pool_size": "1", "communicator_send_queue_size": "1"}
    comm = Communicator(DistributedMode.SYNC, kw, flags)
    comm.init_with_ctx({}, {}, desc, HOSTS, scope)
    return comm


def feed_source(feed_names):
    """step -> this trainer's feed dict: the prediction's feeds.npz, or the user's generator
    (`module:function`, called with the trainer id and the trainers)."""
    if SETUP.get("feeds_fn"):
        mod, _, fn = SETUP["feeds_fn"].partition(":")
        sys.path.insert(0, SETUP.get("cwd") or os.getcwd())
        import importlib
        gen = iter(getattr(importlib.import_module(mod), fn)(INDEX, SETUP["trainers"]))
        return lambda step: {k: np.asarray(v) for k, v in next(gen).items()}
    feeds = np.load(SETUP["feeds"])
    prefix = "t%d." % INDEX if SETUP.get("feeds_per_trainer") else ""

    def at(step):
        head = "s%d.%s" % (step, prefix)
        return {k[len(head):]: feeds[k] for k in feeds.files if k.startswith(head)}
    return at


def failure(step, exc):
    """The op and Paddle's own message of an exception a step raised."""
    text = str(exc)
    m = re.search(r"\[operator < ?([\w.]+) ?> error\]", text)
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    msg = next((x for x in lines if re.match(r"\w+Error: ", x)), lines[-1] if lines else "")
    msg = re.sub(r"\s*\(at [^)]*\)\s*$", "", msg)
    REPORT.update(step=step, error=msg[:600] or type(exc).__name__, op=m.group(1) if m else None)


class RoleTrainer:
    def __init__(self):
        d = SETUP["trainer_dirs"][INDEX]
        self.desc = open(os.path.join(d, "worker_desc.txt")).read()
        self.w = core.DistFleetWrapper()
        self.w.init_worker(self.desc, HOSTS, INDEX)
        self.main, self.startup = load(os.path.join(d, "main.pb")), load(
            os.path.join(d, "startup.pb"))
        self.mode = SETUP["mode"]
        if self.mode == "sync":
            remove_ops(self.main, "send_barrier")
        self.place, self.scope = paddle.CPUPlace(), paddle.static.global_scope()
        self.exe = paddle.static.Executor(self.place)
        self.dense = dense_tables(self.main)
        self.grads = dense_grads(self.main)
        self.ids = lookup_ids(self.main)
        self.touched = {}
        self.trace = []
        self.pulls = 0
        self.comm = None

    def start(self):
        self.exe.run(self.startup)
        if SETUP.get("init"):
            rows = selected_rows_vars(self.startup)
            for name, value in np.load(SETUP["init"]).items():
                if self.scope.find_var(name) is None:
                    continue
                if name in rows:    # a SelectedRows param (sparse_embedding's): its value
                    sr = self.scope.var(name).get_selected_rows()
                    sr.set_height(int(value.shape[0]))
                    sr.set_rows(list(range(int(value.shape[0]))))
                    sr.get_tensor().set(value, self.place)
                else:
                    self.scope.var(name).get_tensor().set(value, self.place)
        if self.mode == "sync":
            self.comm = barrier_communicator(self.desc, self.scope)
        if self.mode == "geo":
            import rolegeo
            self.geo = rolegeo.GeoStart(self, SETUP, INDEX, HOSTS, log, all_reach, mark)
            self.geo.start()
            return
        all_reach("started")
        if INDEX == 0:
            for tid, names in sorted(self.dense.items()):
                self.w.push_dense_params(self.scope, tid, names)
            self.w.client_flush()
        all_reach("pushed")
        self.pull()
        if TURNS:   # trainer 0's first push waits for every trainer's first pull
            all_reach("ready")

    def pull(self):
        for tid, names in sorted(self.dense.items()):
            self.w.pull_dense_params(self.scope, tid, names)
        if SETUP.get("trace"):      # what each pull read: the prediction follows it (buckets.py)
            j = self.pulls
            self.pulls += 1
            self.trace.append({"%d/%d" % (j, tid): np.concatenate(
                [np.array(self.scope.find_var(nm).get_tensor()).reshape(-1) for nm in names])
                for tid, names in sorted(self.dense.items())})

    def step(self, s, feed):
        REPORT["step"] = s
        fetch = sorted({n for names in self.ids.values() for n in names})
        sent = sorted({g for gs in self.grads.values() for g in gs}) if SETUP.get("trace") \
            else []
        try:
            got = self.exe.run(self.main, feed=feed, fetch_list=fetch + sent)
        except Exception as e:      # noqa: BLE001 - Paddle raises many kinds; all are reported
            failure(s, e)
            raise
        values = dict(zip(fetch + sent, got))
        if sent:    # what each step pushed to each dense table (buckets.py)
            self.trace.append({"g%d/%d" % (s, tid): np.concatenate(
                [np.asarray(values[g], "float32").reshape(-1) for g in gs])
                for tid, gs in sorted(self.grads.items())})
        for tid, names in self.ids.items():
            keys = self.touched.setdefault(tid, set())
            for n in names:
                keys.update(int(k) for k in np.asarray(values[n]).reshape(-1))
        if self.mode == "geo":
            self.geo.after_step(s)
            return
        self.w.client_flush()
        if self.mode == "async":
            self.pull()

    def sync_barrier(self, s):
        self.w.barrier(0)       # the BarrierTable: once every trainer arrived, the tables pour
        all_reach("poured.%d" % s)
        self.pull()

    def train(self):
        n, steps = SETUP["trainers"], SETUP["steps"]
        feed_at = feed_source(None)
        for s in range(steps):
            feed = feed_at(s)
            if TURNS:
                wait_for("turn.%d" % (s * n + INDEX))
            self.step(s, feed)
            if TURNS:
                mark("turn.%d" % (s * n + INDEX + 1))
            if self.mode == "sync":
                self.sync_barrier(s)
                if TURNS:
                    all_reach("pulled.%d" % s)
            log("step", s, "done")

    def finish(self):
        all_reach("trained")
        out = {}
        for tid, names in sorted(self.dense.items()):
            for nm in names:
                out["dense/" + nm] = np.array(self.scope.find_var(nm).get_tensor())
        keys = self.keys_to_read()
        if self.mode == "geo":
            out.update(self.geo.local_rows(keys))
        elif keys:
            out.update(self.sparse_rows(keys))
        np.savez(os.path.join(RUN, TAG + ".npz"), **out)
        if self.trace:
            np.savez(os.path.join(RUN, "trace%d.npz" % INDEX),
                     **{k: v for pull in self.trace for k, v in pull.items()})
        REPORT["step"] = "done"
        write_report()
        if SETUP.get("save"):
            save(out)
        all_reach("written")
        if INDEX == 0:
            self.w.stop_server()
        log("done")

    def keys_to_read(self):
        """table id -> keys: the prediction's (local runs: trainer 0 reads them), else the
        keys this trainer looked up."""
        if SETUP.get("keys") is not None:
            return SETUP["keys"] if INDEX == 0 or self.mode == "geo" else {}
        return {tid: sorted(k) for tid, k in self.touched.items()}

    def sparse_rows(self, keys):
        out = {}
        for tid, ks in sorted(keys.items()):
            if not ks:
                continue
            width = SETUP["widths"][str(tid)]
            prog = lookup_program(int(tid), width)
            self.scope.var("W_%s" % tid).get_tensor().set(
                np.zeros((1, width), "float32"), self.place)
            ids = np.asarray(ks, "int64").reshape(-1, 1)
            got, = self.exe.run(prog, feed={"ids": ids}, fetch_list=["out_%s" % tid])
            out["sparse/%s" % tid] = np.asarray(got)
            out["keys/%s" % tid] = ids.reshape(-1)
        return out


def lookup_program(tid, width):
    prog = paddle.static.Program()
    with paddle.static.program_guard(prog, paddle.static.Program()):
        b = prog.global_block()
        ids = paddle.static.data("ids", [-1, 1], "int64")
        w = b.create_var(name="W_%d" % tid, shape=[1, width], dtype="float32", persistable=True)
        out = b.create_var(name="out_%d" % tid, shape=[-1, width], dtype="float32")
        b.append_op(type="distributed_lookup_table", inputs={"Ids": [ids], "W": [w]},
                    outputs={"Outputs": [out]},
                    attrs={"table_id": int(tid), "is_distributed": False, "is_test": True,
                           "lookup_table_version": "lookup_table", "padding_idx": -1,
                           "dtype": 5})
    return prog


def save(values):
    """--save DIR: the dense params as NAME.npy, each sparse table's rows as TABLE.npz (keys,
    rows)."""
    d = os.path.join(SETUP["save"], "trainer_%d" % INDEX)
    os.makedirs(d, exist_ok=True)
    for k, v in sorted(values.items()):
        kind, _, name = k.partition("/")
        if kind == "dense":
            np.save(os.path.join(d, name + ".npy"), v)
        elif kind in ("sparse", "local"):
            np.savez(os.path.join(d, "table_%s.npz" % name), keys=values["keys/" + name],
                     rows=v)


def trainer():
    tr = None
    try:
        if not TURNS:   # a cluster: fleet's barrier (gloo), as Paddle's init_worker uses it
            import paddle.distributed.fleet as fleet
            from paddle.distributed.fleet.base import role_maker
            fleet.init(role_maker.PaddleCloudRoleMaker())
        tr = RoleTrainer()
        REPORT["step"] = "start"
        tr.start()
        tr.train()
        tr.finish()
    except SystemExit:
        raise
    except BaseException as e:      # noqa: BLE001 - written down for the launcher, then exit 1
        if REPORT["error"] is None:
            REPORT["error"] = ("%s: %s" % (type(e).__name__, str(e).strip().splitlines()[-1]
                                           if str(e).strip() else ""))[:600]
        write_report()
        traceback.print_exc()
        if TURNS:
            mark("abort")
        sys.stdout.flush()
        os._exit(1)
    sys.stdout.flush()
    os._exit(0)         # the geo communicator's thread may still wait for ids: do not join it


if __name__ == "__main__":
    pserver() if KIND == "pserver" else trainer()
