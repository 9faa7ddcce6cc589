"""Metrics: auc (with its stat buffers) and accuracy. No gradients."""
from __future__ import annotations

import numpy as np

from ..values import SimError, dense
from .registry import kernel


def _auc_area(pos, neg):
    """ROC area from the per-bucket histograms, walking from the highest bucket down and adding
    trapezoids (Paddle's calcAuc); the sum is divided by pos * neg only when both totals are
    positive (else it is returned as is: 0 with one class only)."""
    tot_pos = tot_neg = 0.0
    area = 0.0
    for i in range(len(pos) - 1, -1, -1):
        prev_pos, prev_neg = tot_pos, tot_neg
        tot_pos += float(pos[i])
        tot_neg += float(neg[i])
        area += abs(tot_neg - prev_neg) * (tot_pos + prev_pos) / 2.0
    if tot_pos > 0 and tot_neg > 0:
        area = area / tot_pos / tot_neg
    return area


@kernel("auc")
def auc(ctx):
    """Paddle's auc op. Each sample's bucket is int(p * num_thresholds), p its positive-class
    probability (the last column of Predict); label > 0 counts as positive, 0 as negative.

    slide_steps == 0: StatPos / StatNeg ([1, num_thresholds + 1]; a longer flat buffer is cut to
    its first num_thresholds + 1 values, as Paddle does) accumulate the histograms over every
    batch, and AUC is computed from them.
    slide_steps > 0: the buffers are flat, (slide_steps + 1) * (num_thresholds + 1) + 1 long:
    slide_steps rows of per-batch histograms (a ring), then their running sum, then a step
    counter. A batch takes ring row counter % slide_steps: that row is taken out of the sum and
    cleared, the batch counted into it and added back into the sum, the counter (in both
    buffers) incremented; AUC is computed from the sum row.
    InsTagWeight (optional): a first value of 0 marks a fake batch, not counted.
    """
    if (ctx.attr("curve", "ROC") or "ROC") != "ROC":
        raise SimError("auc: curve %s is not simulated" % ctx.attr("curve"))
    pred = dense(ctx.x("Predict"))
    label = np.asarray(dense(ctx.x("Label"))).reshape(-1)
    nt = int(ctx.attr("num_thresholds", 4095))
    steps = int(ctx.attr("slide_steps", 1) or 0)
    pos_in, neg_in = dense(ctx.x("StatPos")), dense(ctx.x("StatNeg"))
    pos = np.array(pos_in, dtype=np.int64, copy=True).reshape(-1)
    neg = np.array(neg_in, dtype=np.int64, copy=True).reshape(-1)
    blen = nt + 1
    want = blen if steps == 0 else (steps + 1) * blen + 1
    if pos.size < want or neg.size < want:
        raise SimError("auc: stat buffers of %d / %d values, %d needed (num_thresholds %d, "
                       "slide_steps %d)" % (pos.size, neg.size, want, nt, steps))
    p = pred.reshape(pred.shape[0], -1)[:, -1] if pred.ndim else pred.reshape(1)
    if p.shape[0] != label.shape[0]:
        raise SimError("auc: %d predictions for %d labels" % (p.shape[0], label.shape[0]))
    if p.size and (p.min() < 0 or p.max() > 1):
        raise SimError("auc: a prediction outside [0, 1]")
    fake = ctx.has("InsTagWeight") and \
        float(np.asarray(dense(ctx.x("InsTagWeight"))).reshape(-1)[0]) == 0
    bins = (p * nt).astype(np.int64)
    if steps == 0:
        if not fake:
            np.add.at(pos, bins[label > 0], 1)
            np.add.at(neg, bins[label == 0], 1)
        value = _auc_area(pos[:blen], neg[:blen])
    else:
        cur = int(pos[steps * blen + blen]) % steps
        row = slice(cur * blen, (cur + 1) * blen)
        total = slice(steps * blen, (steps + 1) * blen)
        for buf in (pos, neg):
            buf[total] -= buf[row]
            buf[row] = 0
        if not fake:
            base = cur * blen
            np.add.at(pos, base + bins[label > 0], 1)
            np.add.at(neg, base + bins[label == 0], 1)
        for buf in (pos, neg):
            buf[total] += buf[row]
            buf[(steps + 1) * blen] += 1
        value = _auc_area(pos[total], neg[total])
    ctx.set("AUC", np.asarray(value, dtype=np.float64))      # 0-d, as Paddle 2.6 makes it
    # the outputs take the shape Paddle's InferMeta gives them, whatever the input buffers'
    # (paddle.static.auc's startup fills the slide_steps=0 buffers with num_thresholds + 2
    # zeros while the op declares and keeps [1, num_thresholds + 1]: the first row)
    shape = (1, blen) if steps == 0 else (want,)
    ctx.set("StatPosOut", pos[:want].reshape(shape))
    ctx.set("StatNegOut", neg[:want].reshape(shape))


@kernel("accuracy")
def accuracy(ctx):
    """Top-k accuracy: a sample is correct when its label is among its Indices ([N, k])."""
    idx = np.asarray(dense(ctx.x("Indices")))
    label = np.asarray(dense(ctx.x("Label"))).reshape(-1, 1)
    n = idx.shape[0]
    if label.shape[0] != n:
        raise SimError("accuracy: %d rows of Indices for %d labels" % (n, label.shape[0]))
    correct = int((idx.reshape(n, -1) == label).any(axis=1).sum())
    ctx.set("Accuracy", np.asarray([correct / n if n else 0.0], dtype=ctx.fdt))
    ctx.set("Correct", np.asarray([correct], dtype=np.int32))
    ctx.set("Total", np.asarray([n], dtype=np.int32))
