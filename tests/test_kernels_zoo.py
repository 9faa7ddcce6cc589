"""Kernels the PaddleRec zoo and Paddle's distributed-test models need beyond the others:
bitwise ops, l1_norm, squared_l2_norm, multinomial, sequence_conv, merge_selected_rows,
get_tensor_from_selected_rows, elementwise broadcasting both ways, a SelectedRows scaled by
elementwise_mul. Expected values by hand, grads by finite differences."""
from __future__ import annotations

import numpy as np
import pytest

from kernelkit import check_grad, run_op
from transpile.simulate.model.executor import Executor
from transpile.simulate.model.values import SelectedRows

R = np.random.default_rng(11)


@pytest.mark.parametrize("op,fn", [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                                   ("bitwise_xor", np.bitwise_xor)])
def test_bitwise(op, fn):
    x = np.array([[5, 3], [12, 0]], dtype=np.int64)
    y = np.array([6, 1], dtype=np.int64)
    assert (run_op(op, {"X": x, "Y": y}, {"Out": 1})["Out"] == fn(x, y)).all()
    b = np.array([True, False, True])
    c = np.array([True, True, False])
    assert (run_op(op, {"X": b, "Y": c}, {"Out": 1})["Out"] == fn(b, c)).all()


def test_bitwise_not():
    assert run_op("bitwise_not", {"X": np.array([True, False])}, {"Out": 1})["Out"].tolist() \
        == [False, True]
    assert run_op("bitwise_not", {"X": np.array([0, 5], dtype=np.int64)},
                  {"Out": 1})["Out"].tolist() == [-1, -6]


def test_l1_norm():
    x = np.array([[1.0, -2.0], [0.5, -0.25]])
    assert np.isclose(float(run_op("l1_norm", {"X": x}, {"Out": 1})["Out"]), 3.75)
    check_grad("l1_norm", {"X": R.normal(size=(3, 4))}, wrt=["X"], grad_inputs=("X",))


def test_squared_l2_norm():
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    assert np.isclose(float(run_op("squared_l2_norm", {"X": x}, {"Out": 1})["Out"]), 14.25)
    check_grad("squared_l2_norm", {"X": R.normal(size=(3, 4))}, wrt=["X"], grad_inputs=("X",))


def test_squared_l2_norm_of_selected_rows():
    sr = SelectedRows([4, 1, 4], np.array([[1.0, 2.0], [3.0, 0.0], [1.0, 1.0]]), 10)
    assert np.isclose(float(run_op("squared_l2_norm", {"X": sr}, {"Out": 1})["Out"]), 16.0)
    g = run_op("squared_l2_norm_grad", {"X": sr, "Out@GRAD": np.array([0.5])},
               {"X@GRAD": 1})["X@GRAD"]
    assert isinstance(g, SelectedRows) and g.rows.tolist() == [4, 1, 4]
    assert np.allclose(g.value, sr.value)


def _multinomial(p, k, replacement, samples=0, offset=0, step=0):
    from kernelkit import build
    prog, ins, outs = build("multinomial", {"X": p}, {"Out": 1},
                            {"num_samples": k, "replacement": replacement})
    ex = Executor("t", prog)
    ex.begin_step(step, samples, offset)
    ex.scope.put(ins["X"][0], p)
    ex.run_block(0)
    return ex.scope.get(outs["Out"][0])


def test_multinomial_without_replacement_draws_distinct_classes():
    p = np.array([[0.1, 0.2, 0.3, 0.4], [1.0, 0.0, 1.0, 1.0]])
    out = _multinomial(p, 3, False)
    assert out.shape == (2, 3) and out.dtype == np.int64
    for row, probs in zip(out, p):
        assert len(set(row.tolist())) == 3 and all(probs[c] > 0 for c in row)


def test_multinomial_follows_the_probabilities():
    p = np.array([[0.0, 0.25, 0.75]])
    counts = np.zeros(3)
    for step in range(200):
        counts += np.bincount(_multinomial(p, 5, True, step=step).reshape(-1), minlength=3)
    assert counts[0] == 0 and 0.2 < counts[1] / counts.sum() < 0.3


def test_multinomial_a_shard_draws_the_originals_rows():
    """Rows keyed by their global row: trainer 1's rows 2..3 draw what the whole batch drew."""
    p = R.random((4, 6)) + 0.1
    whole = _multinomial(p, 2, True, samples=4, offset=0)
    part = _multinomial(p[2:], 2, True, samples=2, offset=2)
    assert (whole[2:] == part).all()


SEQ_LOD = [[0, 3, 4, 7]]


def test_sequence_conv_by_hand():
    x = np.arange(14, dtype=np.float64).reshape(7, 2)
    w = R.normal(size=(6, 3))
    attrs = {"contextStart": -1, "contextLength": 3, "contextStride": 1}
    out = run_op("sequence_conv", {"X": x, "Filter": w}, {"Out": 1}, attrs,
                 lods={"X": SEQ_LOD})["Out"]
    z = np.zeros(2)
    rows = [np.concatenate([z, x[0], x[1]]), np.concatenate([x[0], x[1], x[2]]),
            np.concatenate([x[1], x[2], z]), np.concatenate([z, x[3], z]),
            np.concatenate([z, x[4], x[5]]), np.concatenate([x[4], x[5], x[6]]),
            np.concatenate([x[5], x[6], z])]
    assert np.allclose(out, np.stack(rows) @ w)


def test_sequence_conv_grad():
    attrs = {"contextStart": -2, "contextLength": 3, "contextStride": 1}
    check_grad("sequence_conv", {"X": R.normal(size=(7, 2)), "Filter": R.normal(size=(6, 4))},
               attrs, wrt=["X", "Filter"], lods={"X": SEQ_LOD}, grad_inputs=("X", "Filter"))


def test_merge_selected_rows_and_its_tensor():
    sr = SelectedRows([3, 1, 3], np.array([[1.0], [2.0], [4.0]]), 5)
    m = run_op("merge_selected_rows", {"X": sr}, {"Out": 1})["Out"]
    assert m.rows.tolist() == [1, 3] and m.value.reshape(-1).tolist() == [2.0, 5.0]
    t = run_op("get_tensor_from_selected_rows", {"X": m}, {"Out": 1})["Out"]
    assert t.tolist() == [[2.0], [5.0]]


def test_clip_of_selected_rows_merges_then_clips_and_stays_sparse():
    """Paddle's sparse clip kernel: repeated rows added up first, then clipped."""
    sr = SelectedRows([3, 1, 3], np.array([[0.4], [-2.0], [0.5]]), 5)
    out = run_op("clip", {"X": sr}, {"Out": 1}, {"min": -1.0, "max": 0.8})["Out"]
    assert isinstance(out, SelectedRows) and out.height == 5
    assert out.rows.tolist() == [1, 3] and out.value.reshape(-1).tolist() == [-1.0, 0.8]


def test_elementwise_broadcasts_both_ways():
    """X (4,) and Y (4, 1): Paddle broadcasts to (4, 4), as numpy does."""
    x, y = R.normal(size=4), R.normal(size=(4, 1))
    out = run_op("elementwise_sub", {"X": x, "Y": y}, {"Out": 1}, {"axis": -1})["Out"]
    assert np.allclose(out, x - y)
    check_grad("elementwise_sub", {"X": x, "Y": y}, {"axis": -1}, wrt=["X", "Y"],
               grad_inputs=("X", "Y"))
    check_grad("elementwise_mul", {"X": R.normal(size=(3, 1)), "Y": R.normal(size=(4,))},
               {"axis": -1}, wrt=["X", "Y"], grad_inputs=("X", "Y"))


def test_elementwise_mul_scales_selected_rows():
    sr = SelectedRows([2, 0], np.array([[1.0, 2.0], [3.0, 4.0]]), 6)
    out = run_op("elementwise_mul", {"X": sr, "Y": np.array([0.5])}, {"Out": 1})["Out"]
    assert isinstance(out, SelectedRows) and out.rows.tolist() == [2, 0]
    assert np.allclose(out.value, sr.value * 0.5)
