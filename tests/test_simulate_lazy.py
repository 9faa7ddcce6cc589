"""Big tables kept lazily (values.LazyTable): only the rows a run touches exist, optimizers
update the rows that can change (kernels/rowwise.py), and the result is the dense one."""
from __future__ import annotations

import numpy as np
import pytest

from transpile.ir.program import Attr, Block, Op, Program, Var
from transpile.simulate.model import executor as executor_mod
from transpile.simulate.model import keyed
from transpile.simulate import simulate
from transpile.simulate.model.executor import Executor
from transpile.simulate.model.values import LazyTable, SelectedRows

from test_simulate import load_case


def _table(height=10, width=3, seed=1):
    op = Op("uniform_random", {}, {"Out": ["t"]}, {"min": Attr.infer(-1.0),
                                                   "max": Attr.infer(1.0)})
    return keyed.lazy_table(op, seed, height, (width,), np.float64)


def test_rows_exist_once_touched_and_keep_their_initial_values():
    a, b = _table(), _table()
    x = a.get([7, 2])
    assert len(a.index) == 2 and np.array_equal(b.get([2, 9, 7])[[0, 2]], x[::-1])
    assert np.all((-1 <= x) & (x < 1))
    dense = b.to_dense()
    assert dense.shape == (10, 3) and np.array_equal(dense[[7, 2]], x)
    c = a.copy()
    c.set([2], np.zeros((1, 3)))
    assert np.array_equal(a.get([2]), x[1:]) and not c.get([2]).any()
    # a pserver's block of rows 5..9 starts from the original's rows 5..9
    assert np.array_equal(a.view(5, 5).get([2]), a.get([7]))
    with pytest.raises(Exception, match="outside the 10 rows"):
        a.get([10])


def test_keyed_initializers():
    rows = np.arange(2000)
    g = keyed.init_rows(Op("truncated_gaussian_random", {}, {"Out": ["t"]},
                           {"mean": Attr.infer(1.0), "std": Attr.infer(2.0)}), 7, rows, 4)
    assert g.shape == (2000, 4) and np.all(np.abs(g - 1.0) <= 4.0)
    assert abs(g.mean() - 1.0) < 0.1 and 1.5 < g.std() < 2.0
    c = keyed.init_rows(Op("fill_constant", {}, {"Out": ["t"]}, {"value": Attr.infer(0.5)}),
                        7, rows[:3], 2)
    assert np.array_equal(c, np.full((3, 2), 0.5))


def test_keyed_draws_are_those_of_every_earlier_version():
    # the draws a split's values are aligned by: made in place and redrawn only where a
    # truncated value fell out, they must stay the numbers the first implementation drew
    # (these, from it), and a subset of rows must get the whole table's values for them
    z = keyed.normal(7, [0, 5, 123456], 3, 0.5, 2.0, truncated=True)
    assert z.tolist() == [
        [0.1416362243962201, 2.715411397423316, 2.3161823727332074],
        [3.3309420315757814, 1.481559782242432, -0.6213691302038704],
        [1.3338470113070597, -2.9093123203544846, -1.561136222316613]]
    assert keyed.uniform(11, [3, 2**40], 2).tolist() == [
        [0.8541031505736989, 0.4441966335825497], [0.17013743624948285, 0.8477130993926832]]
    whole = keyed.normal(3, np.arange(3000), 5, truncated=True)
    some = [2999, 17, 1500, 17]
    assert np.array_equal(keyed.normal(3, some, 5, truncated=True), whole[some])
    assert np.abs(whole).max() <= 2.0


SLOTS = {   # op -> (state inputs, outputs besides ParamOut, attrs)
    "sgd": ([], [], {}),
    "adam": (["Moment1", "Moment2"], ["Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"],
             {}),
    "momentum": (["Velocity"], ["VelocityOut"], {"mu": 0.9}),
    "adagrad": (["Moment"], ["MomentOut"], {}),
    "decayed_adagrad": (["Moment"], ["MomentOut"], {}),
    "rmsprop": (["MeanSquare", "Moment"], ["MeanSquareOut", "MomentOut"], {"momentum": 0.5}),
    "adamax": (["Moment", "InfNorm"], ["MomentOut", "InfNormOut"], {}),
}


def _optimizer_step(op_type, lazy, steps, attrs=None, dense_grad=False):
    """Run `op_type` for len(steps) steps of SelectedRows grads (`dense_grad`: the same grads
    as dense tensors, a lookup's without is_sparse) on a 12-row table, dense or lazy; returns
    the table and its state as dense arrays."""
    state, outs, extra = SLOTS[op_type]
    b = Block(0, -1)
    names = ["P", "LR", "B1", "B2"] + state
    for n in names:
        b.add_var(Var.tensor(n, "FP64", [12, 4] if n not in ("LR", "B1", "B2") else [1],
                             persistable=True))
    b.add_var(Var.tensor("G", "FP64", [12, 4],
                         kind="LOD_TENSOR" if dense_grad else "SELECTED_ROWS"))
    ins = {"Param": ["P"], "Grad": ["G"], "LearningRate": ["LR"]}
    ins.update({s: [s] for s in state})
    if op_type in ("adam", "adamax"):
        ins["Beta1Pow"] = ["B1"]
    if op_type == "adam":
        ins["Beta2Pow"] = ["B2"]
    out = {"ParamOut": ["P"]}
    out.update({o: [{"Beta1PowOut": "B1", "Beta2PowOut": "B2"}.get(o, o[:-3])] for o in outs})
    all_attrs = dict(extra, **(attrs or {}))
    op = Op(op_type, ins, out, {k: Attr.infer(v) for k, v in all_attrs.items()})
    b.ops = [op]
    ex = Executor("t", Program([b]))
    init = _table(12, 4, seed=3)
    ex.scope.put("P", init.view(0, 12) if lazy else init.to_dense())
    for s in state:
        zero = LazyTable(12, (4,), np.float64, lambda r: np.zeros((len(r), 4)))
        ex.scope.put(s, zero if lazy else np.zeros((12, 4)))
    ex.scope.put("LR", np.array([0.1]))
    ex.scope.put("B1", np.array([0.9]))
    ex.scope.put("B2", np.array([0.999]))
    rng = np.random.default_rng(0)
    for rows in steps:
        g = SelectedRows(rows, rng.normal(size=(len(rows), 4)), 12)
        ex.scope.put("G", g.to_dense() if dense_grad else g)
        ex.run_block(0)
    got = {n: ex.scope.get(n) for n in ["P"] + state}
    if lazy:
        if op_type == "adamax":
            assert ex.densified == {n: "adamax" for n in ["P"] + state}
            return got, None
        assert isinstance(got["P"], LazyTable) and not ex.densified
        touched = set(got["P"].index)
        return {n: v.to_dense() for n, v in got.items()}, touched
    return got, None


@pytest.mark.parametrize("op_type", sorted(SLOTS))
def test_lazy_optimizer_updates_equal_the_dense_ones(op_type):
    """Rows 1 and 3 get a grad in step 1, rows 3 and 5 in step 2: where the optimizer keeps
    state, row 1 moves again in step 2 (adam, momentum...), sgd leaves it."""
    steps = [[1, 3, 3], [3, 5]]
    dense, _ = _optimizer_step(op_type, False, steps)
    lazy, touched = _optimizer_step(op_type, True, steps)
    for n in dense:
        assert np.allclose(dense[n], lazy[n], rtol=0, atol=1e-15), n
    # adamax's infinity norm grows by epsilon on every row: materialized, run dense
    assert touched is None if op_type == "adamax" else touched <= {1, 3, 5}


@pytest.mark.parametrize("op_type", sorted(SLOTS))
def test_a_dense_gradient_updates_a_lazy_table_row_by_row(op_type):
    """A lookup without is_sparse gives a dense gradient: a row-local optimizer updates the
    lazy table on the gradient's nonzero rows and the rows with state, without materializing
    it, to the values of the dense run (adamax: materialized, as with SelectedRows)."""
    steps = [[1, 3, 3], [3, 5]]
    dense, _ = _optimizer_step(op_type, False, steps, dense_grad=True)
    lazy, touched = _optimizer_step(op_type, True, steps, dense_grad=True)
    for n in dense:
        assert np.array_equal(dense[n], lazy[n]), n
    assert touched is None if op_type == "adamax" else touched <= {1, 3, 5}


def test_a_dense_gradient_on_every_row_materializes_the_table():
    """A dense gradient nonzero on every row (a weight decay's) runs the dense kernel on the
    materialized tables, as before (and says so in the executor's densified)."""
    b = Block(0, -1)
    for n in ("P", "G", "LR"):
        b.add_var(Var.tensor(n, "FP64", [1] if n == "LR" else [12, 4], persistable=n != "G"))
    b.ops = [Op("sgd", {"Param": ["P"], "Grad": ["G"], "LearningRate": ["LR"]},
                {"ParamOut": ["P"]})]
    ex = Executor("t", Program([b]))
    ex.scope.put("P", _table(12, 4))
    ex.scope.put("LR", np.array([0.5]))
    ex.scope.put("G", np.ones((12, 4)))
    ex.run_block(0)
    assert ex.densified == {"P": "sgd"}
    assert np.array_equal(ex.scope.get("P"), _table(12, 4).to_dense() - 0.5)


def test_the_row_blocks_of_a_table_stack_back_lazily():
    """A trainer's recv (or classic concat) of the pservers' row blocks of a lazy table: one
    lazy table of their rows, none drawn; blocks of other tables or out of order: None."""
    t = _table(12, 4)
    a, b = t.view(0, 5), t.view(5, 7)
    a.set([1], np.full((1, 4), 7.0))
    b.get([3])
    s = LazyTable.stacked([a, b])
    assert s.shape == (12, 4) and sorted(s.index) == [1, 8]
    assert np.array_equal(s.to_dense(), np.concatenate([a.to_dense(), b.to_dense()]))
    assert LazyTable.stacked([b, a]) is None and LazyTable.stacked([a, _table(7, 4)]) is None
    blk = Block(0, -1)
    for n, shape in (("A", [5, 4]), ("B", [7, 4]), ("W", [12, 4])):
        blk.add_var(Var.tensor(n, "FP64", shape))
    blk.ops = [Op("concat", {"X": ["A", "B"]}, {"Out": ["W"]}, {"axis": Attr.infer(0)})]
    ex = Executor("t", Program([blk]))
    ex.scope.put("A", a)
    ex.scope.put("B", b)
    ex.run_block(0)
    w = ex.scope.get("W")
    assert isinstance(w, LazyTable) and not ex.densified
    assert np.array_equal(w.to_dense(), s.to_dense())


def test_a_dense_lookups_table_is_kept_lazily_but_in_geo():
    from transpile.simulate.refs.original import lazy_policy_for
    b = Block(0, -1)
    for n, shape in (("W", [200000, 8]), ("ids", [-1, 1]), ("emb", [-1, 1, 8]),
                     ("emb@GRAD", [-1, 1, 8]), ("W@GRAD", [200000, 8]), ("LR", [1])):
        b.add_var(Var.tensor(n, "FP64" if n != "ids" else "INT64", shape))
    b.ops = [Op("lookup_table_v2", {"W": ["W"], "Ids": ["ids"]}, {"Out": ["emb"]},
                {"is_sparse": Attr.infer(False)}),
             Op("lookup_table_v2_grad", {"W": ["W"], "Ids": ["ids"], "Out@GRAD": ["emb@GRAD"]},
                {"W@GRAD": ["W@GRAD"]}, {"is_sparse": Attr.infer(False)}),
             Op("adagrad", {"Param": ["W"], "Grad": ["W@GRAD"], "LearningRate": ["LR"]},
                {"ParamOut": ["W"]})]
    main = Program([b])
    assert lazy_policy_for(main)("W", (200000, 8))
    assert not lazy_policy_for(main, dense_lookups=False)("W", (200000, 8))


def test_adam_lazy_mode_moves_only_the_grads_rows():
    steps = [[1, 3], [3]]
    dense, _ = _optimizer_step("adam", False, steps, {"lazy_mode": True})
    lazy, _ = _optimizer_step("adam", True, steps, {"lazy_mode": True})
    assert np.array_equal(dense["P"], lazy["P"])
    nonlazy, _ = _optimizer_step("adam", False, steps)
    assert not np.array_equal(nonlazy["P"][1], dense["P"][1])


def test_momentum_with_l2_decay_moves_every_row_so_the_table_is_materialized():
    """Paddle's sparse momentum decays every row of the parameter: not row-local."""
    b = Block(0, -1)
    for n in ("P", "V", "LR"):
        b.add_var(Var.tensor(n, "FP64", [12, 4] if n != "LR" else [1], persistable=True))
    b.add_var(Var.tensor("G", "FP64", [12, 4], kind="SELECTED_ROWS"))
    op = Op("momentum", {"Param": ["P"], "Grad": ["G"], "Velocity": ["V"], "LearningRate": ["LR"]},
            {"ParamOut": ["P"], "VelocityOut": ["V"]},
            {"mu": Attr.infer(0.9), "regularization_method": Attr.infer("l2_decay"),
             "regularization_coeff": Attr.infer(0.1)})
    b.ops = [op]
    ex = Executor("t", Program([b]))
    ex.scope.put("P", _table(12, 4))
    ex.scope.put("V", np.zeros((12, 4)))
    ex.scope.put("LR", np.array([0.1]))
    ex.scope.put("G", SelectedRows([2], np.ones((1, 4)), 12))
    before = _table(12, 4).to_dense()
    ex.run_block(0)
    after = ex.scope.get("P")
    assert ex.densified == {"P": "momentum"} and isinstance(after, np.ndarray)
    assert np.allclose(after[7], before[7] * (1 - 0.1 * 0.1))     # an untouched row decays


def test_a_simulation_with_lazy_tables_equals_the_dense_one(monkeypatch):
    """classic/fake_init's three 10000-row tables on two pservers, lazy below 10000 rows: the
    pservers' blocks are views of the original's rows, and the result is the dense run's."""
    main, startup, cfg, progs, rts = load_case("classic/fake_init")
    dense = simulate(main, startup, cfg, progs, rts, steps=4, batch=8, seed=0)
    monkeypatch.setattr(executor_mod, "LAZY_ROWS", 1000)
    _, _, _, progs, _ = load_case("classic/fake_init")
    lazy = simulate(main, startup, cfg, progs, rts, steps=4, batch=8, seed=0)
    assert lazy.exit_code == dense.exit_code == 0
    assert any("emb_w [10000, 8] kept lazily: the original run touched" in n for n in lazy.notes)
    assert not any("kept lazily" in n for n in dense.notes)
    assert not any("materialized" in n for n in lazy.notes)
    assert [p.changed for p in lazy.params] == [p.changed for p in dense.params] == [True] * 3


def test_a_million_row_table_touches_only_its_pool():
    """paddlerec-classic/fm_sync: two Embedding(1000001, ...) tables, adam."""
    main, startup, cfg, progs, rts = load_case("paddlerec-classic/fm_sync")
    res = simulate(main, startup, cfg, progs, rts, steps=5, batch=8, seed=0)
    assert res.exit_code == 0 and not res.unchanged
    note = next(n for n in res.notes if n.startswith("embedding_1.w_0 [1000001, 9] kept lazily"))
    assert int(note.split("touched ")[1].split()[0]) <= 16


def test_l2_decay_on_a_sparse_grad_decays_every_row():
    """Paddle 2.x's L2Decay on a table with a SelectedRows grad: decay = scale(W) (dense, every
    row), grad = sum(W@GRAD, decay) (dense): every row of the table moves each step, so the
    lazy table is materialized and the untouched rows decay as they do in Paddle."""
    b = Block(0, -1)
    for n, kind in (("W", "LOD_TENSOR"), ("G", "SELECTED_ROWS"), ("D", "LOD_TENSOR"),
                    ("G2", "LOD_TENSOR"), ("LR", "LOD_TENSOR")):
        b.add_var(Var.tensor(n, "FP64", [1] if n == "LR" else [12, 4], kind=kind,
                             persistable=n in ("W", "LR")))
    b.ops = [Op("scale", {"X": ["W"]}, {"Out": ["D"]}, {"scale": Attr.infer(0.01)}),
             Op("sum", {"X": ["G", "D"]}, {"Out": ["G2"]}),
             Op("sgd", {"Param": ["W"], "Grad": ["G2"], "LearningRate": ["LR"]},
                {"ParamOut": ["W"]})]
    ex = Executor("t", Program([b]))
    ex.scope.put("W", _table(12, 4))
    ex.scope.put("LR", np.array([0.5]))
    ex.scope.put("G", SelectedRows([3], np.ones((1, 4)), 12))
    ex.run_block(0)
    w0 = _table(12, 4).to_dense()
    w = ex.scope.get("W")
    assert isinstance(w, np.ndarray) and ex.densified == {"W": "scale"}
    assert np.allclose(w[7], w0[7] * (1 - 0.5 * 0.01))
    assert np.allclose(w[3], w0[3] * (1 - 0.5 * 0.01) - 0.5)
