"""Optimizers over a SelectedRows gradient as Paddle 2.6.2's CPU kernels run them
(kernels/optim_ops.py, kernels/rowwise.py). The expected values were measured on Paddle 2.6.2
(dygraph, `nn.Embedding(10, 1, sparse=True)`, the lookup's gradient for id i of a row being
i + 1). The executor runs them so with `paddle_sparse_kernels` (run --local's prediction of
the runtime); without it (simulate) they do what they mean. Momentum (and rmsprop) finds each row of its merged gradient by binary search, which misses rows
when they are not sorted (MergeAdd sorts them only when some id repeats); adam's kernel
bias-corrects step t with the beta powers of step t + 1 (it writes Beta1PowOut, the same var,
before it reads Beta1Pow)."""
from __future__ import annotations

import numpy as np
import pytest

from transpile.ir.program import Attr, Block, Op, Program, Var
from transpile.simulate.model.executor import Executor
from transpile.simulate.model.values import LazyTable, SelectedRows

STATE = {"momentum": ["Velocity"], "adam": ["Moment1", "Moment2"]}


def _step(op_type, ids, lazy, lr, attrs, height=10, velocity=None, paddle=True):
    """One step of `op_type` on a `height` x 1 table of zeros whose gradient has the rows
    `ids`, the k-th of value k + 1. Returns (param, state) as dense arrays."""
    b = Block(0, -1)
    for n in ["P", "LR", "B1", "B2"] + STATE[op_type]:
        b.add_var(Var.tensor(n, "FP64", [1] if n in ("LR", "B1", "B2") else [height, 1],
                             persistable=True))
    b.add_var(Var.tensor("G", "FP64", [height, 1], kind="SELECTED_ROWS"))
    ins = {"Param": ["P"], "Grad": ["G"], "LearningRate": ["LR"]}
    ins.update({s: [s] for s in STATE[op_type]})
    out = {"ParamOut": ["P"]}
    out.update({s + "Out": [s] for s in STATE[op_type]})
    if op_type == "adam":
        ins.update(Beta1Pow=["B1"], Beta2Pow=["B2"])
        out.update(Beta1PowOut=["B1"], Beta2PowOut=["B2"])
    b.ops = [Op(op_type, ins, out, {k: Attr.infer(v) for k, v in attrs.items()})]
    ex = Executor("t", Program([b]))
    ex.paddle_sparse_kernels = paddle

    def table(init=None):
        a = np.zeros((height, 1)) if init is None else np.asarray(init, np.float64)
        if not lazy:
            return a
        t = LazyTable(height, (1,), np.float64, lambda r: np.zeros((len(r), 1)))
        nz = np.nonzero(a[:, 0])[0]
        if nz.size:
            t.set(nz, a[nz])
        return t
    ex.scope.put("P", table())
    for s in STATE[op_type]:
        ex.scope.put(s, table(velocity if s == "Velocity" else None))
    ex.scope.put("LR", np.array([lr]))
    ex.scope.put("B1", np.array([0.9]))
    ex.scope.put("B2", np.array([0.999]))
    ex.scope.put("G", SelectedRows(np.asarray(ids, np.int64),
                                   np.arange(1.0, len(ids) + 1).reshape(-1, 1), height))
    ex.run_block(0)

    def d(v):
        return v.to_dense() if hasattr(v, "to_dense") else np.asarray(v)
    return d(ex.scope.get("P"))[:, 0], {s: d(ex.scope.get(s))[:, 0] for s in STATE[op_type]}


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ids, moved", [
    ([9, 3, 7, 3], {3: 6.0, 7: 3.0, 9: 1.0}),       # a repeat: merged and sorted, all found
    ([9, 3, 7, 1], {3: 2.0, 7: 3.0}),               # unsorted: 9 and 1 missed
    ([4, 2, 8, 6, 0], {4: 1.0, 8: 3.0}),            # unsorted: 2, 6 and 0 missed
    ([1, 3, 7, 9], {1: 1.0, 3: 2.0, 7: 3.0, 9: 4.0}),
])
def test_paddles_sparse_momentum_applies_the_rows_its_binary_search_finds(ids, moved, lazy):
    p, state = _step("momentum", ids, lazy, 1.0, {"mu": 0.9})
    want = np.zeros(10)
    for r, g in moved.items():
        want[r] = -g
    assert np.array_equal(p, want), p
    assert np.array_equal(state["Velocity"], -want)


@pytest.mark.parametrize("lazy", [False, True])
def test_paddles_sparse_momentum_over_no_rows_changes_nothing(lazy):
    # MomentumSparseImpl returns before its update: a velocity left from earlier steps does
    # not decay, nor move the parameter
    v0 = np.zeros((10, 1))
    v0[4] = 2.0
    p, state = _step("momentum", [], lazy, 1.0, {"mu": 0.9}, velocity=v0)
    assert not p.any() and np.array_equal(state["Velocity"], v0[:, 0])


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("lazy_mode", [False, True])
def test_paddles_sparse_adam_corrects_its_first_step_with_the_second_steps_powers(lazy, lazy_mode):
    # Paddle 2.6.2 (float32) moved each row by -0.07441343 (lr 0.1): lr * sqrt(1 - b2^2) / (1 - b1^2)
    # * m / sqrt(v), not -0.1 as a first step of adam does on a dense gradient
    p, _ = _step("adam", [5, 1, 8], lazy, 0.1, {"lazy_mode": lazy_mode})
    assert np.allclose(p[[5, 1, 8]], -0.07441343, rtol=0, atol=1e-6), p
    assert not p[[0, 2, 3, 4, 6, 7, 9]].any()


@pytest.mark.parametrize("lazy", [False, True])
def test_without_paddles_kernels_every_row_is_applied(lazy):
    # simulate's own runs (split against original): the kernels do what they mean
    p, _ = _step("momentum", [9, 3, 7, 1], lazy, 1.0, {"mu": 0.9}, paddle=False)
    assert np.array_equal(p[[9, 3, 7, 1]], [-1.0, -2.0, -3.0, -4.0])
    p, _ = _step("adam", [5, 1, 8], lazy, 0.1, {}, paddle=False)
    assert np.allclose(p[[5, 1, 8]], -0.1, rtol=0, atol=1e-6)
    v0 = np.zeros((10, 1))
    v0[4] = 2.0
    p, state = _step("momentum", [], lazy, 1.0, {"mu": 0.9}, velocity=v0, paddle=False)
    assert np.isclose(state["Velocity"][4], 1.8) and np.isclose(p[4], -1.8)
