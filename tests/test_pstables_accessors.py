"""The sparse accessors of Paddle 2.6.2's pserver (transpile/simulate/ps/tables/accessors.py):
row layouts, Create / Select / Update / Merge / NeedExtendMF / Shrink, against values worked
out by hand from sparse_accessor.cc, ctr_accessor.cc and ctr_double_accessor.cc."""
import numpy as np
import pytest
from google.protobuf import text_format

from transpile.core.errors import UserError
from transpile.format import psdesc
from transpile.simulate.ps.tables import TableError, accessors

F32 = np.float32
NAIVE = 'name: "SparseNaiveSGDRule" naive { learning_rate: 0.1 initial_range: 0.5 }'
ADAGRAD = 'name: "SparseAdaGradSGDRule" adagrad { learning_rate: 0.1 initial_g2sum: 3 }'
ADAM = ('name: "SparseAdamSGDRule" adam { learning_rate: 0.1 initial_range: 0.5 '
        'beta1_decay_rate: 0.9 beta2_decay_rate: 0.999 ada_epsilon: 1e-8 }')


def accessor(cls="SparseAccessor", embedx_dim=3, embed=NAIVE, embedx=NAIVE, extra=""):
    param = psdesc.TableParameter().accessor
    text_format.Parse('accessor_class: "%s" embedx_dim: %d embedx_threshold: 5 '
                      'embed_sgd_param { %s } embedx_sgd_param { %s } '
                      'ctr_accessor_param { nonclk_coeff: 0.1 click_coeff: 1 %s }'
                      % (cls, embedx_dim, embed, embedx, extra), param)
    return accessors.make_accessor(param, "server_desc.txt: table 0 accessor")


def test_sparse_accessor_layout_follows_the_rules_state():
    # Adam: embed state 2*1+2 = 4, embedx state 2*3+2 = 8; row = 6 + 4 + 3 + 8 = 21 floats,
    # of which the mf tail (embedx_w + its state) is 11: a short row has 10
    acc = accessor(embed=ADAM, embedx=ADAM)
    assert (acc.dim, acc.short_dim, acc.select_dim, acc.update_dim) == (21, 10, 4, 7)
    assert (acc.embed_w, acc.embed_state, acc.embedx_w, acc.embedx_state) == (5, 6, 10, 13)
    acc = accessor(embed=NAIVE, embedx=NAIVE)       # naive rules keep no state
    assert (acc.dim, acc.short_dim) == (9, 6)


def test_create_zero_init_embed_random_embedx():
    acc = accessor(embed=ADAM, embedx=ADAM)
    u = np.asarray([[0.75]]), np.asarray([[0.0, 0.5, 0.75]])
    row = acc.create(*u)[0]
    # slot -1, counters 0, embed 0 (zero_init defaults to true), embedx (u * 2 - 1) * 0.5
    np.testing.assert_array_equal(row[:6], [-1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(row[acc.embedx_w:acc.embedx_w + 3], [-0.5, 0, 0.25])
    # Adam state: moments 0, powers at the betas, for embed and for embedx
    np.testing.assert_allclose(row[6:10], [0, 0, 0.9, 0.999], rtol=1e-7)
    np.testing.assert_allclose(row[-2:], [0.9, 0.999], rtol=1e-7)
    off = accessor(embed=ADAM, embedx=ADAM, extra="zero_init: false")
    assert off.create(*u)[0, off.embed_w] == F32(0.25)     # (0.75 * 2 - 1) * 0.5


def test_update_counts_slot_delta_score_and_both_rules():
    acc = accessor()
    rows = acc.create(np.asarray([[0.5]]), np.asarray([[0.5, 0.5, 0.5]]))   # weights 0
    rows[0, acc.unseen_days] = 4
    push = np.asarray([[5, 2, 1, 1, 1, 2, 3]], F32)      # slot 5, show 2, click 1, g
    row = acc.update(rows, push)[0]
    # show 2, click 1, slot 5, delta_score += (2 - 1) * 0.1 + 1 * 1 = 1.1, unseen_days 0
    np.testing.assert_allclose(row[:5], [5, 0, 1.1, 2, 1], rtol=1e-6)
    # naive lr 0.1: embed -0.1, embedx -0.1 * [1, 2, 3]
    np.testing.assert_allclose(row[5:9], [-0.1, -0.1, -0.2, -0.3], rtol=1e-6)
    np.testing.assert_allclose(acc.select(row[None]), [[-0.1, -0.1, -0.2, -0.3]], rtol=1e-6)


def test_sparse_accessor_scales_adagrad_by_the_pushed_show():
    acc = accessor(embed=ADAGRAD, embedx=ADAGRAD, embedx_dim=1)
    rows = acc.create(np.asarray([[0.5]]), np.asarray([[0.5]]))
    # show 4: scaled grads 8 / 4 = 2; w = -0.1 * 2 * sqrt(3 / 3); g2sum = 4
    row = acc.update(rows, np.asarray([[0, 4, 0, 8, 8]], F32))[0]
    np.testing.assert_allclose([row[acc.embed_w], row[acc.embed_state]], [-0.2, 4], rtol=1e-6)


def test_ctr_common_accessor_pulls_show_click_and_scales_only_with_show_scale():
    acc = accessor("CtrCommonAccessor", embed=ADAGRAD, embedx=ADAGRAD, embedx_dim=1,
                   extra="show_scale: false")
    assert (acc.select_dim, acc.update_dim) == (4, 5)
    rows = acc.create(np.asarray([[0.5]]), np.asarray([[0.5]]))
    # without show_scale the rules see scale 1: w = -0.1 * 8 = -0.8; g2sum 64
    row = acc.update(rows, np.asarray([[0, 4, 1, 8, 8]], F32))
    np.testing.assert_allclose(acc.select(row), [[4, 1, -0.8, -0.8]], rtol=1e-6)
    # embedding columns 0 and 1 are show and click: a program row's embed is column 2
    embed, embedx = acc.split_embedding(np.asarray([[7, 8, 0.5, 0.25]]))
    assert embed.tolist() == [[0.5]] and embedx.tolist() == [[0.25]]


def test_need_extend_mf_at_the_embedx_threshold():
    acc = accessor()        # embedx_threshold 5, nonclk_coeff 0.1, click_coeff 1
    rows = np.zeros((3, acc.dim), F32)
    # score = (show - click) * 0.1 + click: 10 shows no click = 1.0; 10/4 = 4.6; 10/5 = 5.5
    rows[:, acc.show] = 10
    rows[:, acc.click] = [0, 4, 5]
    assert acc.need_extend_mf(rows).tolist() == [False, False, True]


def test_merge_sums_all_but_the_slot():
    acc = accessor(embedx_dim=1)
    merged = acc.merge(np.asarray([5, 1, 0, 1, 2], F32), np.asarray([7, 1, 1, 3, 4], F32))
    assert merged.tolist() == [5, 2, 1, 4, 6]


def test_shrink_decays_show_click_and_deletes():
    acc = accessor(extra="show_click_decay_rate: 0.5 delete_threshold: 0.8 "
                         "delete_after_unseen_days: 3")
    rows = np.zeros((3, acc.dim), F32)
    rows[:, acc.show] = [4, 2, 4]
    rows[:, acc.click] = [2, 0, 2]
    rows[:, acc.unseen_days] = [0, 0, 4]
    new, delete = acc.shrink(rows)
    # show, click halve: [2, 1, 2], [1, 0, 1]; scores (2-1)*0.1 + 1 = 1.1, 0.1, 1.1;
    # 0.1 < 0.8 goes, and the third row was unseen 4 > 3 days
    np.testing.assert_allclose(new[:, acc.show], [2, 1, 2])
    np.testing.assert_allclose(new[:, acc.click], [1, 0, 1])
    assert delete.tolist() == [False, True, True]


def test_ctr_double_accessor_counts_in_double():
    acc = accessor("CtrDoubleAccessor", embed=ADAGRAD, embedx=ADAGRAD, embedx_dim=2,
                   extra="zero_init: false")
    # unseen, delta, show (2 floats), click (2), embed_w, embed_g2sum, slot, embedx_g2sum, embedx
    assert (acc.dim, acc.short_dim, acc.embedx_w, acc.slot) == (12, 9, 10, 8)
    rows = acc.create(np.asarray([[0.75]]), np.asarray([[0.5, 0.5]]))
    assert rows[0, acc.embed_w] == 0        # its Create always zero-inits the embed part
    rows = acc.update(rows, np.asarray([[3, 1e8, 0, 0, 0, 0]], F32))
    rows = acc.update(rows, np.asarray([[3, 1, 0, 0, 0, 0]], F32))
    show, _ = acc.counts(rows)
    assert show[0] == 100000001.0           # in float32 1e8 + 1 stays 1e8
    assert acc.select(rows)[0, 0] == F32(1e8)
    assert rows[0, acc.slot] == 3


def test_refusals_are_named():
    with pytest.raises(UserError, match="CtrDoubleAccessor has room for 1"):
        accessor("CtrDoubleAccessor", embed=ADAM, embedx=ADAM)
    with pytest.raises(UserError, match="CtrDymfAccessor is not simulated"):
        accessor("CtrDymfAccessor")
    with pytest.raises(UserError, match="server_desc.txt: table 0 accessor.*FooAccessor"):
        accessor("FooAccessor")
    with pytest.raises(TableError, match="takes 7"):
        accessor().update(np.zeros((1, 9), F32), np.zeros((1, 6), F32))
