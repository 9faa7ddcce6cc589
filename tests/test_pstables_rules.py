"""The sparse SGD rules of Paddle 2.6.2's pserver (transpile/simulate/ps/tables/rules.py) against
values worked out by hand from sparse_sgd_rule.cc (docs/ps-runtime.md section 4)."""
import numpy as np
import pytest
from google.protobuf import text_format

from transpile.core.errors import UserError
from transpile.format import psdesc
from transpile.simulate.ps.tables import rules

F32 = np.float32


def rule(text, n):
    """The rule a SparseCommonSGDRuleParameter text names, for n values."""
    param = psdesc.TableParameter().accessor.embed_sgd_param
    text_format.Parse(text, param)
    return rules.make_rule(param, n)


def f32(*xs):
    return np.asarray([xs], dtype=F32)


def test_naive_sgd_steps_and_bounds():
    r = rule('name: "SparseNaiveSGDRule" naive { learning_rate: 0.1 initial_range: 0.5 '
             'weight_bounds: -1 weight_bounds: 1 }', 2)
    assert r.dim() == 0
    w, s = f32(0.5, -0.2), np.zeros((1, 0), F32)
    # w -= 0.1 g: 0.5 - 0.1 = 0.4, -0.2 + 0.3 = 0.1 (the scale, the show count, is unused)
    w, s = r.update(w, s, f32(1, -3), np.asarray([7], F32))
    np.testing.assert_allclose(w, [[0.4, 0.1]], rtol=1e-6)
    # 0.4 - 1.0 = -0.6
    w, s = r.update(w, s, f32(10, 0), np.ones(1, F32))
    np.testing.assert_allclose(w, [[-0.6, 0.1]], rtol=1e-6)
    # -0.6 + 2.0 = 1.4, clipped to the upper bound 1; 0.1 - 3 = -2.9 clipped to -1
    w, s = r.update(w, s, f32(-20, 30), np.ones(1, F32))
    np.testing.assert_array_equal(w, [[1.0, -1.0]])
    assert w.dtype == F32


def test_adagrad_one_g2sum_per_row_scaled_by_show():
    r = rule('name: "SparseAdaGradSGDRule" adagrad { learning_rate: 0.1 initial_g2sum: 3 }', 2)
    assert r.dim() == 1
    w, s = f32(0, 0), r.init_state(1)
    # show 2: scaled grads [2, 4] / 2 = [1, 2]; sqrt(3 / (3 + 0)) = 1: w = [-0.1, -0.2];
    # g2sum += (1 + 4) / 2 = 2.5
    w, s = r.update(w, s, f32(2, 4), np.asarray([2], F32))
    np.testing.assert_allclose(w, [[-0.1, -0.2]], rtol=1e-6)
    np.testing.assert_allclose(s, [[2.5]], rtol=1e-6)
    # show 1: scaled [2, 0]; sqrt(3 / 5.5) = 0.73855: w0 = -0.1 - 0.1 * 2 * 0.73855;
    # g2sum += (4 + 0) / 2
    w, s = r.update(w, s, f32(2, 0), np.asarray([1], F32))
    np.testing.assert_allclose(w, [[-0.24770979, -0.2]], rtol=1e-6)
    np.testing.assert_allclose(s, [[4.5]], rtol=1e-6)


def test_std_adagrad_one_g2sum_per_value():
    r = rule('name: "StdAdaGradSGDRule" adagrad { learning_rate: 0.1 initial_g2sum: 3 }', 2)
    assert r.dim() == 2
    w, s = f32(0, 0), r.init_state(1)
    # scaled [1, 2], both ratios 1: w = [-0.1, -0.2]; g2sum = [1, 4]
    w, s = r.update(w, s, f32(2, 4), np.asarray([2], F32))
    np.testing.assert_allclose(s, [[1, 4]], rtol=1e-6)
    # scaled [2, 0]: w0 = -0.1 - 0.1 * 2 * sqrt(3 / 4); g2sum = [5, 4]
    w, s = r.update(w, s, f32(2, 0), np.asarray([1], F32))
    np.testing.assert_allclose(w, [[-0.27320508, -0.2]], rtol=1e-6)
    np.testing.assert_allclose(s, [[5, 4]], rtol=1e-6)


ADAM = ('name: "%s" adam { learning_rate: 0.1 initial_range: 0.02 beta1_decay_rate: 0.5 '
        'beta2_decay_rate: 0.75 ada_epsilon: 1e-8 weight_bounds: -10 weight_bounds: 10 }')


def test_adam_moments_per_value_and_beta_powers_per_row():
    r = rule(ADAM % "SparseAdamSGDRule", 1)
    assert r.dim() == 4         # gsum, g2sum, beta1_pow, beta2_pow
    s = r.init_state(1)
    np.testing.assert_array_equal(s, [[0, 0, 0.5, 0.75]])   # the powers start at the betas
    w = f32(0)
    # step 1: lr_t = 0.1 * sqrt(1 - 0.75) / (1 - 0.5) = 0.1; gsum = 0.5 * 2 = 1;
    # g2sum = 0.25 * 4 = 1; w = -0.1 * 1 / 1
    w, s = r.update(w, s, f32(2), np.ones(1, F32))
    np.testing.assert_allclose(w, [[-0.1]], rtol=1e-6)
    np.testing.assert_allclose(s, [[1, 1, 0.25, 0.5625]], rtol=1e-6)
    # step 2: lr_t = 0.1 * sqrt(0.4375) / 0.75; gsum = 0.5 - 1 = -0.5; g2sum = 0.75 + 1;
    # w = -0.1 + lr_t * 0.5 / sqrt(1.75) = -0.1 + 1/30
    w, s = r.update(w, s, f32(-2), np.ones(1, F32))
    np.testing.assert_allclose(w, [[-0.06666667]], rtol=1e-6)
    np.testing.assert_allclose(s, [[-0.5, 1.75, 0.125, 0.421875]], rtol=1e-6)


def test_adam_rows_keep_their_own_step_count():
    # two rows in one call: the first already updated once (powers 0.25, 0.5625), the second
    # new: the same gradient moves them by different amounts
    r = rule(ADAM % "SparseAdamSGDRule", 1)
    s = np.asarray([[1, 1, 0.25, 0.5625], [0, 0, 0.5, 0.75]], F32)
    w, s = r.update(f32(-0.1).reshape(1, 1).repeat(2, 0), s, np.asarray([[-2], [-2]], F32),
                    np.ones(2, F32))
    np.testing.assert_allclose(w[:, 0], [-0.06666667, 0.0], atol=1e-7)   # -0.1 + 0.1 = 0
    np.testing.assert_allclose(s[:, 2], [0.125, 0.25], rtol=1e-6)


def test_shared_adam_one_moment_per_row():
    r = rule(ADAM % "SparseSharedAdamSGDRule", 2)
    assert r.dim() == 4
    w, s = f32(0, 0), r.init_state(1)
    # step 1, lr_t 0.1: new_gsum = 0.5 * [2, 4] = [1, 2], new_g2sum = 0.25 * [4, 16] = [1, 4]:
    # w = -0.1 * [1/1, 2/2]; the row keeps their means 1.5 and 2.5
    w, s = r.update(w, s, f32(2, 4), np.ones(1, F32))
    np.testing.assert_allclose(w, [[-0.1, -0.1]], rtol=1e-6)
    np.testing.assert_allclose(s, [[1.5, 2.5, 0.25, 0.5625]], rtol=1e-6)
    # step 2, lr_t = 0.1 * sqrt(0.4375) / 0.75 = 0.0881917: both values start from 1.5 / 2.5:
    # new_gsum = [0.75, 0.75 + 1], new_g2sum = [1.875, 1.875 + 1]
    w, s = r.update(w, s, f32(0, 2), np.ones(1, F32))
    np.testing.assert_allclose(w, [[-0.14830459, -0.19102211]], rtol=1e-6)
    np.testing.assert_allclose(s, [[1.25, 2.375, 0.125, 0.421875]], rtol=1e-6)


def test_init_weights_uniform_in_range_bounded_or_zero():
    r = rule(ADAM.replace("weight_bounds: -10", "weight_bounds: -0.015") % "SparseAdamSGDRule",
             4)
    u = np.asarray([[0.0, 0.25, 0.5, 0.999]])
    # (u * 2 - 1) * 0.02 = [-0.02, -0.01, 0, 0.01996]; -0.02 is below the bound -0.015
    np.testing.assert_allclose(r.init_weights(u, False), [[-0.015, -0.01, 0, 0.01996]],
                               rtol=1e-6)
    np.testing.assert_array_equal(r.init_weights(u, True), np.zeros((1, 4)))


def test_bound_sends_nan_to_the_lower_bound_and_defaults_to_float_max():
    r = rule('name: "SparseNaiveSGDRule" naive { learning_rate: 0.1 weight_bounds: -2 '
             'weight_bounds: 3 }', 3)
    np.testing.assert_array_equal(r.bound(f32(np.nan, 5, -5)), [[-2, 3, -2]])
    free = rule('name: "SparseNaiveSGDRule" naive { learning_rate: 0.1 }', 1)
    assert free.max_bound == np.finfo(F32).max and free.min_bound == -np.finfo(F32).max


def test_adagrad_v2_raises_g2sum_first_and_ignores_initial_g2sum():
    r = rule('name: "SparseAdaGradV2SGDRule" adagrad { learning_rate: 0.1 initial_g2sum: 3 }',
             2)
    assert r.dim() == 1
    w, s = f32(0, 0), r.init_state(1)
    # show 2: scaled [1, 2]; g2sum = 0 + (1 + 4) / 2 = 2.5 first, then
    # w -= 0.1 * g / (sqrt(2.5) + 1e-8) = [-0.0632456, -0.1264911]
    w, s = r.update(w, s, f32(2, 4), np.asarray([2], F32))
    np.testing.assert_allclose(s, [[2.5]], rtol=1e-6)
    np.testing.assert_allclose(w, [[-0.0632456, -0.1264911]], rtol=1e-6)
    # show 1: scaled [2, 0]; g2sum = 2.5 + 4 / 2 = 4.5; w0 -= 0.1 * 2 / sqrt(4.5) = 0.0942809
    w, s = r.update(w, s, f32(2, 0), np.asarray([1], F32))
    np.testing.assert_allclose(s, [[4.5]], rtol=1e-6)
    np.testing.assert_allclose(w, [[-0.1575265, -0.1264911]], rtol=1e-6)


def test_unknown_rule_is_named():
    with pytest.raises(UserError, match="SparseFooRule"):
        rule('name: "SparseFooRule"', 1)
