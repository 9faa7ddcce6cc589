"""MemorySparseTable of Paddle 2.6.2's pserver (transpile/simulate/ps/tables/sparse.py): rows
created at their first push, short until the embedx threshold, the extending push's embedx
gradient lost, per-row Adam powers, weight bounds; against values worked out by hand from
memory_sparse_table.cc (docs/ps-runtime.md section 2)."""
import numpy as np
from google.protobuf import text_format

from transpile.format import psdesc
from transpile.simulate.model import keyed
from transpile.simulate.ps.tables import TableOptions
from transpile.simulate.ps.tables.sparse import MemorySparseTable, key_waves

F32 = np.float32
NAIVE = ('name: "SparseNaiveSGDRule" naive { learning_rate: 0.1 initial_range: 0.5 '
         'weight_bounds: -10 weight_bounds: 10 }')
ADAM = ('name: "SparseAdamSGDRule" adam { learning_rate: 0.1 initial_range: 0.5 '
        'beta1_decay_rate: 0.5 beta2_decay_rate: 0.75 ada_epsilon: 1e-8 }')


def table(rule=NAIVE, threshold=0, table_id=3, embedx_dim=2, **options):
    param = psdesc.TableParameter()
    text_format.Parse('table_id: %d table_class: "MemorySparseTable" shard_num: 1000 '
                      'accessor { accessor_class: "SparseAccessor" embedx_dim: %d '
                      'embedx_threshold: %d embed_sgd_param { %s } embedx_sgd_param { %s } '
                      'ctr_accessor_param { nonclk_coeff: 0.1 click_coeff: 1 } } '
                      'common { table_name: "emb" }'
                      % (table_id, embedx_dim, threshold, rule, rule), param)
    return MemorySparseTable(param, TableOptions(**options))


def push(t, key, g, show=1, click=0):
    t.push([key], np.asarray([[0, show, click] + list(g)], F32))


def test_a_pull_before_any_push_reads_zeros_and_creates_nothing():
    t = table()
    np.testing.assert_array_equal(t.pull([4, 9]), np.zeros((2, 3)))
    assert len(t) == 0


def test_pull_creates_the_short_row_without_create_value_when_push():
    t = table(create_value_when_push=False)
    out = t.pull([4])
    assert len(t) == 1 and len(t.row(4)) == t.accessor.short_dim
    # embed 0 (zero_init), embedx not there yet: zeros
    np.testing.assert_array_equal(out, np.zeros((1, 3)))


def test_first_push_creates_the_row_and_loses_its_embedx_gradient():
    t = table()
    init = t.create_rows([4])[0]
    embedx0 = init[t.accessor.embedx_w:t.accessor.embedx_w + 2]
    assert np.all(np.abs(embedx0) <= 0.5) and np.any(embedx0 != 0)
    push(t, 4, [1, 2, 3])
    # embed: 0 - 0.1 * 1; embedx: the fresh Create's values, the push's [2, 3] not applied
    # (threshold 0: score 0.1 >= 0 extends the row at once)
    np.testing.assert_allclose(t.pull([4])[0], [-0.1, *embedx0], rtol=1e-6)
    assert len(t.row(4)) == t.accessor.dim
    push(t, 4, [1, 2, 3])
    # the full row is updated in place: embed -0.2, embedx - 0.1 * [2, 3]
    np.testing.assert_allclose(t.pull([4])[0], [-0.2, embedx0[0] - 0.2, embedx0[1] - 0.3],
                               rtol=1e-5)


def test_embedx_waits_for_the_threshold():
    t = table(threshold=2)
    init = t.create_rows([7])[0]
    embedx0 = init[t.accessor.embedx_w:t.accessor.embedx_w + 2]
    # show 1 click 1: score 0 * 0.1 + 1 = 1 per push
    push(t, 7, [1, 5, 5], show=1, click=1)      # score 1 < 2: stays short, embedx pulls 0
    np.testing.assert_allclose(t.pull([7])[0], [-0.1, 0, 0], rtol=1e-6)
    assert len(t.row(7)) == t.accessor.short_dim
    push(t, 7, [1, 5, 5], show=1, click=1)      # score 2 >= 2: extended, embedx from its init
    np.testing.assert_allclose(t.pull([7])[0], [-0.2, *embedx0], rtol=1e-6)
    push(t, 7, [1, 5, 5], show=1, click=1)      # now trained
    np.testing.assert_allclose(t.pull([7])[0], [-0.3, *(embedx0 - 0.5)], rtol=1e-5)
    row = t.row(7)
    assert (row[t.accessor.show], row[t.accessor.click]) == (3, 3)


def test_weight_bounds_clip_the_values():
    t = table()
    push(t, 1, [-500, 0, 1000])
    push(t, 1, [-500, 0, 1000])
    # embed 0 + 50 = 50 -> 10; embedx[1] init - 100 -> -10
    out = t.pull([1])[0]
    assert out[0] == 10 and out[2] == -10


def test_sparse_adam_beta_powers_count_each_rows_pushes():
    t = table(rule=ADAM, embedx_dim=1)
    acc = t.accessor
    push(t, 1, [2, 0])                  # step 1: row 1 only
    push(t, 1, [2, 0])                  # step 2: rows 1 and 2
    push(t, 2, [2, 0])
    # row 2's first push corrects like row 1's first: lr_t 0.1, gsum 1, g2sum 1: embed -0.1
    # (embed starts at 0); row 1's second: gsum 0.5 + 1, g2sum 0.75 + 1,
    # lr_t = 0.1 * sqrt(0.4375) / 0.75: -0.1 - lr_t * 1.5 / sqrt(1.75) = -0.1 - 0.1
    np.testing.assert_allclose(t.pull([1, 2])[:, 0], [-0.2, -0.1], rtol=1e-6)
    pows = acc.embed_state + 2
    np.testing.assert_allclose(t.row(1)[pows:pows + 2], [0.125, 0.421875], rtol=1e-6)
    np.testing.assert_allclose(t.row(2)[pows:pows + 2], [0.25, 0.5625], rtol=1e-6)


def test_a_key_pushed_twice_in_one_request_is_updated_twice():
    t = table()
    t.push([5, 6, 5], np.asarray([[0, 1, 0, 1, 0, 0], [0, 1, 0, 3, 0, 0],
                                  [0, 1, 0, 1, 0, 0]], F32))
    assert [i.tolist() for i in key_waves(np.asarray([5, 6, 5]))] == [[0, 1], [2]]
    np.testing.assert_allclose(t.pull([5, 6])[:, 0], [-0.2, -0.3], rtol=1e-6)
    assert t.row(5)[t.accessor.show] == 2


def test_new_rows_are_keyed_by_seed_table_and_key_not_by_order():
    a, b = table(), table()
    push(a, 11, [0, 0, 0])
    push(a, 12, [0, 0, 0])
    push(b, 12, [0, 0, 0])      # other order, other table object
    push(b, 11, [0, 0, 0])
    np.testing.assert_array_equal(a.pull([11, 12]), b.pull([11, 12]))
    assert not np.array_equal(a.pull([11]), a.pull([12]))
    assert not np.array_equal(table(seed=1).create_rows([11]), a.create_rows([11]))
    assert not np.array_equal(table(table_id=4).create_rows([11]), a.create_rows([11]))
    # the draw: uniform u per (seed, table, part, key), weight (u * 2 - 1) * initial_range
    u = keyed.uniform(keyed.key_of(0, "pstable", 3, "embedx"), [11], 2)
    np.testing.assert_allclose(a.pull([11])[0, 1:], ((u * 2 - 1) * 0.5)[0], rtol=1e-6)


def test_program_init_starts_rows_from_the_program():
    rows = {("emb", 8): [0.25, 0.5, -0.75]}
    t = table(program_init=lambda name, keys: np.asarray([rows[name, int(k)] for k in keys]))
    push(t, 8, [1, 1, 1])
    # embed 0.25 - 0.1; embedx the program's (this push's embedx gradient is lost)
    np.testing.assert_allclose(t.pull([8])[0], [0.15, 0.5, -0.75], rtol=1e-6)


def test_shrink_deletes_rows_below_the_threshold():
    param = psdesc.TableParameter()
    text_format.Parse('table_id: 1 accessor { accessor_class: "SparseAccessor" embedx_dim: 1 '
                      'embed_sgd_param { %s } embedx_sgd_param { %s } ctr_accessor_param { '
                      'nonclk_coeff: 0.1 click_coeff: 1 show_click_decay_rate: 0.5 '
                      'delete_threshold: 0.2 } }' % (NAIVE, NAIVE), param)
    t = MemorySparseTable(param)
    t.push([1, 2], np.asarray([[0, 2, 0, 0, 0], [0, 8, 0, 0, 0]], F32))
    # shows halve to 1 and 4: scores 0.1 (< 0.2: deleted) and 0.4
    assert t.shrink() == [1]
    assert t.keys() == [2] and t.row(2)[t.accessor.show] == 4
