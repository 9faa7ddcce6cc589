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


@pytest.mark.parametrize("rule", ["sgd", "adam"])
@pytest.mark.parametrize("sync", [False, True])
def test_a_table_kept_by_rows_equals_the_whole_one(rule, sync):
    start, grads = _start_and_grads()
    whole, rows = _rule_tables(rule, sync), _rule_tables(rule, sync)
    kept = frozenset({"emb"})
    flat, bases = denseflat.start_values(start, kept)
    assert isinstance(flat, FlatRows) and len(flat.pos) == 6
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
    assert sorted(set(rows[0].rows.pos[rows[0].rows.pos < H * W] // W)) == [0, 3, 7, 39]
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
    """A learning rate of NaN (0 * NaN moves every value) or a rule not in ROW_RULES (sum:
    Param + 0 turns a -0.0 into 0.0; adam_d2sum moves its state): the table runs whole, as
    before, with the same values."""
    start, grads = _start_and_grads()
    kept = frozenset({"emb"})
    t = _rule_tables("sgd", False)[0]
    t.push_param(denseflat.start_values(start, kept)[0])
    assert t.rows is not None
    t.values["LearningRate"][0] = np.nan
    t.push(denseflat.grad_values(grads[0], kept, {"emb": (H, W)}))
    assert t.rows is None and np.isnan(t.pull()).all()
    assert not _rule_tables("sum", False)[0].row_ready()
    d2 = table("adam_d2sum", [("Param", SIZE, "fill_constant&0.0")] + [
        (n, SIZE, "fill_constant&0.0") for n in ("D2Sum", "G2Sum", "Moment")] + [
        (n, 1, "fill_constant&0.5") for n in ("MomentDecayRate", "AdaDecayRate", "AdaEpsilon",
                                              "LearningRate")])
    assert not d2.row_ready() and denseflat.kept_by_rows(
        [("emb", (200000, 2), 400000)], [d2]) == frozenset()
    d2.push_param(denseflat.start_values(start, kept)[0])
    assert d2.rows is None
    np.testing.assert_array_equal(d2.pull(), denseflat.start_values(start, frozenset())[0])


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
