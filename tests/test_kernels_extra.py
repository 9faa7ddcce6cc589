"""Less common creation and indexing kernels (extra_ops.py): by hand and by central
differences."""
from __future__ import annotations

import numpy as np
import pytest

from kernelkit import check_grad, run_op

R = np.random.default_rng(6)
X = R.normal(size=(3, 4, 5))


def test_assign_value_and_batch_size_like_and_eye():
    out = run_op("assign_value", {}, {"Out": 1},
                 {"shape": [2, 2], "dtype": 5, "fp32_values": [1.0, 2.0, 3.0, 4.0]})["Out"]
    assert np.array_equal(out, [[1, 2], [3, 4]])
    out = run_op("assign_value", {}, {"Out": 1},
                 {"shape": [3], "dtype": 3, "int64_values": [7, 8, 9]})["Out"]
    assert out.dtype == np.int64 and out.tolist() == [7, 8, 9]
    out = run_op("fill_constant_batch_size_like", {"Input": X}, {"Out": 1},
                 {"shape": [-1, 2], "value": 1.5, "dtype": 5, "input_dim_idx": 0,
                  "output_dim_idx": 0})["Out"]
    assert out.shape == (3, 2) and np.all(out == 1.5)
    out = run_op("uniform_random_batch_size_like", {"Input": X}, {"Out": 1},
                 {"shape": [2, -1], "input_dim_idx": 1, "output_dim_idx": 1, "min": 0.0,
                  "max": 1.0})["Out"]
    assert out.shape == (2, 4) and out.min() >= 0 and out.max() <= 1
    assert np.array_equal(run_op("eye", {}, {"Out": 1}, {"num_rows": 2, "num_columns": 3,
                                                         "dtype": 5})["Out"], np.eye(2, 3))
    r = run_op("randint", {}, {"Out": 1}, {"low": 2, "high": 5, "shape": [100], "dtype": 3})
    assert r["Out"].min() >= 2 and r["Out"].max() <= 4


@pytest.mark.parametrize("attrs,value,index", [
    # x[1:3, 0] = v: axis 1 decreased, v broadcast over rows
    ({"axes": [0, 1], "starts": [1, 0], "ends": [3, 1], "steps": [1, 1], "decrease_axes": [1]},
     R.normal(size=(5,)), (slice(1, 3), 0)),
    ({"axes": [0], "starts": [0], "ends": [1], "steps": [1], "decrease_axes": [0]},
     R.normal(size=(4, 5)), 0),
    ({"axes": [1, 2], "starts": [1, -1], "ends": [4, 5], "steps": [2, 1], "decrease_axes": []},
     R.normal(size=(3, 2, 1)), (slice(None), slice(1, 4, 2), slice(4, 5))),
])
def test_set_value_tensor(attrs, value, index):
    out = run_op("set_value", {"Input": X, "ValueTensor": value}, {"Out": 1}, attrs)["Out"]
    ref = X.copy()
    ref[index] = value
    assert np.allclose(out, ref)
    check_grad("set_value", {"Input": X, "ValueTensor": value}, attrs,
               wrt=["Input", "ValueTensor"], grad_inputs=("ValueTensor",))


def test_set_value_from_attr_values():
    attrs = {"axes": [1, 2], "starts": [1, -1], "ends": [4, 5], "steps": [2, 1],
             "decrease_axes": [2], "values": [{"type": 5, "r": 2.5}], "shape": [1], "dtype": 6}
    out = run_op("set_value", {"Input": X}, {"Out": 1}, attrs)["Out"]
    ref = X.copy()
    ref[:, 1:4:2, -1] = 2.5
    assert np.allclose(out, ref)


def test_flip_roll_tril():
    assert np.allclose(run_op("flip", {"X": X}, {"Out": 1}, {"axis": [0, -1]})["Out"],
                       X[::-1, :, ::-1])
    check_grad("flip", {"X": X}, {"axis": [0, 2]}, wrt=["X"], grad_inputs=())
    assert np.allclose(run_op("roll", {"X": X}, {"Out": 1}, {"shifts": [1, -2],
                                                             "axis": [0, 2]})["Out"],
                       np.roll(X, [1, -2], axis=[0, 2]))
    assert np.allclose(run_op("roll", {"X": X}, {"Out": 1}, {"shifts": [3], "axis": []})["Out"],
                       np.roll(X.reshape(-1), 3).reshape(X.shape))
    check_grad("roll", {"X": X}, {"shifts": [1, -2], "axis": [0, 2]}, wrt=["X"], grad_inputs=())
    m = X[0]
    assert np.allclose(run_op("tril_triu", {"X": m}, {"Out": 1}, {"diagonal": 1,
                                                                  "lower": True})["Out"],
                       np.tril(m, 1))
    check_grad("tril_triu", {"X": m}, {"diagonal": -1, "lower": False}, wrt=["X"],
               grad_inputs=())


def test_along_axis_index_sample_masked_select_scatter_nd_add():
    i = R.integers(0, 4, size=(3, 2, 5))
    out = run_op("take_along_axis", {"Input": X, "Index": i}, {"Result": 1}, {"Axis": 1})
    assert np.allclose(out["Result"], np.take_along_axis(X, i, 1))
    check_grad("take_along_axis", {"Input": X, "Index": i}, {"Axis": 1}, wrt=["Input"],
               outs=("Result",), grad_inputs=("Input", "Index"))
    j = R.integers(0, 4, size=(3, 1, 5))
    v = R.normal(size=(3, 1, 5))
    out = run_op("put_along_axis", {"Input": X, "Index": j, "Value": v}, {"Result": 1},
                 {"Axis": 1, "Reduce": "add"})["Result"]
    ref = X.copy()
    np.add.at(ref, (np.arange(3)[:, None, None], j, np.arange(5)[None, None, :]), v)
    assert np.allclose(out, ref)
    m = X[0]
    k = np.array([[0, 4, 4], [1, 1, 2], [3, 0, 0], [2, 2, 2]])
    assert np.allclose(run_op("index_sample", {"X": m, "Index": k}, {"Out": 1})["Out"],
                       np.take_along_axis(m, k, 1))
    check_grad("index_sample", {"X": m, "Index": k}, wrt=["X"], grad_inputs=("X", "Index"))
    mask = X > 0
    assert np.allclose(run_op("masked_select", {"X": X, "Mask": mask}, {"Y": 1})["Y"], X[mask])
    check_grad("masked_select", {"X": X, "Mask": mask}, wrt=["X"], outs=("Y",),
               grad_inputs=("X", "Mask"))
    idx = np.array([[1, 2], [0, 3], [1, 2]])
    u = R.normal(size=(3, 5))
    out = run_op("scatter_nd_add", {"X": X, "Index": idx, "Updates": u}, {"Out": 1})["Out"]
    ref = X.copy()
    ref[1, 2] += u[0] + u[2]
    ref[0, 3] += u[1]
    assert np.allclose(out, ref)
    check_grad("scatter_nd_add", {"X": X, "Index": idx, "Updates": u}, wrt=["X", "Updates"],
               grad_inputs=("Index", "Updates"))


def test_isfinite_family():
    x = np.array([1.0, np.inf, np.nan])
    assert run_op("isfinite_v2", {"X": x}, {"Out": 1})["Out"].tolist() == [True, False, False]
    assert run_op("isnan_v2", {"X": x}, {"Out": 1})["Out"].tolist() == [False, False, True]
    assert run_op("isfinite", {"X": x}, {"Out": 1})["Out"].tolist() == [False]


@pytest.mark.parametrize("attrs", [
    {"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]},
    {"ksize": [3, 2], "adaptive": True},
])
def test_max_pool2d_with_index(attrs):
    x = R.normal(size=(1, 2, 5, 5))
    res = run_op("max_pool2d_with_index", {"X": x}, {"Out": 1, "Mask": 1}, attrs)
    flat = x.reshape(1, 2, -1)
    assert np.allclose(np.take_along_axis(flat, res["Mask"].reshape(1, 2, -1).astype(int), -1),
                       res["Out"].reshape(1, 2, -1))
    if not attrs.get("adaptive"):
        assert res["Out"][0, 0, 0, 0] == x[0, 0, 0:2, 0:2].max()
    check_grad("max_pool2d_with_index", {"X": x}, attrs, wrt=["X"], extra_outs=("Mask",),
               grad_inputs=("X", "Mask"))
