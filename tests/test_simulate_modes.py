"""simulate's reference in every mode (schedule.py): async and half_async trained turn by
turn, geo with local training and pushed deltas. Paddle's own splits equal them, broken ones
do not, and the references agree with each other where the modes coincide."""
from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from transpile.core.errors import UserError
from transpile.simulate import original_run, simulate
from transpile.simulate.refs.schedule import Schedule, make_schedule

from test_simulate import CORPUS, _group, load_case

TURNS = ["classic/async_mlp_adam", "classic/half_async_mlp", "fleet/mlp_sgd_async",
         "fleet/mlp_adam_half_async", "paddlerec-fleet/autoint_async"]
GEO = ["fleet/ctr_sparse_adam_geo", "paddlerec-fleet/fm_geo"]


def run(case, progs=None, **kw):
    main, startup, cfg, p, rts = load_case(case)
    kw.setdefault("steps", 2)
    kw.setdefault("batch", 4)
    return simulate(main, startup, cfg, p if progs is None else progs, rts, seed=0,
                    expect_equal=True, **kw)


@pytest.mark.parametrize("case", TURNS + GEO)
def test_paddles_split_equals_the_modes_reference(case):
    res = run(case)
    assert res.error is None, res.error
    assert res.exit_code == 0, [(p.name, p.max_rel, p.note) for p in res.params if not p.ok]
    assert res.unchanged == []


def _drop(progs, pred):
    for key in sorted(progs):
        if key.startswith("pserver_") and key.endswith("/main"):
            for b in progs[key].blocks[1:]:
                for i, op in enumerate(b.ops):
                    if pred(op):
                        del b.ops[i]
                        return op
    return None


@pytest.mark.parametrize("case", ["classic/async_mlp_adam", "fleet/mlp_adam_half_async",
                                  "fleet/ctr_sparse_adam_geo"])
def test_a_dropped_update_or_send_is_caught(case):
    """A pserver's first optimizer op (geo: the `sum` that adds a delta) or the trainer's
    first send deleted: exit 1."""
    _, _, _, progs, _ = load_case(case)
    dropped = _drop(progs, lambda op: op.input("Param") or op.type == "sum")
    assert dropped is not None
    res = run(case, progs)
    assert res.exit_code == 1 and (res.error or not res.equal)
    _, _, _, progs, _ = load_case(case)
    ops = progs["trainer_0/main"].global_block.ops
    del ops[next(i for i, op in enumerate(ops) if op.type == "send")]
    res = run(case, progs)
    assert res.exit_code == 1 and (res.error or not res.equal)


def _final(case, mode, trainers, push_every=1):
    """The server values of the original trained under `mode` for 2 steps."""
    from transpile.simulate.model.feeds import Feeder
    main, startup, *_ = load_case(case)
    sched = Schedule(mode, trainers, push_every)
    r = original_run(main, startup, sched, fdt=np.float64, seed=0)
    r.startup()
    feeder = Feeder(main, 4, 0, np.float64, trainers=trainers)
    for s in range(2):
        glob = feeder.feed(s)
        r.step(s, [feeder.shard(glob, t, trainers) for t in range(trainers)], 4 // trainers)
    return r, {p: np.asarray(r.server(p)) for p in sorted(r.trainable)}


def test_with_one_trainer_every_mode_trains_alike():
    """One trainer: data-parallel, turns and geo (pushing every step) are plain training; but
    a geo table sends only the rows a step's gradient touched, and adam moves the rows an
    earlier step touched too (their moments): those stay on the trainer."""
    _, sync = _final("fleet/ctr_sparse_adam_geo", "sync", 1)
    for mode in ("async", "geo"):
        r, other = _final("fleet/ctr_sparse_adam_geo", mode, 1)
        for p in sync:
            if mode == "geo" and p in r.sparse:
                assert np.allclose(sync[p], np.asarray(r.trainer(p, 0)), rtol=0, atol=1e-12)
                assert not np.allclose(sync[p], other[p], rtol=0, atol=1e-12)
                continue
            assert np.allclose(sync[p], other[p], rtol=0, atol=1e-12), (mode, p)


def test_turns_give_each_trainer_what_it_pulled():
    """async, 2 trainers: the last trainer pulled the final values; trainer 0 pulled before
    trainer 1's last update (it differs)."""
    r, server = _final("fleet/mlp_sgd_async", "async", 2)
    for p in server:
        assert np.array_equal(np.asarray(r.trainer(p, 1)), server[p])
    assert any(not np.array_equal(np.asarray(r.trainer(p, 0)), server[p]) for p in server)


def test_geo_push_adds_the_trainers_mean_delta():
    """geo, 2 trainers, one push: the pservers hold init + sum over trainers of
    (local - init) / 2; trainer 1, which pulls last, holds its local values plus trainer 0's
    delta."""
    main, startup, *_ = load_case("fleet/ctr_sparse_adam_geo")
    from transpile.simulate.model.feeds import Feeder
    r = original_run(main, startup, Schedule("geo", 2, 5), fdt=np.float64, seed=0)
    init = r.startup()
    feeder = Feeder(main, 4, 0, np.float64, trainers=2)
    glob = feeder.feed(0)
    r.step(0, [feeder.shard(glob, t, 2) for t in range(2)], 2)       # no push yet (K = 5)
    local = [{p: np.asarray(r.trainer(p, t), dtype=float).copy() for p in r.trainable}
             for t in range(2)]
    dense = [p for p in sorted(r.trainable) if p not in r.sparse]
    for t in range(2):
        r._pull(t, r._push(t))
    for p in dense:
        want = init[p] + ((local[0][p] - init[p]) * 0.5 + (local[1][p] - init[p]) * 0.5)
        assert np.allclose(np.asarray(r.server(p)), want, rtol=0, atol=1e-15)
        assert np.allclose(np.asarray(r.trainer(p, 1)),
                           local[1][p] + (local[0][p] - init[p]) * 0.5, rtol=0, atol=1e-15)
    table = next(iter(r.sparse))
    rows = sorted(set().union(*[np.nonzero((local[t][table] != init[table]).any(axis=1))[0]
                                for t in range(2)]))
    assert rows and np.allclose(np.asarray(r.server(table))[rows],
                                (init[table] + (local[0][table] - init[table]) * 0.5
                                 + (local[1][table] - init[table]) * 0.5)[rows])


def test_the_schedule():
    _, _, cfg, _, _ = load_case("fleet/ctr_sparse_adam_geo")
    s = make_schedule(cfg)
    assert s.mode == "geo" and s.push_every == 2 and s.pushes_after(1) and \
        not s.pushes_after(0)
    assert make_schedule(replace(cfg, geo_push_nums=1)).push_every == 1
    assert make_schedule(cfg, 7).push_every == 7
    with pytest.raises(UserError, match="--push-every must be at least 1"):
        make_schedule(cfg, 0)
    assert make_schedule(replace(cfg, mode="half_async")).turns


def test_the_cli_states_the_reference():
    d = os.path.join(CORPUS, "fleet/ctr_sparse_adam_geo")
    r = CliRunner().invoke(_group(), [
        "simulate", os.path.join(d, "main.pb"), os.path.join(d, "expected"), "--startup",
        os.path.join(d, "startup.pb"), "--cluster", os.path.join(d, "cluster.yaml"),
        "--steps", "2", "--batch", "4", "--push-every", "1", "--expect-equal"])
    assert r.exit_code == 0, r.output
    assert "reference: geo: local training; after every 1 step the trainers push deltas" \
        in r.output


def test_a_communicator_that_may_merge_more_is_noted():
    import copy
    main, startup, cfg, progs, rts = load_case("fleet/mlp_sgd_async")
    rts = copy.deepcopy(rts)
    rts["trainer_0"]["envs"]["communicator_max_merge_var_num"] = "4"
    res = simulate(main, startup, cfg, progs, rts, steps=2, batch=4, seed=0)
    assert res.exit_code == 0
    assert any("merge up to 4 queued gradients" in n for n in res.notes)
