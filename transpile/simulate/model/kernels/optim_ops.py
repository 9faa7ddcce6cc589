"""Optimizer update ops. SelectedRows grads are densified where that is what Paddle's sparse
kernel amounts to (rows absent from the grad see a zero gradient); adam's lazy_mode updates only
the rows present. With the executor's `paddle_sparse_kernels` (run --local's prediction of
the runtime) they run as Paddle 2.6.2's kernels do: momentum and rmsprop apply only the rows
their binary search finds (rowwise.searched_rows), adam reads the powers it just advanced."""
from __future__ import annotations

from typing import NamedTuple

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


def _own(ctx, slot, a) -> bool:
    """Whether the update may write input `slot` (the array `a`, which only the calling
    kernel's one local name holds) in place as its output `slot`Out: the same var, held by no
    one else (OpCtx.owned: copy-on-write; the initial values' snapshot, another role's scope,
    a view or a second name would see the write)."""
    # held: the kernel's local name and this function's argument
    return isinstance(a, np.ndarray) and ctx.owned(slot, slot + "Out", held=2)


def _minus(p, t, own: bool):
    """p - t, into p's own array where `own` (_own) and the result has p's dtype and shape
    (the same arithmetic in place gives the same bits)."""
    if own and p.dtype == np.result_type(p, t) and p.shape == np.broadcast_shapes(p.shape,
                                                                                 np.shape(t)):
        return np.subtract(p, t, out=p)
    return p - t


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
    del raw     # (a second name of the parameter's array: it would never be written in place)
    p, _, g = _param_grad(ctx)
    own, lr = _own(ctx, "Param", p), _lr(ctx)
    g = np.asarray(g)
    if g.shape == p.shape and p.dtype == np.result_type(lr, g) == np.result_type(p, g):
        po = p if own else np.empty_like(p)
        for sl in _chunks(p):
            np.subtract(p[sl], lr * g[sl], out=po[sl])
        ctx.set("ParamOut", po)
        return
    ctx.set("ParamOut", p - lr * g)


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
    own_p, own_v = _own(ctx, "Param", p), _own(ctx, "Velocity", v)
    t = mu * v
    if own_v and t.dtype == v.dtype and np.result_type(t, g) == v.dtype \
            and np.shape(g) == v.shape:
        del t
        v_out = np.multiply(v, mu, out=v)
        v_out += g
    else:
        v_out = t + g
        del t
    if ctx.attr("use_nesterov", False):
        p_out = _minus(p, (g + mu * v_out) * lr, own_p)
    else:
        p_out = _minus(p, lr * v_out, own_p)
    ctx.set("ParamOut", p_out)
    ctx.set("VelocityOut", v_out)


class AdamRates(NamedTuple):
    """The coefficients of one Adam update: the moments' decays, the step's learning rate
    (bias-corrected) and its epsilon (scaled as the rate is)."""
    beta1: object
    beta2: object
    lr: object
    eps_hat: object


def _adam_update(p, m1, m2, g, rates: AdamRates, own=(False, False, False)):
    """Adam's new moments and parameter. Where every array is of one dtype, the same
    arithmetic in the same order, in place on the new arrays: a table of a million rows
    updated whole makes one temporary, not five; and into the inputs' own arrays where `own`
    (param, moment 1, moment 2: _own) says they may be written, none but that temporary."""
    b1, b2, lr, eps_hat = rates
    arrays = [np.asarray(a) for a in (p, m1, m2, g)]
    if len({a.dtype for a in arrays}) != 1 or len({a.shape for a in arrays}) != 1:
        m1o = b1 * m1 + (1 - b1) * g
        m2o = b2 * m2 + (1 - b2) * g * g
        return m1o, m2o, p - lr * (m1o / (np.sqrt(m2o) + eps_hat))
    p, m1, m2, g = arrays
    del arrays
    m1o = m1 if own[1] else np.empty_like(m1)
    m2o = m2 if own[2] else np.empty_like(m2)
    po = p if own[0] else np.empty_like(p)
    for sl in _chunks(p):
        gs, a1, a2 = g[sl], m1o[sl], m2o[sl]
        np.multiply(b1, m1[sl], out=a1)
        t = (1 - b1) * gs
        a1 += t
        np.multiply(1 - b2, gs, out=t)
        t *= gs
        np.multiply(b2, m2[sl], out=a2)
        a2 += t
        np.sqrt(a2, out=t)
        t += eps_hat
        np.divide(a1, t, out=t)
        t *= lr
        np.subtract(p[sl], t, out=po[sl])
    return m1o, m2o, po


CHUNK = 1 << 20     # elements an update computes at once: its temporaries stay small


def _chunks(a):
    """Row slices of `a` of about CHUNK elements each (one slice for a small array): an
    elementwise update computed slice by slice gives the same bits with temporaries of a
    slice, not of a table of 55 million floats."""
    if a.ndim == 0 or a.size <= CHUNK:
        yield Ellipsis
        return
    per = max(1, CHUNK // max(1, a.size // a.shape[0]))
    for r in range(0, a.shape[0], per):
        yield slice(r, r + per)


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
    lazy = isinstance(graw, SelectedRows) and ctx.attr("lazy_mode", False)
    # (lazy_mode reads the old values after the update: never in place)
    own = (False,) * 3 if lazy else \
        (_own(ctx, "Param", p), _own(ctx, "Moment1", m1), _own(ctx, "Moment2", m2))
    m1o, m2o, po = _adam_update(p, m1, m2, g, AdamRates(b1, b2, lr, eps * np.sqrt(1 - b2pv)),
                                own)
    if lazy:
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
    own_p, own_m = _own(ctx, "Param", p), _own(ctx, "Moment", m)
    lr, eps = _lr(ctx), ctx.attr("epsilon", 1e-6)
    arrays = [np.asarray(a) for a in (p, m, g)]
    if len({a.dtype for a in arrays}) == 1 and len({a.shape for a in arrays}) == 1 \
            and np.result_type(lr, g) == p.dtype:
        del arrays
        po = p if own_p else np.empty_like(p)
        mo = m if own_m else np.empty_like(m)
        for sl in _chunks(p):
            gs, ms = g[sl], mo[sl]
            np.add(m[sl], gs * gs, out=ms)
            # p - lr * g / (sqrt(mo) + epsilon)
            den = np.sqrt(ms)
            den += eps
            num = lr * gs
            np.divide(num, den, out=num)
            np.subtract(p[sl], num, out=po[sl])
        ctx.set("ParamOut", po)
        ctx.set("MomentOut", mo)
        return
    del arrays
    mo = m + g * g
    q = lr * g / (np.sqrt(mo) + eps)
    ctx.set("ParamOut", p - q)
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
