"""A style owns its behaviour everywhere (issue 43): a style registered here only, in this test
(its traits, its Style, and its behaviour in each slot of core/stylehooks.py), is split,
checked, simulated and rendered without an edit to check/, simulate/, render/ or output/.

The toy style is style ps under another name, with a behaviour of its own on each floor (an
extra check, an extra simulate note, an extra line in report.md's head): each floor shows it
asks the style's hook, not a trait that stands for ps.
"""
from __future__ import annotations

import dataclasses
import os

import pytest
from click.testing import CliRunner

import transpile.check as check_mod
import transpile.commands.plan  # noqa: F401  (registers PLAN)
import transpile.render.report  # noqa: F401  (registers REPORT)
import transpile.render.styled  # noqa: F401  (registers SUMMARY)
import transpile.simulate as simulate_mod
from cli import main as cli_main
from transpile.core import config as config_mod
from transpile.core import styles as core_styles
from transpile.core.config import load_config
from transpile.core.stylehooks import CHECK, PLAN, REPORT, SIMULATE, SLOTS, SUMMARY
from transpile.format import programio
from transpile.split import split, split_to_folder
from transpile.styles import registry
from transpile.styles.ps import PsStyle

HERE = os.path.dirname(os.path.abspath(__file__))
CASE = os.path.join(HERE, "corpus", "ps", "two_tables_sgd_sync")
TOY = dataclasses.replace(core_styles.PS, name="toy")
TOY_CHECK = "the toy style's own check ran"
TOY_NOTE = "the toy style's own run of the split"
TOY_HEAD = "A toy style's report."


class ToyStyle(PsStyle):
    traits = TOY


def _toy_check(ctx) -> None:
    ctx.warnings.append(TOY_CHECK)


def _toy_simulate(run):
    res = SIMULATE.of(core_styles.PS.name)(run)
    res.notes.append(TOY_NOTE)
    return res


def _toy_head(plan: dict) -> list:
    return [TOY_HEAD, ""] + REPORT.of(core_styles.PS.name).head(plan)


@pytest.fixture
def toy(monkeypatch):
    """Register the toy style in every registry, for this test only."""
    ps = core_styles.PS.name
    monkeypatch.setitem(core_styles.STYLES, TOY.name, TOY)
    registry.register(ToyStyle())
    ps_check = CHECK.of(ps)
    CHECK.register(TOY.name, check_mod.CheckWay(lambda: ps_check.order() + (_toy_check,),
                                                ps_check.streamed))
    SIMULATE.register(TOY.name, _toy_simulate)
    REPORT.register(TOY.name, dataclasses.replace(REPORT.of(ps), head=_toy_head))
    SUMMARY.register(TOY.name, SUMMARY.of(ps))
    PLAN.register(TOY.name, PLAN.of(ps))
    yield TOY.name
    for slot in SLOTS:
        slot.unregister(TOY.name)
    registry.unregister(TOY.name)


def _case(style=None):
    main = programio.load(os.path.join(CASE, "main.pb"))
    startup = programio.load(os.path.join(CASE, "startup.pb"))
    cfg = load_config(os.path.join(CASE, "cluster.yaml"))
    if style:
        cfg = dataclasses.replace(cfg, style=style)
    return main, startup, cfg


def _files(root: str) -> dict:
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                out[os.path.relpath(os.path.join(d, f), root)] = fh.read()
    return out


def test_every_style_has_a_behaviour_in_every_slot():
    assert all(slot.styles() == sorted(core_styles.STYLES) for slot in SLOTS), \
        {slot.name: slot.styles() for slot in SLOTS}


def test_a_toy_style_is_split_checked_and_rendered(toy, tmp_path):
    main, startup, cfg = _case(toy)
    split_to_folder(main, startup, cfg, str(tmp_path / "toy"))
    ps_main, ps_startup, ps_cfg = _case()
    split_to_folder(ps_main, ps_startup, ps_cfg, str(tmp_path / "ps"))
    ours, theirs = _files(str(tmp_path / "toy")), _files(str(tmp_path / "ps"))
    assert sorted(ours) == sorted(theirs)
    # the programs and descriptors are ps's; plan.json and report.md name the toy style
    assert {k for k in ours if ours[k] != theirs[k]} == {"plan.json", "report.md"}
    report = ours["report.md"].decode("utf-8")
    assert "Style **toy**" in report and TOY_HEAD in report      # render asked the toy's hook
    assert "the tables of the descriptors" in report

    checked = check_mod.check_dir(main, startup, cfg, str(tmp_path / "toy"))
    assert checked.findings == []
    assert TOY_CHECK in checked.warnings                            # check asked the toy's hook


def test_a_toy_style_is_simulated(toy):
    main, startup, cfg = _case(toy)
    res = split(main, startup, cfg, trainer_ids=list(range(cfg.trainers)))
    progs = {k: p.copy() for k, p in res.programs.items()}
    got = simulate_mod.simulate(main, startup, cfg, progs, {}, steps=2, batch=4, seed=0,
                                ps_options=dict(texts=dict(res.texts), why=False))
    assert got.error is None and got.params
    assert all(p.ok for p in got.params), [p for p in got.params if not p.ok]
    assert TOY_NOTE in got.notes                                    # simulate asked the hook


def test_a_style_without_a_behaviour_is_named(monkeypatch, tmp_path):
    bare = dataclasses.replace(core_styles.PS, name="bare")
    monkeypatch.setitem(core_styles.STYLES, bare.name, bare)
    monkeypatch.setattr(config_mod, "STYLES", config_mod.STYLES + (bare.name,))
    assert not SIMULATE.has(bare.name)
    with pytest.raises(LookupError, match="style bare has no check behaviour"):
        CHECK.of(bare.name)
    # `simulate` refuses a style with no SIMULATE behaviour, in one line
    cluster = tmp_path / "cluster.yaml"
    with open(os.path.join(CASE, "cluster.yaml"), encoding="utf-8") as f:
        cluster.write_text(f.read().replace("style: ps", "style: bare"))
    r = CliRunner().invoke(cli_main, ["simulate", os.path.join(CASE, "main.pb"), "--startup",
                                      os.path.join(CASE, "startup.pb"), "--cluster",
                                      str(cluster)])
    assert r.exit_code == 2, r.output
    assert "simulate does not support the bare style" in r.output
