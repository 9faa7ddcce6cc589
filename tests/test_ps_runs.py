"""Positions as runs (tables/runs.py, issue 47: bst's dense table named its 15M values not
kept by rows by int64 positions, 0.12 GB in the tables and again in each push's slice and
each joined pull): every answer is the one an int64 array of the positions gives, and a
table kept by rows, its pushes and its pulls hold no array of positions."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from transpile.simulate.ps import denseflat
from transpile.simulate.ps.tables.denserows import FlatRows
from transpile.simulate.ps.tables.runs import Runs
from tests.test_pstables_dense import table

F32 = np.float32


def _positions(rng, size=400):
    """Sorted unique positions of spans and [*, 3] rows, as a ps push lays them out."""
    out, at = [], 0
    while at < size:
        n = int(rng.integers(1, 40))
        kind = rng.integers(0, 3)
        if kind == 0:
            out.append(np.arange(at, min(at + n, size)))
        elif kind == 1:
            rows = np.flatnonzero(rng.random(n // 3 + 1) < 0.4)
            p = (at + rows[:, None] * 3 + np.arange(3)).reshape(-1)
            out.append(p[p < min(at + n, size)])
        at += n
    return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)


@pytest.mark.parametrize("seed", range(12))
def test_runs_answer_as_the_positions_array(seed):
    rng = np.random.default_rng(seed)
    p, o = _positions(rng), _positions(rng)
    r, ro = Runs.of(p), Runs.of(o)
    np.testing.assert_array_equal(r.array(), p)
    assert len(r) == len(p)
    if len(p) > 1:      # runs apart: no two touch
        assert np.all(r.starts[1:] > r.ends[:-1])
    q = np.arange(-3, 410)
    np.testing.assert_array_equal(r.rank(q), np.searchsorted(p, q))
    at, hit = r.lookup(q)
    np.testing.assert_array_equal(at, np.searchsorted(p, q))
    np.testing.assert_array_equal(hit, np.isin(q, p))
    assert r.rank(17) == np.searchsorted(p, 17)
    lo, hi = sorted(rng.integers(0, 410, 2).tolist())
    np.testing.assert_array_equal(r.clip(lo, hi).array(), p[(p >= lo) & (p < hi)])
    np.testing.assert_array_equal(r.shift(5).array(), p + 5)
    np.testing.assert_array_equal(r.union(ro).array(), np.union1d(p, o))
    np.testing.assert_array_equal(r.minus(ro).array(), np.setdiff1d(p, o))
    np.testing.assert_array_equal(r.row_ids(7), np.unique(p // 7))
    arr = rng.normal(size=410).astype(F32)
    np.testing.assert_array_equal(r.gather(arr), arr[p])
    out, want = np.zeros(410, F32), np.zeros(410, F32)
    r.scatter(out, np.arange(len(p), dtype=F32))
    want[p] = np.arange(len(p))
    np.testing.assert_array_equal(out, want)
    rows = np.unique(rng.integers(0, 50, 10))
    np.testing.assert_array_equal(Runs.rows(4, rows, 3).array(),
                                  (4 + rows[:, None] * 3 + np.arange(3)).reshape(-1))
    cut = min(410, int(p[-1]) + 1 if len(p) else 0)
    both = Runs.concat([r, Runs.span(cut, cut + 9)])
    np.testing.assert_array_equal(both.array(), np.concatenate([p, np.arange(cut, cut + 9)]))


def test_runs_refuse_positions_out_of_order():
    with pytest.raises(ValueError):
        Runs.of([3, 2])
    with pytest.raises(ValueError):
        Runs.concat([Runs.span(5, 9), Runs.span(0, 6)])


def _held(fn):
    """(fn(), the bytes numpy and Python hold after it that they did not before)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = fn()
        return out, tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()


def test_a_table_kept_by_rows_and_its_pull_hold_no_positions():
    """A `sum` table kept by rows, started and pushed at 2M positions (a param not kept by
    rows) and 30 rows of a kept one: it holds Param's float32 values and no int64 positions
    (and no reservoir: it is not sync); a pull joined over two slices copies the values
    alone. The values are the whole table's."""
    n, h, w = 2 << 20, 1000, 4
    size = n + h * w
    t = table("sum", [("Param", size, "fill_constant&0.0")])
    rng = np.random.default_rng(3)
    dense_start, emb = rng.normal(size=n), rng.normal(size=(h, w))
    start, _ = denseflat.start_values([("a", dense_start), ("emb", emb)], frozenset({"emb"}))
    g_emb = np.zeros((h, w))
    g_emb[rng.choice(h, 30, replace=False)] = rng.normal(size=(30, w))
    grads = [("a", rng.normal(size=n)), ("emb", g_emb)]
    push = denseflat.grad_values(grads, frozenset({"emb"}), {"emb": (h, w)})

    def started():
        t.push_param(start)
        t.push(push)
    _, held = _held(started)
    assert t.rows is not None
    assert held < 4.5 * n, "%.1f bytes a value" % (held / n)
    halves = list(denseflat.split(t.pull(), 2))
    got, held = _held(lambda: denseflat.joined(halves))
    assert held < 4.5 * n, "%.1f bytes a value" % (held / n)
    want = np.concatenate([dense_start, emb.reshape(-1)]).astype(F32) + np.concatenate(
        [g.reshape(-1) for _, g in grads]).astype(F32)
    assert isinstance(got, FlatRows)
    np.testing.assert_array_equal(got.take(0, size).view(np.uint32), want.view(np.uint32))
