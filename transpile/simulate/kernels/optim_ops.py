"""Optimizer update ops. SelectedRows grads are densified where that is what Paddle's sparse
kernel amounts to (rows absent from the grad see a zero gradient); adam's lazy_mode updates only
the rows present. With the executor's `paddle_sparse_kernels` (run --local's prediction of
the runtime) they run as Paddle 2.6.2's kernels do: momentum and rmsprop apply only the rows
their binary search finds (rowwise.searched_rows), adam reads the powers it just advanced."""
from __future__ import annotations

import numpy as np

from ..values import SelectedRows, SimError, SparseTable, dense
from . import rowwise
from .registry import kernel


def optimizer(*names):
    """Register an optimizer kernel; on a LazyTable it runs on the rows that can change
    (rowwise.py)."""
    def deco(fn):
        kernel(*names)(lambda ctx: rowwise.run(ctx, fn))
        return fn
    return deco


def _lr(ctx):
    lr = np.asarray(dense(ctx.x("LearningRate")))
    if lr.size != 1:
        raise SimError("%s: LearningRate %s has shape %s, expected one value"
                       % (ctx.op.type, ctx.op.input("LearningRate")[0], lr.shape))
    return lr.reshape(-1)[0]


def _param_grad(ctx):
    p = ctx.x("Param")
    if isinstance(p, SparseTable):
        raise SimError("%s on the sparse table %s is not simulated (only sgd is)"
                       % (ctx.op.type, ctx.op.input("Param")[0]))
    p = dense(p)
    g = ctx.x("Grad")
    if isinstance(g, SelectedRows) and ctx.op.type in rowwise.SEARCHED and \
            rowwise.paddle_kernels(ctx):
        g = rowwise.searched_rows(g)
    gd = dense(g)
    if np.shape(gd) != p.shape:
        raise SimError("%s: Grad %s has shape %s but Param %s has %s"
                       % (ctx.op.type, ctx.op.input("Grad")[0], np.shape(gd),
                          ctx.op.input("Param")[0], p.shape))
    return p, g, gd


def _same(ctx, slot, p):
    v = dense(ctx.x(slot))
    if np.shape(v) != p.shape:
        raise SimError("%s: %s %s has shape %s but Param %s has %s"
                       % (ctx.op.type, slot, ctx.op.input(slot)[0], np.shape(v),
                          ctx.op.input("Param")[0], p.shape))
    return v


@optimizer("sgd")
def sgd(ctx):
    raw = ctx.x("Param")
    if isinstance(raw, SparseTable):
        from .table_ops import table_sgd
        return table_sgd(ctx, raw)
    p, _, g = _param_grad(ctx)
    ctx.set("ParamOut", p - _lr(ctx) * g)


@optimizer("momentum")
def momentum(ctx):
    graw = ctx.x("Grad")
    if isinstance(graw, SelectedRows) and graw.rows.size == 0 and rowwise.paddle_kernels(ctx):
        # Paddle's MomentumSparseImpl returns before it updates: nothing moves, nor decays
        ctx.set("ParamOut", dense(ctx.x("Param")))
        ctx.set("VelocityOut", dense(ctx.x("Velocity")))
        return
    p, _, g = _param_grad(ctx)
    v = _same(ctx, "Velocity", p)
    mu = ctx.attr("mu", 0.9)
    if ctx.attr("regularization_method", "") == "l2_decay":
        g = g + ctx.attr("regularization_coeff", 0.0) * p
    g = g * ctx.attr("rescale_grad", 1.0)
    lr = _lr(ctx)
    v_out = mu * v + g
    if ctx.attr("use_nesterov", False):
        p_out = p - (g + mu * v_out) * lr
    else:
        p_out = p - lr * v_out
    ctx.set("ParamOut", p_out)
    ctx.set("VelocityOut", v_out)


def _adam_update(p, m1, m2, g, b1, b2, lr, eps_hat):
    """Adam's new moments and parameter. Where every array is of one dtype, the same
    arithmetic in the same order, in place on the new arrays: a table of a million rows
    updated whole makes one temporary, not five."""
    arrays = [np.asarray(a) for a in (p, m1, m2, g)]
    if len({a.dtype for a in arrays}) != 1 or len({a.shape for a in arrays}) != 1:
        m1o = b1 * m1 + (1 - b1) * g
        m2o = b2 * m2 + (1 - b2) * g * g
        return m1o, m2o, p - lr * (m1o / (np.sqrt(m2o) + eps_hat))
    p, m1, m2, g = arrays
    m1o = b1 * m1
    t = (1 - b1) * g
    m1o += t
    np.multiply(1 - b2, g, out=t)
    t *= g
    m2o = b2 * m2
    m2o += t
    np.sqrt(m2o, out=t)
    t += eps_hat
    np.divide(m1o, t, out=t)
    t *= lr
    return m1o, m2o, np.subtract(p, t, out=t)


@optimizer("adam")
def adam(ctx):
    p, graw, g = _param_grad(ctx)
    m1 = _same(ctx, "Moment1", p)
    m2 = _same(ctx, "Moment2", p)
    b1p = np.asarray(dense(ctx.x("Beta1Pow")))
    b2p = np.asarray(dense(ctx.x("Beta2Pow")))
    b1 = float(np.asarray(ctx.x("Beta1Tensor")).reshape(-1)[0]) if ctx.has("Beta1Tensor") \
        else ctx.attr("beta1", 0.9)
    b2 = float(np.asarray(ctx.x("Beta2Tensor")).reshape(-1)[0]) if ctx.has("Beta2Tensor") \
        else ctx.attr("beta2", 0.999)
    eps = float(np.asarray(ctx.x("EpsilonTensor")).reshape(-1)[0]) \
        if ctx.has("EpsilonTensor") else ctx.attr("epsilon", 1e-8)
    if ctx.has("SkipUpdate") and bool(np.asarray(ctx.x("SkipUpdate")).reshape(-1)[0]):
        ctx.set("ParamOut", p)
        ctx.set("Moment1Out", m1)
        ctx.set("Moment2Out", m2)
        ctx.set("Beta1PowOut", b1p)
        ctx.set("Beta2PowOut", b2p)
        return
    b1pv, b2pv = b1p.reshape(-1)[0], b2p.reshape(-1)[0]
    if _advanced_powers(ctx):
        b1pv, b2pv = (b1p * b1).reshape(-1)[0], (b2p * b2).reshape(-1)[0]
    lr = _lr(ctx) * np.sqrt(1 - b2pv) / (1 - b1pv)
    m1o, m2o, po = _adam_update(p, m1, m2, g, b1, b2, lr, eps * np.sqrt(1 - b2pv))
    if isinstance(graw, SelectedRows) and ctx.attr("lazy_mode", False):
        rows = graw.merged().rows
        keep = np.ones(p.shape[0], dtype=bool)
        keep[rows] = False
        m1o[keep], m2o[keep], po[keep] = m1[keep], m2[keep], p[keep]
    ctx.set("ParamOut", po)
    ctx.set("Moment1Out", m1o)
    ctx.set("Moment2Out", m2o)
    if not ctx.attr("use_global_beta_pow", False):
        ctx.set("Beta1PowOut", b1p * b1)
        ctx.set("Beta2PowOut", b2p * b2)


def _advanced_powers(ctx) -> bool:
    """Paddle 2.6.2's CPU adam over a SelectedRows gradient (lazy_mode or not) writes
    Beta1PowOut / Beta2PowOut before its update reads Beta1Pow / Beta2Pow: where they are one
    var (as every optimizer makes them), step t is bias-corrected with the powers of step
    t + 1 (seen: a first step moves by 0.744 lr, not lr)."""
    op = ctx.op
    inner = getattr(ctx, "ctx", ctx)        # rowwise's RowCtx wraps the op's context
    return (rowwise.paddle_kernels(ctx) and isinstance(inner.raw("Grad"), SelectedRows)
            and not ctx.attr("use_global_beta_pow", False)
            and op.input("Beta1Pow") == op.output("Beta1PowOut")
            and op.input("Beta2Pow") == op.output("Beta2PowOut"))


@optimizer("adamax")
def adamax(ctx):
    p, _, g = _param_grad(ctx)
    m = _same(ctx, "Moment", p)
    u = _same(ctx, "InfNorm", p)
    b1p = np.asarray(dense(ctx.x("Beta1Pow"))).reshape(-1)[0]
    b1, b2, eps = ctx.attr("beta1", 0.9), ctx.attr("beta2", 0.999), ctx.attr("epsilon", 1e-8)
    mo = b1 * m + (1 - b1) * g
    uo = np.maximum(b2 * u + eps, np.abs(g))
    ctx.set("ParamOut", p - _lr(ctx) / (1 - b1p) * mo / uo)
    ctx.set("MomentOut", mo)
    ctx.set("InfNormOut", uo)


@optimizer("adagrad")
def adagrad(ctx):
    p, _, g = _param_grad(ctx)
    m = _same(ctx, "Moment", p)
    mo = m + g * g
    ctx.set("ParamOut", p - _lr(ctx) * g / (np.sqrt(mo) + ctx.attr("epsilon", 1e-6)))
    ctx.set("MomentOut", mo)


@optimizer("decayed_adagrad")
def decayed_adagrad(ctx):
    p, _, g = _param_grad(ctx)
    m = _same(ctx, "Moment", p)
    decay = ctx.attr("decay", 0.95)
    mo = decay * m + (1 - decay) * g * g
    ctx.set("ParamOut", p - _lr(ctx) * g / (np.sqrt(mo) + ctx.attr("epsilon", 1e-6)))
    ctx.set("MomentOut", mo)


@optimizer("rmsprop")
def rmsprop(ctx):
    p, _, g = _param_grad(ctx)
    ms = _same(ctx, "MeanSquare", p)
    mom = _same(ctx, "Moment", p)
    rho, eps = ctx.attr("decay", 0.9), ctx.attr("epsilon", 1e-10)
    mu = ctx.attr("momentum", 0.0)
    lr = _lr(ctx)
    ms_o = rho * ms + (1 - rho) * g * g
    if ctx.attr("centered", False):
        mg = _same(ctx, "MeanGrad", p)
        mg_o = rho * mg + (1 - rho) * g
        mom_o = mu * mom + lr * g / np.sqrt(ms_o - mg_o * mg_o + eps)
        ctx.set("MeanGradOut", mg_o)
    else:
        # Paddle's kernel leaves MeanGrad alone when not centered
        mom_o = mu * mom + lr * g / np.sqrt(ms_o + eps)
    ctx.set("ParamOut", p - mom_o)
    ctx.set("MeanSquareOut", ms_o)
    ctx.set("MomentOut", mom_o)


@kernel("ftrl")
def ftrl(ctx):
    p, _, g = _param_grad(ctx)
    sq = _same(ctx, "SquaredAccumulator", p)
    lin = _same(ctx, "LinearAccumulator", p)
    l1, l2 = ctx.attr("l1", 0.0), ctx.attr("l2", 0.0)
    pw = ctx.attr("lr_power", -0.5)
    lr = _lr(ctx)
    new_sq = sq + g * g
    if pw == -0.5:
        lin_o = lin + g - (np.sqrt(new_sq) - np.sqrt(sq)) / lr * p
        y = np.sqrt(new_sq) / lr + 2 * l2
    else:
        lin_o = lin + g - (np.power(new_sq, -pw) - np.power(sq, -pw)) / lr * p
        y = np.power(new_sq, -pw) / lr + 2 * l2
    x = l1 * np.sign(lin_o) - lin_o
    ctx.set("ParamOut", np.where(np.abs(lin_o) > l1, x / y, 0.0))
    ctx.set("SquaredAccumOut", new_sq)
    ctx.set("LinearAccumOut", lin_o)
