"""A pserver's tables built from real server_desc.txt files (tests/corpus/*/*/expected/),
the BarrierTable, the geo table, the client's routing of keys and dense slices, and what a
trainer's distributed_push_sparse pushes (transpile/simulate/ps/tables/server.py, geo.py,
client.py; docs/ps-runtime.md sections 1, 5 and 7)."""
import glob
import os

import numpy as np
import pytest

from transpile.core.errors import UserError
from transpile.simulate.ps.tables import PserverRefuses, TableError, TableOptions
from transpile.simulate.ps.tables.client import Push, batch_size, merge_by_key, push_values
from transpile.simulate.ps.tables.dense import MemoryDenseTable
from transpile.simulate.ps.tables.geo import MemorySparseGeoTable
from transpile.simulate.ps.tables.server import (BarrierTable, build_server, dense_dims,
                                                 geo_server, sparse_server, split_dense)
from transpile.simulate.ps.tables.sparse import MemorySparseTable

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
F32 = np.float32


def servers(case, **options):
    """The PsServers of a corpus case's expected split, in port order."""
    paths = sorted(glob.glob(os.path.join(CORPUS, case, "expected", "pserver_*",
                                          "server_desc.txt")))
    return [build_server(open(p).read(), i, len(paths), TableOptions(**options), p)
            for i, p in enumerate(paths)]


def test_ctr_adam_sync_builds_its_tables():
    s0, s1 = servers("ps/ctr_adam_sync")
    sparse, dense, barrier = s0.table(0), s0.table(1), s0.table(2)
    assert isinstance(sparse, MemorySparseTable) and isinstance(barrier, BarrierTable)
    acc = sparse.accessor
    assert (acc.name, acc.embedx_dim, acc.embed_rule.name, acc.embedx_rule.name) == \
        ("SparseAccessor", 7, "SparseAdamSGDRule", "SparseAdamSGDRule")
    assert acc.embedx_rule.lr == F32(0.001) and acc.embedx_rule.max_bound == 10
    assert (acc.dim, acc.short_dim, acc.select_dim, acc.update_dim) == (33, 10, 8, 11)
    assert (dense.rule_name, dense.sync, dense.param_dim, s1.table(1).param_dim) == \
        ("adam", True, 194, 192)
    assert [dense.values[n][0] for n in ("Beta1Pow", "Beta2Pow", "LearningRate")] == \
        [F32(0.9), F32(0.999), F32(0.001)]
    # a lookup of an 8-wide embedding before training: zeros
    np.testing.assert_array_equal(sparse.pull([3, 4]), np.zeros((2, 8)))


def test_the_barrier_pours_every_table_once_all_trainers_arrived():
    s0, _ = servers("ps/ctr_adam_sync")
    dense = s0.table(1)
    dense.push_param(np.ones(194))
    dense.push(np.full(194, 2.0))
    dense.push(np.full(194, 4.0))
    assert s0.barrier(0) is False           # trainer 1 still missing: nothing applied
    assert dense.count == 2 and dense.pull()[0] == 1
    assert s0.barrier(1) is True            # both: the mean 3 goes through adam
    assert dense.count == 0 and dense.pull()[0] < 1
    np.testing.assert_allclose(dense.values["Moment1"], 0.3, rtol=1e-6)    # (1 - 0.9) * 3
    # type "2" (a trainer done) lowers the count the barrier waits for
    assert s0.barrier(0, "2") is False and s0.barrier(1) is True


def test_geo_case_builds_geo_tables():
    (s0, _) = servers("ps/two_tables_sgd_geo")
    a, b, dense = s0.table(0), s0.table(1), s0.table(2)
    assert isinstance(a, MemorySparseGeoTable) and (a.dim, b.dim, a.trainers) == (8, 4, 2)
    assert isinstance(dense, MemoryDenseTable) and dense.rule_name == "sum" and not dense.sync


def test_geo_table_adds_deltas_and_hands_out_what_changed():
    (s0, _) = servers("ps/two_tables_sgd_geo")
    t = s0.table(1)                         # rows of 4
    t.push_param([2, 4], np.ones((2, 4)))   # trainer 0's start
    np.testing.assert_array_equal(t.pull([4, 6]), [[1] * 4, [0] * 4])   # 6: a new zero row
    t.push([4, 4, 9], np.full((3, 4), 0.5))         # deltas add, key by key
    np.testing.assert_array_equal(t.pull([4, 9])[:, 0], [2.0, 0.5])
    keys, rows = t.pull_geo(1)              # every trainer sees the keys, the pusher too
    assert keys.tolist() == [4, 9] and rows[:, 0].tolist() == [2.0, 0.5]
    assert t.pull_geo(1)[0].tolist() == []  # and only once
    assert t.pull_geo(0)[0].tolist() == [4, 9]
    with pytest.raises(TableError, match="trainer 2 of 2"):
        t.pull_geo(2)


def test_every_corpus_server_desc_builds_and_its_dense_dims_are_the_clients_slices():
    # (ps-tables-made keeps the first pserver's descriptor only: no whole group to build)
    cases = sorted({p.split(os.sep + "expected" + os.sep)[0] for p in
                    glob.glob(os.path.join(CORPUS, "*", "*", "expected", "pserver_*"))
                    if os.sep + "ps-tables-made" + os.sep not in p})
    assert len(cases) > 100
    built = 0
    for case in cases:
        try:
            group = servers(os.path.relpath(case, CORPUS))
        except PserverRefuses:      # inits_adam: Param's initializer is "" (see dense tests)
            assert case.endswith("inits_adam_sync")
            continue
        for i, s in enumerate(group):
            for t in s.tables.values():
                if isinstance(t, MemorySparseTable) and \
                        type(t.accessor).__name__ == "SparseAccessor":
                    # SparseAccessor: fea_dim = emb + 2, the pull is the emb-wide row
                    assert t.accessor.select_dim + 2 == _fea_dim(s, t), case
                if isinstance(t, MemoryDenseTable):
                    assert t.param_dim == dense_dims(_fea_dim(s, t), len(group))[i], case
        built += 1
    assert built == len(cases) - 1


def _fea_dim(server, table):
    desc = server.desc_params[table.table_id]
    return desc.accessor.fea_dim


def test_sparse_and_geo_routing():
    # shard_num 1000 on 2 pservers: 500 shards each, key % 1000 // 500
    assert sparse_server([0, 499, 500, 999, 1000, 1500], 1000, 2).tolist() == [0, 0, 1, 1, 0, 1]
    # on 3 pservers 1000 / 3 does not divide: 334 shards each
    assert sparse_server([333, 334, 667, 668, 999], 1000, 3).tolist() == [0, 1, 1, 2, 2]
    assert geo_server([0, 1, 2, 3], 3).tolist() == [0, 1, 2, 0]
    # -1 as uint64 is 18446744073709551615: % 1000 = 615
    assert sparse_server([-1], 1000, 2).tolist() == [1]


def test_dense_slices():
    assert dense_dims(386, 2) == [194, 192]     # 386 / 2 + 1, then the rest
    assert dense_dims(10, 3) == [4, 4, 2]
    parts = split_dense(np.arange(10), 3)
    assert [p.tolist() for p in parts] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 0]]


def test_push_values_scale_by_batch_and_carry_show_click():
    ids = np.asarray([[3], [7], [3]])
    grad = np.asarray([[1, 2], [3, 4], [5, 6]], F32)
    keys, values = push_values(ids, grad, 2, Push(batch=3, slot=4, shows=[1.0], clicks=[0.0],
                                                    padding_idx=7))
    # id 7 is padding; the others: [slot, show, click, 3 * g]; show Shows[0] for the first,
    # 1 beyond Shows' one value
    assert keys.tolist() == [3, 3]
    np.testing.assert_array_equal(values, [[4, 1, 0, 3, 6], [4, 1, 0, 15, 18]])
    keys, values = push_values(ids, grad, 2, Push(batch=3, shows=[2, 5, 6], clicks=[1, 0, 1]))
    np.testing.assert_array_equal(values[:, 1:3], [[2, 1], [5, 0], [6, 1]])
    _, cvm = push_values(ids[:1], [[1, 2, 3]], 3, Push(batch=2, slot=1, use_cvm_op=True))
    np.testing.assert_array_equal(cvm, [[1, 1, 2, 6]])   # the first two columns unscaled
    _, seq = push_values([1, 2, 3], np.zeros((3, 1)), 1, Push(shows=[8, 9], lod=[0, 2, 3]))
    assert seq[:, 1].tolist() == [8, 8, 9]  # with LoD, show by sequence


def test_push_values_aborts_on_ids_of_two_lod_levels():
    """FleetWrapper::PushSparseFromTensorAsync walks the ids' first LoD level as their rows:
    ids of lod_level 2 (first level ending at 2, 5 ids) leave gradient rows unread and its
    trainer aborts; simulate says so (ps/run.py: the ps reference aborts), not an IndexError."""
    from transpile.simulate.ps.tables import ClientAborts
    with pytest.raises(ClientAborts, match="first LoD level"):
        push_values([1, 2, 3, 4, 5], np.zeros((5, 1)), 1, Push(shows=[1, 1], lod=[0, 1, 2]))


def test_batch_size_and_the_clients_merge():
    assert batch_size([np.zeros((4, 1)), np.zeros((4, 2))]) == 4
    assert batch_size([np.zeros((4, 1)), np.zeros((3, 1))]) is None
    (s0, _) = servers("ps/ctr_adam_sync")
    acc = s0.table(0).accessor
    keys, values = merge_by_key([9, 2, 9], np.asarray([[1, 1, 0] + [1] * 8, [2, 1, 0] + [0] * 8,
                                                       [3, 1, 1] + [2] * 8], F32), acc)
    assert keys.tolist() == [2, 9]
    np.testing.assert_array_equal(values[1, :4], [1, 2, 1, 3])   # slot kept, the rest summed


def test_bad_descriptors_are_named():
    text = open(os.path.join(CORPUS, "ps", "ctr_adam_sync", "expected",
                             "pserver_127.0.0.1_6174", "server_desc.txt")).read()
    with pytest.raises(UserError, match="x.txt: downpour_table_param.2. .table_id 2.: "
                                        "table_class 'FooTable' is not simulated"):
        build_server(text.replace('"BarrierTable"', '"FooTable"'), source="x.txt")
    with pytest.raises(UserError, match="CtrDymfAccessor is not simulated"):
        build_server(text.replace('"SparseAccessor"', '"CtrDymfAccessor"'), source="x.txt")
    with pytest.raises(UserError, match="x.txt: not a PSParameter text"):
        build_server("server_param {", source="x.txt")
    with pytest.raises(TableError, match="pserver 0 has no table 7"):
        build_server(text).table(7)
