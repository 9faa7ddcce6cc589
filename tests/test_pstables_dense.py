"""MemoryDenseTable of Paddle 2.6.2's pserver and its rules (transpile/simulate/ps/tables/
dense.py) against values worked out by hand from memory_dense_table.cc and depends/dense.h
(docs/ps-runtime.md section 6)."""
import numpy as np
import pytest
from google.protobuf import text_format

from transpile.core.errors import UserError
from transpile.format import psdesc
from transpile.simulate.ps.tables import PserverRefuses, TableError, TableOptions
from transpile.simulate.ps.tables.dense import MemoryDenseTable, bucket

F32 = np.float32


def table(name, params, sync=False, attr="", **options):
    """A dense table: params = [(name, dim, initializer)]."""
    body = "".join('params: "%s" ' % p for p, _, _ in params)
    body += "".join("dims: %d " % d for _, d, _ in params)
    body += "".join('initializers: "%s" ' % i for _, _, i in params)
    param = psdesc.TableParameter()
    text_format.Parse('table_id: 1 table_class: "MemoryDenseTable" common { name: "%s" %s '
                      'trainer_num: 2 sync: %s attr: "%s" }'
                      % (name, body, "true" if sync else "false", attr), param)
    return MemoryDenseTable(param, TableOptions(**options), "server_desc.txt: table 1")


def sgd(dim=3, lr=0.5, sync=False):
    return table("sgd", [("Param", dim, "fill_constant&0.0"),
                         ("LearningRate", 1, "fill_constant&%r" % lr)], sync)


def adam(dim):
    return table("adam", [("Param", dim, "fill_constant&0.0"), ("Moment1", dim, "fill_constant&0"),
                          ("Moment2", dim, "fill_constant&0"),
                          ("Beta1Pow", 1, "fill_constant&0.9"),
                          ("Beta2Pow", 1, "fill_constant&0.999"),
                          ("LearningRate", 1, "fill_constant&0.1")],
                 attr="beta1&0.5#beta2&0.5#epsilon&0.5")


def test_bucket_splits_like_paddle():
    # 23 values in 10 buckets: 23 // 10 = 2 each, the first 23 % 10 = 3 one more
    assert bucket(23, 10) == [0, 3, 6, 9, 11, 13, 15, 17, 19, 21, 23]
    assert bucket(2, 10) == [0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2]


def test_sgd_async_applies_each_push():
    t = sgd()
    t.push_param([1, 2, 3])                 # trainer 0's start
    t.push([2, 2, 2])                       # Param -= 0.5 * 2
    np.testing.assert_array_equal(t.pull(), [0, 1, 2])
    assert t.pull().dtype == F32


def test_sync_pushes_wait_for_the_barrier_and_are_averaged_by_count():
    t = sgd(sync=True)
    t.push([2, 2, 2])
    t.push([4, 4, 4])
    np.testing.assert_array_equal(t.pull(), [0, 0, 0])     # nothing before the pour
    t.pour()                                                # mean 3: Param -= 0.5 * 3
    np.testing.assert_array_equal(t.pull(), [-1.5, -1.5, -1.5])
    t.push([4, 4, 4])                       # one push: its mean is itself
    t.pour()
    np.testing.assert_array_equal(t.pull(), [-3.5, -3.5, -3.5])


def test_dense_adam_powers_advance_before_use_ten_times_a_push():
    t = adam(2)
    t.push([1, -1])
    # m1 = 0.1 * g, m2 = 0.001 * g^2. Bucket 0 (value 0): powers 0.9^2, 0.999^2, lr_t =
    # 0.1 * sqrt(1 - 0.999^2) / (1 - 0.9^2) = 0.0235317, eps 1e-8 * sqrt(1 - 0.999^2):
    # -lr_t * 0.1 / (sqrt(0.001) + eps). Bucket 1: powers 0.9^3, 0.999^3 (lr_t 0.0202011).
    # The descriptor's attr betas (0.5) are not read. (Float32 as Paddle: 1 - 0.999^2 keeps
    # about 4 digits, hence the tolerance.)
    np.testing.assert_allclose(t.pull(), [-0.07441368, 0.06388136], rtol=2e-5)
    # the 8 empty buckets still multiply: 0.9 * 0.9^10
    np.testing.assert_allclose([t.values["Beta1Pow"][0], t.values["Beta2Pow"][0]],
                               [0.31381060, 0.98905484], rtol=1e-6)


def test_a_pour_without_pushes_still_runs_the_rule():
    t = table("adam", [("Param", 1, "fill_constant&0.0"), ("Moment1", 1, "fill_constant&0"),
                       ("Moment2", 1, "fill_constant&0"), ("Beta1Pow", 1, "fill_constant&0.9"),
                       ("Beta2Pow", 1, "fill_constant&0.999"),
                       ("LearningRate", 1, "fill_constant&0.1")], sync=True)
    t.pour()                                # zero gradients: Param stays, the powers go on
    np.testing.assert_array_equal(t.pull(), [0])
    np.testing.assert_allclose(t.values["Beta1Pow"][0], 0.31381060, rtol=1e-6)


def test_adam_d2sum():
    t = table("adam_d2sum", [("Param", 1, "fill_constant&1.0"), ("D2Sum", 1, "fill_constant&0"),
                             ("G2Sum", 1, "fill_constant&0"), ("Moment", 1, "fill_constant&0"),
                             ("MomentDecayRate", 1, "fill_constant&0.5"),
                             ("AdaDecayRate", 1, "fill_constant&0.5"),
                             ("AdaEpsilon", 1, "fill_constant&1.0"),
                             ("LearningRate", 1, "fill_constant&0.1")])
    # d2sum = 0 * 0.5 + 1 = 1; g2sum = 0 + 2^2 = 4; scale = sqrt((1 + 1) / (4 + 1));
    # mom = (0 + 2) * 0.5 - 2 = -1; Param = 1 + 0.1 * -1 * sqrt(0.4)
    t.push([2])
    np.testing.assert_allclose(t.pull(), [0.93675445], rtol=1e-6)
    # g = 0: d2sum 1.5, g2sum 2, scale sqrt(3 / 3.5); mom = -0.5; Param -= 0.05 * scale
    t.push([0])
    np.testing.assert_allclose(t.pull(), [0.89046344], rtol=1e-6)
    assert t.values["Moment"][0] == -0.5


def test_summary_decays_by_a_constant_and_sum_adds():
    t = table("summary", [("Param", 2, "fill_constant&10000.0"),
                          ("SummaryDecayRate", 1, "fill_constant&0.5")])
    t.push([5, -5])                         # Param * 0.999999 + g; the 0.5 is not read
    np.testing.assert_allclose(t.pull(), [10004.99, 9994.99], rtol=1e-7)
    s = table("sum", [("Param", 2, "fill_constant&1.0")])
    s.push([0.5, -2])
    np.testing.assert_array_equal(s.pull(), [1.5, -1])


def test_initializers_fill_each_value():
    t = table("sum", [("Param", 4, "uniform_random&0&-2.0&2.0")], seed=5)
    p = t.pull()
    assert np.all(np.abs(p) <= 2) and len(set(p.tolist())) == 4
    again = table("sum", [("Param", 4, "uniform_random&0&-2.0&2.0")], seed=5).pull()
    np.testing.assert_array_equal(p, again)
    g = table("sum", [("Param", 3, "truncated_gaussian_random&0&1.0&0.5")]).pull()
    assert np.all(np.abs(g - 1) <= 1.0)     # within 2 std


def test_push_widths_and_bad_descriptors():
    t = sgd(dim=3)
    t.push([1, 1, 1, 9, 9])                 # a padded slice: the first param_dim count
    np.testing.assert_array_equal(t.pull(), [-0.5, -0.5, -0.5])
    with pytest.raises(TableError, match="2 values, the slice holds 3"):
        t.push([1, 1])
    with pytest.raises(UserError, match="server_desc.txt: table 1.common.name: 'rmsprop'"):
        table("rmsprop", [("Param", 1, "fill_constant&0.0")])
    with pytest.raises(UserError, match="rule adam needs Moment1"):
        table("adam", [("Param", 1, "fill_constant&0.0")])
    with pytest.raises(UserError, match="initializer 'xavier&1'"):
        table("sum", [("Param", 1, "xavier&1")])


def test_an_empty_initializer_stops_paddles_pserver():
    spec = [("Param", 2, ""), ("LearningRate", 1, "fill_constant&0.1")]
    with pytest.raises(PserverRefuses, match="Param has an empty initializer"):
        table("sgd", spec)
    t = table("sgd", spec, lenient_initializers=True)
    np.testing.assert_array_equal(t.pull(), [0, 0])
    assert "started at 0 here" in t.notes[0]
    assert t.empty_inits == ["Param"]
