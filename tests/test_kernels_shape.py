"""Shape and indexing kernels: values by hand (numpy indexing as the reference), grads by
central differences."""
from __future__ import annotations

import numpy as np
import pytest

from kernelkit import check_grad, run_op

R = np.random.default_rng(1)
X = R.normal(size=(2, 3, 4, 5))


def _out(typ, inputs, attrs=None, slot="Out", n=1):
    return run_op(typ, inputs, {slot: n}, attrs)[slot]


@pytest.mark.parametrize("attrs,ref", [
    ({"axes": [1, 2], "starts": [1, -3], "ends": [3, 100]}, X[:, 1:3, -3:]),
    ({"axes": [3], "starts": [-100], "ends": [-1]}, X[..., :-1]),
    ({"axes": [1, 3], "starts": [1, 2], "ends": [2, 3], "decrease_axis": [1, 3]}, X[:, 1, :, 2]),
    ({"axes": [0, 1, 2, 3], "starts": [1, 2, 3, 4], "ends": [2, 3, 4, 5],
      "decrease_axis": [0, 1, 2, 3]}, X[1, 2, 3, 4]),
    ({"axes": [2], "starts": [3], "ends": [1]}, X[:, :, 3:1]),
])
def test_slice(attrs, ref):
    attrs = dict(attrs, infer_flags=[1] * len(attrs["axes"]))
    out = _out("slice", {"Input": X}, attrs)
    assert out.shape == ref.shape and np.allclose(out, ref)
    if out.size:
        check_grad("slice", {"Input": X[:2, :3, :4, :5] * 1.0}, attrs, wrt=["Input"],
                   grad_inputs=("Input",), out_counts=None)


def test_slice_starts_from_tensors():
    out = run_op("slice", {"Input": X, "StartsTensorList": [np.array([1]), np.array([2])],
                           "EndsTensor": np.array([2, 4])}, {"Out": 1},
                 {"axes": [0, 3], "starts": [-1, -1], "ends": [-1, -1]})["Out"]
    assert np.allclose(out, X[1:2, :, :, 2:4])


@pytest.mark.parametrize("attrs,ref", [
    ({"axes": [1, 3], "starts": [2, 4], "ends": [0, 0], "strides": [-1, -2]}, X[:, 2:0:-1, :, 4:0:-2]),
    # an end of -1 with a negative stride runs through index 0
    ({"axes": [0], "starts": [2147483647], "ends": [-1], "strides": [-1]}, X[::-1]),
    # any other negative end counts from the back and clamps at 0 (Paddle, not Python)
    ({"axes": [3], "starts": [-1], "ends": [-100], "strides": [-2]}, X[..., 4:0:-2]),
    ({"axes": [1], "starts": [1], "ends": [2147483647], "strides": [2]}, X[:, 1::2]),
])
def test_strided_slice(attrs, ref):
    out = _out("strided_slice", {"Input": X}, attrs)
    assert out.shape == ref.shape and np.allclose(out, ref)
    check_grad("strided_slice", {"Input": X[:, :, :1]}, attrs, wrt=["Input"],
               grad_inputs=("Input",))


def test_squeeze_unsqueeze_flatten_with_xshape():
    x = R.normal(size=(1, 3, 1, 2))
    res = run_op("squeeze2", {"X": x}, {"Out": 1, "XShape": 1}, {"axes": [0, 2]})
    assert res["Out"].shape == (3, 2) and res["XShape"].shape == (0, 1, 3, 1, 2)
    assert _out("squeeze2", {"X": x}, {"axes": []}).shape == (3, 2)
    assert _out("squeeze2", {"X": x}, {"axes": [1, -2]}).shape == (1, 3, 2)   # dim 1 is 3: kept
    g = run_op("squeeze2_grad", {"XShape": res["XShape"], "Out@GRAD": np.ones((3, 2))},
               {"X@GRAD": 1}, {"axes": [0, 2]})["X@GRAD"]
    assert g.shape == x.shape
    y = R.normal(size=(3, 2))
    for axes, shape in (([0, 2], (1, 3, 1, 2)), ([-1, 1], (3, 1, 2, 1)), ([1, 1], (3, 1, 1, 2))):
        assert _out("unsqueeze2", {"X": y}, {"axes": axes}).shape == shape
    assert _out("unsqueeze2", {"X": y, "AxesTensor": np.array([0])}, {"axes": []}).shape == (1, 3, 2)
    for typ, attrs in (("squeeze2", {"axes": [0, 2]}), ("unsqueeze2", {"axes": [2]}),
                       ("flatten_contiguous_range", {"start_axis": 1, "stop_axis": -1})):
        check_grad(typ, {"X": x}, attrs, wrt=["X"], extra_outs=("XShape",),
                   grad_inputs=("XShape",))
    res = run_op("flatten_contiguous_range", {"X": X}, {"Out": 1, "XShape": 1},
                 {"start_axis": 1, "stop_axis": 2})
    assert res["Out"].shape == (2, 12, 5) and np.allclose(res["Out"].reshape(X.shape), X)
    assert _out("flatten_contiguous_range", {"X": X}, {"start_axis": 0, "stop_axis": -1}).shape \
        == (120,)
    assert _out("flatten2", {"X": X}, {"axis": 2}).shape == (6, 20)


def test_stack_unstack():
    a, b = R.normal(size=(3, 2)), R.normal(size=(3, 2))
    assert np.allclose(_out("stack", {"X": [a, b]}, {"axis": 1}, slot="Y"), np.stack([a, b], 1))
    assert np.allclose(_out("stack", {"X": [a, b]}, {"axis": -1}, slot="Y"), np.stack([a, b], -1))
    check_grad("stack", {"X": [a, b]}, {"axis": 1}, wrt=["X"], outs=("Y",), grad_inputs=())
    x = R.normal(size=(3, 2, 4))
    ys = _out("unstack", {"X": x}, {"axis": 1, "num": 2}, slot="Y", n=2)
    assert np.allclose(ys[0], x[:, 0]) and np.allclose(ys[1], x[:, 1])
    check_grad("unstack", {"X": x}, {"axis": 1, "num": 2}, wrt=["X"], outs=("Y",),
               out_counts={"Y": 2}, grad_inputs=())


def test_expand_tile():
    x = R.normal(size=(3, 1))
    assert np.allclose(_out("expand_v2", {"X": x}, {"shape": [2, 3, 4]}),
                       np.broadcast_to(x, (2, 3, 4)))
    assert np.allclose(_out("expand_v2", {"X": x}, {"shape": [2, -1, 4]}),
                       np.broadcast_to(x, (2, 3, 4)))
    check_grad("expand_v2", {"X": x}, {"shape": [2, 3, 4]}, wrt=["X"], grad_inputs=("X",))
    y = R.normal(size=(2, 3, 4))
    assert np.allclose(_out("expand_as_v2", {"X": x, "Y": y}, {"target_shape": [2, 3, 4]}),
                       np.broadcast_to(x, (2, 3, 4)))
    check_grad("expand_as_v2", {"X": x}, {"target_shape": [2, 3, 4]}, wrt=["X"],
               grad_inputs=("X",))
    z = R.normal(size=(3, 2))
    assert np.allclose(_out("tile", {"X": z}, {"repeat_times": [2, 1, 3]}), np.tile(z, (2, 1, 3)))
    check_grad("tile", {"X": z}, {"repeat_times": [2, 1, 3]}, wrt=["X"], grad_inputs=("X",))
    assert np.allclose(_out("expand", {"X": z}, {"expand_times": [2, 3]}), np.tile(z, (2, 3)))
    check_grad("expand", {"X": z}, {"expand_times": [2, 3]}, wrt=["X"], grad_inputs=("X",))


def test_gather_scatter_index_select_where():
    x = R.normal(size=(5, 3))
    i = np.array([1, 3, 1])
    assert np.allclose(_out("gather", {"X": x, "Index": i}), x[i])
    check_grad("gather", {"X": x, "Index": i}, wrt=["X"], grad_inputs=("X", "Index"))
    j = np.array([2, 0, 2, 2])
    assert np.allclose(_out("gather", {"X": x, "Index": j}, {"axis": 1}), x[:, j])
    # the true gradient (Paddle 2.6.2's CPU gather_grad along axis 1 repeats row 0's)
    check_grad("gather", {"X": x, "Index": j}, {"axis": 1}, wrt=["X"], grad_inputs=("X", "Index"))
    y = R.normal(size=(4, 3, 2))
    k = np.array([[1, 2], [3, 0], [1, 2]])
    assert np.allclose(_out("gather_nd", {"X": y, "Index": k}), y[k[:, 0], k[:, 1]])
    check_grad("gather_nd", {"X": y, "Index": k}, wrt=["X"], grad_inputs=("X", "Index"))
    u = R.normal(size=(3, 3))
    ids = np.array([1, 3, 1])
    over = _out("scatter", {"X": x, "Ids": ids, "Updates": u}, {"overwrite": True})
    ref = x.copy()
    ref[3], ref[1] = u[1], u[2]
    assert np.allclose(over, ref)
    add = _out("scatter", {"X": x, "Ids": ids, "Updates": u}, {"overwrite": False})
    ref = x.copy()
    ref[1], ref[3] = u[0] + u[2], u[1]
    assert np.allclose(add, ref)
    check_grad("scatter", {"X": x, "Ids": np.array([1, 3]), "Updates": u[:2]},
               {"overwrite": True}, wrt=["X", "Updates"], grad_inputs=("Ids", "Updates"))
    assert np.allclose(_out("index_select", {"X": x, "Index": np.array([2, 0, 2])}, {"dim": 1}),
                       x[:, [2, 0, 2]])
    check_grad("index_select", {"X": x, "Index": np.array([2, 0, 2])}, {"dim": 1}, wrt=["X"],
               grad_inputs=("X", "Index"))
    c = x > 0
    z = R.normal(size=(5, 3))
    assert np.allclose(_out("where", {"Condition": c, "X": x, "Y": z}), np.where(c, x, z))
    check_grad("where", {"Condition": c, "X": x, "Y": z}, wrt=["X", "Y"])


def test_one_hot_top_k_arg_max():
    oh = _out("one_hot_v2", {"X": np.array([[1, 4], [0, 2]])}, {"depth": 5, "dtype": 5})
    assert oh.shape == (2, 2, 5) and oh[0, 1, 4] == 1 and oh.sum() == 4
    oh1 = _out("one_hot", {"X": np.array([[1], [4]])}, {"depth": 5, "dtype": 5})
    assert oh1.shape == (2, 5) and oh1[1, 4] == 1
    with pytest.raises(Exception):
        _out("one_hot_v2", {"X": np.array([5])}, {"depth": 5})
    assert _out("one_hot_v2", {"X": np.array([5])}, {"depth": 5, "allow_out_of_range": True}) \
        .sum() == 0
    x = np.array([[1.0, 3.0, 2.0, 3.0], [0.0, -1.0, 5.0, 4.0]])
    res = run_op("top_k_v2", {"X": x}, {"Out": 1, "Indices": 1}, {"k": 2, "axis": -1})
    assert np.allclose(res["Out"], [[3, 3], [5, 4]])
    assert np.array_equal(res["Indices"], [[1, 3], [2, 3]])     # ties: the lower index first
    res = run_op("top_k_v2", {"X": x}, {"Out": 1, "Indices": 1}, {"k": 1, "axis": 0,
                                                                    "largest": False})
    assert np.array_equal(res["Indices"], [[1, 1, 0, 0]])
    res = run_op("top_k", {"X": x}, {"Out": 1, "Indices": 1}, {"k": 2})
    assert np.array_equal(res["Indices"], [[1, 3], [2, 3]])
    xr = R.normal(size=(3, 5))
    check_grad("top_k_v2", {"X": xr}, {"k": 2, "axis": 1}, wrt=["X"], outs=("Out",),
               extra_outs=("Indices",), grad_inputs=("X", "Indices"))
    assert np.array_equal(_out("arg_max", {"X": x}, {"axis": 1}), [1, 2])
    assert np.array_equal(_out("arg_min", {"X": x}, {"axis": 0, "keepdims": True}), [[1, 1, 0, 0]])
    assert int(_out("arg_max", {"X": x}, {"flatten": True, "axis": 0})) == 6


def test_range_cumsum_shape_and_friends():
    out = _out("range", {"Start": np.array([1]), "End": np.array([8]), "Step": np.array([3])})
    assert np.array_equal(out, [1, 4, 7]) and out.dtype.kind == "i"
    assert np.allclose(_out("range", {"Start": np.array([0.5]), "End": np.array([1.6]),
                                      "Step": np.array([0.5])}), [0.5, 1.0, 1.5])
    x = R.normal(size=(3, 4))
    assert np.allclose(_out("cumsum", {"X": x}, {"axis": 1}), np.cumsum(x, 1))
    assert np.allclose(_out("cumsum", {"X": x}, {"flatten": True}), np.cumsum(x))
    rev = _out("cumsum", {"X": x}, {"axis": 1, "reverse": True, "exclusive": True})
    assert np.allclose(rev, np.flip(np.cumsum(np.flip(x, 1), 1), 1) - x)
    for attrs in ({"axis": 1}, {"axis": 0, "reverse": True}, {"axis": 1, "exclusive": True}):
        check_grad("cumsum", {"X": x}, attrs, wrt=["X"], grad_inputs=())
    assert np.array_equal(_out("shape", {"Input": X}), [2, 3, 4, 5])
    assert np.allclose(_out("concat", {"X": [x, x[:, :2]]}, {"axis": -1}),
                       np.concatenate([x, x[:, :2]], -1))
    check_grad("concat", {"X": [x, x[:, :2]]}, {"axis": 1}, wrt=["X"], grad_inputs=("X",))
    parts = _out("split", {"X": x}, {"sections": [1, -1, 1], "axis": 1}, n=3)
    assert [p.shape for p in parts] == [(3, 1), (3, 2), (3, 1)]
    assert np.allclose(_out("transpose2", {"X": X}, {"axis": [2, 0, 1, 3]}),
                       X.transpose(2, 0, 1, 3))
    assert _out("reshape2", {"X": X}, {"shape": [0, -1, 5]}).shape == (2, 12, 5)
    check_grad("transpose2", {"X": X[:1, :2]}, {"axis": [2, 0, 1, 3]}, wrt=["X"])
    check_grad("reshape2", {"X": X[:1, :2]}, {"shape": [0, -1]}, wrt=["X"],
               extra_outs=("XShape",), grad_inputs=("XShape",))
