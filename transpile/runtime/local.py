"""`run --local`: every pserver and trainer of a split as processes on 127.0.0.1, each running
role.py under the Paddle Python (interpreter.py), trained from simulate's feeds and initial
values (predict.py); their results collected for the comparison (verdict.py).

Ports: each pserver listens on a free port of 127.0.0.1 (or `base_port + i`); each trainer's
brpc client service also binds the first free port from 8500 up on this host (fixed in Paddle,
whatever the pservers' ports), which `run` checks and names when busy.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..core.errors import UserError
from . import buckets, predict as predict_mod
from .rundir import barrier_table_id, copy_split, read_texts, role_dirs, write_json

ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "role.py")
BRPC_CLIENT_PORT = 8500


@dataclass
class LocalOptions:
    steps: int = 5
    batch: int = 8
    seed: int = 0
    push_every: Optional[int] = None
    base_port: Optional[int] = None
    timeout: float = 300.0
    rtol: float = 1e-6


@dataclass
class LocalRun:
    """A finished local run: the prediction, each trainer's report and values."""
    prediction: predict_mod.Prediction
    work: str
    mode: str
    reports: dict = field(default_factory=dict)     # "trainer0" -> role.py's report
    values: dict = field(default_factory=dict)      # "trainer_0" -> {"dense/x": array}
    exits: dict = field(default_factory=dict)       # "trainer0" -> exit code
    deaths: dict = field(default_factory=dict)      # pserver index -> its exit code, when it
    #                                                 ended before the trainers did
    seconds: float = 0.0
    notes: list = field(default_factory=list)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def busy(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def brpc_note(trainers: int) -> Optional[str]:
    """A note when the ports Paddle's brpc client services take (8500 up) are in use."""
    taken = [p for p in range(BRPC_CLIENT_PORT, BRPC_CLIENT_PORT + trainers) if busy(p, "")]
    if not taken:
        return None
    return ("ports %s are in use on this host: each trainer's brpc client service (Paddle's, "
            "fixed) binds the first free port from %d up; another Paddle runtime is running?"
            % (", ".join(map(str, taken)), BRPC_CLIENT_PORT))


def prepare(split_dir, config, opts: LocalOptions, work: str):
    """The run folder: the split's copy (initial_range 0), the prediction, feeds, init."""
    trainers, pservers, notes = role_dirs(split_dir, config)
    t_dirs, p_dirs = copy_split(trainers, pservers, os.path.join(work, "split"), True)
    texts = read_texts(t_dirs, p_dirs, config)
    sp = split_programs(t_dirs)
    pred = predict_mod.predict(sp, texts, config, **_kw(opts))
    pred.notes[:0] = notes
    if pred.error is None and not predict_mod.adam_dense(texts):
        pred.spread = _spread(sp, texts, config, opts, pred)
    np.savez(os.path.join(work, "feeds.npz"), **pred.feeds)
    np.savez(os.path.join(work, "init.npz"), **pred.init)
    return t_dirs, p_dirs, sp, texts, pred


def clear_run(work):
    """An empty token folder and no results of an earlier run in `work` (a --work folder
    used again: an old abort token stopped every trainer at once, an old trainer<id>.npz
    stood for a trainer that wrote none)."""
    import re
    import shutil
    shutil.rmtree(os.path.join(work, "sync"), ignore_errors=True)
    os.makedirs(os.path.join(work, "sync"))
    for name in os.listdir(work):
        if re.fullmatch(r"(trainer|pserver|trace)\d+\.(npz|json|log)", name):
            os.remove(os.path.join(work, name))


def _kw(opts):
    return dict(training=predict_mod.Training(opts.steps, opts.batch, opts.seed,
                                              opts.push_every))


def _spread(sp, texts, config, opts, pred):
    """The prediction's own spread: its trainers' ops in float64 (an adaptive optimizer turns
    rounding noise into steps of its learning rate)."""
    other = predict_mod.predict(sp, texts, config, fdt=np.float64, **_kw(opts))
    return predict_mod.spread(pred, [other] if other.error is None else [])


def read_trace(path):
    """A trainer's trace<t>.npz: [{table id: pulled values}] in pull order, and {(step, table
    id): the gradient the step pushed}."""
    pulls, grads = {}, {}
    with np.load(path) as z:
        for k in z.files:
            j, tid = k.split("/")
            if j.startswith("g"):
                grads[(int(j[1:]), int(tid))] = np.asarray(z[k])
            else:
                pulls.setdefault(int(j), {})[int(tid)] = np.asarray(z[k])
    return [pulls.get(j, {}) for j in range(max(pulls, default=-1) + 1)], grads


def pushed_values(pred, follow, runtime=None):
    """The gradients each trainer pushed, every push of a table one after the other, as
    values of the prediction ("grad/<table id>"), and of the runtime's values (`runtime`)."""
    for (t, tid), pushes in sorted(follow.pushed.items()):
        own = np.concatenate([a for _, a, _ in pushes]).astype(np.float64)
        pred.values.setdefault("trainer_%d" % t, {})["grad/%d" % tid] = own
        if runtime is not None:
            runtime.setdefault("trainer_%d" % t, {})["grad/%d" % tid] = np.concatenate(
                [b for _, _, b in pushes]).astype(np.float64)


def gradient_notes(follow, wide, rtol) -> list:
    """A line per table on the pushes whose gradients the prediction took from the runtime, and
    one per push the prediction's gradient differs from the runtime's beyond rtol * max(1, its
    largest value) plus the float64 variant's difference from it (`wide`: its rounding)."""
    out = []
    for (t, tid), pushes in sorted(follow.pushed.items()):
        others = wide.pushed.get((t, tid), [])
        worst, off = 0.0, []
        for i, (s, own, got) in enumerate(pushes):
            d = float(np.max(np.abs(own - got), initial=0.0))
            r = float(np.max(np.abs(own - others[i][1]), initial=0.0)) \
                if i < len(others) and others[i][1].shape == own.shape else 0.0
            worst = max(worst, d)
            if d > rtol * max(1.0, float(np.max(np.abs(got), initial=0.0))) + r:
                off.append("step %d by %.1e (float64's rounding %.1e)" % (s, d, r))
        out.append("dense table %d, trainer_%d: each of its %d pushes applies the gradient the "
                   "runtime's trainer pushed; the prediction's, from the same pulled values, "
                   "is %.1e from it at most (float32 rounding that Adam grows; docs/running.md, "
                   "\"Dense Adam\")%s" % (tid, t, len(pushes), worst,
                                          "; beyond the tolerance: " + ", ".join(off)
                                          if off else ""))
    return out


def follow_runtime(run, sp, texts, config, opts):
    """A split with a dense Adam table: the prediction again, its buckets in the orders the
    runtime's threads took and its pushes the runtime's gradients (buckets.py), read off the
    trainers' pulls and pushes (trace<t>.npz); the spread: the same in float64."""
    trace, grads = {}, {}
    for t in range(config.trainers):
        f = os.path.join(run.work, "trace%d.npz" % t)
        if not os.path.isfile(f):
            return
        trace[t], pushed = read_trace(f)
        grads.update({(t, s, tid): g for (s, tid), g in pushed.items()})
    follow = buckets.Follower(trace=trace, grads=grads)
    pred = predict_mod.predict(sp, texts, config, follow=follow, **_kw(opts))
    if pred.error is not None:
        return
    wide = buckets.Follower(trace=trace, grads=grads)
    other = predict_mod.predict(sp, texts, config, follow=wide, fdt=np.float64, **_kw(opts))
    pushed_values(pred, follow, run.values)
    base = run.prediction
    pred.notes = base.notes + [n for n in pred.notes if n not in base.notes] + \
        follow.notes() + gradient_notes(follow, wide, max(opts.rtol, buckets.GRAD_RTOL))
    if other.error is None:
        pushed_values(other, wide)
        pred.spread = predict_mod.spread(pred, [other])
    run.prediction = pred


def split_programs(trainer_dirs):
    from ..format import programio
    from ..simulate.runs.splitprograms import SplitPrograms
    sp = SplitPrograms()
    for t, d in enumerate(trainer_dirs):
        sp.trainers[t] = {k: programio.load(os.path.join(d, k + ".pb"))
                          for k in ("main", "startup")}
    return sp


def run_local(split_dir, config, paddle, opts: LocalOptions, work: str, progress=None):
    """Prepare, start every role, wait, collect: a LocalRun."""
    progress = progress or (lambda msg: None)
    clear_run(work)
    progress("predicting")
    t_dirs, p_dirs, sp, texts, pred = prepare(split_dir, config, opts, work)
    n_ps = len(config.pservers)
    ports = [opts.base_port + i if opts.base_port else free_port() for i in range(n_ps)]
    for p in ports:
        if busy(p):
            raise UserError("port %d of 127.0.0.1 is in use (a pserver of this run listens "
                            "there): choose another --port-base" % p)
    run = LocalRun(pred, work, config.mode)
    note = brpc_note(config.trainers)
    if note:
        run.notes.append(note)
    barrier = barrier_table_id(texts["trainer_0/worker_desc.txt"])
    setup = {"run_dir": work, "mode": config.mode, "trainers": config.trainers,
             "pservers": ["127.0.0.1:%d" % p for p in ports], "steps": opts.steps,
             "trainer_dirs": t_dirs, "pserver_descs": [os.path.join(d, "server_desc.txt")
                                                       for d in p_dirs],
             "schedule": "turns", "feeds": os.path.join(work, "feeds.npz"),
             "feeds_per_trainer": True, "init": os.path.join(work, "init.npz"),
             "keys": pred.keys, "widths": pred.widths, "barrier_table_id": barrier,
             "wait": opts.timeout, "trace": predict_mod.adam_dense(texts)}
    if pred.geo is not None:
        setup["geo"] = dict(pred.geo, wait=opts.timeout)
    write_json(os.path.join(work, "setup.json"), setup)
    open(os.path.join(work, "sync", "turn.0"), "w").close()
    progress("training on Paddle %s's runtime" % paddle.paddle)
    _launch(run, paddle, setup, opts)
    _collect(run, config)
    if setup["trace"] and pred.error is None:
        progress("following the dense Adam tables' bucket orders")
        follow_runtime(run, sp, texts, config, opts)
    return run


def _start(paddle, work, kind, i):
    log = open(os.path.join(work, "%s%d.log" % (kind, i)), "w")
    env = paddle.env()
    env.update(GLOG_v="0", FLAGS_call_stack_level="2", CPU_NUM="1", OMP_NUM_THREADS="1",
               PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0",
               # geo: the trainers read their communicator's own lines (rolegeo.py)
               GLOG_vmodule="communicator=1" if kind == "trainer" else "")
    for k in [k for k in env if k.startswith(("PADDLE_", "TRAINING_ROLE"))]:
        del env[k]
    return subprocess.Popen([paddle.executable, ROLE, os.path.join(work, "setup.json"), kind,
                             str(i)], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def _wait_listening(servers, ports, deadline):
    for p, port in zip(servers, ports):
        while time.time() < deadline and p.poll() is None:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)


def _launch(run, paddle, setup, opts):
    t0 = time.time()
    ports = [int(ep.rsplit(":", 1)[1]) for ep in setup["pservers"]]
    servers = [_start(paddle, run.work, "pserver", i) for i in range(len(ports))]
    trainers = []
    try:
        _wait_listening(servers, ports, t0 + 60)
        trainers = [_start(paddle, run.work, "trainer", t) for t in range(setup["trainers"])]
        _watch(run, servers, trainers, t0 + opts.timeout)
        for i, p in enumerate(servers):
            if "pserver%d" % i in run.exits:
                continue
            try:
                run.exits["pserver%d" % i] = p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _kill(p)
                run.exits["pserver%d" % i] = "stopped"
    finally:
        for p in servers + trainers:
            if p.poll() is None:
                _kill(p)
    run.seconds = round(time.time() - t0, 1)


def _watch(run, servers, trainers, deadline):
    """Wait for the trainers; a pserver that fails before they end (exits other than 0, or
    is killed: trainer 0 stops them at the end, and they exit 0) or the deadline stops the
    run: the trainers left are told (the abort token), then stopped."""
    abort = os.path.join(run.work, "sync", "abort")
    left = dict(enumerate(trainers))
    while left:
        for t, p in list(left.items()):
            if p.poll() is not None:
                run.exits["trainer%d" % t] = p.returncode
                del left[t]
        # a pserver trainer 0 stopped at the end exits 0, maybe before the others are gone
        dead = [i for i, p in enumerate(servers) if p.poll() not in (None, 0)]
        late = time.time() > deadline
        # a trainer that failed: the others may wait inside Paddle for it (a barrier of
        # init_params), where no abort token reaches them
        failed = any(rc not in (0, 4) for t, rc in run.exits.items() if t.startswith("trainer"))
        if left and (dead or late or failed):
            for i in dead:
                run.exits["pserver%d" % i] = run.deaths[i] = servers[i].returncode
            open(abort, "w").close()
            end = time.time() + (0 if late else 3)
            for t, p in left.items():
                try:
                    run.exits["trainer%d" % t] = p.wait(timeout=max(0.1, end - time.time()))
                except subprocess.TimeoutExpired:
                    _kill(p)
                    run.exits["trainer%d" % t] = "timeout" if late else "stopped"
            return
        time.sleep(0.05)


def _kill(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def _collect(run, config):
    for t in range(config.trainers):
        tag = "trainer%d" % t
        f = os.path.join(run.work, tag + ".json")
        if os.path.isfile(f):
            with open(f, encoding="utf-8") as fh:
                run.reports[tag] = json.load(fh)
        v = os.path.join(run.work, tag + ".npz")
        if os.path.isfile(v):
            with np.load(v) as z:
                run.values["trainer_%d" % t] = {k: np.asarray(z[k]) for k in z.files}
