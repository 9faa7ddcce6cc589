"""simulate never claims what it did not test: a trainable parameter the original run did not
move is reported (its equality proves nothing), and the feeds make every parameter move."""
from __future__ import annotations

import json
import os

import numpy as np
from click.testing import CliRunner

from transpile.simulate import simulate
from transpile.simulate.explain.compare import NOISE, movement, noise

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


def test_the_run_goes_on_until_every_parameter_moved():
    """After one step emb has not moved yet (see above): the original run takes another step,
    and the split runs as many."""
    res = run("classic/fake_init", steps=1)
    assert res.steps == 2 and res.exit_code == 0 and res.unchanged == []
    assert any("went on to 2 steps (--steps 1)" in n for n in res.notes)
    emb = next(p for p in res.params if p.name == "emb")
    assert emb.ok and emb.trainable and emb.changed is True


CONVNET = os.path.join(os.path.dirname(CORPUS), "fixtures", "convnet_sync")


def _convnet_args(*extra):
    d = CONVNET
    return ["simulate", os.path.join(d, "main.pb"), os.path.join(d, "expected"), "--startup",
            os.path.join(d, "startup.pb"), "--cluster", os.path.join(d, "cluster.yaml"),
            "--steps", "2"] + list(extra)


def test_the_report_says_so_in_text_and_json():
    """The conv bias batch_norm centres never moves (its gradient is rounding noise): reported
    as proving nothing, exit 0; with --expect-equal exit 1 naming it, unless accepted."""
    r = CliRunner().invoke(_group(), _convnet_args())
    assert r.exit_code == 0, r.output
    assert "conv2d_0.b_0 " in r.output and "unchanged in the original run: proves nothing" \
        in r.output
    assert "vacuous: 1 of 8 trainable parameters did not change in the original run" \
        in r.output
    r = CliRunner().invoke(_group(), _convnet_args("--expect-equal"))
    assert r.exit_code == 1, r.output
    assert "fails --expect-equal: conv2d_0.b_0 did not move" in r.output
    r = CliRunner().invoke(_group(), _convnet_args("--expect-equal", "--accept-unchanged",
                                                   "conv2d_*.b_0", "--format", "json"))
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    assert out["unchanged_in_original"] == ["conv2d_0.b_0"] and out["exit_code"] == 0
    assert out["accepted_unchanged"] == ["conv2d_0.b_0"]
    b = next(p for p in out["params"] if p["name"] == "conv2d_0.b_0")
    assert b["changed_in_original"] is False and b["trainable"] is True
    r = CliRunner().invoke(_group(), _convnet_args("--steps", "3", "--format", "json"))
    assert json.loads(r.output[r.output.index("{"):])["unchanged_in_original"] == \
        ["conv2d_0.b_0"]


def test_movement_and_what_counts_as_moved():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert movement(a, a.copy()) == 0.0
    assert np.isclose(movement(a, a + 1e-6), 1e-6)
    assert movement(a, np.zeros((3, 2))) is None          # another shape: cannot tell
    assert movement(None, a) is None
    assert noise(4.0) == NOISE * 4.0 and noise(1e-6) == NOISE      # at least NOISE
    assert noise(1.0, float32=True) > noise(1.0)


def test_differences_are_measured_against_the_movement():
    """A split that never updates a parameter differs by all of the movement (relative 1,
    caught however little it moved); rounding noise far below it is equal."""
    from transpile.ir.program import Var
    from transpile.simulate.explain import compare as cmp

    init = np.array([1.0, 2.0, 3.0, 4.0])
    final = init + 1e-7                           # moved a little: 2.5e-8 of the scale
    var = Var.tensor("w", "FP64", (4,))
    never = cmp.compare_pairs(var, [("trainer_0", final, init.copy())], 1e-6,
                         movement(init, final))
    assert not never.ok and np.isclose(never.max_rel, 1.0)
    noisy = cmp.compare_pairs(var, [("trainer_0", final, final * (1 + 1e-15))], 1e-6,
                         movement(init, final))
    assert noisy.ok


def test_a_block_that_did_not_move_is_vacuous():
    """A parameter cut into pserver blocks moved, but not in rows 4:8 (one block): named, and
    --expect-equal fails unless the parameter is accepted."""
    from transpile.simulate import SimResult
    from transpile.simulate.explain.compare import ParamDiff
    init = np.zeros((8, 2))
    final = init.copy()
    final[1] = 0.5
    assert movement(init, final, (0, 4)) == 0.5 and movement(init, final, (4, 8)) == 0.0
    res = SimResult("sync", 3, 8, 1e-6, expect_equal=True)
    res.params = [ParamDiff("w", (8, 2), 0.0, 0.0, True, changed=True,
                            still_blocks=("rows 4:8",))]
    assert res.unchanged == [] and res.partly_unchanged == ["w (rows 4:8)"]
    assert res.vacuous == ["w (rows 4:8)"] and res.exit_code == 1
    res.accepted = ("w",)
    assert res.vacuous == [] and res.exit_code == 0
