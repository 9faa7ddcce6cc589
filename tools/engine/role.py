"""One role of a style-ps split on Paddle 2.6.2's own brpc parameter server (run.py starts them).

    role.py pserver INDEX RUN_DIR      serve the tables of pserver INDEX's server_desc.txt
    role.py trainer ID RUN_DIR         run trainer ID's programs with its worker_desc.txt

RUN_DIR holds setup.json (from run.py), the split (split/), feeds.npz and init.npz (predict.py).
No fleet, no role maker: `core.DistFleetWrapper` (the singleton the trainer's ops use) is started
with the split's descriptors and the pservers' addresses. A trainer:
- runs its startup program, then sets every var init.npz holds (trainer 0's values in the
  prediction: Paddle's own initializers draw from another generator);
- trainer 0 pushes the dense params of each dense table its sends name (push_dense_params), every
  trainer pulls them (the runtime's init_worker);
- per step, in turns (trainer 0 first, a file token passed on: the schedule simulate runs; the
  runtime itself would interleave trainers at random): feeds its shard, runs its main program
  (send_barrier removed: Paddle 2.6.2's op needs a communicator the_one_ps never makes in sync
  mode), flushes the client; async: pulls the dense tables; sync: once every trainer has had its
  turn, calls the barrier table (which pours the dense tables), then pulls them;
- at the end writes trainer<ID>.json: its dense params and, for trainer 0, each sparse table's
  rows of the keys the prediction lists (pulled with a distributed_lookup_table).
"""
import json
import os
import sys
import time

import numpy as np
import paddle
from paddle.base import core

paddle.enable_static()
KIND, INDEX, RUN = sys.argv[1], int(sys.argv[2]), sys.argv[3]
SETUP = json.load(open(os.path.join(RUN, "setup.json")))
HOSTS = [core.PSHost("127.0.0.1", p, i).serialize_to_string()
         for i, p in enumerate(SETUP["ports"])]


def log(*a):
    print("[%s %d %.1fs]" % (KIND, INDEX, time.time() - T0), *a, flush=True)


def wait_for(name, timeout=120):
    path = os.path.join(RUN, "sync", name)
    t = time.time()
    while not os.path.exists(path):
        if time.time() - t > timeout:
            raise SystemExit("role.py: timed out waiting for %s" % name)
        time.sleep(0.01)


def mark(name):
    open(os.path.join(RUN, "sync", name), "w").close()


def all_reach(name):
    """A file barrier of the trainers."""
    mark("%s.%d" % (name, INDEX))
    for t in range(SETUP["trainers"]):
        wait_for("%s.%d" % (name, t))


def pserver():
    text = open(os.path.join(SETUP["pserver_dirs"][INDEX], "server_desc.txt")).read()
    s = core.DistFleetWrapper()
    s.init_server(text, HOSTS, INDEX, SETUP["trainers"], [])
    log("serving on", SETUP["ports"][INDEX])
    s.run_server("127.0.0.1", SETUP["ports"][INDEX])


def load(path):
    with open(path, "rb") as f:
        return paddle.static.Program.parse_from_string(f.read())


def dense_tables(prog):
    out = {}
    for op in prog.global_block().ops:
        if op.type == "send" and not op.attr("is_sparse"):
            out.setdefault(op.attr("table_id"), []).extend(
                g[:-5] if g.endswith("@GRAD") else g for g in op.input("X"))
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
                    attrs={"table_id": int(tid), "is_distributed": False, "is_test": False,
                           "lookup_table_version": "lookup_table", "padding_idx": -1,
                           "dtype": 5})
    return prog


def barrier_communicator(desc, scope):
    """The barrier of a sync step goes through the Communicator (FleetWrapper::BarrierWithTable
    calls Communicator::GetInstance()), which the_one_ps never makes in sync mode: a SYNC
    communicator with no send or recv context, never started, only for its barrier."""
    import re
    from paddle.distributed.communicator import Communicator
    from paddle.distributed.ps.utils.public import DistributedMode
    tables = re.findall(r'table_id: (\d+)\n\s*table_class: "(\w+)"', desc)
    barrier = next(int(t) for t, c in tables if c == "BarrierTable")
    kw = {"need_global_step": "0", "trainer_id": INDEX, "trainers": SETUP["trainers"],
          "barrier_table_id": barrier,
          "pserver_endpoints": ["127.0.0.1:%d" % p for p in SETUP["ports"]]}
    flags = {"communicator_max_merge_var_num": "1", "communicator_send_wait_times": "5",
             "communicator_thread_pool_size": "1", "communicator_send_queue_size": "1"}
    comm = Communicator(DistributedMode.SYNC, kw, flags)
    comm.init_with_ctx({}, {}, desc, HOSTS, scope)
    return comm


def trainer():
    d = SETUP["trainer_dirs"][INDEX]
    w = core.DistFleetWrapper()
    desc = open(os.path.join(d, "worker_desc.txt")).read()
    w.init_worker(desc, HOSTS, INDEX)
    main, startup = load(os.path.join(d, "main.pb")), load(os.path.join(d, "startup.pb"))
    blk = main.global_block()
    for i in range(len(blk.ops) - 1, -1, -1):
        if blk.ops[i].type == "send_barrier":
            blk._remove_op(i)
    place, scope = paddle.CPUPlace(), paddle.static.global_scope()
    exe = paddle.static.Executor(place)
    comm = barrier_communicator(desc, scope) if SETUP["mode"] == "sync" else None  # noqa: F841
    exe.run(startup)
    for name, value in np.load(os.path.join(RUN, "init.npz")).items():
        if scope.find_var(name) is not None:
            scope.var(name).get_tensor().set(value, place)
    dense = dense_tables(main)
    all_reach("started")
    if INDEX == 0:
        for tid, names in sorted(dense.items()):
            w.push_dense_params(scope, tid, names)
        w.client_flush()
    all_reach("pushed")
    for tid, names in sorted(dense.items()):
        w.pull_dense_params(scope, tid, names)
    feeds = np.load(os.path.join(RUN, "feeds.npz"))
    n, sync = SETUP["trainers"], SETUP["mode"] == "sync"
    for s in range(SETUP["steps"]):
        wait_for("turn.%d" % (s * n + INDEX))
        feed = {k.split(".", 2)[2]: feeds[k] for k in feeds.files
                if k.startswith("s%d.t%d." % (s, INDEX))}
        exe.run(main, feed=feed)
        w.client_flush()
        if not sync:
            for tid, names in sorted(dense.items()):
                w.pull_dense_params(scope, tid, names)
        mark("turn.%d" % (s * n + INDEX + 1))
        if sync:
            w.barrier(0)
            all_reach("poured.%d" % s)
            for tid, names in sorted(dense.items()):
                w.pull_dense_params(scope, tid, names)
            all_reach("pulled.%d" % s)
    finish(w, exe, scope, dense)


def finish(w, exe, scope, dense):
    res = {"dense": {}, "sparse": {}}
    all_reach("trained")        # every turn done: the tables hold their final rows
    for tid, names in sorted(dense.items()):   # what the trainer holds (its last pull)
        for nm in names:
            res["dense"][nm] = np.array(scope.find_var(nm).get_tensor()).astype(
                "float64").ravel().tolist()
    if INDEX == 0:
        pred = json.load(open(os.path.join(RUN, "prediction.json")))
        for tid, t in pred["sparse"].items():
            if not t["keys"]:
                continue
            prog = lookup_program(int(tid), t["width"])
            scope.var("W_%s" % tid).get_tensor().set(
                np.zeros((1, t["width"]), "float32"), paddle.CPUPlace())
            ids = np.asarray(t["keys"], "int64").reshape(-1, 1)
            out, = exe.run(prog, feed={"ids": ids}, fetch_list=["out_%s" % tid])
            res["sparse"][tid] = np.asarray(out).astype("float64").tolist()
    json.dump(res, open(os.path.join(RUN, "trainer%d.json" % INDEX), "w"))
    all_reach("written")
    if INDEX == 0:
        w.stop_server()
    w.stop_worker()
    log("done")


T0 = time.time()
if __name__ == "__main__":
    pserver() if KIND == "pserver" else trainer()
