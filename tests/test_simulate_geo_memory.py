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




F32 = np.float32


def _peak(fn):
    """(fn(), the most bytes numpy and Python allocated at once while it ran)."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


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
