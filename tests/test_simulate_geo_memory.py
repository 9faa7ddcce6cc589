"""simulate's memory in style ps geo (issue 47: PaddleRec's bst and match_pyramid held 2.5 and
2.1 GB): the ps geo reference drops a step's temporaries, a dense table's zero start and a
random init's float64 draw are not copied, a kept table's start is read from the initial
values, and a push of millions of positions into a table kept by rows needs no temporaries of
its size. The values are the ones before, bit for bit."""
from __future__ import annotations

import tracemalloc

import numpy as np

from test_simulate_ps import case, ours, run
from transpile.simulate.model.executor import Executor
from transpile.simulate.ps import denseflat, georun
from transpile.simulate.ps.tables.dense import init_values
from transpile.simulate.ps.tables.denserows import FlatRows
from tests.test_pstables_dense import table

F32 = np.float32


def _peak(fn):
    """(fn(), the most bytes numpy and Python allocated at once while it ran)."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_ps_geo_reference_drops_a_steps_temporaries(monkeypatch):
    """After its last step, a ps geo reference trainer holds persistables and the sparse
    grads the communicator records, no activation (each step's were kept to its end)."""
    held = []
    release = georun.PsGeoReference.release

    def spy(self):
        held.append({n for tr in self.trainers for n in tr.scope.vars})
        release(self)
    monkeypatch.setattr(georun.PsGeoReference, "release", spy)
    res = run("ps/ctr_adam_geo", *ours("ps/ctr_adam_geo"))
    assert res.error is None and res.exit_code == 0
    block = case("ps/ctr_adam_geo")[0].global_block
    temps = sorted(n for n in held[0] if n in block.vars and not block.vars[n].is_persistable
                   and not n.endswith("@GRAD"))
    assert held[0] and temps == [], temps


ZERO_START = """
import numpy as np
from transpile.simulate.ps.tables.dense import init_values
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
before = rss()
z = init_values("fill_constant&0.0", 16 << 20, 0, "t")
print(rss() - before, z.dtype, z.shape[0], bool(z[:: 1 << 16].any()))
"""


def test_a_dense_tables_zero_start_is_mapped_only_as_it_is_written():
    """In a process of its own (a long one's malloc may hand back a heap block that calloc
    writes): a 64 MB zero start adds almost nothing to the resident set (np.full wrote every
    page)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", ZERO_START], capture_output=True, text=True,
                         check=True).stdout.split()
    assert int(out[0]) < 16 << 20 and out[1:] == ["float32", str(16 << 20), "False"], out
    neg = init_values("fill_constant&-0.0", 4, 0, "t")
    assert np.signbit(neg).all() and np.array_equal(init_values("fill_constant&1.5", 3, 0, "t"),
                                                    np.full(3, 1.5, F32))


def test_a_kept_tables_start_is_read_from_the_initial_values():
    """A read-only float64 start (a snapshot the initial values hold) is read row by row, no
    float32 copy of it; the rows are the copy's; a value float32 rounds to -0.0 is one."""
    rng = np.random.default_rng(0)
    start = rng.normal(size=(1 << 16, 32))
    start[5, 3] = -1e-50
    start.flags.writeable = False
    (base, signed), peak = _peak(lambda: denseflat._table_base(start))
    assert peak < start.size       # a float32 copy: 4 bytes a value
    rows = np.array([0, 5, 65535])
    assert np.array_equal(base(rows).view(np.uint32), start.astype(F32)[rows].view(np.uint32))
    assert signed
    mine = start.copy()             # writeable: the trainer's own array, copied in float32
    mine[5, 3] = 1.0
    base, signed = denseflat._table_base(mine)
    assert not signed and np.array_equal(base(rows), mine.astype(F32)[rows])


def test_a_float64_random_init_is_drawn_once():
    from kernelkit import build
    prog, _, out = build("gaussian_random", {}, {"Out": 1},
                         {"shape": [2000, 1000], "mean": 0.0, "std": 1.0, "seed": 3})
    ex = Executor("t", prog)
    _, peak = _peak(lambda: ex.run_block(0))
    w = ex.scope.get(out["Out"][0])
    assert w.dtype == np.float64 and w.shape == (2000, 1000)
    assert peak < 1.5 * w.nbytes       # the draw, not the draw and its copy


def test_a_push_of_millions_of_positions_into_a_kept_table_needs_little_more():
    """A `sum` table kept by rows, started and pushed at every one of 4M positions (bst's
    dense params that are not kept by rows go so): the push allocates its gradient over the
    kept values and chunks, not searchsorted indexes and masks of its size; the values are
    the whole table's."""
    n = 4 << 20
    t = table("sum", [("Param", n, "fill_constant&0.0")])
    rng = np.random.default_rng(1)
    start, g = rng.normal(size=n).astype(F32), rng.normal(size=n).astype(F32)
    t.push_param(FlatRows(n, np.arange(n), start, None, False))
    assert t.rows is not None
    push = FlatRows(n, np.arange(n), g)
    _, peak = _peak(lambda: t.push(push))
    assert peak < 8 * n, "%.1f bytes a value" % (peak / n)
    assert np.array_equal(t.pull().take(0, n).view(np.uint32), (start + g).view(np.uint32))


def test_a_geo_push_with_a_kept_param_is_built_a_pservers_slice_at_a_time(monkeypatch):
    """A geo trainer's push of a table with a kept param: each pserver gets a slice built for
    it (positions and float32 deltas of its values alone), not a cut of one push of all of
    them (bst: 15M values not kept by rows, 180 MB of positions and deltas at each push); what
    the tables end with is the same."""
    from transpile.simulate.model.executor import Scope
    from transpile.simulate.model.values import LazyTable
    from transpile.simulate.ps.geo import GeoClient
    from transpile.simulate.ps.tables import dense
    from tests.test_ps_dense_rows import _Server
    n, h = 2 << 20, 64          # 2M values not kept by rows, then a [64, 4] kept table
    per = (n + h * 4) // 2 + 1
    monkeypatch.setattr(denseflat, "default_lazy_policy", lambda name, shape: name == "emb")
    servers = [_Server(table("sum", [("Param", per, "fill_constant&0.0")]), i) for i in (0, 1)]
    rng = np.random.default_rng(2)
    start = {"a": rng.normal(size=n), "emb": rng.normal(size=(h, 4))}
    clients = []
    for t in range(2):
        scope = Scope()
        for name, v in start.items():
            scope.put(name, np.array(v))
        c = GeoClient("trainer_%d" % t, t, 2, servers, {}, {1: ["a", "emb"]}, scope, np.float64)
        c.keep_rows = True
        clients.append(c)
    for c in clients:
        c.init_params(clients[0])
    c0 = clients[0]
    assert isinstance(c0.scope.get("emb"), LazyTable)
    c0.scope.put("a", c0.scope.get("a") + 1e-3)
    held, push = [], dense.MemoryDenseTable.push

    def spy(self, grad):
        held.append(tracemalloc.get_traced_memory()[0])
        return push(self, grad)
    monkeypatch.setattr(dense.MemoryDenseTable, "push", spy)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        c0.push_pull()
    finally:
        tracemalloc.stop()
    assert max(held) - base < 8 * n, "%.1f bytes a value" % ((max(held) - base) / n)
    got = np.concatenate([s.t.pull().take(0, per) for s in servers])[:n]
    want = (start["a"].astype(F32) + ((start["a"] + 1e-3) - start["a"].astype(F32)) * 0.5
            ).astype(F32)
    assert got.dtype == F32 and np.abs(got - want).max() < 1e-6


def test_the_nonzero_rows_of_a_dense_gradient_are_found_a_block_at_a_time():
    """rowwise's test of a dense gradient over a lazy table (bst: [192403, 288] in float64)
    reads it a block of rows at a time, with no mask of its size; the rows are the ones the
    whole mask gives."""
    from transpile.simulate.model.kernels import rowwise
    rng = np.random.default_rng(4)
    for shape in ((20000, 300), (7, 3), (3000,), (1, 1 << 21)):
        g = np.zeros(shape)
        hit = rng.choice(shape[0], min(shape[0], 40), replace=False)
        g[hit] = rng.normal(size=(len(hit),) + shape[1:])
        g[hit[:3]] = 0.0
        want = np.nonzero(np.any(g.reshape(shape[0], -1) != 0, axis=1))[0]
        got, peak = _peak(lambda: rowwise.nonzero_rows(g, shape[0]))
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
        if g.size > 4 * rowwise.NONZERO_AT_ONCE:
            assert peak < g.size / 4, "%d bytes for %d values" % (peak, g.size)  # a mask: 1 a value
