"""What simulate holds at once (issue 44: `make test` peaked at 5 GB, one simulation of a table of a
million rows with an L2 decay, which makes its update dense, holding some thirty copies of it).

A finished run keeps only the parameters the comparisons read; a snapshot of an array is the
array itself, read-only; Adam updates a whole table with one temporary; comparing two tables
makes one array of their size."""
from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest

from transpile.format import programio
from transpile.simulate import simulate
from transpile.simulate.refs.reference import snapshot
from transpile.split import split

from test_simulate import load_case

HERE = os.path.dirname(os.path.abspath(__file__))
CLIP = os.path.join(HERE, "corpus", "clip")


def test_a_snapshot_is_the_array_itself_made_read_only():
    a = np.arange(6.0)
    s = snapshot(a)
    assert s is a and not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1.0          # a kernel writing into a value a snapshot holds fails loudly
    view = np.arange(6.0)[1:]
    assert snapshot(view) is not view and np.array_equal(snapshot(view), view)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_adam_in_place_is_the_same_arithmetic(dtype):
    from transpile.simulate.model.kernels.optim_ops import AdamRates, _adam_update
    rng = np.random.default_rng(0)
    p, m1, m2, g = (rng.standard_normal((50, 4)).astype(dtype) for _ in range(4))
    m2 = np.abs(m2)
    b1, b2, lr, eps = 0.9, 0.999, dtype(0.01) * np.sqrt(dtype(0.5)), 1e-8 * np.sqrt(dtype(0.3))
    m1o, m2o, po = _adam_update(p, m1, m2, g, AdamRates(b1, b2, lr, eps))
    want_m1 = b1 * m1 + (1 - b1) * g
    want_m2 = b2 * m2 + (1 - b2) * g * g
    want_p = p - lr * (want_m1 / (np.sqrt(want_m2) + eps))
    for got, want in ((m1o, want_m1), (m2o, want_m2), (po, want_p)):
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_a_finished_run_keeps_only_the_parameters():
    from transpile.simulate import original_run
    from transpile.simulate.refs.schedule import make_schedule
    main, startup, cfg, _, _ = load_case("fleet/mlp_adam_sync")
    run = original_run(main, startup, make_schedule(cfg), fdt=np.float64, seed=0)
    run.startup()
    params = {v.name for v in main.parameters()}
    assert set(run.scope.vars) - params        # the moments, the learning rate ...
    run.release()
    assert set(run.scope.vars) == params


def _shrunk(main, startup, rows):
    """The program with its tables of more than `rows` rows cut to `rows` (every var of that
    height, and the startup ops that make them)."""
    for prog in (main, startup):
        for b in prog.blocks:
            for name, v in list(b.vars.items()):
                if v.shape and v.shape[0] > rows:
                    b.vars[name] = v.with_shape((rows,) + tuple(v.shape[1:]))
        for _, _, op in prog.ops():
            shape = op.attr("shape")
            if shape and shape[0] > rows:
                op.set_attr("shape", [rows] + list(shape[1:]))


@pytest.mark.slow
def test_a_dense_table_update_in_geo_holds_few_copies_of_the_table():
    """fleet geo, an L2 decay on two tables (their Adam update is dense), 2 trainers and 2
    pservers: the original run, the split's run and the comparison together hold at most 20
    copies of the tables at once (23 before the finished runs were released)."""
    case = os.path.join(CLIP, "fleet_ctr2_emb_l2_geo")
    main = programio.load(os.path.join(case, "main.pb"))
    startup = programio.load(os.path.join(case, "startup.pb"))
    _shrunk(main, startup, 120_000)
    from transpile.core.config import load_config_text
    with open(os.path.join(case, "cluster.yaml")) as f:
        cfg = load_config_text(f.read() + "\npaddle_faults: fix\n", "cluster.yaml")
    res = split(main, startup, cfg, trainer_ids=list(range(cfg.trainers)))
    table = sum(int(np.prod(v.shape)) * 8 for v in main.parameters() if v.shape[0] == 120_000)
    tracemalloc.start()
    try:
        out = simulate(main, startup, cfg, res.programs, res.runtime, steps=3, seed=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.exit_code == 0, (out.error, [(p.name, p.max_rel) for p in out.params])
    assert peak < 20 * table, "%.1f copies of the tables" % (peak / table)


def _update_program(op_type, slots, attrs=None):
    """One optimizer op whose outputs are its inputs (ParamOut = Param ...), as a program
    writes them; `slots`: input slot -> var name."""
    from transpile.ir.program import Attr, Block, Op, Program, Var
    b = Block(0, -1)
    for n in set(slots.values()):
        b.add_var(Var.tensor(n, "FP64", [], persistable=True))
    outs = {s + "Out": [n] for s, n in slots.items() if s in ("Param", "Moment", "Velocity",
                                                               "Moment1", "Moment2")}
    b.ops = [Op(op_type, {s: [n] for s, n in slots.items()}, outs,
                {k: Attr.infer(v) for k, v in (attrs or {}).items()})]
    return Program([b])


@pytest.mark.parametrize("op_type,slots,attrs", [
    ("sgd", {"Param": "w", "Grad": "g", "LearningRate": "lr"}, None),
    ("momentum", {"Param": "w", "Grad": "g", "Velocity": "v", "LearningRate": "lr"}, {"mu": 0.9}),
    ("adagrad", {"Param": "w", "Grad": "g", "Moment": "m", "LearningRate": "lr"}, None),
    ("adam", {"Param": "w", "Grad": "g", "Moment1": "m", "Moment2": "v", "LearningRate": "lr",
              "Beta1Pow": "b1", "Beta2Pow": "b2"}, None),
])
def test_an_update_writes_in_place_only_an_array_its_scope_alone_holds(op_type, slots, attrs):
    """A table of 55 million floats is not copied by each update (copy-on-write): the update
    writes into the parameter's own array where the scope alone holds it, and into a new one
    where anything else does (a snapshot of the initial values, read-only; another role's
    scope); the values are the same bits either way."""
    from transpile.simulate.model.executor import Executor
    from transpile.simulate.model.values import shared
    rng = np.random.default_rng(1)
    vals = {"w": rng.normal(size=(40, 3)), "g": rng.normal(size=(40, 3)),
            "v": np.abs(rng.normal(size=(40, 3))), "m": np.abs(rng.normal(size=(40, 3))),
            "lr": np.array([0.1]), "b1": np.array([0.9]), "b2": np.array([0.999])}
    prog = _update_program(op_type, slots, attrs)

    def run(hold):
        """(the update's output, whether it is the parameter's own array, what `hold` kept)"""
        import weakref
        ex = Executor("t", prog)
        for s, n in slots.items():
            ex.scope.put(n, vals[n].copy())
        kept = hold(ex.scope.get("w"))
        before = weakref.ref(ex.scope.get("w"))     # (a weak reference holds nothing)
        ex.run_block(0)
        out = ex.scope.get("w")
        return out, out is before(), kept
    out_alone, same, _ = run(lambda w: None)
    assert same                                     # in place
    out_other, same, kept = run(lambda w: [w])      # a second holder: a list
    assert not same and np.array_equal(kept[0], vals["w"])
    out_snap, same, kept = run(shared)              # read-only: another role's copy
    assert not same and np.array_equal(kept, vals["w"])
    assert np.array_equal(out_alone, out_other) and np.array_equal(out_alone, out_snap)
    assert not np.array_equal(out_alone, vals["w"])


def test_a_send_hands_the_same_array_read_only():
    from transpile.simulate.model.values import split_rows
    a = np.arange(12.0).reshape(6, 2)
    whole, = split_rows(a, None, "x")
    assert whole is a and not a.flags.writeable
    b = np.arange(12.0).reshape(6, 2)
    parts = split_rows(b, [4, 2], "x")
    assert all(np.shares_memory(p, b) and not p.flags.writeable for p in parts)


def test_max_memory_stops_with_a_clear_message():
    """--max-memory caps the process's address space: beyond it simulate stops, exit 2, one
    line naming the option (not a swap, not a traceback); within it simulate runs."""
    import subprocess
    import sys
    d = os.path.join(HERE, "corpus", "fleet", "mlp_sgd_sync")
    base = [sys.executable, os.path.join(os.path.dirname(HERE), "cli.py"), "-q", "simulate",
            os.path.join(d, "main.pb"), os.path.join(d, "expected"), "--startup",
            os.path.join(d, "startup.pb"), "--cluster", os.path.join(d, "cluster.yaml"),
            "--steps", "2"]
    r = subprocess.run(base + ["--max-memory", "0.05"], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        "pstranspile: error: simulate stopped: it needs more than --max-memory 0.05 GB of "
        "address space (try --float32, fewer --steps or a smaller --batch)"]
    r = subprocess.run(base + ["--max-memory", "8"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(base + ["--max-memory", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and "--max-memory must be > 0" in r.stderr
