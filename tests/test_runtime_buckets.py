"""runtime/buckets.py: a dense Adam table's push whose 10 bucket threads took the beta powers
in some order is found again from the values a trainer pulled after it (run --local follows the
runtime's order so)."""
import numpy as np

from transpile.runtime import buckets
from transpile.simulate.ps.tables.dense import TASK_POOL_SIZE

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


def _pushed_in(t, grad, order):
    """(Param after a push of `grad` in bucket `order`, the two powers after it, the state
    before it); `t` is left as before the push."""
    before = _state(t)
    buckets.run_push(t, grad, order)
    want = t.values["Param"].copy()
    powers = (t.values["Beta1Pow"][0], t.values["Beta2Pow"][0])
    _restore(t, before)
    return want, powers, before


def test_the_order_of_a_push_is_found_from_the_pulled_values():
    t = _adam()
    rng = np.random.default_rng(1)
    t.apply(rng.normal(size=40).astype(np.float32))     # a first push, in order
    grad = rng.normal(size=40).astype(np.float32)
    order = [4, 9, 1, 10, 2, 7, 3, 8, 6, 5]
    want, powers, _ = _pushed_in(t, grad, order)
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
    order = [4, 9, 1, 10, (3, 5), 7, 2, 8, 6, 5]
    want, _, before = _pushed_in(t, grad, order)
    for j in range(1, 11):      # no one number for bucket 4 does that
        _restore(t, before)
        buckets.run_push(t, grad, order[:4] + [j] + order[5:])
        assert not np.array_equal(t.values["Param"], want)
    _restore(t, before)
    found, worst = buckets.fit_push(t, grad, want, tol=1e-7)
    assert found == order and worst == 0.0


class _Cluster:
    """What Follower touches of a prediction's cluster: its servers, pulls and dense sends."""

    def __init__(self):
        self.servers, self.sent = [], []

    def pull_dense(self, tr):
        pass

    def send_dense(self, tr, ex, op):
        self.push_dense(0, op)          # the "op" here is the gradient the trainer computed

    def push_dense(self, tid, values):
        self.sent.append(np.array(values))


def _send(cluster, trainer, step, values):
    from types import SimpleNamespace
    cluster.send_dense(SimpleNamespace(tid=trainer), SimpleNamespace(step=step),
                       np.asarray(values, np.float32))


def test_a_push_applies_the_runtimes_gradient_and_keeps_the_predictions_beside_it():
    # float32 rounding in a trainer's sums: the runtime's bits are pushed (Adam would grow the
    # difference); the prediction's own gradient is kept for the verdict, which holds it to
    # the tolerance (a wrong one shows there: local.gradient_notes)
    own = np.array([0.5, -1e-9, 2.0], np.float32)
    runtime = own + np.array([3e-8, 2e-8, 0], np.float32)
    wrong = own * np.float32(1.01)
    grads = {(0, 0, 0): runtime, (1, 0, 0): wrong}
    c = _Cluster()
    f = buckets.Follower(trace={}, grads=grads)
    f.install(c)
    _send(c, 0, 0, own)
    _send(c, 1, 0, own)
    _send(c, 0, 1, own)                 # no runtime gradient recorded: its own
    assert np.array_equal(c.sent[0], runtime) and np.array_equal(c.sent[1], wrong)
    assert np.array_equal(c.sent[2], own)
    assert sorted(f.pushed) == [(0, 0), (1, 0)]
    s, mine, theirs = f.pushed[(1, 0)][0]
    assert s == 0 and np.array_equal(mine, own) and np.array_equal(theirs, wrong)


def test_a_pushed_gradient_beyond_the_tolerance_and_its_float64_rounding_is_named():
    from transpile.runtime.local import gradient_notes
    from types import SimpleNamespace
    own = np.array([0.5, 1e-9], np.float32)
    f = SimpleNamespace(pushed={(1, 0): [(0, own, own + np.float32(2e-8)),
                                         (1, own, own * np.float32(1.01))]})
    wide = SimpleNamespace(pushed={(1, 0): [(0, own + np.float32(1e-8), None),
                                            (1, own + np.float32(1e-8), None)]})
    notes = gradient_notes(f, wide, 1e-6)
    assert len(notes) == 1 and "dense table 0, trainer_1: each of its 2 pushes" in notes[0]
    assert "beyond the tolerance: step 1 by 5.0e-03 (float64's rounding 1.0e-08)" in notes[0]
    assert "step 0" not in notes[0]


def test_a_bucket_with_nothing_to_update_leaves_the_last_power_to_the_unseen_thread():
    # bucket 0 has no gradient and no moments: whatever power its thread read, its values are
    # the same; that thread may have multiplied last (measured: ps-gen/slots_adam_async, whose
    # slot columns get no gradient), so the push ends ten multiplications on, not nine
    t = _adam()
    grad = np.random.default_rng(3).normal(size=40).astype(np.float32)
    grad[:4] = 0                                  # bucket 0 of 40 values: 0..3
    order = [10, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    want, powers, _ = _pushed_in(t, grad, order)
    found, worst = buckets.fit_push(t, grad, want)
    assert worst == 0.0 and found[1:] == order[1:]
    assert (t.values["Beta1Pow"][0], t.values["Beta2Pow"][0]) == powers
