"""Activations and other unary elementwise ops, with their grads.

Each op has a forward `f(x, ctx)` and a derivative. Paddle's grad op reads X for some
activations and only Out for others (relu, sigmoid, tanh, exp, sqrt, rsqrt, reciprocal, relu6,
selu, hard_sigmoid, expm1...): a derivative is written from X when Paddle hands it X, and from Out
when it hands Out only, so that a grad op built by Paddle finds what it needs.
"""
from __future__ import annotations

import math

import numpy as np

from ..values import SimError, dense
from .registry import kernel

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    # stable for large |x|
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _softplus(x, beta=1.0, threshold=20.0):
    bx = beta * x
    soft = (np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / beta
    return np.where(bx > threshold, x, soft)


def _gelu(x, c):
    if c.attr("approximate", False):
        k = math.sqrt(2.0 / math.pi)
        return 0.5 * x * (1.0 + np.tanh(k * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_dx(x, c):
    if c.attr("approximate", False):
        k = math.sqrt(2.0 / math.pi)
        t = np.tanh(k * (x + 0.044715 * x ** 3))
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * x * x)
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) \
        + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _pow_factor(c):
    if c.has("FactorTensor"):
        return float(np.asarray(dense(c.x("FactorTensor"))).reshape(-1)[0])
    return c.attr("factor", 1.0)


def _round(x):
    # half away from zero (std::round), not numpy's half to even
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _hard_swish(x, c):
    t, s, o = c.attr("threshold", 6.0), c.attr("scale", 6.0), c.attr("offset", 3.0)
    return x * np.minimum(np.maximum(x + o, 0.0), t) / s


def _hard_swish_dx(x, c):
    t, s, o = c.attr("threshold", 6.0), c.attr("scale", 6.0), c.attr("offset", 3.0)
    return np.where(x + o <= 0, 0.0, np.where(x + o < t, (2 * x + o) / s, t / s))


def _mish(x, c):
    return x * np.tanh(_softplus(x, 1.0, c.attr("threshold", 20.0)))


def _mish_dx(x, c):
    th = c.attr("threshold", 20.0)
    sp = _softplus(x, 1.0, th)
    t = np.tanh(sp)
    dsp = np.where(x > th, 1.0, _sigmoid(x))
    return t + x * (1 - t * t) * dsp


def _swish_beta(c):
    return c.attr("beta", 1.0) if c.op.type.startswith("swish") else 1.0


# type: (forward(x, ctx), derivative from X (x, ctx) or None,
#        derivative from Out (out, ctx) or None)
_OPS = {
    "relu": (lambda x, c: np.maximum(x, 0), None, lambda o, c: (o > 0) * 1.0),
    "relu6": (lambda x, c: np.clip(x, 0, c.attr("threshold", 6.0)), None,
              lambda o, c: ((o > 0) & (o < c.attr("threshold", 6.0))) * 1.0),
    "leaky_relu": (lambda x, c: np.where(x > 0, x, x * c.attr("alpha", 0.02)),
                   lambda x, c: np.where(x > 0, 1.0, c.attr("alpha", 0.02)), None),
    "elu": (lambda x, c: np.where(x > 0, x, c.attr("alpha", 1.0) * np.expm1(np.minimum(x, 0))),
            lambda x, c: np.where(x > 0, 1.0, c.attr("alpha", 1.0) * np.exp(np.minimum(x, 0))),
            None),
    "selu": (lambda x, c: c.attr("scale", 1.0507009873554805) * np.where(
                 x > 0, x, c.attr("alpha", 1.6732632423543772) * np.expm1(np.minimum(x, 0))),
             None,
             lambda o, c: np.where(o > 0, c.attr("scale", 1.0507009873554805),
                                   o + c.attr("scale", 1.0507009873554805)
                                   * c.attr("alpha", 1.6732632423543772))),
    "celu": (lambda x, c: np.maximum(x, 0) + np.minimum(
                 0.0, c.attr("alpha", 1.0) * np.expm1(np.minimum(x, 0) / c.attr("alpha", 1.0))),
             lambda x, c: np.where(x > 0, 1.0, np.exp(np.minimum(x, 0) / c.attr("alpha", 1.0))),
             None),
    "gelu": (_gelu, _gelu_dx, None),
    "sigmoid": (lambda x, c: _sigmoid(x), None, lambda o, c: o * (1 - o)),
    "logsigmoid": (lambda x, c: -_softplus(-x), lambda x, c: _sigmoid(-x), None),
    "tanh": (lambda x, c: np.tanh(x), None, lambda o, c: 1 - o * o),
    "tanh_shrink": (lambda x, c: x - np.tanh(x), lambda x, c: np.tanh(x) ** 2, None),
    "stanh": (lambda x, c: c.attr("scale_b", 1.7159) * np.tanh(c.attr("scale_a", 0.67) * x),
              lambda x, c: c.attr("scale_a", 0.67) * c.attr("scale_b", 1.7159)
              * (1 - np.tanh(c.attr("scale_a", 0.67) * x) ** 2), None),
    "softplus": (lambda x, c: _softplus(x, c.attr("beta", 1.0), c.attr("threshold", 20.0)),
                 lambda x, c: np.where(x * c.attr("beta", 1.0) > c.attr("threshold", 20.0), 1.0,
                                       _sigmoid(x * c.attr("beta", 1.0))), None),
    "softsign": (lambda x, c: x / (1 + np.abs(x)), lambda x, c: 1.0 / (1 + np.abs(x)) ** 2, None),
    "swish": (lambda x, c: x * _sigmoid(_swish_beta(c) * x),
              lambda x, c: _sigmoid(_swish_beta(c) * x) * (
                  1 + _swish_beta(c) * x * (1 - _sigmoid(_swish_beta(c) * x))), None),
    "silu": (lambda x, c: x * _sigmoid(x),
             lambda x, c: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))), None),
    "mish": (_mish, _mish_dx, None),
    "hard_sigmoid": (lambda x, c: np.clip(c.attr("slope", 0.2) * x + c.attr("offset", 0.5), 0, 1),
                     None, lambda o, c: ((o > 0) & (o < 1)) * c.attr("slope", 0.2)),
    "hard_swish": (_hard_swish, _hard_swish_dx, None),
    "hard_shrink": (lambda x, c: np.where(np.abs(x) > c.attr("threshold", 0.5), x, 0.0),
                    lambda x, c: (np.abs(x) > c.attr("threshold", 0.5)) * 1.0, None),
    "softshrink": (lambda x, c: np.where(x > c.attr("lambda", 0.5), x - c.attr("lambda", 0.5),
                                         np.where(x < -c.attr("lambda", 0.5),
                                                  x + c.attr("lambda", 0.5), 0.0)),
                   lambda x, c: (np.abs(x) > c.attr("lambda", 0.5)) * 1.0, None),
    "thresholded_relu": (lambda x, c: np.where(x > c.attr("threshold", 1.0), x, 0.0),
                         lambda x, c: (x > c.attr("threshold", 1.0)) * 1.0, None),
    "brelu": (lambda x, c: np.clip(x, c.attr("t_min", 0.0), c.attr("t_max", 24.0)),
              lambda x, c: ((x > c.attr("t_min", 0.0)) & (x < c.attr("t_max", 24.0))) * 1.0, None),
    "exp": (lambda x, c: np.exp(x), None, lambda o, c: o),
    "expm1": (lambda x, c: np.expm1(x), None, lambda o, c: o + 1),
    "log": (lambda x, c: np.log(x), lambda x, c: 1.0 / x, None),
    "log2": (lambda x, c: np.log2(x), lambda x, c: 1.0 / (x * math.log(2)), None),
    "log10": (lambda x, c: np.log10(x), lambda x, c: 1.0 / (x * math.log(10)), None),
    "log1p": (lambda x, c: np.log1p(x), lambda x, c: 1.0 / (1 + x), None),
    "sqrt": (lambda x, c: np.sqrt(x), None, lambda o, c: 0.5 / o),
    "rsqrt": (lambda x, c: 1.0 / np.sqrt(x), None, lambda o, c: -0.5 * o ** 3),
    "square": (lambda x, c: x * x, lambda x, c: 2 * x, None),
    "abs": (lambda x, c: np.abs(x), lambda x, c: np.sign(x), None),
    "pow": (lambda x, c: np.power(x, _pow_factor(c)),
            lambda x, c: _pow_factor(c) * np.power(x, _pow_factor(c) - 1), None),
    "reciprocal": (lambda x, c: 1.0 / x, None, lambda o, c: -o * o),
    "sin": (lambda x, c: np.sin(x), lambda x, c: np.cos(x), None),
    "cos": (lambda x, c: np.cos(x), lambda x, c: -np.sin(x), None),
    "tan": (lambda x, c: np.tan(x), lambda x, c: 1.0 / np.cos(x) ** 2, None),
    "atan": (lambda x, c: np.arctan(x), lambda x, c: 1.0 / (1 + x * x), None),
    "sinh": (lambda x, c: np.sinh(x), lambda x, c: np.cosh(x), None),
    "cosh": (lambda x, c: np.cosh(x), lambda x, c: np.sinh(x), None),
    "erf": (lambda x, c: _erf(x), lambda x, c: 2 / math.sqrt(math.pi) * np.exp(-x * x), None),
    # no gradient: Paddle's grad of these is zero
    "floor": (lambda x, c: np.floor(x), lambda x, c: np.zeros_like(x), None),
    "ceil": (lambda x, c: np.ceil(x), lambda x, c: np.zeros_like(x), None),
    "round": (lambda x, c: _round(x), lambda x, c: np.zeros_like(x), None),
    "sign": (lambda x, c: np.sign(x), lambda x, c: np.zeros_like(x), None),
}


@kernel(*_OPS)
def activation(ctx):
    x = dense(ctx.x("X"))
    if x.dtype.kind not in "fc" and ctx.op.type not in ("abs", "sign", "square"):
        x = x.astype(ctx.fdt)
    out = np.asarray(_OPS[ctx.op.type][0](x, ctx))
    ctx.set("Out", out.astype(x.dtype, copy=False), lod=ctx.lod("X"))


@kernel(*[k + "_grad" for k in _OPS])
def activation_grad(ctx):
    typ = ctx.op.type[:-5]
    _, from_x, from_out = _OPS[typ]
    dout = dense(ctx.x("Out@GRAD"))
    if from_x is not None and ctx.has("X"):
        deriv = from_x(dense(ctx.x("X")), ctx)
    elif from_out is not None and ctx.has("Out"):
        deriv = from_out(dense(ctx.x("Out")), ctx)
    elif from_out is not None and ctx.has("X"):
        deriv = from_out(_OPS[typ][0](dense(ctx.x("X")), ctx), ctx)
    elif typ in ("floor", "ceil", "round", "sign"):
        deriv = np.zeros_like(dout)
    else:
        raise SimError("%s needs %s" % (ctx.op.type, "X" if from_x is not None else "Out"))
    ctx.set("X@GRAD", np.asarray(dout * deriv).astype(dout.dtype, copy=False),
            lod=ctx.lod("Out@GRAD"))


# --- prelu --------------------------------------------------------------------------------
def _prelu_alpha(ctx, x):
    a = dense(ctx.x("Alpha"))
    mode = ctx.attr("mode", "all")
    if mode == "all":
        return a.reshape(()), mode
    if mode == "channel":
        if ctx.attr("data_format", "NCHW") == "NHWC":
            return a.reshape([1] * (x.ndim - 1) + [-1]), mode
        return a.reshape([1, -1] + [1] * (x.ndim - 2)), mode
    if mode == "element":
        return a.reshape((1,) + x.shape[1:]), mode
    raise SimError("prelu: mode %s is not simulated" % mode)


@kernel("prelu")
def prelu(ctx):
    x = dense(ctx.x("X"))
    a, _ = _prelu_alpha(ctx, x)
    ctx.set("Out", np.where(x > 0, x, a * x), lod=ctx.lod("X"))


@kernel("prelu_grad")
def prelu_grad(ctx):
    x = dense(ctx.x("X"))
    d = dense(ctx.x("Out@GRAD"))
    a, mode = _prelu_alpha(ctx, x)
    if ctx.wants("X@GRAD"):
        ctx.set("X@GRAD", np.where(x > 0, d, a * d), lod=ctx.lod("X"))
    if ctx.wants("Alpha@GRAD"):
        ga = np.where(x > 0, 0.0, x * d)
        ashape = ctx.shape("Alpha")
        if mode == "all":
            g = ga.sum()
        else:
            axes = tuple(i for i in range(x.ndim) if a.shape[i] == 1)
            g = ga.sum(axis=axes)
        ctx.set("Alpha@GRAD", np.reshape(g, ashape))
