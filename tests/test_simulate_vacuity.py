"""simulate never claims what it did not test: a trainable parameter the original run did not
move is reported (its equality proves nothing), and the feeds make every parameter move."""
from __future__ import annotations

import json
import os

import numpy as np
from click.testing import CliRunner

from transpile.simulate import simulate
from transpile.simulate.compare import moved

from test_simulate import CORPUS, _group, load_case


def run(case, progs=None, **kw):
    main, startup, cfg, p, rts = load_case(case)
    kw.setdefault("batch", 8)
    return simulate(main, startup, cfg, p if progs is None else progs, rts, seed=0, **kw)


def _drop_update_of(progs, param):
    for key, prog in progs.items():
        if key.startswith("pserver_") and key.endswith("/main"):
            for b in prog.blocks[1:]:
                b.ops = [op for op in b.ops if op.input("Param") != [param]]
    return progs


def test_fake_init_tables_all_train_so_a_dropped_update_is_caught():
    """classic/fake_init: emb's gradient is emb_w's rows, which start at 0; it moves only once
    a step reads rows of emb_w an earlier step trained. Ids drawn afresh from 10000 rows never
    did: emb never moved, and a pserver that dropped emb.block0's sgd went unnoticed."""
    res = run("classic/fake_init")
    assert res.exit_code == 0 and res.unchanged == []
    assert all(p.changed for p in res.params)
    _, _, _, progs, _ = load_case("classic/fake_init")
    broken = run("classic/fake_init", _drop_update_of(progs, "emb.block0"))
    assert broken.exit_code == 1
    assert "emb" in {p.name for p in broken.params if not p.ok}


def test_a_parameter_that_did_not_move_is_reported():
    """After one step emb has not moved yet (see above): equal, and said to prove nothing."""
    res = run("classic/fake_init", steps=1)
    assert res.exit_code == 0 and res.unchanged == ["emb"]
    emb = next(p for p in res.params if p.name == "emb")
    assert emb.ok and emb.trainable and emb.changed is False


def test_the_report_says_so_in_text_and_json():
    d = os.path.join(CORPUS, "classic/fake_init")
    args = ["simulate", os.path.join(d, "main.pb"), os.path.join(d, "expected"), "--startup",
            os.path.join(d, "startup.pb"), "--cluster", os.path.join(d, "cluster.yaml"),
            "--steps", "1"]
    r = CliRunner().invoke(_group(), args)
    assert r.exit_code == 0, r.output
    assert "emb " in r.output and "unchanged in the original run: proves nothing" in r.output
    assert "vacuous: 1 of 3 trainable parameters did not change in the original run" in r.output
    r = CliRunner().invoke(_group(), args + ["--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    assert out["unchanged_in_original"] == ["emb"] and out["exit_code"] == 0
    emb = next(p for p in out["params"] if p["name"] == "emb")
    assert emb["changed_in_original"] is False and emb["trainable"] is True
    r = CliRunner().invoke(_group(), args[:-2] + ["--format", "json"])
    assert json.loads(r.output[r.output.index("{"):])["unchanged_in_original"] == []


def test_moved_means_beyond_the_tolerance():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert not moved(a, a.copy(), 1e-9)
    assert not moved(a, a + 1e-12, 1e-9)            # below what the comparison can tell
    assert moved(a, a + 1e-6, 1e-9)
    z = np.zeros(3)
    assert not moved(z, z + 1e-17, 1e-9)             # rounding noise around 0
    assert moved(z, z + 1e-9, 1e-9)
