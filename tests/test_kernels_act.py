"""Activation kernels: forward values by hand, grads by central differences, each grad fed
what Paddle's grad op maker gives it (X, or Out only)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kernelkit import check_grad, run_op

X = np.array([[-2.5, -1.2, -0.3, 0.2], [0.7, 1.1, 2.4, 3.3]])
POS = np.abs(X) + 0.2

# op -> (attrs, slots Paddle's grad op reads besides Out@GRAD, input)
GRADS = {
    "relu": ({}, ("Out",), X), "relu6": ({"threshold": 2.0}, ("Out",), X),
    "leaky_relu": ({"alpha": 0.1}, ("X",), X), "elu": ({"alpha": 0.7}, ("X", "Out"), X),
    "selu": ({"scale": 1.0507, "alpha": 1.6733}, ("Out",), X), "celu": ({"alpha": 0.5}, ("X",), X),
    "gelu": ({"approximate": False}, ("X",), X), "sigmoid": ({}, ("Out",), X),
    "logsigmoid": ({}, ("X",), X), "tanh": ({}, ("Out",), X), "tanh_shrink": ({}, ("X",), X),
    "stanh": ({"scale_a": 0.67, "scale_b": 1.7159}, ("X",), X),
    "softplus": ({"beta": 2.0, "threshold": 3.0}, ("X",), X), "softsign": ({}, ("X",), X),
    "swish": ({"beta": 1.5}, ("X",), X), "silu": ({}, ("X", "Out"), X),
    "mish": ({"threshold": 20.0}, ("X",), X),
    "hard_sigmoid": ({"slope": 0.2, "offset": 0.5}, ("Out",), X + 0.05),
    "hard_swish": ({"threshold": 6.0, "scale": 6.0, "offset": 3.0}, ("X",), X * 2),
    "hard_shrink": ({"threshold": 0.5}, ("X",), X), "softshrink": ({"lambda": 0.5}, ("X",), X),
    "thresholded_relu": ({"threshold": 1.0}, ("X",), X),
    "brelu": ({"t_min": -1.0, "t_max": 2.0}, ("X",), X),
    "exp": ({}, ("Out",), X), "expm1": ({}, ("Out",), X), "log": ({}, ("X",), POS),
    "log2": ({}, ("X",), POS), "log10": ({}, ("X",), POS), "log1p": ({}, ("X",), POS),
    "sqrt": ({}, ("Out",), POS), "rsqrt": ({}, ("Out",), POS), "square": ({}, ("X",), X),
    "abs": ({}, ("X",), X), "pow": ({"factor": 2.5}, ("X",), POS),
    "reciprocal": ({}, ("Out",), X), "sin": ({}, ("X",), X), "cos": ({}, ("X",), X),
    "tan": ({}, ("X",), X * 0.4), "atan": ({}, ("X",), X), "sinh": ({}, ("X",), X),
    "cosh": ({}, ("X",), X), "erf": ({}, ("X",), X),
}


@pytest.mark.parametrize("typ", sorted(GRADS))
def test_activation_grad_matches_central_differences(typ):
    attrs, reads, x = GRADS[typ]
    check_grad(typ, {"X": x}, attrs, wrt=["X"], grad_inputs=reads)


def test_gelu_approximate_grad():
    check_grad("gelu", {"X": X}, {"approximate": True}, wrt=["X"], grad_inputs=("X",))


def _fwd(typ, x, **attrs):
    return run_op(typ, {"X": np.asarray(x, dtype=float)}, {"Out": 1}, attrs)["Out"]


def test_activation_values_by_hand():
    assert np.allclose(_fwd("relu6", [-1, 3, 7]), [0, 3, 6])
    assert np.allclose(_fwd("leaky_relu", [-2, 3], alpha=0.1), [-0.2, 3])
    assert np.allclose(_fwd("elu", [-1, 2], alpha=0.5), [0.5 * (math.exp(-1) - 1), 2])
    assert np.allclose(_fwd("selu", [-1, 2], scale=2.0, alpha=3.0),
                       [2 * 3 * (math.exp(-1) - 1), 4])
    assert np.allclose(_fwd("gelu", [1.0]), [0.5 * (1 + math.erf(1 / math.sqrt(2)))])
    assert np.allclose(_fwd("gelu", [1.0], approximate=True),
                       [0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * 1.044715))])
    assert np.allclose(_fwd("softplus", [1.0, 30.0], beta=1.0, threshold=20.0),
                       [math.log1p(math.e), 30.0])
    assert np.allclose(_fwd("softsign", [3.0]), [0.75])
    assert np.allclose(_fwd("swish", [2.0], beta=1.0), [2 / (1 + math.exp(-2))])
    assert np.allclose(_fwd("hard_sigmoid", [-5, 0, 1, 5], slope=0.2, offset=0.5),
                       [0, 0.5, 0.7, 1])
    assert np.allclose(_fwd("hard_swish", [-4, 1, 4]), [0, 1 * 4 / 6, 4])
    assert np.allclose(_fwd("logsigmoid", [0.0]), [-math.log(2)])
    assert np.allclose(_fwd("rsqrt", [4.0]), [0.5])
    assert np.allclose(_fwd("reciprocal", [4.0]), [0.25])
    assert np.allclose(_fwd("pow", [2.0], factor=3.0), [8.0])
    # Paddle rounds half away from zero
    assert np.array_equal(_fwd("round", [0.5, 1.5, 2.5, -0.5, -2.5]), [1, 2, 3, -1, -3])
    assert np.array_equal(_fwd("floor", [-1.5, 1.5]), [-2, 1])
    assert np.array_equal(_fwd("ceil", [-1.5, 1.5]), [-1, 2])
    assert np.array_equal(_fwd("sign", [-3.0, 0.0, 2.0]), [-1, 0, 1])
    assert np.allclose(_fwd("mish", [1.0]), [math.tanh(math.log1p(math.e))])


@pytest.mark.parametrize("typ", ["floor", "ceil", "round", "sign"])
def test_rounding_ops_have_zero_grad(typ):
    g = run_op(typ + "_grad", {"Out@GRAD": np.ones(3)}, {"X@GRAD": 1})["X@GRAD"]
    assert np.array_equal(g, np.zeros(3))


@pytest.mark.parametrize("mode,ashape", [("all", [1]), ("channel", [3]),
                                         ("element", [1, 3, 2, 2])])
def test_prelu(mode, ashape):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 2, 2))
    a = rng.uniform(0.1, 0.5, size=ashape)
    out = run_op("prelu", {"X": x, "Alpha": a}, {"Out": 1}, {"mode": mode})["Out"]
    ab = {"all": lambda: a.reshape(()), "channel": lambda: a.reshape(1, 3, 1, 1),
          "element": lambda: a}[mode]()
    assert np.allclose(out, np.where(x > 0, x, ab * x))
    check_grad("prelu", {"X": x, "Alpha": a}, {"mode": mode}, wrt=["X", "Alpha"])


def test_prelu_channel_nhwc():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 2, 2, 3))
    a = rng.uniform(0.1, 0.5, size=[3])
    out = run_op("prelu", {"X": x, "Alpha": a}, {"Out": 1},
                 {"mode": "channel", "data_format": "NHWC"})["Out"]
    assert np.allclose(out, np.where(x > 0, x, a * x))


def test_softmax_log_softmax():
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    sm = run_op("softmax", {"X": x}, {"Out": 1}, {"axis": -1})["Out"]
    e = np.exp([1.0, 2.0, 3.0])
    assert np.allclose(sm[0], e / e.sum()) and np.allclose(sm[1], 1 / 3)
    ls = run_op("log_softmax", {"X": x}, {"Out": 1}, {"axis": 0})["Out"]
    assert np.allclose(ls, x - np.log(np.exp(x).sum(axis=0, keepdims=True)))
    for axis in (0, 1):
        check_grad("softmax", {"X": x}, {"axis": axis}, wrt=["X"], grad_inputs=("Out",))
        check_grad("log_softmax", {"X": x}, {"axis": axis}, wrt=["X"], grad_inputs=("Out",))
