"""simulate's prediction of a style-ps split, written for a run on Paddle's own runtime.

    predict.py CASE_DIR OUT [--steps N] [--batch B] [--seed S] [--paddle]

CASE_DIR holds main.pb, startup.pb, cluster.yaml (style ps). The split is ours (made here) or,
with --paddle, Paddle's own (CASE_DIR/expected). Written to OUT:
  split/          the split, every descriptor with `initial_range: 0.0` (Paddle's pservers draw
                  new sparse rows from a clock-seeded generator; 0 makes them reproducible);
  feeds.npz       each trainer's feed of each step ("s<step>.t<trainer>.<var>");
  init.npz        trainer 0's values after its startup (the runtime's trainers start from them);
  prediction.json the values simulate's in-process cluster (float32) ends with: each trainer's
                  dense params, and each sparse table's pulled rows of the keys it holds.
Runs in the project's venv (it imports transpile).
"""
import argparse
import json
import os
import re
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from transpile.core.config import load_config  # noqa: E402
from transpile.format import programio  # noqa: E402
from transpile.simulate import split_programs_from  # noqa: E402
from transpile.simulate.model.executor import Executor  # noqa: E402
from transpile.simulate.model.feeds import Feeder  # noqa: E402
from transpile.simulate.runs.loading import load_descs, load_split_dir  # noqa: E402
from transpile.simulate.ps.cluster import PsCluster  # noqa: E402
from transpile.simulate.ps.tables import TableOptions  # noqa: E402
from transpile.simulate.refs.reference import Reference, snapshot  # noqa: E402
from transpile.split import split_to_folder  # noqa: E402


def make_split(case, cfg, main, startup, out, paddle):
    dst = os.path.join(out, "split")
    if os.path.exists(dst):
        shutil.rmtree(dst)
    if paddle:
        shutil.copytree(os.path.join(case, "expected"), dst)
    else:
        split_to_folder(main, startup, cfg, dst)
    for d, _, files in os.walk(dst):
        for f in files:
            if f.endswith("_desc.txt"):
                p = os.path.join(d, f)
                text = open(p).read()
                open(p, "w").write(re.sub(r"initial_range: [-0-9.eE+]+", "initial_range: 0.0",
                                          text))
    return dst


def main_():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--paddle", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cfg = load_config(os.path.join(a.case, "cluster.yaml"))
    main = programio.load(os.path.join(a.case, "main.pb"))
    startup = programio.load(os.path.join(a.case, "startup.pb"))
    split_dir = make_split(a.case, cfg, main, startup, a.out, a.paddle)
    programs, _ = load_split_dir(split_dir)
    texts = load_descs(split_dir)
    fdt = np.float32
    ref = Reference(main, startup)
    orig = Executor("original startup", startup, float_dtype=fdt, seed=a.seed)
    orig.run_block(0)
    ref.init = {k: snapshot(v) for k, v in orig.scope.vars.items() if not hasattr(v, "rows")}
    sp = split_programs_from(programs, {}, cfg)
    cluster = PsCluster(sp, texts, cfg, float_dtype=fdt, seed=a.seed, reference=ref,
                        options=TableOptions(seed=a.seed, lenient_initializers=True))
    n = len(cluster.trainers)
    per = a.batch // n
    for tr in cluster.trainers:
        tr.ex_startup.run_block(0)
    first = cluster.trainers[0]
    init = {}
    for name, v in first.scope.vars.items():
        var = first.main.find_var(name) or first.ex_startup.program.find_var(name)
        if isinstance(v, np.ndarray) and var is not None and var.is_persistable:
            init[name] = v
    np.savez(os.path.join(a.out, "init.npz"), **init)
    cluster.init_worker()
    feeder = Feeder(main, a.batch, a.seed, fdt, trainers=n)
    feeds = {}
    for s in range(a.steps):
        glob = feeder.feed(s)
        shards = [feeder.shard(glob, t.tid, n) for t in cluster.trainers]
        for t, shard in enumerate(shards):
            for name, (arr, lod) in shard.items():
                if lod:
                    sys.exit("predict: feed %s has a LoD; the runtime check feeds dense tensors"
                             % name)
                feeds["s%d.t%d.%s" % (s, t, name)] = arr
        cluster.step(shards, s, per)
    np.savez(os.path.join(a.out, "feeds.npz"), **feeds)
    json.dump(prediction(cluster, a, cfg, sorted({k.split(".", 2)[2] for k in feeds})),
              open(os.path.join(a.out, "prediction.json"), "w"), indent=1, sort_keys=True)
    print("predict: %s (%s split), %d steps, batch %d: %s" % (
        a.case, "Paddle's" if a.paddle else "our", a.steps, a.batch, a.out))


def prediction(cluster, a, cfg, feed_names):
    dense = {}
    for tr in cluster.trainers:
        vals = {}
        for tid, names in tr.dense.items():
            for n in names:
                vals[n] = np.asarray(tr.scope.get(n), dtype=np.float64).ravel().tolist()
        dense["trainer_%d" % tr.tid] = vals
    sparse = {}
    for tid, param in sorted(cluster.trainers[0].client.items()):
        if param.table_class not in ("MemorySparseTable", "SSDSparseTable"):
            continue
        keys = sorted({k for s in cluster.servers for k in s.table(tid).keys()})
        rows = np.zeros((0, 0))
        if keys:
            rows = np.concatenate([_pull(cluster, tid, param, [k]) for k in keys])
        sparse[str(tid)] = {"keys": keys, "rows": rows.astype(np.float64).tolist(),
                            "width": int(cluster.servers[0].table(tid).accessor.select_dim)}
    from transpile.output.result import endpoint_dir
    split = os.path.abspath(os.path.join(a.out, "split"))
    tdirs = []
    for t in range(len(cluster.trainers)):
        d = os.path.join(split, "trainer_%d" % t)
        tdirs.append(d if os.path.isdir(d) else os.path.join(split, "trainer_0"))
    return {"case": a.case, "mode": cfg.mode, "trainer_dirs": tdirs,
            "pserver_dirs": [os.path.join(split, endpoint_dir(ep)) for ep in cfg.pservers], "trainers": len(cluster.trainers),
            "pservers": len(cluster.servers), "steps": a.steps, "batch": a.batch,
            "paddle_split": a.paddle, "feeds": feed_names, "dense": dense, "sparse": sparse}


def _pull(cluster, tid, param, keys):
    from transpile.simulate.ps.tables.server import sparse_server
    s = int(sparse_server(keys, int(param.shard_num) or 1, len(cluster.servers))[0])
    return cluster.servers[s].table(tid).pull(keys)


if __name__ == "__main__":
    main_()
