"""The sparse SGD rules of Paddle 2.6.2 (`ps/table/sparse_sgd_rule.{h,cc}`), vectorized over rows.

A rule updates `n` values of a row (1 for the embed part, `embedx_dim` for embedx) and keeps
`dim()` floats of state beside them. Arrays are [rows, n] float32 (`w`, `grad`), [rows, dim()]
(`state`) and [rows] (`scale`, the pushed show count); every function returns new arrays.
Float32 arithmetic where the C++ computes in float, float64 where it uses double.
"""
from __future__ import annotations

import numpy as np

from ....core.errors import UserError

F32 = np.float32
FLT_MAX = float(np.finfo(np.float32).max)


def _f(x) -> np.float32:
    return np.float32(x)


class Rule:
    """What every rule shares: the config fields, the bound and the init of the weights."""
    name = ""
    uniform_dtype = np.float64      # local_uniform_real_distribution<double> in InitValueWork

    def __init__(self, param, n: int, sub: str):
        self.n = int(n)
        cfg = getattr(param, sub)
        self.lr = _f(cfg.learning_rate)
        self.initial_range = _f(cfg.initial_range)
        bounds = list(cfg.weight_bounds)
        if len(bounds) == 1:
            raise UserError("%s: weight_bounds needs 2 values, has 1" % self.name)
        self.min_bound = _f(bounds[0] if bounds else -FLT_MAX)
        self.max_bound = _f(bounds[1] if bounds else FLT_MAX)

    def dim(self) -> int:
        raise NotImplementedError

    def bound(self, w):
        """BoundValue: below the minimum (or NaN) -> minimum, above the maximum -> maximum."""
        w = np.asarray(w, dtype=F32)
        w = np.where(~(w >= self.min_bound), self.min_bound, w)
        return np.where(~(w <= self.max_bound), self.max_bound, w).astype(F32)

    def init_weights(self, uniforms, zero_init: bool):
        """InitValueWork's weights from uniforms in [0, 1) ([rows, n]): 0 when zero_init, else
        (u * 2 - 1) * initial_range; bounded."""
        u = np.asarray(uniforms, dtype=np.float64)
        if zero_init:
            return self.bound(np.zeros(u.shape, dtype=F32))
        u = u.astype(self.uniform_dtype)
        return self.bound((u * 2 - 1) * self.uniform_dtype(self.initial_range))

    def init_state(self, rows: int):
        return np.zeros((rows, self.dim()), dtype=F32)

    def update(self, w, state, grad, scale):
        """(new w, new state) after one push of `grad` with show `scale`."""
        raise NotImplementedError


class NaiveSGD(Rule):
    """SparseNaiveSGDRule: w -= lr * g. No state, no scale."""
    name = "SparseNaiveSGDRule"
    uniform_dtype = np.float32

    def __init__(self, param, n):
        super().__init__(param, n, "naive")

    def dim(self):
        return 0

    def init_weights(self, uniforms, zero_init):
        if zero_init:   # the naive rule does not bound its zeros
            return np.zeros(np.shape(uniforms), dtype=F32)
        return super().init_weights(uniforms, False)

    def update(self, w, state, grad, scale):
        w = np.asarray(w, F32) - self.lr * np.asarray(grad, F32)
        return self.bound(w), np.asarray(state, F32).copy()


class AdaGrad(Rule):
    """SparseAdaGradSGDRule: one g2sum per row, the mean of the squared scaled gradients."""
    name = "SparseAdaGradSGDRule"

    def __init__(self, param, n):
        super().__init__(param, n, "adagrad")
        self.initial_g2sum = _f(param.adagrad.initial_g2sum)

    def dim(self):
        return 1

    def _step(self, w, g2sum, grad, scale):
        """The shared arithmetic: (new w, scaled grads in double), g2sum per value or per row."""
        scaled = (np.asarray(grad, F32) / np.asarray(scale, F32)[:, None]).astype(np.float64)
        ratio = np.sqrt(self.initial_g2sum / (self.initial_g2sum + np.asarray(g2sum, F32)))
        w = np.asarray(w, F32).astype(np.float64) - np.float64(self.lr) * scaled * ratio
        return self.bound(w.astype(F32)), scaled

    def update(self, w, state, grad, scale):
        state = np.asarray(state, F32)
        with np.errstate(divide="ignore", invalid="ignore"):   # n = 0: 0 / 0, as in C++
            w, scaled = self._step(w, state[:, :1], grad, scale)
            add = (scaled * scaled).sum(axis=1) / self.n
        return w, (state[:, 0].astype(np.float64) + add).astype(F32)[:, None]


class StdAdaGrad(AdaGrad):
    """StdAdaGradSGDRule: a g2sum per value."""
    name = "StdAdaGradSGDRule"

    def dim(self):
        return self.n

    def update(self, w, state, grad, scale):
        state = np.asarray(state, F32)
        with np.errstate(divide="ignore", invalid="ignore"):
            w, scaled = self._step(w, state, grad, scale)
        return w, (state.astype(np.float64) + scaled * scaled).astype(F32)


class AdaGradV2(Rule):
    """SparseAdaGradV2SGDRule: one g2sum per row, first raised by the mean of the squared scaled
    gradients (added in double to the float), then w -= lr * g / (sqrt(g2sum) + 1e-8); no
    initial_g2sum in the update."""
    name = "SparseAdaGradV2SGDRule"
    eps = F32(1e-8)

    def __init__(self, param, n):
        super().__init__(param, n, "adagrad")

    def dim(self):
        return 1

    def update(self, w, state, grad, scale):
        state = np.asarray(state, F32)
        with np.errstate(divide="ignore", invalid="ignore"):   # n = 0: 0 / 0, as in C++
            scaled = (np.asarray(grad, F32) / np.asarray(scale, F32)[:, None]).astype(np.float64)
            g2sum = (state[:, 0].astype(np.float64)
                     + (scaled * scaled).sum(axis=1) / self.n).astype(F32)
        root = (np.sqrt(g2sum) + self.eps).astype(F32)[:, None]
        w = np.asarray(w, F32).astype(np.float64) - np.float64(self.lr) * scaled / root
        return self.bound(w.astype(F32)), g2sum[:, None]


class Adam(Rule):
    """SparseAdamSGDRule: moments per value and beta powers per row, starting at the betas."""
    name = "SparseAdamSGDRule"

    def __init__(self, param, n):
        super().__init__(param, n, "adam")
        self.beta1 = _f(param.adam.beta1_decay_rate)
        self.beta2 = _f(param.adam.beta2_decay_rate)
        self.eps = _f(param.adam.ada_epsilon)

    def dim(self):
        return 2 * self.n + 2

    def init_state(self, rows):
        state = np.zeros((rows, self.dim()), dtype=F32)
        state[:, -2] = self.beta1
        state[:, -1] = self.beta2
        return state

    def _lr(self, pows):
        """lr * sqrt(1 - beta2_pow) / (1 - beta1_pow), per row, in float."""
        b1p, b2p = pows[:, 0], pows[:, 1]
        return (self.lr * (np.sqrt(_f(1) - b2p) / (_f(1) - b1p))).astype(F32)

    def update(self, w, state, grad, scale):
        state = np.asarray(state, F32).copy()
        g = np.asarray(grad, F32)
        n = self.n
        lr = self._lr(state[:, 2 * n:])[:, None]
        gsum = self.beta1 * state[:, :n] + (_f(1) - self.beta1) * g
        g2sum = self.beta2 * state[:, n:2 * n] + (_f(1) - self.beta2) * g * g
        w = np.asarray(w, F32) - lr * (gsum / (np.sqrt(g2sum) + self.eps))
        state[:, :n], state[:, n:2 * n] = gsum, g2sum
        state[:, 2 * n] *= self.beta1
        state[:, 2 * n + 1] *= self.beta2
        return self.bound(w), state


class SharedAdam(Adam):
    """SparseSharedAdamSGDRule: one gsum and one g2sum per row (their means), beta powers per
    row."""
    name = "SparseSharedAdamSGDRule"

    def dim(self):
        return 4

    def update(self, w, state, grad, scale):
        state = np.asarray(state, F32).copy()
        g = np.asarray(grad, F32)
        lr = self._lr(state[:, 2:])[:, None]
        # each value starts from the row's stored gsum / g2sum (float), kept in double
        new_gsum = (self.beta1 * state[:, :1] + (_f(1) - self.beta1) * g).astype(np.float64)
        new_g2sum = (self.beta2 * state[:, 1:2]
                     + (_f(1) - self.beta2) * g * g).astype(np.float64)
        step = lr * (new_gsum / (np.sqrt(new_g2sum) + np.float64(self.eps)))
        w = (np.asarray(w, F32).astype(np.float64) - step).astype(F32)
        with np.errstate(divide="ignore", invalid="ignore"):   # n = 0: 0 / 0, as in C++
            state[:, 0] = (new_gsum.sum(axis=1) / self.n).astype(F32)
            state[:, 1] = (new_g2sum.sum(axis=1) / self.n).astype(F32)
        state[:, 2] *= self.beta1
        state[:, 3] *= self.beta2
        return self.bound(w), state


RULES = {cls.name: cls for cls in (NaiveSGD, AdaGrad, StdAdaGrad, AdaGradV2, Adam, SharedAdam)}


def make_rule(param, n: int, where: str = "sgd_param") -> Rule:
    """The rule a SparseCommonSGDRuleParameter names, for `n` values; UserError naming `where`
    for a rule Paddle 2.6.2 does not have."""
    cls = RULES.get(param.name)
    if cls is None:
        raise UserError("%s: name %r is not a sparse rule of Paddle 2.6.2 (one of %s)"
                        % (where, param.name, ", ".join(sorted(RULES))))
    return cls(param, n)
