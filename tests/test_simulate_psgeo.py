"""simulate for style ps in geo mode: the GeoCommunicator against MemorySparseGeoTable and the
dense `sum` table (transpile/simulate/ps/geo.py) by hand, the split against the ps geo reference
(simulate/ps/georun.py), and broken geo splits caught."""
from __future__ import annotations

import re

import numpy as np
import pytest

from test_simulate_ps import ours, paddles, param, run
from transpile.simulate.model.executor import Scope
from transpile.simulate.ps.geo import GeoClient, dense_groups
from transpile.simulate.ps.tables.server import build_server
from transpile.simulate.model.values import SelectedRows

SERVER = """server_param { downpour_server_param {
  downpour_table_param { table_id: 0 table_class: "MemorySparseGeoTable" shard_num: 256
    accessor { accessor_class: "CommMergeAccessor" fea_dim: 4 embedx_dim: 2 }
    common { name: "sum" table_name: "emb" params: "Param" dims: 2 initializers: "fill_constant&0.0"
             trainer_num: 2 sync: false }
    type: PS_SPARSE_TABLE }
  downpour_table_param { table_id: 1 table_class: "MemoryDenseTable" shard_num: 256
    accessor { accessor_class: "CommMergeAccessor" fea_dim: 3 embedx_dim: 1 }
    common { name: "sum" table_name: "MergedDense" params: "Param" dims: 4
             initializers: "fill_constant&0.0" trainer_num: 2 sync: false }
    type: PS_DENSE_TABLE }
  downpour_table_param { table_id: 2 table_class: "BarrierTable" shard_num: 256
    accessor { accessor_class: "CommMergeAccessor" }
    common { name: "" table_name: "barrier_table" trainer_num: 2 sync: false }
    type: PS_OTHER_TABLE }
} }"""


def _clients():
    """Two trainers, one pserver: a 4-row table `emb` (2 wide) and a dense `w` of 3 values."""
    servers = [build_server(SERVER)]
    out = []
    for t in range(2):
        scope = Scope()
        scope.put("emb", np.arange(8, dtype=np.float64).reshape(4, 2) / 8)
        scope.put("w", np.array([1.0, 2.0, 3.0]))
        out.append(GeoClient("trainer_%d" % t, t, 2, servers, {"emb": 0}, {1: ["w"]}, scope,
                             np.float64))
    for c in out:
        c.init_params(out[0])
    return servers[0], out


def test_geo_start_pushes_trainer_0s_rows_and_dense_values():
    server, (c0, c1) = _clients()
    geo, dense = server.table(0), server.table(1)
    assert dense.pull()[:3].tolist() == [1.0, 2.0, 3.0]
    # every row of trainer 0's table is on the pserver, taken at its first use
    assert geo.row(3).tolist() == [0.75, 0.875]
    assert geo.pull_geo(0)[0].tolist() == []        # the start records nothing


def test_geo_push_and_pull_by_hand():
    """Trainer 0 moves row 1 by (+0.4, -0.2) and w by (+2, 0, -4); trainer 1 moves row 1 by
    (0, +0.6) and row 2 by (+1, +1), w by (0, +2, 0). Pushes go trainer 0 first:
    - trainer 0 pushes delta (x - old) / 2: row 1 (0.2, -0.1), w (1, 0, -2); the table holds
      row 1 = (0.25 + 0.2, 0.375 - 0.1) = (0.45, 0.275), w = (2, 2, 1); it pulls row 1 back
      (recorded for it too): local row 1 = (0.65, 0.175) + (0.45, 0.275) - (0.45, 0.275),
      unchanged; w = (3, 2, -1) + (2, 2, 1) - (2, 2, 1) = (3, 2, -1).
    - trainer 1 pushes row 1 (0, 0.3), row 2 (0.5, 0.5), w (0, 1, 0): the table holds row 1 =
      (0.45, 0.575), row 2 = (1.0, 1.125), w = (2, 3, 1); it pulls rows 1 and 2 (both recorded
      for it): row 1 = (0.25, 0.975) + (0.45, 0.575) - (0.25, 0.675) = (0.45, 0.875);
      row 2 = (1.5, 1.625) + 0; w = (1, 4, 3) + (2, 3, 1) - (1, 3, 3) = (2, 4, 1).
    - trainer 0 again, nothing sent: it pulls rows 1 and 2 all the same, row 1 = (0.65, 0.175)
      + (0.45, 0.575) - (0.45, 0.275) = (0.65, 0.475), row 2 = (0.5, 0.625) + (1.0, 1.125) -
      (0.5, 0.625) = (1.0, 1.125).
    """
    server, (c0, c1) = _clients()
    e0, e1 = c0.scope.get("emb").copy(), c1.scope.get("emb").copy()
    e0[1] += [0.4, -0.2]
    e1[1] += [0.0, 0.6]
    e1[2] += [1.0, 1.0]
    c0.scope.put("emb", e0)
    c1.scope.put("emb", e1)
    c0.scope.put("w", np.array([3.0, 2.0, -1.0]))
    c1.scope.put("w", np.array([1.0, 4.0, 3.0]))
    c0.record("emb", SelectedRows([1, 1], np.zeros((2, 2)), 4))
    c1.record("emb", SelectedRows([2, 1], np.zeros((2, 2)), 4))
    c0.push_pull()
    assert np.allclose(c0.scope.get("emb")[1], [0.65, 0.175])
    assert np.allclose(c0.scope.get("w"), [3.0, 2.0, -1.0])
    assert np.allclose(server.table(0).row(1), [0.45, 0.275])
    assert np.allclose(server.table(1).pull()[:3], [2.0, 2.0, 1.0])
    c1.push_pull()
    assert np.allclose(server.table(0).row(1), [0.45, 0.575])
    assert np.allclose(server.table(0).row(2), [1.0, 1.125])
    assert np.allclose(c1.scope.get("emb")[1], [0.45, 0.875])
    assert np.allclose(c1.scope.get("emb")[2], [1.5, 1.625])
    assert np.allclose(c1.scope.get("w"), [2.0, 4.0, 1.0])
    # trainer 0 sent nothing since, yet its next pull brings trainer 1's rows 1 and 2
    c0.push_pull()
    assert np.allclose(c0.scope.get("emb")[1], [0.65, 0.475])
    assert np.allclose(c0.scope.get("emb")[2], [1.0, 1.125])
    assert "emb" in c0.unsent_pulls


def test_a_dense_send_of_a_geo_table_is_refused():
    _, (c0, _) = _clients()
    from transpile.simulate.model.values import SimError
    with pytest.raises(SimError, match="dense value"):
        c0.record("emb", np.zeros((4, 2)))


def test_dense_groups_put_data_norm_statistics_last():
    assert dense_groups(["w", "dn.batch_sum", "b", "dn.batch_size"]) == [
        ["b", "w"], ["dn.batch_size", "dn.batch_sum"]]


def test_a_geo_split_without_a_sparse_table_never_exchanges():
    """ps/mlp_sgd_geo: no sparse table, so no send in Paddle's geo trainer program; Paddle
    2.6.2's geo communicator waits for a first sparse send that never comes (measured with
    `pstranspile run`): after trainer 0's start each trainer trains alone, and the split differs
    from the geo reference (ps-geo-no-sparse-table)."""
    res = run("ps/mlp_sgd_geo", *paddles("ps/mlp_sgd_geo"))
    assert res.error is None and res.exit_code == 1
    assert any("never starts exchanging" in n for n in res.notes), res.notes


@pytest.mark.parametrize("name,split_of", [
    ("ps/ctr_adam_geo", ours), ("ps/two_tables_sgd_geo", paddles),
    ("ps-gen/datanorm_sgd_geo", ours)])
def test_a_ps_geo_split_trains_like_the_ps_geo_reference(name, split_of):
    res = run(name, *split_of(name))
    assert res.error is None and res.exit_code == 0, (res.error, res.params)
    assert all(p.changed for p in res.params if p.trainable), res.params
    ids = {w.id for ws in res.ps.why.values() for w in ws}
    assert res.ps.original and ids <= {"ps-geo-float32", "ps-geo-pull-unsent"}


def _drop(progs, kind):
    main = progs["trainer_0/main"]
    ops = main.global_block.ops
    if kind == "send":
        i = next(i for i, op in enumerate(ops) if op.type == "send")
    else:
        i = next(i for i, op in enumerate(ops) if op.input("Param") and op.input("Grad"))
    del ops[i]


def _first_server(texts):
    return sorted(k for k in texts if k.endswith("server_desc.txt"))[0]


@pytest.mark.parametrize("edit", ["send", "update", "rule", "dense table"])
def test_a_broken_ps_geo_split_is_caught(edit):
    progs, texts = paddles("ps/two_tables_sgd_geo")
    if edit in ("send", "update"):
        _drop(progs, edit)
    else:
        k = _first_server(texts)
        blocks = texts[k].split("downpour_table_param {")
        i = next(i for i, b in enumerate(blocks) if "MemoryDenseTable" in b)
        blocks[i] = (blocks[i].replace('name: "sum"', 'name: "summary"') if edit == "rule"
                     else re.sub(r'"MemoryDenseTable"', '"BarrierTable"', blocks[i]))
        texts[k] = "downpour_table_param {".join(blocks)
    res = run("ps/two_tables_sgd_geo", progs, texts)
    assert res.exit_code == 1, (res.error, res.params)
    if edit == "send":
        assert "other rows" in param(res, "emb_a").note
    if edit == "dense table":
        assert "BarrierTable" in res.error


def test_program_init_is_refused_in_geo():
    from transpile.core.errors import UserError
    with pytest.raises(UserError, match="geo"):
        run("ps/mlp_sgd_geo", *paddles("ps/mlp_sgd_geo"), program_init=True)


def test_geo_table_refuses_a_short_param_row():
    server = build_server(SERVER)
    t = server.table(0)
    t.push_all_params(lambda keys: np.zeros((len(keys), 1)), 0, 1)
    from transpile.simulate.ps.tables import TableError
    with pytest.raises(TableError, match="1 floats"):
        t.pull([0])


def test_the_command_proves_paddles_geo_split_and_names_the_differences():
    import json
    import os

    from click.testing import CliRunner

    from cli import main
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "ps",
                     "two_tables_sgd_geo")
    r = CliRunner().invoke(main, [
        "simulate", os.path.join(d, "main.pb"), "--startup", os.path.join(d, "startup.pb"),
        "--cluster", os.path.join(d, "cluster.yaml"), "--steps", "3", "--expect-equal",
        "--format", "json", os.path.join(d, "expected")])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["mode"] == "geo" and out["exit_code"] == 0
    ids = {w["id"] for p in out["ps_reference_vs_original"]["params"] for w in p["why"]}
    assert "ps-geo-float32" in ids


def test_a_geo_run_without_a_push_is_refused():
    from test_simulate_ps import case

    from transpile.core.errors import UserError
    from transpile.simulate import simulate
    main, startup, cfg = case("ps/mlp_sgd_geo")
    progs, texts = paddles("ps/mlp_sgd_geo")
    with pytest.raises(UserError, match="no push"):
        simulate(main, startup, cfg, progs, {}, steps=1, batch=4, seed=0, push_every=10,
                 expect_equal=True, ps_options=dict(texts=texts, why=False))


def test_a_dense_geo_push_holds_few_copies_of_the_table():
    """A trainer's dense push and pull (delta = (latest - old) / trainers pushed, local =
    latest + (pulled - old)) works param by param in slices, the delta rounded into the
    float32 array it pushes, what it pulled kept in float32: it allocates under 3 copies of
    the dense values at once (2.4; 4.0 with whole concatenations, 6.5 before them: bst's 70M
    floats), the same values."""
    import tracemalloc
    n = 1_000_000
    desc = SERVER.replace('table_name: "MergedDense" params: "Param" dims: 4',
                          'table_name: "MergedDense" params: "Param" dims: %d' % (n + 1))
    servers = [build_server(desc)]
    rng = np.random.default_rng(0)
    clients = []
    for t in range(2):
        scope = Scope()
        scope.put("emb", np.zeros((4, 2)))
        scope.put("w", rng.normal(size=n))
        clients.append(GeoClient("trainer_%d" % t, t, 2, servers, {"emb": 0}, {1: ["w"]},
                                 scope, np.float64))
    for c in clients:
        c.init_params(clients[0])
    c0 = clients[0]
    start = c0.scope.get("w").copy()
    moved = start + rng.normal(size=n) * 1e-3
    c0.scope.put("w", moved.copy())
    old = c0.old["w"].copy()
    tracemalloc.start()
    try:
        c0.push_pull()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * 8 * n, "%.1f copies" % (peak / (8 * n))
    delta = (moved - old) * (1.0 / 2)
    pulled = servers[0].table(1).pull()[:n].astype(np.float64)
    assert np.array_equal(c0.scope.get("w"), moved + (pulled - (old + delta)))
    assert np.array_equal(c0.old["w"], pulled)
