"""Losses beyond the softmax / cross-entropy family (nn_ops.py): log_loss, bce_loss, huber_loss,
smooth_l1_loss, margin_rank_loss, rank_loss, hinge_loss, cos_sim, kldiv_loss, bpr_loss,
label_smooth; with their grads."""
from __future__ import annotations

import numpy as np

from ..values import SimError, dense
from .registry import kernel


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@kernel("log_loss")
def log_loss(ctx):
    """-label * log(p + eps) - (1 - label) * log(1 - p + eps)."""
    p, y = dense(ctx.x("Predicted")), dense(ctx.x("Labels"))
    eps = ctx.attr("epsilon", 1e-4)
    loss = -y * np.log(p + eps) - (1 - y) * np.log(1 - p + eps)
    ctx.set("Loss", loss.astype(p.dtype, copy=False), lod=ctx.lod("Predicted"))


@kernel("log_loss_grad")
def log_loss_grad(ctx):
    p, y = dense(ctx.x("Predicted")), dense(ctx.x("Labels"))
    d = dense(ctx.x("Loss@GRAD"))
    eps = ctx.attr("epsilon", 1e-4)
    ctx.set("Predicted@GRAD", d * (-y / (p + eps) + (1 - y) / (1 - p + eps)),
            lod=ctx.lod("Predicted"))


@kernel("bce_loss")
def bce_loss(ctx):
    """-(label * log(x) + (1 - label) * log(1 - x)), each log clipped at -100."""
    x, y = dense(ctx.x("X")), dense(ctx.x("Label"))
    if x.size and (x.min() < 0 or x.max() > 1):
        raise SimError("bce_loss: an input outside [0, 1]")
    with np.errstate(divide="ignore"):
        out = -(y * np.maximum(np.log(x), -100.0) + (1 - y) * np.maximum(np.log(1 - x), -100.0))
    ctx.set("Out", out.astype(x.dtype, copy=False), lod=ctx.lod("X"))


@kernel("bce_loss_grad")
def bce_loss_grad(ctx):
    x, y = dense(ctx.x("X")), dense(ctx.x("Label"))
    d = dense(ctx.x("Out@GRAD"))
    ctx.set("X@GRAD", d * (x - y) / np.maximum((1 - x) * x, 1e-12), lod=ctx.lod("X"))


@kernel("huber_loss")
def huber_loss(ctx):
    """Residual = Y - X; Out = r^2 / 2 where |r| <= delta, else delta * (|r| - delta / 2)."""
    x, y = dense(ctx.x("X")), dense(ctx.x("Y"))
    delta = ctx.attr("delta", 1.0)
    r = y - x
    a = np.abs(r)
    ctx.set("Residual", r)
    ctx.set("Out", np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta)))


@kernel("huber_loss_grad")
def huber_loss_grad(ctx):
    r = dense(ctx.x("Residual"))
    d = dense(ctx.x("Out@GRAD"))
    delta = ctx.attr("delta", 1.0)
    dr = d * np.where(np.abs(r) <= delta, r, delta * np.sign(r))
    ctx.set_wanted({"X@GRAD": -dr, "Y@GRAD": dr})


def _sl1(ctx):
    x, y = dense(ctx.x("X")), dense(ctx.x("Y"))
    s2 = ctx.attr("sigma", 1.0) ** 2
    iw = dense(ctx.x("InsideWeight")) if ctx.has("InsideWeight") else 1.0
    ow = dense(ctx.x("OutsideWeight")) if ctx.has("OutsideWeight") else 1.0
    return x, y, s2, iw, ow


@kernel("smooth_l1_loss")
def smooth_l1_loss(ctx):
    """The fluid op: Diff = (X - Y) * InsideWeight; per element 0.5 * sigma^2 * d^2 where
    |d| < 1 / sigma^2, else |d| - 0.5 / sigma^2; times OutsideWeight, summed per row ([N, 1])."""
    x, y, s2, iw, ow = _sl1(ctx)
    diff = (x - y) * iw
    a = np.abs(diff)
    v = np.where(a < 1.0 / s2, 0.5 * s2 * diff * diff, a - 0.5 / s2) * ow
    ctx.set("Diff", diff)
    ctx.set("Out", v.reshape(v.shape[0], -1).sum(axis=1, keepdims=True))


@kernel("smooth_l1_loss_grad")
def smooth_l1_loss_grad(ctx):
    diff = dense(ctx.x("Diff"))
    s2 = ctx.attr("sigma", 1.0) ** 2
    ow = dense(ctx.x("OutsideWeight")) if ctx.has("OutsideWeight") else 1.0
    d = dense(ctx.x("Out@GRAD")).reshape((diff.shape[0],) + (1,) * (diff.ndim - 1))
    # Paddle's grad applies OutsideWeight and not InsideWeight
    g = d * ow * np.where(np.abs(diff) < 1.0 / s2, s2 * diff, np.sign(diff))
    ctx.set_wanted({"X@GRAD": g, "Y@GRAD": -g})


@kernel("margin_rank_loss")
def margin_rank_loss(ctx):
    """Out = max(0, -Label * (X1 - X2) + margin); Activated = Out > 0."""
    lab, x1, x2 = dense(ctx.x("Label")), dense(ctx.x("X1")), dense(ctx.x("X2"))
    out = np.maximum(0.0, -lab * (x1 - x2) + ctx.attr("margin", 0.0))
    ctx.set("Out", out)
    ctx.set("Activated", (out > 0).astype(out.dtype))


@kernel("margin_rank_loss_grad")
def margin_rank_loss_grad(ctx):
    lab = dense(ctx.x("Label"))
    act = dense(ctx.x("Activated"))
    d = dense(ctx.x("Out@GRAD"))
    ctx.set_wanted({"X1@GRAD": -lab * act * d, "X2@GRAD": lab * act * d})


@kernel("rank_loss")
def rank_loss(ctx):
    """RankNet: Out = log(1 + exp(Left - Right)) - Label * (Left - Right)."""
    lab, l, r = dense(ctx.x("Label")), dense(ctx.x("Left")), dense(ctx.x("Right"))
    o = l - r
    ctx.set("Out", np.maximum(o, 0) + np.log1p(np.exp(-np.abs(o))) - lab * o)


@kernel("rank_loss_grad")
def rank_loss_grad(ctx):
    lab, l, r = dense(ctx.x("Label")), dense(ctx.x("Left")), dense(ctx.x("Right"))
    d = dense(ctx.x("Out@GRAD"))
    g = d * (_sigmoid(l - r) - lab)
    ctx.set_wanted({"Left@GRAD": g, "Right@GRAD": -g})


@kernel("hinge_loss")
def hinge_loss(ctx):
    """max(0, 1 - (2 * label - 1) * logits)."""
    x, y = dense(ctx.x("Logits")), dense(ctx.x("Labels"))
    ctx.set("Loss", np.maximum(0.0, 1 - (2 * y - 1) * x))


@kernel("hinge_loss_grad")
def hinge_loss_grad(ctx):
    x, y = dense(ctx.x("Logits")), dense(ctx.x("Labels"))
    d = dense(ctx.x("Loss@GRAD"))
    s = 2 * y - 1
    ctx.set("Logits@GRAD", d * -s * ((1 - s * x) > 0))


def _cos_parts(ctx):
    x, y = dense(ctx.x("X")), dense(ctx.x("Y"))
    x2 = x.reshape(x.shape[0], -1)
    y2 = y.reshape(y.shape[0], -1)
    if y2.shape[0] not in (1, x2.shape[0]):
        raise SimError("cos_sim: Y has %d rows for the %d of X" % (y2.shape[0], x2.shape[0]))
    return x, y, x2, y2


@kernel("cos_sim")
def cos_sim(ctx):
    """Row-wise cosine similarity ([N, 1]); Y may be one row broadcast to every row of X."""
    x, _, x2, y2 = _cos_parts(ctx)
    xn = np.sqrt((x2 * x2).sum(axis=1, keepdims=True))
    yn = np.sqrt((y2 * y2).sum(axis=1, keepdims=True))
    ctx.set("Out", (x2 * y2).sum(axis=1, keepdims=True) / (xn * yn), lod=ctx.lod("X"))
    ctx.set("XNorm", xn)
    ctx.set("YNorm", yn)


@kernel("cos_sim_grad")
def cos_sim_grad(ctx):
    x, y, x2, y2 = _cos_parts(ctx)
    xn = np.sqrt((x2 * x2).sum(axis=1, keepdims=True))
    yn = np.sqrt((y2 * y2).sum(axis=1, keepdims=True))
    out = (x2 * y2).sum(axis=1, keepdims=True) / (xn * yn)
    d = dense(ctx.x("Out@GRAD")).reshape(-1, 1)
    if ctx.wants("X@GRAD"):
        gx = d * (y2 / (xn * yn) - out * x2 / (xn * xn))
        ctx.set("X@GRAD", gx.reshape(x.shape), lod=ctx.lod("X"))
    if ctx.wants("Y@GRAD"):
        gy = d * (x2 / (xn * yn) - out * y2 / (yn * yn))
        if y2.shape[0] == 1:
            gy = gy.sum(axis=0, keepdims=True)
        ctx.set("Y@GRAD", gy.reshape(y.shape))


@kernel("kldiv_loss")
def kldiv_loss(ctx):
    """target * (log(target) - X) where target > 0, reduced by `reduction`."""
    x, t = dense(ctx.x("X")), dense(ctx.x("Target"))
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = np.where(t > 0, t * (np.log(np.where(t > 0, t, 1.0)) - x), 0.0)
    red = ctx.attr("reduction", "mean")
    if red == "mean":
        loss = np.asarray(loss.mean())
    elif red == "sum":
        loss = np.asarray(loss.sum())
    elif red == "batchmean":
        loss = np.asarray(loss.sum() / x.shape[0])
    ctx.set("Loss", loss)


@kernel("kldiv_loss_grad")
def kldiv_loss_grad(ctx):
    x, t = dense(ctx.x("X")), dense(ctx.x("Target"))
    d = dense(ctx.x("Loss@GRAD"))
    red = ctx.attr("reduction", "mean")
    g = np.where(t > 0, -t, 0.0) * d
    if red == "mean":
        g = g / x.size
    elif red == "batchmean":
        g = g / x.shape[0]
    ctx.set("X@GRAD", g)


def _bpr_diffs(ctx):
    """(X, its labels, rows, classes, X[i, label[i]] - X[i, j] for every i, j)."""
    x = dense(ctx.x("X"))
    lab = np.asarray(dense(ctx.x("Label"))).reshape(-1).astype(np.int64)
    n, c = x.shape[0], x.shape[-1]
    x2 = x.reshape(n, c)
    return x, lab, n, c, x2[np.arange(n), lab][:, None] - x2


@kernel("bpr_loss")
def bpr_loss(ctx):
    """Y[i] = -mean over j != label[i] of log(sigmoid(X[i, label] - X[i, j]))."""
    x, lab, n, c, diff = _bpr_diffs(ctx)
    term = -(np.minimum(diff, 0) - np.log1p(np.exp(-np.abs(diff))))   # -log(sigmoid(diff))
    term[np.arange(n), lab] = 0
    ctx.set("Y", (term.sum(axis=1) / (c - 1)).reshape(n, 1))


@kernel("bpr_loss_grad")
def bpr_loss_grad(ctx):
    x, lab, n, c, diff = _bpr_diffs(ctx)
    d = dense(ctx.x("Y@GRAD")).reshape(n, 1)
    # d/d(diff) of -log(sigmoid(diff)) is -sigmoid(-diff)
    s = _sigmoid(-diff) / (c - 1) * d
    s[np.arange(n), lab] = 0
    g = s.copy()
    g[np.arange(n), lab] = -s.sum(axis=1)
    ctx.set("X@GRAD", g.reshape(x.shape))


@kernel("label_smooth")
def label_smooth(ctx):
    x = dense(ctx.x("X"))
    eps = ctx.attr("epsilon", 0.0)
    prior = dense(ctx.x("PriorDist")).reshape(-1) if ctx.has("PriorDist") else 1.0 / x.shape[-1]
    ctx.set("Out", (1 - eps) * x + eps * prior, lod=ctx.lod("X"))


@kernel("label_smooth_grad")
def label_smooth_grad(ctx):
    ctx.set("X@GRAD", (1 - ctx.attr("epsilon", 0.0)) * dense(ctx.x("Out@GRAD")))


def _nll_parts(ctx):
    x = dense(ctx.x("X"))
    lab = np.asarray(dense(ctx.x("Label"))).astype(np.int64)
    ignore = ctx.attr("ignore_index", -100)
    ok = lab != ignore
    safe = np.where(ok, lab, 0)
    if np.any((safe < 0) | (safe >= x.shape[1])):
        raise SimError("nll_loss: label out of range [0, %d)" % x.shape[1])
    w = dense(ctx.x("Weight")).reshape(-1) if ctx.has("Weight") else np.ones(x.shape[1])
    wl = np.where(ok, w[safe], 0.0)
    return x, safe, wl


@kernel("nll_loss")
def nll_loss(ctx):
    """-Weight[label] * X[n, label] (X [N, C] or [N, C, ...] of log-probabilities), then
    reduction: mean divides the sum by the total weight of the non-ignored labels."""
    x, lab, wl = _nll_parts(ctx)
    picked = np.take_along_axis(x, lab[:, None], axis=1)[:, 0]
    loss = -wl * picked
    red = ctx.attr("reduction", "mean")
    total = wl.sum()
    if red == "mean":
        out = np.asarray(loss.sum() / total if total else 0.0)
    elif red == "sum":
        out = np.asarray(loss.sum())
    else:
        out = loss
    ctx.set("Out", out)
    ctx.set("Total_weight", np.asarray(total if red != "none" else 0.0))


@kernel("nll_loss_grad")
def nll_loss_grad(ctx):
    x, lab, wl = _nll_parts(ctx)
    d = dense(ctx.x("Out@GRAD"))
    red = ctx.attr("reduction", "mean")
    if red == "none":
        coef = -wl * d
    else:
        coef = -wl * float(np.asarray(d).reshape(-1)[0])
        if red == "mean":
            total = wl.sum()
            coef = coef / total if total else coef * 0
    g = np.zeros_like(x)
    np.put_along_axis(g, lab[:, None], coef[:, None], axis=1)
    ctx.set("X@GRAD", g)
