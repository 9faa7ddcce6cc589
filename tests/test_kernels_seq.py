"""Sequence (LoD) kernels: sequence_pool (every pooltype), sequence_softmax, sequence_concat,
sequence_expand_as, sequence_mask."""
from __future__ import annotations

import numpy as np
import pytest

from kernelkit import check_grad, run_op

R = np.random.default_rng(5)
X = R.normal(size=(6, 3))
LOD = [[0, 2, 5, 6]]


@pytest.mark.parametrize("kind", ["SUM", "AVERAGE", "SQRT", "MAX", "FIRST", "LAST"])
def test_sequence_pool(kind):
    res = run_op("sequence_pool", {"X": X}, {"Out": 1, "MaxIndex": 1}, {"pooltype": kind},
                 lods={"X": LOD})
    segs = [X[0:2], X[2:5], X[5:6]]
    ref = {"SUM": [s.sum(0) for s in segs], "AVERAGE": [s.mean(0) for s in segs],
           "SQRT": [s.sum(0) / np.sqrt(len(s)) for s in segs], "MAX": [s.max(0) for s in segs],
           "FIRST": [s[0] for s in segs], "LAST": [s[-1] for s in segs]}[kind]
    assert np.allclose(res["Out"], np.stack(ref))
    check_grad("sequence_pool", {"X": X}, {"pooltype": kind}, wrt=["X"], extra_outs=("MaxIndex",),
               lods={"X": LOD}, grad_inputs=("X", "MaxIndex"))


@pytest.mark.parametrize("kind", ["SUM", "AVERAGE", "MAX", "LAST"])
def test_sequence_pool_of_two_levels(kind):
    """A two-level LoD (a node's neighbours, their neighbours) is pooled at its last level;
    the output keeps the first (Paddle's SequencePoolKernel); an empty sequence is pad_value."""
    lod = [[0, 2, 4], [0, 2, 2, 5, 6]]
    res, scope, names = run_op("sequence_pool", {"X": X}, {"Out": 1, "MaxIndex": 1},
                               {"pooltype": kind, "pad_value": 0.25}, lods={"X": lod}, full=True)
    segs = [X[0:2], None, X[2:5], X[5:6]]
    fn = {"SUM": lambda s: s.sum(0), "AVERAGE": lambda s: s.mean(0), "MAX": lambda s: s.max(0),
          "LAST": lambda s: s[-1]}[kind]
    ref = [np.full(3, 0.25) if s is None else fn(s) for s in segs]
    assert np.allclose(res["Out"], np.stack(ref))
    assert scope.lods[names["Out"][0]] == [[0, 2, 4]]
    check_grad("sequence_pool", {"X": X}, {"pooltype": kind}, wrt=["X"], extra_outs=("MaxIndex",),
               lods={"X": lod}, grad_inputs=("X", "MaxIndex"))


def test_sequence_pool_refuses_an_illegal_lod():
    from transpile.simulate.model.values import SimError
    with pytest.raises(SimError, match="illegal"):
        run_op("sequence_pool", {"X": X}, {"Out": 1}, {"pooltype": "SUM"},
               lods={"X": [[0, 2, 4], [0, 2, 5, 6]]})


def test_sequence_softmax():
    x = R.normal(size=(6, 1))
    out = run_op("sequence_softmax", {"X": x}, {"Out": 1}, lods={"X": LOD})["Out"]
    for a, b in zip(LOD[0][:-1], LOD[0][1:]):
        e = np.exp(x[a:b, 0])
        assert np.allclose(out[a:b, 0], e / e.sum())
    check_grad("sequence_softmax", {"X": x}, wrt=["X"], lods={"X": LOD},
               grad_inputs=("X", "Out"))


def test_sequence_concat():
    y = R.normal(size=(4, 3))
    lods = {"X": LOD, ("X", 1): [[0, 1, 2, 4]]}
    out = run_op("sequence_concat", {"X": [X, y]}, {"Out": 1}, lods=lods)["Out"]
    ref = np.concatenate([X[0:2], y[0:1], X[2:5], y[1:2], X[5:6], y[2:4]])
    assert np.allclose(out, ref)
    check_grad("sequence_concat", {"X": [X, y]}, wrt=["X"], lods=lods)


def test_sequence_expand_as():
    x = R.normal(size=(3, 2))
    out = run_op("sequence_expand_as", {"X": x, "Y": X}, {"Out": 1}, lods={"Y": LOD})["Out"]
    assert np.allclose(out, x[[0, 0, 1, 1, 1, 2]])
    check_grad("sequence_expand_as", {"X": x, "Y": X}, wrt=["X"], lods={"Y": LOD})


def test_sequence_mask():
    out = run_op("sequence_mask", {"X": np.array([1, 3, 0])}, {"Y": 1},
                 {"maxlen": 4, "out_dtype": 3})["Y"]
    assert out.tolist() == [[1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]]


def test_sequence_expand():
    x = R.normal(size=(3, 2))
    out = run_op("sequence_expand", {"X": x, "Y": X}, {"Out": 1}, {"ref_level": -1},
                 lods={"Y": LOD})["Out"]
    assert np.allclose(out, x[[0, 0, 1, 1, 1, 2]])
    check_grad("sequence_expand", {"X": x, "Y": X}, {"ref_level": -1}, wrt=["X"],
               lods={"Y": LOD})
    # X with sequences: sequence i repeated as often as Y's sequence i is long
    y = R.normal(size=(4, 1))
    res, scope, names = run_op("sequence_expand", {"X": X, "Y": y}, {"Out": 1},
                               {"ref_level": -1}, lods={"X": LOD, "Y": [[0, 1, 3, 4]]},
                               full=True)
    assert np.allclose(res["Out"], X[[0, 1, 2, 3, 4, 2, 3, 4, 5]])
    assert scope.lods[names["Out"][0]] == [[0, 2, 5, 8, 9]]
    check_grad("sequence_expand", {"X": X, "Y": y}, {"ref_level": -1}, wrt=["X"],
               lods={"X": LOD, "Y": [[0, 1, 3, 4]]})


def test_sequence_pad_unpad():
    res = run_op("sequence_pad", {"X": X, "PadValue": np.array([0.5])}, {"Out": 1, "Length": 1},
                 {"padded_length": 4}, lods={"X": LOD})
    assert res["Out"].shape == (3, 4, 3) and res["Length"].tolist() == [2, 3, 1]
    assert np.allclose(res["Out"][1, :3], X[2:5]) and np.all(res["Out"][2, 1:] == 0.5)
    check_grad("sequence_pad", {"X": X, "PadValue": np.array([0.5])}, {"padded_length": -1},
               wrt=["X"], extra_outs=("Length",), lods={"X": LOD}, grad_inputs=("X",))
    p = R.normal(size=(3, 4, 2))
    res, scope, names = run_op("sequence_unpad", {"X": p, "Length": np.array([2, 4, 1])},
                               {"Out": 1}, full=True)
    assert np.allclose(res["Out"], np.concatenate([p[0, :2], p[1], p[2, :1]]))
    assert scope.lods[names["Out"][0]] == [[0, 2, 6, 7]]
    # Paddle's grad op reads X and Out@GRAD only: the lengths come from Out@GRAD's LoD
    d = R.normal(size=(7, 2))
    g = run_op("sequence_unpad_grad", {"X": p, "Out@GRAD": d}, {"X@GRAD": 1},
               lods={"Out@GRAD": [[0, 2, 6, 7]]})["X@GRAD"]
    ref = np.zeros_like(p)
    ref[0, :2], ref[1], ref[2, :1] = d[:2], d[2:6], d[6:]
    assert np.allclose(g, ref)


def test_reshape_keeps_the_sequences():
    """Paddle's reshape kernel keeps X's LoD (ResetLoD): a lookup's rows reshaped are pooled by
    their sequences (test_dist_fleet_ps.py's bow net)."""
    res, scope, names = run_op("reshape2", {"X": X}, {"Out": 1, "XShape": 1},
                               {"shape": [-1, 3]}, lods={"X": LOD}, full=True)
    assert np.allclose(res["Out"], X) and scope.lods.get(names["Out"][0]) == LOD


@pytest.mark.parametrize("op_type,inputs,attrs", [
    ("leaky_relu", {"X": X}, {"alpha": 0.2}),
    ("concat", {"X": [X, X[:, :1]]}, {"axis": 1}),
    ("scale", {"X": X}, {"scale": 2.0}),
])
def test_forward_ops_pass_their_inputs_lod_on(op_type, inputs, attrs):
    """As Paddle's ShareLoD: the output of a row-keeping forward op carries its (first)
    input's LoD, so a sequence op after it sees the sequences (sequence_softmax after a
    leaky_relu of a graph attention's scores)."""
    _, scope, names = run_op(op_type, inputs, {"Out": 1}, attrs, lods={"X": LOD}, full=True)
    assert scope.lods[names["Out"][0]] == LOD


def test_a_lod_is_not_passed_on_where_the_rows_differ():
    _, scope, names = run_op("concat", {"X": [X[:3], X[3:]]}, {"Out": 1}, {"axis": 0},
                             lods={"X": [[0, 1, 3]]}, full=True)
    assert names["Out"][0] not in scope.lods
