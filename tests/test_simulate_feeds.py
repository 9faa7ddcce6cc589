"""simulate's feeds: integer inputs take values their uses allow (feeduses.py, feeds.py)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from transpile.format import programio
from transpile.ir.program import Attr, Block, Op, Program, Var
from transpile.simulate.model.feeds import SEQ_LEN, Feeder, id_pool
from transpile.simulate.model.feeduses import Use, feed_uses

HERE = os.path.dirname(__file__)
CORPUS = os.path.join(HERE, "corpus")


def _main(case):
    return programio.load(os.path.join(CORPUS, case, "main.pb"))


def _program(vars_, ops):
    """A one-block program: vars_ = [(name, dtype, shape)], ops = [(type, ins, outs, attrs)]."""
    b = Block(0, -1)
    for name, dtype, shape in vars_:
        b.add_var(Var.tensor(name, dtype, shape))
    b.ops = [Op(t, i, o, {k: Attr.infer(v) for k, v in (a or {}).items()}) for t, i, o, a in ops]
    return Program([b])


def test_ids_concatenated_before_the_lookup_are_bounded_by_the_table():
    """fm: C1..C26 ([-1, 1] each) are concatenated, then looked up in 1000001-row tables; the
    label reaches auc directly and log_loss through a cast."""
    main = _main("paddlerec-classic/fm_sync")
    uses = feed_uses(main)
    for i in range(1, 27):
        assert (uses["C%d" % i].kind, uses["C%d" % i].bound) == ("ids", 1000001)
    assert uses["label"].kind == "label" and uses["label"].bound == 2


def test_ids_are_spread_over_the_table_and_recur_across_steps():
    main = _main("paddlerec-classic/fm_sync")
    f = Feeder(main, 8, 0, np.float64, trainers=2)
    pool = set(id_pool(1000001, f.pool_size, 0).tolist())
    seen = []
    for step in range(3):
        glob = f.feed(step)
        ids = np.concatenate([glob["C%d" % i][0].reshape(-1) for i in range(1, 27)])
        assert ids.dtype == np.int64 and set(ids.tolist()) <= pool
        seen.append(set(ids.tolist()))
    # rows trained in one step are read again in the next; both halves of the table are used
    assert seen[0] & seen[1] and seen[1] & seen[2]
    allids = set().union(*seen)
    assert min(allids) < 500000 < max(allids)


def test_id_pool_takes_one_id_from_each_stratum():
    pool = id_pool(1000, 10, 3)
    assert len(pool) == 10
    assert all(100 * k <= v < 100 * (k + 1) for k, v in enumerate(pool))
    assert (id_pool(1000, 10, 3) == pool).all()
    assert id_pool(6, 10, 0).tolist() == list(range(6))


def test_labels_have_both_classes_in_every_trainers_shard():
    """mmoe's int64 labels reach log_loss and auc only through casts."""
    main = _main("paddlerec-classic/mmoe_sync")
    assert feed_uses(main)["label_income"].kind == "label"
    f = Feeder(main, 8, 0, np.float64, trainers=2)
    for step in range(3):
        glob = f.feed(step)
        for t in range(2):
            lab = f.shard(glob, t, 2)["label_income"][0].reshape(-1)
            assert sorted(set(lab.tolist())) == [0, 1]


def test_class_count_comes_from_the_logits():
    """softmax_with_cross_entropy: Logits' last dim; accuracy: the width top_k ranked."""
    p = _program([("x", "FP32", [-1, 7]), ("lab", "INT64", [-1, 1]), ("sm", "FP32", [-1, 7]),
                  ("loss", "FP32", [-1, 1]), ("x2", "FP32", [-1, 4]), ("v", "FP32", [-1, 1]),
                  ("i", "INT64", [-1, 1]), ("lab2", "INT64", [-1, 1]), ("acc", "FP32", [1]),
                  ("c", "INT32", [1]), ("t", "INT32", [1])],
                 [("softmax_with_cross_entropy", {"Logits": ["x"], "Label": ["lab"]},
                   {"Softmax": ["sm"], "Loss": ["loss"]}, None),
                  ("top_k_v2", {"X": ["x2"]}, {"Out": ["v"], "Indices": ["i"]}, {"k": 1}),
                  ("accuracy", {"Out": ["v"], "Indices": ["i"], "Label": ["lab2"]},
                   {"Accuracy": ["acc"], "Correct": ["c"], "Total": ["t"]}, None)])
    uses = feed_uses(p)
    assert uses["lab"] == Use("label", 7, "softmax_with_cross_entropy")
    assert uses["lab2"] == Use("label", 4, "accuracy")
    f = Feeder(p, 14, 0, np.float64, trainers=2)
    lab = f.feed(0)["lab"][0].reshape(-1)
    assert sorted(set(lab[:7].tolist())) == list(range(7))    # every class in each shard


def test_variable_length_ids_get_a_fixed_length():
    """A [-1, -1] id sequence (din's history) gets SEQ_LEN ids a sample."""
    p = _program([("seq", "INT64", [-1, -1]), ("w", "FP32", [50, 4]), ("e", "FP32", [-1, -1, 4])],
                 [("lookup_table_v2", {"Ids": ["seq"], "W": ["w"]}, {"Out": ["e"]}, None)])
    arr, lod = Feeder(p, 4, 0, np.float64).feed(0)["seq"]
    assert arr.shape == (4, SEQ_LEN) and lod is None
    assert arr.min() >= 0 and arr.max() < 50


def test_an_integer_cast_to_float_is_a_flag():
    """din's additive attention mask: an int64 feed only ever cast to float."""
    p = _program([("mask", "INT64", [-1, -1, 1]), ("m", "FP32", [-1, -1, 1])],
                 [("cast", {"X": ["mask"]}, {"Out": ["m"]}, {"in_dtype": 3, "out_dtype": 5})])
    assert feed_uses(p)["mask"].kind == "flag"
    arr, _ = Feeder(p, 8, 0, np.float64).feed(0)["mask"]
    assert arr.shape == (8, SEQ_LEN, 1) and set(arr.reshape(-1).tolist()) <= {0, 1}


def test_an_unbounded_integer_feed_gets_the_stated_default():
    p = _program([("n", "INT64", [-1, 1]), ("x", "FP32", [-1, 1]), ("y", "FP32", [-1, 1])],
                 [("elementwise_add", {"X": ["x"], "Y": ["n"]}, {"Out": ["y"]}, None)])
    f = Feeder(p, 4, 0, np.float64)
    assert f.notes == ["feed n: an integer input no use bounds (no lookup, label, index, "
                       "length or float cast): 0 or 1"]
    arr, _ = f.feed(0)["n"]
    assert set(arr.reshape(-1).tolist()) <= {0, 1}


def test_lengths_are_bounded_by_what_they_measure():
    """mind's seq_len, tiled and compared with positions 0..19; a sequence_mask's X with a
    maxlen; a range's end with nothing to say: 1 .. DEFAULT_LENGTH."""
    from transpile.simulate.model.feeduses import DEFAULT_LENGTH
    p = _program([("len", "INT64", [-1, 1]), ("t", "INT64", [-1, 4]), ("u", "INT64", [-1, 4, 1]),
                  ("pos", "INT64", [-1, 4, 20]), ("lt", "BOOL", [-1, 4, 20]),
                  ("m", "INT64", [-1]), ("mask", "BOOL", [-1, 7]),
                  ("e", "INT64", [1]), ("r", "INT64", [-1])],
                 [("tile", {"X": ["len"]}, {"Out": ["t"]}, {"repeat_times": [1, 4]}),
                  ("unsqueeze2", {"X": ["t"]}, {"Out": ["u"]}, {"axes": [-1]}),
                  ("less_than", {"X": ["pos"], "Y": ["u"]}, {"Out": ["lt"]}, None),
                  ("sequence_mask", {"X": ["m"]}, {"Y": ["mask"]}, {"maxlen": 7}),
                  ("range", {"Start": ["e"], "End": ["e"], "Step": ["e"]}, {"Out": ["r"]},
                   None)])
    uses = feed_uses(p)
    assert (uses["len"].kind, uses["len"].bound) == ("length", 20)
    assert (uses["m"].kind, uses["m"].bound) == ("length", 7)
    assert (uses["e"].kind, uses["e"].bound) == ("length", DEFAULT_LENGTH)
    glob = Feeder(p, 8, 0, np.float64).feed(0)
    assert 1 <= glob["len"][0].min() and glob["len"][0].max() <= 20
    assert 1 <= glob["m"][0].min() and glob["m"][0].max() <= 7


@pytest.mark.parametrize("case", ["paddlerec-classic/%s" % m for m in
                                  ("autoint_sync", "dssm_sync", "esmm_sync", "fm_sync",
                                   "mmoe_sync", "ncf_sync", "xdeepfm_sync")])
def test_every_real_models_feeds_are_bounded(case):
    main = _main(case)
    f = Feeder(main, 8, 0, np.float64, trainers=2)
    uses = feed_uses(main)
    for name, (arr, _) in f.feed(0).items():
        u = uses.get(name)
        if u is not None and arr.dtype.kind in "iu":
            assert 0 <= arr.min() and arr.max() < u.bound, name


def test_columns_of_one_float_feed_take_their_own_uses():
    """dmr packs its features in one float feed: a cast to int64, then column slices: 0:2 ids
    of a 500-row table, 2:4 a mask compared with ones_like (0 / 1), 4:5 a float left as is."""
    from transpile.simulate.model.feeduses import column_uses
    p = _program([("f", "FP32", [-1, 5]), ("i", "INT64", [-1, 5]), ("a", "INT64", [-1, 2]),
                  ("w", "FP32", [500, 4]), ("e", "FP32", [-1, 2, 4]), ("m", "INT64", [-1, 2]),
                  ("one", "INT64", [-1, 2]), ("eq", "BOOL", [-1, 2]), ("x", "FP32", [-1, 1]),
                  ("y", "FP32", [-1, 1])],
                 [("cast", {"X": ["f"]}, {"Out": ["i"]}, {"in_dtype": 5, "out_dtype": 3}),
                  ("slice", {"Input": ["i"]}, {"Out": ["a"]},
                   {"axes": [1], "starts": [0], "ends": [2]}),
                  ("lookup_table_v2", {"Ids": ["a"], "W": ["w"]}, {"Out": ["e"]}, None),
                  ("slice", {"Input": ["i"]}, {"Out": ["m"]},
                   {"axes": [1], "starts": [2], "ends": [4]}),
                  ("fill_any_like", {"X": ["m"]}, {"Out": ["one"]}, {"value": 1.0, "dtype": 3}),
                  ("equal", {"X": ["m"], "Y": ["one"]}, {"Out": ["eq"]}, None),
                  ("slice", {"Input": ["f"]}, {"Out": ["x"]},
                   {"axes": [1], "starts": [4], "ends": [5]}),
                  ("scale", {"X": ["x"]}, {"Out": ["y"]}, {"scale": 2.0})])
    cols = column_uses(p)
    assert sorted((a, lo, hi, u.kind, u.bound) for a, lo, hi, u in cols["f"]) == \
        [(1, 0, 2, "ids", 500), (1, 2, 4, "flag", 2)]
    arr, _ = Feeder(p, 8, 0, np.float64).feed(0)["f"]
    ids, mask, rest = arr[:, 0:2], arr[:, 2:4], arr[:, 4]
    assert (ids == np.round(ids)).all() and ids.min() >= 0 and ids.max() < 500 and ids.max() > 1
    assert set(mask.reshape(-1).tolist()) == {0.0, 1.0}
    assert (np.abs(rest) < 1).all() and (rest != np.round(rest)).any()


def test_the_batch_a_program_fixes_in_its_ops():
    """match_pyramid's pairwise loss: predictions sliced at rows [0, 64) and [64, 128), 1 -
    pos + neg with a fill_constant of [64, 1]: a trainer's batch is 128."""
    from transpile.simulate.model.batchsize import candidates
    p = _program([("x", "FP32", [-1, 1]), ("s", "FP32", [-1, 1]),
                  ("pos", "FP32", [64, 1]), ("neg", "FP32", [64, 1]), ("one", "FP32", [64, 1]),
                  ("d", "FP32", [64, 1])],
                 [("scale", {"X": ["x"]}, {"Out": ["s"]}, {"scale": 2.0}),
                  ("slice", {"Input": ["s"]}, {"Out": ["pos"]},
                   {"axes": [0, 1], "starts": [0, 0], "ends": [64, 1]}),
                  ("slice", {"Input": ["s"]}, {"Out": ["neg"]},
                   {"axes": [0, 1], "starts": [64, 0], "ends": [128, 1]}),
                  ("fill_constant", {}, {"Out": ["one"]}, {"shape": [64, 1], "value": 1.0}),
                  ("elementwise_sub", {"X": ["one"], "Y": ["pos"]}, {"Out": ["d"]}, None)])
    assert candidates(p) == [128, 64]
    feed = _program([("x", "FP32", [1, 50, 50]), ("y", "FP32", [1, 50, 50])],
                    [("scale", {"X": ["x"]}, {"Out": ["y"]}, {"scale": 2.0})])
    assert candidates(feed) == [1]
