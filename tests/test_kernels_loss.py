"""Loss kernels: values by hand, grads by central differences."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kernelkit import check_grad, run_op

R = np.random.default_rng(4)


def test_log_loss():
    p = np.array([[0.2], [0.9]])
    y = np.array([[0.0], [1.0]])
    out = run_op("log_loss", {"Predicted": p, "Labels": y}, {"Loss": 1}, {"epsilon": 1e-4})
    assert np.allclose(out["Loss"], [[-math.log(0.8 + 1e-4)], [-math.log(0.9 + 1e-4)]])
    check_grad("log_loss", {"Predicted": R.uniform(0.1, 0.9, size=(5, 1)),
                            "Labels": R.integers(0, 2, size=(5, 1)).astype(float)},
               {"epsilon": 1e-4}, wrt=["Predicted"], outs=("Loss",),
               grad_inputs=("Predicted", "Labels"))


def test_bce_loss():
    x = np.array([0.25, 0.5])
    y = np.array([1.0, 0.0])
    out = run_op("bce_loss", {"X": x, "Label": y}, {"Out": 1})["Out"]
    assert np.allclose(out, [math.log(4), math.log(2)])
    check_grad("bce_loss", {"X": R.uniform(0.1, 0.9, size=(4, 2)),
                            "Label": R.integers(0, 2, size=(4, 2)).astype(float)}, wrt=["X"])


def test_sigmoid_cross_entropy_with_logits_normalize_ignore():
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    y = np.array([[1.0, -1.0], [0.0, 1.0]])
    attrs = {"normalize": True, "ignore_index": -1}
    out = run_op("sigmoid_cross_entropy_with_logits", {"X": x, "Label": y}, {"Out": 1}, attrs)
    per = np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0) - x * y
    assert np.allclose(out["Out"], np.where(y != -1, per, 0) / 3)
    check_grad("sigmoid_cross_entropy_with_logits", {"X": x, "Label": y}, attrs, wrt=["X"])


@pytest.mark.parametrize("attrs,label", [
    ({"soft_label": False, "axis": -1}, np.array([[0], [2], [3], [1]])),
    ({"soft_label": False, "axis": -1, "ignore_index": 2}, np.array([[0], [2], [3], [1]])),
    ({"soft_label": True, "axis": -1}, None),
])
def test_softmax_with_cross_entropy(attrs, label):
    x = R.normal(size=(4, 4))
    if label is None:
        label = R.dirichlet(np.ones(4), size=4)
    res = run_op("softmax_with_cross_entropy", {"Logits": x, "Label": label},
                 {"Softmax": 1, "Loss": 1}, attrs)
    sm = np.exp(x) / np.exp(x).sum(1, keepdims=True)
    assert np.allclose(res["Softmax"], sm)
    if attrs["soft_label"]:
        ref = -(label * np.log(sm)).sum(1, keepdims=True)
    else:
        ref = -np.log(sm[np.arange(4), label[:, 0]])[:, None]
        if "ignore_index" in attrs:
            ref[label == attrs["ignore_index"]] = 0
    assert np.allclose(res["Loss"], ref)
    check_grad("softmax_with_cross_entropy", {"Logits": x, "Label": label}, attrs,
               wrt=["Logits"], outs=("Loss",), extra_outs=("Softmax",),
               grad_inputs=("Label", "Softmax"))


def test_softmax_with_cross_entropy_on_a_middle_axis():
    x = R.normal(size=(2, 4, 3))
    lab = R.integers(0, 4, size=(2, 1, 3))
    res = run_op("softmax_with_cross_entropy", {"Logits": x, "Label": lab},
                 {"Softmax": 1, "Loss": 1}, {"axis": 1})
    sm = np.exp(x) / np.exp(x).sum(1, keepdims=True)
    assert np.allclose(res["Loss"], -np.log(np.take_along_axis(sm, lab, axis=1)))
    check_grad("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, {"axis": 1},
               wrt=["Logits"], outs=("Loss",), extra_outs=("Softmax",),
               grad_inputs=("Label", "Softmax"))


def test_cross_entropy_family():
    p = R.dirichlet(np.ones(4), size=5)
    lab = R.integers(0, 4, size=(5, 1))
    y = run_op("cross_entropy", {"X": p, "Label": lab}, {"Y": 1})["Y"]
    assert np.allclose(y, -np.log(p[np.arange(5), lab[:, 0]])[:, None])
    check_grad("cross_entropy", {"X": p, "Label": lab}, {"soft_label": False}, wrt=["X"],
               outs=("Y",))
    soft = R.dirichlet(np.ones(4), size=5)
    check_grad("cross_entropy", {"X": p, "Label": soft}, {"soft_label": True}, wrt=["X"],
               outs=("Y",))
    res = run_op("cross_entropy2", {"X": p, "Label": lab}, {"Y": 1, "XShape": 1, "MatchX": 1})
    assert np.allclose(res["Y"], y) and res["XShape"].shape == (5, 4, 0)
    check_grad("cross_entropy2", {"X": p, "Label": lab}, {"ignore_index": -100}, wrt=["X"],
               outs=("Y",), extra_outs=("XShape", "MatchX"),
               grad_type="cross_entropy_grad2", grad_inputs=("Label", "MatchX", "XShape"))


def test_huber_and_smooth_l1():
    x = np.array([[0.0], [0.0]])
    y = np.array([[0.5], [3.0]])
    res = run_op("huber_loss", {"X": x, "Y": y}, {"Out": 1, "Residual": 1}, {"delta": 1.0})
    assert np.allclose(res["Out"], [[0.125], [2.5]])
    check_grad("huber_loss", {"X": R.normal(size=(5, 1)), "Y": R.normal(size=(5, 1))},
               {"delta": 0.7}, wrt=["X", "Y"], extra_outs=("Residual",),
               grad_inputs=("Residual",))
    res = run_op("smooth_l1_loss", {"X": np.array([[0.5, 3.0]]), "Y": np.zeros((1, 2))},
                 {"Out": 1, "Diff": 1}, {"sigma": 1.0})
    assert np.allclose(res["Out"], [[0.125 + 2.5]])
    check_grad("smooth_l1_loss", {"X": R.normal(size=(3, 2)), "Y": R.normal(size=(3, 2)),
                                  "OutsideWeight": R.uniform(size=(3, 2))},
               {"sigma": 2.0}, wrt=["X", "Y"], extra_outs=("Diff",),
               grad_inputs=("Diff", "OutsideWeight"))


def test_ranking_losses_and_hinge():
    lab = np.array([[1.0], [-1.0]])
    x1, x2 = np.array([[0.3], [0.3]]), np.array([[0.5], [0.6]])
    res = run_op("margin_rank_loss", {"Label": lab, "X1": x1, "X2": x2},
                 {"Out": 1, "Activated": 1}, {"margin": 0.1})
    assert np.allclose(res["Out"], [[0.3], [0.0]])
    check_grad("margin_rank_loss", {"Label": np.sign(R.normal(size=(5, 1))),
                                    "X1": R.normal(size=(5, 1)), "X2": R.normal(size=(5, 1))},
               {"margin": 0.1}, wrt=["X1", "X2"], extra_outs=("Activated",),
               grad_inputs=("Label", "Activated"))
    l, r = np.array([[2.0]]), np.array([[1.0]])
    out = run_op("rank_loss", {"Label": np.array([[1.0]]), "Left": l, "Right": r}, {"Out": 1})
    assert np.allclose(out["Out"], math.log1p(math.e) - 1)
    check_grad("rank_loss", {"Label": R.integers(0, 2, size=(4, 1)).astype(float),
                             "Left": R.normal(size=(4, 1)), "Right": R.normal(size=(4, 1))},
               wrt=["Left", "Right"])
    out = run_op("hinge_loss", {"Logits": np.array([[0.3], [0.3]]),
                                "Labels": np.array([[1.0], [0.0]])}, {"Loss": 1})
    assert np.allclose(out["Loss"], [[0.7], [1.3]])
    check_grad("hinge_loss", {"Logits": R.normal(size=(5, 1)) * 3,
                              "Labels": R.integers(0, 2, size=(5, 1)).astype(float)},
               wrt=["Logits"], outs=("Loss",))


@pytest.mark.parametrize("yrows", [4, 1])
def test_cos_sim(yrows):
    x, y = R.normal(size=(4, 3)), R.normal(size=(yrows, 3))
    res = run_op("cos_sim", {"X": x, "Y": y}, {"Out": 1, "XNorm": 1, "YNorm": 1})
    yb = np.broadcast_to(y, x.shape)
    ref = (x * yb).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(yb, axis=1)
    assert np.allclose(res["Out"][:, 0], ref)
    check_grad("cos_sim", {"X": x, "Y": y}, wrt=["X", "Y"], extra_outs=("XNorm", "YNorm"))


@pytest.mark.parametrize("red", ["mean", "sum", "batchmean", "none"])
def test_kldiv_loss(red):
    x, t = R.normal(size=(3, 4)), R.uniform(size=(3, 4))
    t[0, 0] = 0.0
    out = run_op("kldiv_loss", {"X": x, "Target": t}, {"Loss": 1}, {"reduction": red})["Loss"]
    per = np.where(t > 0, t * (np.log(np.where(t > 0, t, 1)) - x), 0)
    ref = {"mean": per.mean(), "sum": per.sum(), "batchmean": per.sum() / 3, "none": per}[red]
    assert np.allclose(out, ref)
    check_grad("kldiv_loss", {"X": x, "Target": t}, {"reduction": red}, wrt=["X"],
               outs=("Loss",))


def test_bpr_nll_label_smooth():
    x = np.array([[1.0, 0.0, 2.0]])
    y = run_op("bpr_loss", {"X": x, "Label": np.array([[0]])}, {"Y": 1})["Y"]
    sig = lambda v: 1 / (1 + math.exp(-v))     # noqa: E731
    assert np.allclose(y, [[-(math.log(sig(1.0)) + math.log(sig(-1.0))) / 2]])
    check_grad("bpr_loss", {"X": R.normal(size=(4, 5)), "Label": R.integers(0, 5, size=(4, 1))},
               wrt=["X"], outs=("Y",))
    lp = np.log(R.dirichlet(np.ones(4), size=5))
    lab = np.array([0, 2, 3, 1, 2])
    w = R.uniform(0.5, 1.5, size=4)
    for red in ("mean", "sum", "none"):
        res = run_op("nll_loss", {"X": lp, "Label": lab, "Weight": w},
                     {"Out": 1, "Total_weight": 1}, {"reduction": red, "ignore_index": 1})
        wl = np.where(lab != 1, w[lab], 0.0)          # label 1 is ignored
        per = -wl * lp[np.arange(5), lab]
        ref = {"mean": per.sum() / wl.sum(), "sum": per.sum(), "none": per}[red]
        assert np.allclose(res["Out"], ref)
        check_grad("nll_loss", {"X": lp, "Label": np.array([0, 2, 3, 1, 2]), "Weight": w},
                   {"reduction": red, "ignore_index": 3}, wrt=["X"], extra_outs=("Total_weight",))
    out = run_op("label_smooth", {"X": np.array([[0.0, 1.0]])}, {"Out": 1}, {"epsilon": 0.1})
    assert np.allclose(out["Out"], [[0.05, 0.95]])
