"""simulate/ps/tables/ against Paddle 2.6.2's own parameter server: scenarios run on its brpc
pserver by docs/ps-runtime-check/run.sh (a pserver and a trainer process driving distributed_lookup_table,
distributed_push_sparse and a dense send through core.DistFleetWrapper, then dumping the
table with save_one_model), recorded in tests/data/pstables/paddle_*.json, and replayed here
through our client helpers and tables.

initial_range is 0 in the scenarios (Paddle's draws are clock-seeded), so new rows start at 0
on both sides. Sparse lookups agree exactly; the saved rows are Paddle's text (6 significant
digits). The dense adam table runs its 10 buckets in racing threads, each multiplying the beta
powers: the test finds the order Paddle's threads took and checks that it is an order of the
10 buckets and that, in that order, our table computes Paddle's values."""
import glob
import json
import os

import numpy as np
import pytest

from transpile.simulate.ps.tables.client import Push, batch_size, merge_by_key, push_values
from transpile.simulate.ps.tables.dense import TASK_POOL_SIZE, bucket
from transpile.simulate.ps.tables.server import build_server

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "pstables")
RUNS = sorted(glob.glob(os.path.join(DATA, "paddle_*.json")))


def load(path):
    with open(path) as f:
        return json.load(f)


def replay(run):
    """Our pserver after the run's pushes, with what each lookup and push gave."""
    server = build_server(run["server_desc"])
    table = server.table(0)
    lookups, grads = [], []
    for st in run["scenario"]["sparse"]:
        lookups.append(table.pull(st["lookup"]))
        ids = np.asarray(st["ids"]).reshape(-1, 1)
        keys, values = push_values(ids, st["grad"], 3, Push(batch=batch_size([ids]), slot=7,
                                                       shows=[st["show"]], clicks=[st["clk"]]))
        grads.append(values[:, 3:])
        table.push(*merge_by_key(keys, values, table.accessor))
    lookups.append(table.pull(run["scenario"]["final_lookup"]))
    return server, lookups, grads


def test_the_recorded_runs_are_there():
    names = [os.path.basename(p) for p in RUNS]
    assert names == ["paddle_adagrad_threshold.json", "paddle_adam.json",
                     "paddle_naive_shared_adam.json"]


@pytest.mark.parametrize("path", RUNS, ids=os.path.basename)
def test_sparse_lookups_and_pushes_as_paddle(path):
    run = load(path)
    _, lookups, grads = replay(run)
    for ours, theirs in zip(lookups, run["lookups"]):
        np.testing.assert_array_equal(ours, np.asarray(theirs, dtype=np.float32))
    for ours, theirs in zip(grads, run["scaled_grads"]):     # scaled by the batch size
        np.testing.assert_array_equal(ours, np.asarray(theirs, dtype=np.float32))


@pytest.mark.parametrize("path", RUNS, ids=os.path.basename)
def test_sparse_rows_as_paddle_saved_them(path):
    run = load(path)
    server, _, _ = replay(run)
    table = server.table(0)
    assert sorted(int(k) for k in run["rows"]) == table.keys()
    for key, theirs in run["rows"].items():
        # the whole row, short or extended: slot, unseen_days, delta_score, show, click,
        # embed_w and its rule state, then embedx_w and its state once extended
        ours = table.row(int(key))
        assert len(ours) == len(theirs), key
        np.testing.assert_allclose(ours, theirs, rtol=5e-6, atol=1e-7, err_msg=key)


def _bucket_position(desc, grad, k, want, bounds):
    """The position among the 10 bucket calls at which bucket k reproduces `want`."""
    rest = [b for b in range(TASK_POOL_SIZE) if b != k]
    for pos in range(TASK_POOL_SIZE):
        t = build_server(desc).table(1)
        t.bucket_order = tuple(rest[:pos] + [k] + rest[pos:])
        t.push(grad)
        if np.array_equal(t.pull()[bounds[k]:bounds[k + 1]], want[bounds[k]:bounds[k + 1]]):
            return pos
    return None


@pytest.mark.parametrize("path", RUNS, ids=os.path.basename)
def test_dense_adam_as_paddle_in_the_order_its_threads_ran(path):
    run = load(path)
    assert len(run["scenario"]["dense"]) == 1
    grad, desc = run["scenario"]["dense"][0], run["server_desc"]
    want = np.asarray(run["dense"], dtype=np.float32)
    dense = build_server(desc).table(1)
    bounds = bucket(dense.param_dim, TASK_POOL_SIZE)     # 12 values: 2, 2, then 1 each
    positions = [_bucket_position(desc, grad, k, want, bounds) for k in range(TASK_POOL_SIZE)]
    # every bucket took one of the 10 multiplications of the powers, no two the same
    assert None not in positions and sorted(positions) == list(range(TASK_POOL_SIZE))
    dense.bucket_order = tuple(int(k) for k in np.argsort(positions))
    dense.push(grad)
    np.testing.assert_array_equal(dense.pull(), want)
    np.testing.assert_allclose(dense.values["Beta1Pow"][0], 0.9 ** 11, rtol=1e-6)
