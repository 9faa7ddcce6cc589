"""auc and accuracy. The auc sequence below was recorded from Paddle 2.6.2 running
paddle.static.auc(num_thresholds=7, slide_steps=2) on these batches (its batch op with the
sliding window, its global op with slide_steps=0): the buffers and AUCs must match exactly."""
from __future__ import annotations

import numpy as np
import pytest

from kernelkit import build, run_op
from transpile.simulate.model.executor import Executor

BATCHES = [
    ([0.6369617, 0.26978672, 0.04097353, 0.01652764, 0.8132702], [1, 1, 1, 1, 1]),
    ([0.543625, 0.9350724, 0.81585354, 0.0027385, 0.8574043], [2, 1, 0, 1, 1]),
    ([0.17565562, 0.8631789, 0.5414612, 0.29971188, 0.42268723], [0, 0, 0, 0, 0]),
    ([0.6471895, 0.6153851, 0.38367754, 0.9972099, 0.9808353], [1, 0, 1, 1, 1]),
]
# (global AUC, batch AUC, batch StatPos, batch StatNeg, global StatPos, global StatNeg)
PADDLE = [
    (0.0, 0.0,
     [2, 1, 0, 0, 1, 1, 0, 0] + [0] * 8 + [2, 1, 0, 0, 1, 1, 0, 0] + [1], [0] * 24 + [1],
     [2, 1, 0, 0, 1, 1, 0, 0], [0] * 8),
    (0.2777777777777778, 0.2777777777777778,
     [2, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 2, 0, 3, 1, 0, 1, 1, 1, 2, 0, 2],
     [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 2],
     [3, 1, 0, 1, 1, 1, 2, 0], [0, 0, 0, 0, 0, 1, 0, 0]),
    (0.4351851851851852, 0.6041666666666666,
     [0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 2, 0, 1, 0, 0, 1, 0, 0, 2, 0, 3],
     [0, 1, 2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 2, 1, 0, 1, 1, 0, 3],
     [3, 1, 0, 1, 1, 1, 2, 0], [0, 1, 2, 1, 0, 1, 1, 0]),
    (0.5109890109890111, 0.7291666666666666,
     [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 2, 0, 0, 0, 1, 0, 1, 0, 2, 0, 4],
     [0, 1, 2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 2, 1, 1, 0, 1, 0, 4],
     [3, 1, 1, 1, 2, 1, 4, 0], [0, 1, 2, 1, 1, 1, 1, 0]),
]


def _auc_exec(slide, nt, pos0, neg0):
    prog, ins, outs = build("auc", {"Predict": np.zeros((1, 2)), "Label": np.zeros((1, 1), int),
                                    "StatPos": pos0, "StatNeg": neg0},
                            {"AUC": 1, "StatPosOut": 1, "StatNegOut": 1},
                            {"curve": "ROC", "num_thresholds": nt, "slide_steps": slide})
    op = prog.global_block.ops[0]
    # in place, as Paddle builds it: StatPosOut is the StatPos var
    op.outputs["StatPosOut"] = list(ins["StatPos"])
    op.outputs["StatNegOut"] = list(ins["StatNeg"])
    ex = Executor("auc", prog)
    ex.scope.put(ins["StatPos"][0], pos0)
    ex.scope.put(ins["StatNeg"][0], neg0)

    def step(q, lab):
        q = np.asarray(q).reshape(-1, 1)
        ex.scope.put(ins["Predict"][0], np.concatenate([1 - q, q], axis=1))
        ex.scope.put(ins["Label"][0], np.asarray(lab).reshape(-1, 1))
        ex.run_block(0)
        return (float(ex.scope.get(outs["AUC"][0])), ex.scope.get(ins["StatPos"][0]),
                ex.scope.get(ins["StatNeg"][0]))
    return step


def test_auc_matches_paddle_sliding_and_global():
    batch = _auc_exec(2, 7, np.zeros(25, np.int64), np.zeros(25, np.int64))
    glob = _auc_exec(0, 7, np.zeros((1, 8), np.int64), np.zeros((1, 8), np.int64))
    for (q, lab), (g_auc, b_auc, b_pos, b_neg, g_pos, g_neg) in zip(BATCHES, PADDLE):
        auc, pos, neg = batch(q, lab)
        assert auc == pytest.approx(b_auc, abs=1e-15)
        assert pos.tolist() == b_pos and neg.tolist() == b_neg
        auc, pos, neg = glob(q, lab)
        assert auc == pytest.approx(g_auc, abs=1e-15)
        assert pos.shape == (1, 8) and pos[0].tolist() == g_pos and neg[0].tolist() == g_neg


def test_auc_slide_zero_buffer_of_startup_size_is_cut_to_its_first_row():
    """paddle.static.auc's startup fills its slide_steps=0 batch buffers with
    num_thresholds + 2 zeros; the op keeps [1, num_thresholds + 1]."""
    step = _auc_exec(0, 7, np.zeros(9, np.int64), np.zeros(9, np.int64))
    _, pos, _ = step(*BATCHES[0])
    assert pos.shape == (1, 8) and pos[0].tolist() == PADDLE[0][4]


def test_auc_by_hand_and_label_rules():
    # buckets int(p * 4): negatives 0.1 -> 0, 0.35 -> 1; positives 0.4 -> 1, 0.8 -> 3.
    # Trapezoids from the top bucket: 0 + 0 + 1 * (2 + 1) / 2 + 1 * (2 + 2) / 2 = 3.5, / (2 * 2)
    res = run_op("auc", {"Predict": np.array([[0.1], [0.4], [0.35], [0.8]]),
                         "Label": np.array([[0], [1], [0], [1]]),
                         "StatPos": np.zeros((1, 5), np.int64), "StatNeg": np.zeros((1, 5), np.int64)},
                 {"AUC": 1, "StatPosOut": 1, "StatNegOut": 1},
                 {"num_thresholds": 4, "slide_steps": 0})
    assert float(res["AUC"]) == 0.875
    assert res["StatPosOut"].tolist() == [[0, 1, 0, 1, 0]]
    assert res["StatNegOut"].tolist() == [[1, 1, 0, 0, 0]]
    # a label < 0 is neither; one class only: the unnormalised area (0)
    res = run_op("auc", {"Predict": np.array([[0.9, 0.1], [0.2, 0.8]]),
                         "Label": np.array([[-1], [1]]),
                         "StatPos": np.zeros((1, 5), np.int64), "StatNeg": np.zeros((1, 5), np.int64)},
                 {"AUC": 1, "StatPosOut": 1, "StatNegOut": 1},
                 {"num_thresholds": 4, "slide_steps": 0})
    assert float(res["AUC"]) == 0.0 and res["StatPosOut"].sum() == 1
    assert res["StatNegOut"].sum() == 0
    with pytest.raises(Exception, match="outside"):
        run_op("auc", {"Predict": np.array([[1.5]]), "Label": np.array([[1]]),
                       "StatPos": np.zeros((1, 5), np.int64),
                       "StatNeg": np.zeros((1, 5), np.int64)},
               {"AUC": 1, "StatPosOut": 1, "StatNegOut": 1},
               {"num_thresholds": 4, "slide_steps": 0})


def test_accuracy():
    idx = np.array([[1, 3], [0, 2], [2, 1]])
    lab = np.array([[3], [1], [2]])
    res = run_op("accuracy", {"Out": np.zeros((3, 2)), "Indices": idx, "Label": lab},
                 {"Accuracy": 1, "Correct": 1, "Total": 1})
    assert float(res["Accuracy"][0]) == pytest.approx(2 / 3)
    assert int(res["Correct"][0]) == 2 and int(res["Total"][0]) == 3
