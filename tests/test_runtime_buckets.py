"""runtime/buckets.py: a dense Adam table's push whose 10 bucket threads took the beta powers
in some order is found again from the values a trainer pulled after it (run --local follows the
runtime's order so)."""
import numpy as np

from transpile.runtime import buckets
from transpile.simulate.pstables.dense import TASK_POOL_SIZE

from test_pstables_dense import table


def _adam(dim=40):
    return table("adam", [("Param", dim, "fill_constant&0.0"), ("Moment1", dim, "fill_constant&0"),
                          ("Moment2", dim, "fill_constant&0"),
                          ("Beta1Pow", 1, "fill_constant&0.9"),
                          ("Beta2Pow", 1, "fill_constant&0.999"),
                          ("LearningRate", 1, "fill_constant&0.1")],
                 attr="beta1&0.9#beta2&0.999#epsilon&1e-8")


def _state(t):
    return {n: a.copy() for n, a in t.values.items()}


def _restore(t, state):
    for n, a in state.items():
        t.values[n][:] = a


def test_the_order_of_a_push_is_found_from_the_pulled_values():
    t = _adam()
    rng = np.random.default_rng(1)
    t.apply(rng.normal(size=40).astype(np.float32))     # a first push, in order
    grad = rng.normal(size=40).astype(np.float32)
    before = _state(t)
    order = [4, 9, 1, 10, 2, 7, 3, 8, 6, 5]
    buckets.run_push(t, grad, order)
    want = t.values["Param"].copy()
    powers = (t.values["Beta1Pow"][0], t.values["Beta2Pow"][0])
    _restore(t, before)
    found, worst = buckets.fit_push(t, grad, want)
    assert found == order and worst == 0.0
    assert np.array_equal(t.values["Param"], want)
    assert (t.values["Beta1Pow"][0], t.values["Beta2Pow"][0]) == powers
    # each push ends ten multiplications on (the thread that wrote last read the tenth): 0.9^21
    assert np.isclose(powers[0], np.float32(0.9) ** 21, rtol=1e-5)


def test_in_order_the_push_is_simulates_own():
    a, b = _adam(), _adam()
    grad = np.linspace(-1, 1, 40).astype(np.float32)
    a.apply(grad)
    buckets.run_push(b, grad, list(range(1, TASK_POOL_SIZE + 1)))
    for n in a.values:
        assert np.array_equal(a.values[n], b.values[n]), n


def test_a_push_no_order_explains_leaves_its_difference():
    t = _adam()
    grad = np.ones(40, np.float32)
    want = np.full(40, -0.5, np.float32)          # no learning-rate factor moves it that far
    _, worst = buckets.fit_push(t, grad, want)
    assert worst > 0.3


def test_a_bucket_that_read_the_two_powers_at_different_steps_is_found():
    # DAdam reads Beta2Pow, then Beta1Pow: another thread's multiplication can fall between
    t = _adam()
    rng = np.random.default_rng(2)
    grad = rng.normal(size=40).astype(np.float32)
    before = _state(t)
    order = [4, 9, 1, 10, (3, 5), 7, 2, 8, 6, 5]
    buckets.run_push(t, grad, order)
    want = t.values["Param"].copy()
    for j in range(1, 11):      # no one number for bucket 4 does that
        _restore(t, before)
        buckets.run_push(t, grad, order[:4] + [j] + order[5:])
        assert not np.array_equal(t.values["Param"], want)
    _restore(t, before)
    found, worst = buckets.fit_push(t, grad, want, tol=1e-7)
    assert found == order and worst == 0.0
