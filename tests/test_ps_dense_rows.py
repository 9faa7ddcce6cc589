"""Style ps's dense tables kept by rows (issue 47: a big param looked up without is_sparse,
PaddleRec's mind): tables/denserows.py, ps/denseflat.py and the gather of a LazyTable. Every
value equals the whole-array run's bit for bit; only the pushed rows are spelled out."""
import numpy as np
import pytest

from transpile.ir.program import Block, Op, Program, Var
from transpile.simulate.model.executor import Executor
from transpile.simulate.model.values import LazyTable
from transpile.simulate.ps import denseflat
from transpile.simulate.ps.tables.denserows import FlatRows
from transpile.simulate.ps.tables.dense import MemoryDenseTable
from tests.test_pstables_dense import table

F32 = np.float32
H, W = 40, 3            # a [40, 3] table, then a small dense param of 6 values
SIZE = H * W + 6


def _rule_tables(rule, sync):
    lr = ("LearningRate", 1, "fill_constant&0.25")
    params = {"sgd": [lr], "sum": [],
              "adam": [("Moment1", SIZE, "fill_constant&0.0"),
                       ("Moment2", SIZE, "fill_constant&0.0"),
                       ("Beta1Pow", 1, "fill_constant&0.9"),
                       ("Beta2Pow", 1, "fill_constant&0.999"), lr]}[rule]
    return [table(rule, [("Param", SIZE, "gaussian_random&0&0.0&1.0")] + params, sync)
            for _ in range(2)]


def _start_and_grads(seed=0):
    rng = np.random.default_rng(seed)
    emb, small = rng.normal(size=(H, W)), rng.normal(size=6)
    grads = []
    for rows in ([3, 7, 7], [], [39, 0]):
        g = np.zeros((H, W))
        for r in rows:
            g[r] += rng.normal(size=W)
        grads.append([("emb", g), ("b", rng.normal(size=6))])
    return [("emb", emb), ("b", small)], grads


@pytest.mark.parametrize("rule", ["sgd", "adam", "sum"])
@pytest.mark.parametrize("sync", [False, True])
def test_a_table_kept_by_rows_equals_the_whole_one(rule, sync):
    start, grads = _start_and_grads()
    whole, rows = _rule_tables(rule, sync), _rule_tables(rule, sync)
    kept = frozenset({"emb"})
    flat, bases = denseflat.start_values(start, kept)
    assert isinstance(flat, FlatRows) and len(flat.pos) == 6 and flat.pos.count() == 1
    np.testing.assert_array_equal(flat.take(0, SIZE), np.concatenate(
        [np.asarray(v, F32).reshape(-1) for _, v in start]))
    for t, part in zip(whole, denseflat.split(denseflat.start_values(start, frozenset())[0], 1)):
        t.push_param(part)
    for t, part in zip(rows, denseflat.split(flat, 1)):
        t.push_param(part)
    assert rows[0].rows is not None and "Param" not in rows[0].values
    shapes = {"emb": (H, W)}
    for g in grads:
        whole[0].push(denseflat.grad_values(g, frozenset(), shapes))
        rows[0].push(denseflat.grad_values(g, kept, shapes))
        if sync:
            whole[0].pour()
            rows[0].pour()
    got = denseflat.joined([rows[0].pull()])
    np.testing.assert_array_equal(got.take(0, SIZE).view(np.uint32),
                                  whole[0].pull().view(np.uint32))
    for n in rows[0].rows.vector:
        np.testing.assert_array_equal(rows[0].values_of(n), whole[0].values[n])
    # the kept positions: the small param's 6 and rows 0, 3, 7 and 39 of the table
    kept_pos = rows[0].rows.pos.array()
    assert sorted(set(kept_pos[kept_pos < H * W] // W)) == [0, 3, 7, 39]
    lay = denseflat.layout(start)
    emb = dict(denseflat.pulled_values(got, lay, bases, np.float64))["emb"]
    assert isinstance(emb, LazyTable) and sorted(emb.index) == [0, 3, 7, 39]
    np.testing.assert_array_equal(
        emb.to_dense(), whole[0].pull()[:H * W].reshape(H, W).astype(np.float64))


def test_a_slice_boundary_through_a_row_and_a_lazy_start():
    """Two pservers cut the table's 126 values inside row 21 (64 values each but the last);
    a LazyTable start (a row touched before) keeps its rows; the pulls join back."""
    start, grads = _start_and_grads(1)
    lazy = LazyTable(H, (W,), np.float64, lambda rows: np.outer(rows, [1.0, -2.0, 0.5]) + 0.1)
    lazy.set([5], np.array([[9.0, 9.0, 9.0]]))
    start[0] = ("emb", lazy)
    kept = frozenset({"emb"})
    flat, bases = denseflat.start_values(start, kept)
    plain = denseflat.start_values(start, frozenset())[0]
    whole = [_sized(t, d) for t, d in zip(_rule_tables("adam", True), (64, 62))]
    rows = [_sized(t, d) for t, d in zip(_rule_tables("adam", True), (64, 62))]
    for ts, values in ((whole, plain), (rows, flat)):
        for t, part in zip(ts, denseflat.split(values, 2)):
            t.push_param(part)
    for g in grads:
        for ts, k in ((whole, frozenset()), (rows, kept)):
            pushed = denseflat.grad_values(g, k, {"emb": (H, W)})
            for t, part in zip(ts, denseflat.split(pushed, 2)):
                t.push(part)
            for t in ts:
                t.pour()
    want = denseflat.joined([t.pull() for t in whole])
    got = denseflat.joined([t.pull() for t in rows])
    np.testing.assert_array_equal(got.take(0, SIZE), want[:SIZE])
    emb = dict(denseflat.pulled_values(got, denseflat.layout(start), bases, np.float64))["emb"]
    assert sorted(emb.index) == [0, 3, 5, 7, 39]
    np.testing.assert_array_equal(emb.to_dense(), want[:H * W].reshape(H, W).astype(np.float64))


def _sized(t, dim):
    """Table `t` cut to a slice of `dim` values (as a pserver of two holds)."""
    t.param_dim = dim
    for n, v in list(t.values.items()):
        if len(v) == SIZE:
            t.values[n] = v[:dim].copy()
    t.reservoir = np.zeros(dim, dtype=F32)
    return t


def test_a_rule_that_moves_zero_gradients_makes_the_table_whole():
    """A learning rate of NaN (0 * NaN moves every value) or a rule not in ROW_RULES
    (adam_d2sum moves its state): the table runs whole, as before, with the same values."""
    start, grads = _start_and_grads()
    kept = frozenset({"emb"})
    t = _rule_tables("sgd", False)[0]
    t.push_param(denseflat.start_values(start, kept)[0])
    assert t.rows is not None
    t.values["LearningRate"][0] = np.nan
    t.push(denseflat.grad_values(grads[0], kept, {"emb": (H, W)}))
    assert t.rows is None and np.isnan(t.pull()).all()
    d2 = table("adam_d2sum", [("Param", SIZE, "fill_constant&0.0")] + [
        (n, SIZE, "fill_constant&0.0") for n in ("D2Sum", "G2Sum", "Moment")] + [
        (n, 1, "fill_constant&0.5") for n in ("MomentDecayRate", "AdaDecayRate", "AdaEpsilon",
                                              "LearningRate")])
    assert not d2.row_ready() and denseflat.kept_by_rows(
        [("emb", (200000, 2), 400000)], [d2]) == frozenset()
    d2.push_param(denseflat.start_values(start, kept)[0])
    assert d2.rows is None
    np.testing.assert_array_equal(d2.pull(), denseflat.start_values(start, frozenset())[0])


def test_a_sum_table_is_kept_by_rows_from_a_start_without_negative_zeros():
    """geo's sum: Param + 0 turns a -0.0 into 0.0, so a start that may hold one (a LazyTable's
    draws, an array with a -0.0) makes the table whole at its first push, with the values of
    the whole table; a start without one stays kept by rows."""
    start, grads = _start_and_grads()
    kept = frozenset({"emb"})
    for emb, by_rows in ((start[0][1], True), (np.where(start[0][1] > 1, -0.0, start[0][1]),
                                               False)):
        values = [("emb", emb), start[1]]
        flat, _ = denseflat.start_values(values, kept)
        assert flat.signed_zero is not by_rows
        t, w = _rule_tables("sum", False)[0], _rule_tables("sum", False)[0]
        t.push_param(flat)
        w.push_param(denseflat.start_values(values, frozenset())[0])
        t.push(denseflat.grad_values(grads[0], kept, {"emb": (H, W)}))
        w.push(denseflat.grad_values(grads[0], frozenset(), {"emb": (H, W)}))
        assert (t.rows is not None) is by_rows
        got = denseflat.joined([t.pull()])
        got = got.take(0, SIZE) if by_rows else got
        np.testing.assert_array_equal(got.view(np.uint32), w.pull().view(np.uint32))


def test_gather_reads_a_lazy_tables_rows_without_materializing_it():
    b = Block(0, -1)
    for n, shape, dt in (("W", [H, W], "FP64"), ("I", [4], "INT64"), ("O", [4, W], "FP64")):
        b.add_var(Var.tensor(n, dt, shape))
    b.ops = [Op("gather", {"X": ["W"], "Index": ["I"]}, {"Out": ["O"]})]
    ex = Executor("t", Program([b]))
    lazy = LazyTable(H, (W,), np.float64, lambda rows: np.outer(rows, [1.0, 2.0, 3.0]))
    ex.scope.put("W", lazy)
    ex.scope.put("I", np.array([3, -1, 3, 0]))
    ex.run_block(0)
    assert ex.scope.get("W") is lazy and not ex.densified and sorted(lazy.index) == [0, 3, 39]
    np.testing.assert_array_equal(ex.scope.get("O"), np.take(lazy.to_dense(), [3, -1, 3, 0], 0))


def test_kept_only_where_big_and_every_table_keeps_rows():
    t = _rule_tables("adam", False)
    lay = [("emb", (100000, 4), 400000), ("b", (5,), 5), ("w", (99999, 4), 399996)]
    assert denseflat.kept_by_rows(lay, t) == frozenset({"emb"})
    assert isinstance(t[0], MemoryDenseTable) and t[0].row_ready()


@pytest.mark.parametrize("name", ["ps/ctr_adam_sync", "ps/two_tables_sgd_async"])
def test_a_ps_run_with_its_dense_params_kept_by_rows_equals_the_whole_run(name, monkeypatch):
    """simulate of a ps split (adam sync, sgd async) with every 2-D dense param kept by rows
    (the size threshold lowered: the fc weights, which mul reads whole, are materialized in
    the trainers and pulled back as LazyTables): every figure equals the run with whole
    tables."""
    from tests.test_simulate_ps import ours, run
    progs, texts = ours(name)
    want = run(name, progs, texts, why=True)
    kept = []
    real = denseflat.kept_by_rows

    def kept_by_rows(lay, tables):
        got = real(lay, tables)
        kept.append(got)
        return got
    monkeypatch.setattr(denseflat, "default_lazy_policy", lambda n, shape: len(shape) >= 2)
    monkeypatch.setattr(denseflat, "kept_by_rows", kept_by_rows)
    progs, texts = ours(name)
    got = run(name, progs, texts, why=True)
    assert any(kept) and got.exit_code == want.exit_code == 0
    assert want.params == got.params and want.ps.original == got.ps.original
    assert want.ps.why == got.ps.why and want.notes == got.notes


class _Server:
    """A pserver of one dense table (GeoClient reads `table(tid)` and `index`)."""

    def __init__(self, t, index):
        self.t, self.index = t, index

    def table(self, tid):
        return self.t


def _geo_exchange(keep_rows, monkeypatch):
    """Two geo trainers' clients over two pservers' sum tables: a start, two rounds of local
    moves (rows of the table, the small param) and push_pull; every trainer's values and
    what it last pulled."""
    from transpile.simulate.model.executor import Scope
    from transpile.simulate.ps.geo import GeoClient
    monkeypatch.setattr(denseflat, "default_lazy_policy", lambda n, shape: shape[0] >= H)
    start, _ = _start_and_grads(2)
    servers = [_Server(_sized(t, d), i)
               for i, (t, d) in enumerate(zip(_rule_tables("sum", False), (64, 62)))]
    clients = []
    for t in range(2):
        scope = Scope()
        for name, v in start:
            scope.put(name, np.array(v))
        c = GeoClient("trainer_%d" % t, t, 2, servers, {}, {1: ["emb", "b"]}, scope,
                      np.float64)
        c.keep_rows = keep_rows
        clients.append(c)
    for c in clients:
        c.init_params(clients[0])
    rng = np.random.default_rng(5)
    for moves in (([3, 21], [21]), ([39], [])):
        for c, rows in zip(clients, moves):
            emb = c.scope.get("emb")
            emb = emb.copy() if isinstance(emb, LazyTable) else np.array(emb)
            for r in rows:
                new = np.asarray(emb.get([r]) if isinstance(emb, LazyTable) else emb[[r]])
                new = new + rng.normal(size=(1, W))
                emb.set([r], new) if isinstance(emb, LazyTable) else emb.__setitem__([r], new)
            c.scope.put("emb", emb)
            c.scope.put("b", c.scope.get("b") + rng.normal(size=6))
        for c in clients:
            c.push_pull()
    return clients


def test_geo_exchanges_with_a_param_kept_by_rows_equal_the_whole_ones(monkeypatch):
    """GeoClient keep_rows: trainer 0's start, the deltas pushed and the pulls of a big dense
    param as LazyTables over the start, the sum tables kept by rows: the same values, bit for
    bit, as the whole arrays; only the rows a trainer moved are held."""
    whole = _geo_exchange(False, monkeypatch)
    rows = _geo_exchange(True, monkeypatch)
    for w, r in zip(whole, rows):
        emb, old = r.scope.get("emb"), r.old["emb"]
        assert isinstance(emb, LazyTable) and isinstance(old, LazyTable)
        assert sorted(emb.index) == [3, 21, 39]
        np.testing.assert_array_equal(emb.to_dense(), w.scope.get("emb"))
        np.testing.assert_array_equal(old.to_dense().reshape(-1), w.old["emb"])
        np.testing.assert_array_equal(r.scope.get("b"), w.scope.get("b"))
        np.testing.assert_array_equal(r.old["b"], w.old["b"])
    assert rows[0].servers[0].t.rows is not None


@pytest.mark.parametrize("name", ["ps/ctr_adam_geo", "ps/two_tables_sgd_geo"])
def test_a_geo_run_with_its_dense_params_kept_by_rows_equals_the_whole_run(name, monkeypatch):
    """simulate of a ps geo split with every 2-D dense param kept by rows in the original's geo
    run (georef.GeoRun), the ps geo reference and the split (the policy widened;
    mul reads the fc weights whole, so a trainer's copy turns into an array and that param's
    pushes run whole from then on): every figure equals the run with whole values."""
    from tests.test_simulate_ps import ours, run
    from transpile.simulate.refs import georef
    progs, texts = ours(name)
    want = run(name, progs, texts, why=True)
    kept = []
    real = georef.GeoRun._by_rows

    def by_rows(self, p, policy):
        real(self, p, policy)
        kept.append(isinstance(self.values.get(p), LazyTable))
    policy = lambda n, shape: len(shape) >= 2      # noqa: E731
    monkeypatch.setattr(denseflat, "default_lazy_policy", policy)
    monkeypatch.setattr(georef, "lazy_policy_for", lambda main: policy)
    monkeypatch.setattr(georef.GeoRun, "_by_rows", by_rows)
    progs, texts = ours(name)
    got = run(name, progs, texts, why=True)
    assert any(kept) and got.exit_code == want.exit_code
    assert want.params == got.params and want.ps.original == got.ps.original
    assert want.notes == got.notes


def test_a_geo_table_an_op_reads_whole_is_not_kept_by_rows(monkeypatch):
    """fleet geo with an L2 decay (`scale` reads both big tables whole): the original's geo
    run keeps neither by rows (lazy_policy_for's judgement), so its notes and figures are the
    ones of a run that never keeps one (with every big dense param kept, its notes said the
    tables were kept lazily and materialized)."""
    import os
    from transpile.core.config import load_config_text
    from transpile.format import programio
    from transpile.simulate import simulate
    from transpile.simulate.refs import georef
    from transpile.split import split
    case = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "clip",
                        "fleet_ctr2_emb_l2_geo")
    main = programio.load(os.path.join(case, "main.pb"))
    startup = programio.load(os.path.join(case, "startup.pb"))
    with open(os.path.join(case, "cluster.yaml")) as f:
        cfg = load_config_text(f.read() + "\npaddle_faults: fix\n", "cluster.yaml")
    res = split(main, startup, cfg, trainer_ids=list(range(cfg.trainers)))

    def simulated():
        return simulate(main, startup, cfg, {k: p.copy() for k, p in res.programs.items()},
                        res.runtime, steps=3, seed=0)
    got = simulated()
    monkeypatch.setattr(georef.GeoRun, "_by_rows", lambda self, *args: None)
    want = simulated()
    assert got.exit_code == want.exit_code == 0
    assert got.notes == want.notes and got.params == want.params
    assert not any("kept lazily" in n for n in got.notes)
