"""data_norm and data_norm_grad (Paddle's CPU kernels): by hand and by central differences."""
from __future__ import annotations

import numpy as np
import pytest

from kernelkit import check_grad, run_op

R = np.random.default_rng(7)
OUTS = {"Y": 1, "Means": 1, "Scales": 1}
GRADS = {"X@GRAD": 1, "BatchSize@GRAD": 1, "BatchSum@GRAD": 1, "BatchSquareSum@GRAD": 1}


def _stats(c):
    return {"BatchSize": np.full(c, 4.0), "BatchSum": R.normal(size=c),
            "BatchSquareSum": R.uniform(2, 5, size=c)}


def test_data_norm_by_hand():
    x = np.array([[1.0, 2.0], [3.0, -1.0]])
    st = {"BatchSize": np.array([2.0, 4.0]), "BatchSum": np.array([4.0, 2.0]),
          "BatchSquareSum": np.array([8.0, 1.0])}
    res = run_op("data_norm", dict(st, X=x), OUTS, {"epsilon": 1e-4})
    assert np.allclose(res["Means"], [2.0, 0.5])
    assert np.allclose(res["Scales"], [0.5, 2.0])
    assert np.allclose(res["Y"], [[-0.5, 3.0], [0.5, -3.0]])


def test_data_norm_grad_by_hand():
    x = np.array([[1.0, 2.0], [3.0, -1.0]])
    ins = {"X": x, "Means": np.array([2.0, 0.5]), "Scales": np.array([0.5, 2.0]),
           "Y@GRAD": np.array([[1.0, 1.0], [2.0, -1.0]])}
    res = run_op("data_norm_grad", ins, GRADS, {"epsilon": 1e-4})
    assert np.allclose(res["X@GRAD"], [[0.5, 2.0], [1.0, -2.0]])
    assert np.allclose(res["BatchSize@GRAD"], [2.0, 2.0])
    assert np.allclose(res["BatchSum@GRAD"], [4.0, 1.0])
    # (1-2)^2 + (3-2)^2 + 2e-4; (2-0.5)^2 + (-1-0.5)^2 + 2e-4
    assert np.allclose(res["BatchSquareSum@GRAD"], [2.0002, 4.5002])


def test_data_norm_grad_x_by_central_differences():
    x = R.normal(size=(3, 4))
    ins = dict(_stats(4), X=x)
    check_grad("data_norm", ins, {"epsilon": 1e-4}, wrt=["X"], outs=("Y",),
               extra_outs=("Means", "Scales"),
               grad_inputs=("X", "Means", "Scales", "BatchSize", "BatchSum",
                            "BatchSquareSum"), out_counts=None)


def test_data_norm_scale_and_shift_grads_by_central_differences():
    x = R.normal(size=(3, 2))
    ins = dict(_stats(2), X=x, scale_w=R.uniform(0.5, 2, size=2), bias=R.normal(size=2))
    check_grad("data_norm", ins, {"epsilon": 1e-4, "enable_scale_and_shift": True},
               wrt=["X", "scale_w", "bias"], outs=("Y",), extra_outs=("Means", "Scales"))


@pytest.mark.parametrize("shift", [False, True])
def test_data_norm_slots_skip_rows_that_do_not_show(shift):
    # two slots of width 2; row 0 shows slot 0 only, row 1 both
    x = np.array([[1.0, 2.0, 0.0, 5.0], [2.0, 4.0, 1.0, 3.0]])
    st = {"BatchSize": np.full(4, 2.0), "BatchSum": np.array([2.0, 4.0, 2.0, 6.0]),
          "BatchSquareSum": np.full(4, 8.0)}
    attrs = {"epsilon": 1e-4, "slot_dim": 2, "enable_scale_and_shift": shift}
    extra = {"scale_w": np.full(4, 2.0), "bias": np.full(4, 1.0)} if shift else {}
    res = run_op("data_norm", dict(st, X=x, **extra), OUTS, attrs)
    y = (x - np.array([1.0, 2.0, 1.0, 3.0])) * 0.5
    y = y * 2 + 1 if shift else y
    y[0, 2:] = 0
    assert np.allclose(res["Y"], y)
    g = run_op("data_norm_grad", dict(X=x, Means=res["Means"], Scales=res["Scales"],
                                      **{"Y@GRAD": np.ones((2, 4))}, **extra), GRADS, attrs)
    # slot 0 seen twice: sums / 2; slot 1 once: its own values
    assert np.allclose(g["BatchSize@GRAD"], [1, 1, 1, 1])
    assert np.allclose(g["BatchSum@GRAD"], [1.5, 3.0, 1.0, 3.0])
    # ((1-1)^2 + (2-1)^2) / 2 + 2 eps, ((2-2)^2 + (4-2)^2) / 2 + 2 eps; slot 1: 0 + eps
    assert np.allclose(g["BatchSquareSum@GRAD"], [0.5 + 2e-4, 2.0 + 2e-4, 1e-4, 1e-4])
    if shift:
        assert np.allclose(g["X@GRAD"][0, 2:], 0)


def test_data_norm_refuses_a_rank_3_input():
    from transpile.simulate.model.values import SimError
    with pytest.raises(SimError, match="rank 3"):
        run_op("data_norm", dict(_stats(2), X=np.zeros((1, 1, 2))), OUTS)
