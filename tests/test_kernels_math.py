"""Elementwise (Paddle's axis broadcasting), matmul family, einsum, reductions, norms."""
from __future__ import annotations

import numpy as np
import pytest

from kernelkit import check_grad, run_op
from transpile.simulate.model.values import SelectedRows

R = np.random.default_rng(0)


def _r(*shape):
    return R.normal(size=shape)


EW = ["elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
      "elementwise_max", "elementwise_min", "elementwise_pow"]


@pytest.mark.parametrize("typ", EW)
def test_elementwise_y_over_nchw_channels(typ):
    """X [N,C,H,W], Y [C], axis=1: the conv-net bias case (it failed before)."""
    x, y = _r(2, 3, 2, 2), _r(3)
    if typ == "elementwise_pow":
        x = np.abs(x) + 0.5
    if typ == "elementwise_div":
        y = np.abs(y) + 0.5
    out = run_op(typ, {"X": x, "Y": y}, {"Out": 1}, {"axis": 1})["Out"]
    yb = y.reshape(1, 3, 1, 1)
    ref = {"elementwise_add": np.add, "elementwise_sub": np.subtract,
           "elementwise_mul": np.multiply, "elementwise_div": np.divide,
           "elementwise_max": np.maximum, "elementwise_min": np.minimum,
           "elementwise_pow": np.power}[typ](x, yb)
    assert np.allclose(out, ref)
    g = check_grad(typ, {"X": x, "Y": y}, {"axis": 1}, wrt=["X", "Y"])
    assert g["Y"].shape == (3,)


@pytest.mark.parametrize("xs,ys,axis", [((2, 3, 4), (3, 4), 1), ((2, 3, 4), (4,), -1),
                                        ((2, 3, 4), (2, 3), 0), ((2, 3, 4), (3, 1), 1),
                                        ((3, 1), (1, 4), -1), ((4,), (2, 3, 4), -1),
                                        ((2, 3, 4), (1, 3, 1), -1)])
def test_elementwise_broadcast_grads(xs, ys, axis):
    check_grad("elementwise_mul", {"X": _r(*xs), "Y": _r(*ys)}, {"axis": axis}, wrt=["X", "Y"])
    check_grad("elementwise_sub", {"X": _r(*xs), "Y": _r(*ys)}, {"axis": axis}, wrt=["X", "Y"])


def test_elementwise_mod_floordiv():
    x = np.array([7, -7, 7, -7])
    y = np.array([3, 3, -3, -3])
    assert np.array_equal(run_op("elementwise_mod", {"X": x, "Y": y}, {"Out": 1})["Out"],
                          [1, 2, -2, -1])
    assert np.array_equal(run_op("elementwise_floordiv", {"X": x, "Y": y}, {"Out": 1})["Out"],
                          [2, -3, -3, 2])
    assert np.allclose(run_op("elementwise_mod", {"X": np.array([5.5, -5.5]),
                                                  "Y": np.array([2.0, 2.0])}, {"Out": 1})["Out"],
                       [1.5, 0.5])


def test_max_min_ties_send_the_grad_to_y():
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([1.0, 1.0, 4.0])
    d = np.array([10.0, 20.0, 30.0])
    g = run_op("elementwise_max_grad", {"X": x, "Y": y, "Out@GRAD": d},
               {"X@GRAD": 1, "Y@GRAD": 1})
    assert np.array_equal(g["X@GRAD"], [0, 20, 0]) and np.array_equal(g["Y@GRAD"], [10, 0, 30])


@pytest.mark.parametrize("xs,ys,tx,ty", [((3, 4), (4, 5), False, False),
                                         ((4, 3), (5, 4), True, True),
                                         ((2, 3, 4), (4, 5), False, False),
                                         ((2, 1, 3, 4), (3, 4, 5), False, False),
                                         ((4,), (2, 4, 5), False, False),
                                         ((2, 3, 4), (4,), False, False), ((4,), (4,), False, False),
                                         ((2, 4, 3), (2, 5, 4), True, True)])
def test_matmul_v2_grads(xs, ys, tx, ty):
    x, y = _r(*xs), _r(*ys)
    out = run_op("matmul_v2", {"X": x, "Y": y}, {"Out": 1}, {"trans_x": tx, "trans_y": ty})["Out"]
    xm = np.swapaxes(x, -1, -2) if tx and x.ndim > 1 else x
    ym = np.swapaxes(y, -1, -2) if ty and y.ndim > 1 else y
    assert np.allclose(out, np.matmul(xm, ym))
    check_grad("matmul_v2", {"X": x, "Y": y}, {"trans_x": tx, "trans_y": ty}, wrt=["X", "Y"])


def test_matmul_v1_alpha_and_bmm_and_mul():
    x, y = _r(2, 3, 4), _r(2, 5, 4)
    attrs = {"transpose_X": False, "transpose_Y": True, "alpha": 0.5}
    out = run_op("matmul", {"X": x, "Y": y}, {"Out": 1}, attrs)["Out"]
    assert np.allclose(out, 0.5 * x @ np.swapaxes(y, 1, 2))
    check_grad("matmul", {"X": x, "Y": y}, attrs, wrt=["X", "Y"])
    y2 = _r(2, 4, 5)
    assert np.allclose(run_op("bmm", {"X": x, "Y": y2}, {"Out": 1})["Out"], x @ y2)
    check_grad("bmm", {"X": x, "Y": y2}, wrt=["X", "Y"])
    w = _r(4, 5)
    out = run_op("mul", {"X": x, "Y": w}, {"Out": 1}, {"x_num_col_dims": 2})["Out"]
    assert out.shape == (2, 3, 5) and np.allclose(out, x @ w)
    check_grad("mul", {"X": x, "Y": w}, {"x_num_col_dims": 2, "y_num_col_dims": 1},
               wrt=["X", "Y"])


@pytest.mark.parametrize("eq,shapes", [("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
                                       ("ij,kj->i", [(3, 4), (5, 4)]),
                                       ("...ij,...jk", [(2, 3, 4), (4, 5)]),
                                       ("ijk->kj", [(2, 3, 4)]),
                                       ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
                                       ("i,j->ij", [(3,), (4,)]),
                                       ("bnd,md->bnm", [(2, 3, 4), (5, 4)])])
def test_einsum(eq, shapes):
    ops = [_r(*s) for s in shapes]
    res = run_op("einsum", {"Operands": ops if len(ops) > 1 else ops},
                 {"Out": 1, "XShape": len(ops)}, {"equation": eq})
    assert np.allclose(res["Out"], np.einsum(eq, *ops))
    # Paddle's einsum_grad reads the operands back from XShape (slot x_shape)
    xshape = res["XShape"] if len(ops) > 1 else [res["XShape"]]
    assert all(np.array_equal(a, b) for a, b in zip(xshape, ops))
    rng = np.random.default_rng(3)
    w = rng.normal(size=np.shape(res["Out"]))
    g = run_op("einsum_grad", {"x_shape": ops, "Out@GRAD": w},
               {"Operands@GRAD": len(ops)}, {"equation": eq})["Operands@GRAD"]
    g = g if isinstance(g, list) else [g]
    for k, op in enumerate(ops):
        num = np.zeros_like(op)
        for idx in np.ndindex(*op.shape):
            p = [o.copy() for o in ops]
            m = [o.copy() for o in ops]
            p[k][idx] += 1e-6
            m[k][idx] -= 1e-6
            num[idx] = ((np.einsum(eq, *p) * w).sum() - (np.einsum(eq, *m) * w).sum()) / 2e-6
        assert np.allclose(g[k], num, atol=1e-7), (eq, k)


@pytest.mark.parametrize("typ", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                 "reduce_prod"])
@pytest.mark.parametrize("dims,keep", [([1], False), ([0, 2], True), ([-1], False)])
def test_reductions(typ, dims, keep):
    x = _r(2, 3, 4)
    fn = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max,
          "reduce_min": np.min, "reduce_prod": np.prod}[typ]
    attrs = {"dim": dims, "keep_dim": keep, "reduce_all": False}
    out = run_op(typ, {"X": x}, {"Out": 1}, attrs)["Out"]
    assert np.allclose(out, fn(x, axis=tuple(d % 3 for d in dims), keepdims=keep))
    reads = ("X",) if typ in ("reduce_sum", "reduce_mean") else ("X", "Out")
    check_grad(typ, {"X": x}, attrs, wrt=["X"], grad_inputs=reads)


def test_reduce_all_and_mean_and_bool_reductions():
    x = _r(2, 3)
    out = run_op("reduce_sum", {"X": x}, {"Out": 1}, {"dim": [0], "reduce_all": True})["Out"]
    assert np.allclose(out, x.sum())
    assert np.allclose(run_op("mean", {"X": x}, {"Out": 1})["Out"], x.mean())
    check_grad("mean", {"X": x}, wrt=["X"])
    b = x > 0
    assert np.array_equal(run_op("reduce_all", {"X": b}, {"Out": 1}, {"dim": [1]})["Out"],
                          b.all(axis=1))
    assert np.array_equal(run_op("reduce_any", {"X": b}, {"Out": 1}, {"dim": [1]})["Out"],
                          b.any(axis=1))
    s = run_op("reduce_sum", {"X": b}, {"Out": 1}, {"dim": [1]})["Out"]
    assert s.dtype.kind == "i" and np.array_equal(s, b.sum(axis=1))


def test_reduce_max_grad_goes_to_every_tied_element():
    x = np.array([[1.0, 3.0, 3.0]])
    g = run_op("reduce_max_grad", {"X": x, "Out": np.array([3.0]), "Out@GRAD": np.array([2.0])},
               {"X@GRAD": 1}, {"dim": [1]})["X@GRAD"]
    assert np.array_equal(g, [[0, 2, 2]])


@pytest.mark.parametrize("p,axis,keep", [(2.0, 1, False), (3.0, -1, True), (1.0, 0, False),
                                         (float("inf"), 1, False)])
def test_p_norm(p, axis, keep):
    x = _r(3, 4)
    attrs = {"porder": p, "axis": axis, "keepdim": keep, "epsilon": 1e-12, "asvector": False}
    out = run_op("p_norm", {"X": x}, {"Out": 1}, attrs)["Out"]
    ref = np.linalg.norm(x, ord=p, axis=axis, keepdims=keep) if p != 3.0 else \
        (np.abs(x) ** 3).sum(axis=axis, keepdims=keep) ** (1 / 3)
    assert np.allclose(out, ref)
    check_grad("p_norm", {"X": x}, attrs, wrt=["X"], grad_inputs=("X", "Out"))


def test_norm_l2_normalize_and_frobenius():
    x = _r(3, 4)
    res = run_op("norm", {"X": x}, {"Out": 1, "Norm": 1}, {"axis": 1, "epsilon": 1e-10})
    n = np.sqrt((x * x).sum(axis=1, keepdims=True) + 1e-10)
    assert np.allclose(res["Out"], x / n) and np.allclose(res["Norm"], n)
    check_grad("norm", {"X": x}, {"axis": 1, "epsilon": 1e-10}, wrt=["X"], extra_outs=("Norm",),
               grad_inputs=("X", "Norm"))
    out = run_op("frobenius_norm", {"X": x}, {"Out": 1}, {"dim": [0, 1], "keep_dim": False})
    assert np.allclose(out["Out"], np.linalg.norm(x))
    check_grad("frobenius_norm", {"X": x}, {"dim": [1], "keep_dim": False}, wrt=["X"])


def test_clip_by_norm_dense_and_selected_rows():
    x = np.array([[3.0, 4.0]])
    assert np.allclose(run_op("clip_by_norm", {"X": x}, {"Out": 1}, {"max_norm": 1.0})["Out"],
                       [[0.6, 0.8]])
    assert np.allclose(run_op("clip_by_norm", {"X": x}, {"Out": 1}, {"max_norm": 10.0})["Out"],
                       x)
    sr = SelectedRows([2, 0, 2], np.array([[1.0, 2.0], [0.0, 1.0], [2.0, 2.0]]), 4)
    out = run_op("clip_by_norm", {"X": sr}, {"Out": 1}, {"max_norm": 1.0})["Out"]
    merged = np.array([[0.0, 1.0], [3.0, 4.0]])
    assert list(out.rows) == [0, 2] and np.allclose(out.value, merged / np.linalg.norm(merged))


def test_clip_scale_sum():
    x = np.array([-2.0, 0.5, 3.0])
    assert np.allclose(run_op("clip", {"X": x}, {"Out": 1}, {"min": -1.0, "max": 1.0})["Out"],
                       [-1, 0.5, 1])
    check_grad("clip", {"X": x}, {"min": -1.0, "max": 1.0}, wrt=["X"])
    assert np.allclose(run_op("scale", {"X": x}, {"Out": 1},
                              {"scale": 2.0, "bias": 1.0, "bias_after_scale": False})["Out"],
                       (x + 1) * 2)
    a = SelectedRows([1, 3], np.ones((2, 2)), 5)
    b = SelectedRows([3], np.full((1, 2), 2.0), 5)
    out = run_op("sum", {"X": [a, b]}, {"Out": 1})["Out"]
    assert list(out.rows) == [1, 3] and np.allclose(out.value, [[1, 1], [3, 3]])
    out = run_op("sum", {"X": [a, np.ones((5, 2))]}, {"Out": 1})["Out"]
    assert np.allclose(out, [[1, 1], [2, 2], [1, 1], [2, 2], [1, 1]])
