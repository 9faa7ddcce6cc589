"""Train a predicted ps split (predict.py's OUT) on Paddle 2.6.2's own runtime.

    run.py OUT RUN_DIR [--base PORT] [--timeout S]

Starts one role.py process per pserver and per trainer on 127.0.0.1 (pserver i on BASE + i),
with Paddle's interpreter (this one) and protobuf 4.25 first on the path ($PROTOBUF425), waits
for the trainers, stops the pservers it started, and writes RUN_DIR/runtime.json: each trainer's
dense params and trainer 0's sparse rows. Logs: RUN_DIR/<role>.log. One run at a time: each
trainer's brpc client also binds 127.0.0.1:8500 and up, whatever BASE says.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("run")
    ap.add_argument("--base", type=int, default=23400)
    ap.add_argument("--timeout", type=int, default=240)
    a = ap.parse_args()
    pred = json.load(open(os.path.join(a.out, "prediction.json")))
    if os.path.exists(a.run):
        shutil.rmtree(a.run)
    os.makedirs(os.path.join(a.run, "sync"))
    for f in ("feeds.npz", "init.npz", "prediction.json"):
        shutil.copy(os.path.join(a.out, f), a.run)
    n_ps, n_tr = pred["pservers"], pred["trainers"]
    setup = {"ports": [a.base + i for i in range(n_ps)], "trainers": n_tr,
             "mode": pred["mode"], "steps": pred["steps"],
             "pserver_dirs": pred["pserver_dirs"], "trainer_dirs": pred["trainer_dirs"]}
    json.dump(setup, open(os.path.join(a.run, "setup.json"), "w"), indent=1)
    open(os.path.join(a.run, "sync", "turn.0"), "w").close()
    env = dict(os.environ, PYTHONPATH=os.environ.get("PROTOBUF425", "/work/paddle/pb425"),
               GLOG_v="0", FLAGS_call_stack_level="2")

    def start(kind, i):
        log = open(os.path.join(a.run, "%s%d.log" % (kind, i)), "w")
        return subprocess.Popen([sys.executable, os.path.join(HERE, "role.py"), kind, str(i),
                                 a.run], stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    t0 = time.time()
    servers = [start("pserver", i) for i in range(n_ps)]
    time.sleep(5)
    trainers = [start("trainer", t) for t in range(n_tr)]
    rcs = []
    for p in trainers:
        try:
            rcs.append(p.wait(timeout=max(1, a.timeout - (time.time() - t0))))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rcs.append("timeout")
    time.sleep(2)
    for p in servers:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    res = {"rc": rcs, "seconds": round(time.time() - t0, 1), "trainers": {}}
    for t in range(n_tr):
        f = os.path.join(a.run, "trainer%d.json" % t)
        if os.path.exists(f):
            res["trainers"]["trainer_%d" % t] = json.load(open(f))
    json.dump(res, open(os.path.join(a.run, "runtime.json"), "w"))
    print("run: %s: trainers exit %s in %.0f s" % (a.run, rcs, res["seconds"]))
    sys.exit(0 if all(r == 0 for r in rcs) else 1)


if __name__ == "__main__":
    main()
