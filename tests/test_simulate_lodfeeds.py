"""simulate's LoD feeds (feeds.py): an input declared with lod_level > 0 whose rows reach a
sequence op gets sequences of drawn lengths (every level it declares), deterministic by seed,
fixed by --lod; a trainer's shard holds whole sequences."""
from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

from transpile.ir.program import Attr, Block, Op, Program, Var
from transpile.simulate.model.feeds import Feeder, parse_lod


def _program(vars_, ops):
    """vars_ = [(name, dtype, shape, lod_level)], ops = [(type, ins, outs, attrs)]."""
    b = Block(0, -1)
    for name, dtype, shape, lod in vars_:
        b.add_var(Var.tensor(name, dtype, shape, lod_level=lod))
    b.ops = [Op(t, i, o, {k: Attr.infer(v) for k, v in (a or {}).items()}) for t, i, o, a in ops]
    return Program([b])


def _graph():
    """nodes (no LoD), nbr1 (lod_level 1), nbr2 (lod_level 2) looked up in one table; nbr1's
    rows go through an fc and a relu before their sequence_pool, nbr2's are pooled at once."""
    vars_ = [("nodes", "INT64", [-1, 1], 0), ("nbr1", "INT64", [-1, 1], 1),
             ("nbr2", "INT64", [-1, 1], 2), ("W", "FP32", [50, 4], 0), ("fw", "FP32", [4, 4], 0)]
    vars_ += [(n, "FP32", [-1, 4], 0) for n in ("e0", "e1", "e2", "h1", "r1", "p1", "p2")]
    ops = [("lookup_table_v2", {"Ids": ["nodes"], "W": ["W"]}, {"Out": ["e0"]}, None),
           ("lookup_table_v2", {"Ids": ["nbr1"], "W": ["W"]}, {"Out": ["e1"]}, None),
           ("lookup_table_v2", {"Ids": ["nbr2"], "W": ["W"]}, {"Out": ["e2"]}, None),
           ("mul", {"X": ["e1"], "Y": ["fw"]}, {"Out": ["h1"]}, None),
           ("relu", {"X": ["h1"]}, {"Out": ["r1"]}, None),
           ("sequence_pool", {"X": ["r1"]}, {"Out": ["p1"]}, {"pooltype": "SUM"}),
           ("sequence_pool", {"X": ["e2"]}, {"Out": ["p2"]}, {"pooltype": "SUM"})]
    return _program(vars_, ops)


def _lengths(offsets):
    return np.diff(np.asarray(offsets)).tolist()


def test_a_feed_whose_rows_reach_a_sequence_op_through_an_fc_gets_sequences():
    """nbr1 reaches its sequence_pool through a mul and a relu (rows kept): sequences of 1 to 3
    rows per sample (before: one row per sample, a pool of nothing to pool)."""
    f = Feeder(_graph(), 8, 0, np.float32)
    feed = f.feed(0)
    arr, lod = feed["nbr1"]
    assert len(lod) == 1 and len(lod[0]) == 9 and lod[0][0] == 0
    lens = _lengths(lod[0])
    assert set(lens) <= {1, 2, 3} and len(set(lens)) > 1
    assert arr.shape == (lod[0][-1], 1)
    assert feed["nodes"][1] is None and feed["nodes"][0].shape == (8, 1)
    assert any("nbr1 (lod_level 1)" in n and "1 to 3 rows" in n for n in f.notes)


def test_a_two_level_feed_shares_its_first_level_with_the_one_level_feed():
    """nbr2 (lod_level 2): each sample's neighbours (the same lengths as nbr1's), each
    neighbour's neighbours; the levels are consistent (Paddle's LoD check)."""
    feed = Feeder(_graph(), 8, 0, np.float32).feed(0)
    (a1, l1), (a2, l2) = feed["nbr1"], feed["nbr2"]
    assert len(l2) == 2
    assert l2[0] == l1[0]
    assert l2[0][-1] == len(l2[1]) - 1
    assert a2.shape[0] == l2[1][-1]
    assert set(_lengths(l2[1])) <= {1, 2, 3}


def test_lod_feeds_are_deterministic_by_seed():
    a = Feeder(_graph(), 8, 0, np.float32).feed(2)
    b = Feeder(_graph(), 8, 0, np.float32).feed(2)
    c = Feeder(_graph(), 8, 1, np.float32).feed(2)
    for n in a:
        assert a[n][1] == b[n][1] and np.array_equal(a[n][0], b[n][0])
    assert any(a[n][1] != c[n][1] for n in ("nbr1", "nbr2"))


@pytest.mark.parametrize("lod", [(2, 2), (0, 4)])
def test_lod_fixes_the_lengths(lod):
    feed = Feeder(_graph(), 16, 0, np.float32, lod=lod).feed(0)
    for n in ("nbr1", "nbr2"):
        for level in feed[n][1]:
            assert set(_lengths(level)) <= set(range(lod[0], lod[1] + 1))
    if lod == (2, 2):
        assert feed["nbr2"][0].shape == (16 * 4, 1)


def test_a_shard_holds_whole_sequences_at_every_level():
    f = Feeder(_graph(), 8, 3, np.float32, trainers=2)
    glob = f.feed(0)
    shards = [f.shard(glob, t, 2) for t in range(2)]
    for n in ("nbr1", "nbr2"):
        arr, lod = glob[n]
        for s in shards:
            a, l = s[n]
            assert len(l) == len(lod) and len(l[0]) == 5 and all(lv[0] == 0 for lv in l)
            assert a.shape[0] == l[-1][-1]
            if len(l) == 2:
                assert l[0][-1] == len(l[1]) - 1
        # the shards, one after the other, are the global batch, sequences unchanged
        assert np.array_equal(np.concatenate([s[n][0] for s in shards]), arr)
        for k in range(len(lod)):
            assert sum((_lengths(s[n][1][k]) for s in shards), []) == _lengths(lod[k])


@pytest.mark.parametrize("text,want", [("2", (2, 2)), ("1-3", (1, 3)), ("0-2", (0, 2))])
def test_parse_lod(text, want):
    assert parse_lod(text) == want


@pytest.mark.parametrize("text", ["0", "0-0", "3-1", "a", "1-2-3", "-1", ""])
def test_parse_lod_refuses(text):
    with pytest.raises(ValueError):
        parse_lod(text)


def test_cli_refuses_a_bad_lod():
    import click

    from transpile.commands.common import handle_errors
    from transpile.commands.simulate import register

    @click.group()
    def g():
        pass
    register(g, handle_errors)
    d = os.path.join(os.path.dirname(__file__), "corpus", "fleet", "mlp_sgd_sync")
    r = CliRunner().invoke(g, ["simulate", os.path.join(d, "main.pb"), os.path.join(d, "expected"),
                               "--cluster", os.path.join(d, "cluster.yaml"), "--lod", "3-1"])
    assert r.exit_code == 2
    assert "--lod: '3-1' is not a length" in r.output

