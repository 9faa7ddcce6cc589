"""Paddle's known faults (plan/faults.py): for each fault id a small program that shows it
(Paddle 2.6.2's own programs from tests/corpus, each a handful of ops), and:
  - `paddle_faults: reproduce` (the default): the split equals Paddle's (the corpus tests), lists
    the fault as not fixed, `check` names the id (a warning, exit 0; a finding, exit 1, where a
    Paddle process of the split fails at its first step), `simulate` finds the split trains
    differently from the original or fails to execute (but for harmless dead code);
  - `paddle_faults: fix`: the fault is listed as fixed, `check` is clean, `simulate` equal."""
import json
import os

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from transpile.plan.faults import FAULT_KINDS, KIND, summary

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

# fault id -> a corpus case whose program shows it
SHOWN_BY = {
    "classic-local-table-fake-init": "classic/local_lookup_table",
    "classic-dist-table-optimizer": "classic/dist_lookup_table",
    "classic-dist-table-ids-not-2d": "ids/classic_se_multihot_async",
    "fleet-clip-before-merge": "fleet/l2decay_clip_unsplit_sync",
    "fleet-sync-step-counter": "fleet/lrdecay_momentum_sync",
    "fleet-orphan-sparse-grad-sum": "fleet/ctr_sparse_adam_sync",
    "fleet-large-scale-adam": "fleet/large_scale_adam_sync",
    "classic-clip-on-pserver": "clip/classic_ctr1_emb_clipvalue_sync",
    "fleet-sparse-clip-dropped": "clip/fleet_ctr2_emb_clipvalue_async",
    "ps-sparse-clip-dropped": "clip/ps_ctr2_emb_clipglobal_async",
    "fleet-geo-dense-table-grad": "usermodels/shared_bottom_fleet_geo",
    "ps-geo-dense-table-grad": "usermodels/shared_bottom_ps_geo",
    "fleet-sparse-decay-whole-table": "clip/fleet_ctr1_emb_l2_sync",
    "fleet-decay-whole-param": "paddlerec-gen/fleet_logistic_regression_sync",
    "classic-assign-init-whole-param": "parity/classic_mlp_assign_fc_sync",
    "fleet-assign-init-whole-param": "parity/fleet_ctr_assign_table_sync",
}
# faults whose split fails at its first step: `check` reports them as findings (exit 1), not
# warnings
FAILS_AT_ONCE = {"classic-clip-on-pserver", "classic-dist-table-ids-not-2d",
                 "fleet-sparse-decay-whole-table", "fleet-decay-whole-param",
                 "fleet-sparse-clip-dropped", "ps-sparse-clip-dropped",
                 "classic-assign-init-whole-param", "fleet-assign-init-whole-param",
                 "fleet-geo-dense-table-grad", "ps-geo-dense-table-grad",
                 "ps-dense-empty-initializer"}
# faults that change nothing a run computes (a `sum` of empty gradients nothing reads): the
# reproduced split trains like the original
HARMLESS = {"fleet-orphan-sparse-grad-sum"}
# reproduced in both settings (a split can not fix them): a case that shows each
NOT_FIXABLE = {
    "ps-clip-before-merge": "ps-gen/mlp_sgd_clip_sync",
    "ps-geo-no-sparse-table": "ps/mlp_sgd_geo",
}
# Paddle's pservers can not start from the split (check: a finding); simulate notes it and
# trains on from the table's start at 0, which trainer 0's push overwrites: a case that shows
# each
START_FAILS = {"ps-dense-empty-initializer": "ps-gen/inits_adam_sync"}
# Paddle refuses the program (split exits 2 as Paddle does); `fix` writes a split that trains
REFUSED = {
    "classic-lookup-ids-not-2d": "paddlerec-gen/classic_dmr_sync",
    "fleet-lookup-ids-not-2d": "paddlerec-gen/fleet_dmr_async",
    "ps-lookup-ids-not-2d": "paddlerec-gen/ps_dmr_sync",
}
# Paddle's pipeline raises on the program: written in both settings as it writes it mended
CRASHES = {"classic-dist-table-crash": "parity/classic_bow_dist_sync"}
# corrected in both settings: the corpus's corrections
ALWAYS_FIXED = {
    "classic-rmsprop-mean-grad-shape": "classic/rmsprop",
    "classic-unwired-grad-chain": "classic/l2decay",
}


def _config(tmp_path, case, setting):
    with open(os.path.join(CORPUS, case, "cluster.yaml")) as f:
        text = f.read()
    path = tmp_path / ("%s.yaml" % setting)
    path.write_text(text + "\npaddle_faults: %s\n" % setting)
    return str(path)


def _run(*args):
    return CliRunner().invoke(cli_main, list(args))


def _split(tmp_path, case, setting):
    out = str(tmp_path / ("split-" + setting))
    c = os.path.join(CORPUS, case)
    cfg = _config(tmp_path, case, setting)
    r = _run("split", c + "/main.pb", "--startup", c + "/startup.pb", "--cluster", cfg,
             "--out", out)
    assert r.exit_code == 0, r.output
    with open(os.path.join(out, "plan.json")) as f:
        return out, cfg, json.load(f), r.output


def _check(case, cfg, split_dir):
    c = os.path.join(CORPUS, case)
    return _run("check", c + "/main.pb", "--startup", c + "/startup.pb", "--cluster", cfg,
                split_dir)


def _simulate(case, cfg, split_dir):
    c = os.path.join(CORPUS, case)
    return _run("simulate", c + "/main.pb", "--startup", c + "/startup.pb", "--cluster", cfg,
                split_dir, "--steps", "3")


# shown by another test, on programs outside tests/corpus (no Paddle split of them there)
SHOWN_ELSEWHERE = {"ps-push-ids-lod2": "tests/test_simulate_lod.py (tests/data/lod/sage, ps)"}


def test_every_fault_kind_is_covered_here():
    shown = set(SHOWN_BY) | set(NOT_FIXABLE) | set(REFUSED) | set(SHOWN_ELSEWHERE) | \
        set(START_FAILS)
    assert shown | set(ALWAYS_FIXED) <= set(KIND)
    assert {k.id for k in FAULT_KINDS if not k.always_fixed} <= shown, \
        "a fault kind without a program that shows it"
    assert {k.id for k in FAULT_KINDS if k.refused} == set(REFUSED)
    assert {k.id for k in FAULT_KINDS if k.crash} == set(CRASHES)


@pytest.mark.parametrize("fault_id", sorted(SHOWN_BY))
def test_reproduced_then_fixed(fault_id, tmp_path):
    case = SHOWN_BY[fault_id]
    # reproduce: listed, not fixed; summary says so; check warns with the id; simulate differs
    out, cfg, plan, text = _split(tmp_path, case, "reproduce")
    mine = [f for f in plan["faults"] if f["id"] == fault_id]
    assert mine and not any(f["fixed"] for f in mine), plan["faults"]
    assert "reproduced: " in text and fault_id in text
    r = _check(case, cfg, out)
    assert r.exit_code == (1 if fault_id in FAILS_AT_ONCE else 0), r.output
    assert "Paddle fault %s" % fault_id in r.output
    r = _simulate(case, cfg, out)
    if fault_id in HARMLESS:
        assert r.exit_code == 0, r.output
    else:
        assert r.exit_code == 1, r.output
        why = [line for line in r.output.splitlines() if line.startswith("why: ")]
        assert why and fault_id in why[0], r.output
    # fix: listed as fixed; check clean (no warning of any fault); simulate equal
    out, cfg, plan, text = _split(tmp_path, case, "fix")
    mine = [f for f in plan["faults"] if f["id"] == fault_id]
    assert mine and all(f["fixed"] for f in mine), plan["faults"]
    assert "fixed: " in text and fault_id in text
    r = _check(case, cfg, out)
    assert r.exit_code == 0 and "Paddle fault" not in r.output, r.output
    r = _simulate(case, cfg, out)
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("fault_id", sorted(START_FAILS))
def test_a_pserver_that_cannot_start_is_a_finding_then_fixed(fault_id, tmp_path):
    """ps-dense-empty-initializer: reproduced, the split's descriptors hold the empty
    initializer Paddle's do, `check` finds it (exit 1) on every pserver, `simulate` notes it;
    under `fix` the Param starts as a constant the server reads, `check` is clean and
    `simulate` equal without the note (`pstranspile run` of that split on Paddle's own
    pservers: tests/test_run_paddle.py)."""
    case = START_FAILS[fault_id]
    out, cfg, plan, text = _split(tmp_path, case, "reproduce")
    mine = [f for f in plan["faults"] if f["id"] == fault_id]
    assert mine and not any(f["fixed"] for f in mine), plan["faults"]
    assert "reproduced: %s; `paddle_faults: fix` corrects it" % fault_id in text, text
    r = _check(case, cfg, out)
    found = [line for line in r.output.splitlines() if "Paddle fault %s" % fault_id in line]
    assert r.exit_code == 1 and len(found) == 2, r.output          # both pservers
    assert all(line.startswith("pserver_") and "Param has an empty initializer" in line
               and "fill_constant&0.0" in line for line in found), found
    r = _simulate(case, cfg, out)
    assert r.exit_code == 0 and "Param has an empty initializer" in r.output, r.output
    out, cfg, plan, text = _split(tmp_path, case, "fix")
    mine = [f for f in plan["faults"] if f["id"] == fault_id]
    assert mine and all(f["fixed"] for f in mine), plan["faults"]
    for ep in ("127.0.0.1_6174", "127.0.0.1_6175"):
        with open(os.path.join(out, "pserver_%s" % ep, "server_desc.txt")) as f:
            desc = f.read()
        assert 'initializers: ""' not in desc and 'initializers: "fill_constant&0.0"' in desc
    r = _check(case, cfg, out)
    assert r.exit_code == 0 and "Paddle fault" not in r.output, r.output
    r = _simulate(case, cfg, out)
    assert r.exit_code == 0 and "empty initializer" not in r.output, r.output


def test_an_empty_initializer_no_split_can_fix_is_a_finding(tmp_path):
    """An empty initializer of another input than Param (its start value is read): `check`
    says the split must not be used."""
    case = START_FAILS["ps-dense-empty-initializer"]
    out, cfg, _, _ = _split(tmp_path, case, "fix")
    path = os.path.join(out, "pserver_127.0.0.1_6174", "server_desc.txt")
    with open(path) as f:
        text = f.read()
    lr = 'initializers: "fill_constant&0.0010000000474974513"'
    assert text.count(lr) == 2          # the sparse table's and the dense table's
    with open(path, "w") as f:
        f.write(text[::-1].replace(lr[::-1], 'initializers: ""'[::-1], 1)[::-1])
    r = _check(case, cfg, out)
    found = [line for line in r.output.splitlines() if "Paddle fault" in line]
    assert r.exit_code == 1 and len(found) == 1, r.output
    assert found[0].startswith("pserver_127.0.0.1_6174/server_desc.txt: Paddle fault "
                               "ps-dense-empty-initializer: table 1 (MergedDense): "
                               "LearningRate has an empty initializer"), found
    assert "no split can give LearningRate one: the split must not be used" in found[0]


@pytest.mark.parametrize("fault_id", sorted(set(SHOWN_BY) | set(NOT_FIXABLE) |
                                            set(START_FAILS)))
def test_paddles_own_split_gets_the_warning(fault_id):
    case = SHOWN_BY.get(fault_id) or NOT_FIXABLE.get(fault_id) or START_FAILS[fault_id]
    c = os.path.join(CORPUS, case)
    r = _check(case, c + "/cluster.yaml", c + "/expected")
    assert r.exit_code == (1 if fault_id in FAILS_AT_ONCE else 0), r.output
    assert "Paddle fault %s" % fault_id in r.output, r.output


@pytest.mark.parametrize("fault_id", sorted(NOT_FIXABLE))
def test_not_fixable_stays_reproduced(fault_id, tmp_path):
    case = NOT_FIXABLE[fault_id]
    for setting in ("reproduce", "fix"):
        out, cfg, plan, text = _split(tmp_path, case, setting)
        mine = [f for f in plan["faults"] if f["id"] == fault_id]
        assert mine and not any(f["fixed"] for f in mine) and all(f.get("note") for f in mine)
        assert "not fixable in a split: " in text and fault_id in text
        r = _check(case, cfg, out)
        assert r.exit_code == 0 and "Paddle fault %s" % fault_id in r.output, r.output


@pytest.mark.parametrize("fault_id", sorted(REFUSED))
def test_refused_then_fixed(fault_id, tmp_path):
    """Paddle refuses the program: so does split by default (exit 2, Paddle's message, nothing
    written); under `fix` the split is written, names the fault as fixed, checks clean and
    trains like the original."""
    case = REFUSED[fault_id]
    c = os.path.join(CORPUS, case)
    with open(os.path.join(c, "expected", "error.txt")) as f:
        reason = f.read().strip()
    out = str(tmp_path / "refused")
    r = _run("split", c + "/main.pb", "--startup", c + "/startup.pb", "--cluster",
             _config(tmp_path, case, "reproduce"), "--out", out)
    assert r.exit_code == 2 and reason in r.output and not os.path.exists(out), r.output
    out, cfg, plan, text = _split(tmp_path, case, "fix")
    mine = [f for f in plan["faults"] if f["id"] == fault_id]
    assert mine and all(f["fixed"] for f in mine), plan["faults"]
    r = _check(case, cfg, out)
    assert r.exit_code == 0 and "Paddle fault" not in r.output, r.output
    r = _simulate(case, cfg, out)
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("fault_id", sorted(ALWAYS_FIXED))
@pytest.mark.parametrize("setting", ["reproduce", "fix"])
def test_corrected_faults_stay_corrected(fault_id, setting, tmp_path):
    case = ALWAYS_FIXED[fault_id]
    out, cfg, plan, _ = _split(tmp_path, case, setting)
    mine = [f for f in plan["faults"] if f["id"] == fault_id]
    assert mine and all(f["fixed"] for f in mine), plan["faults"]
    assert _check(case, cfg, out).exit_code == 0
    c = os.path.join(CORPUS, case)
    r = _check(case, c + "/cluster.yaml", c + "/expected")    # Paddle's: a finding
    assert r.exit_code == 1 and fault_id in r.output, r.output


@pytest.mark.parametrize("fault_id", sorted(CRASHES))
@pytest.mark.parametrize("setting", ["reproduce", "fix"])
def test_a_crash_is_named_in_both_settings(fault_id, setting, tmp_path):
    """Paddle's pipeline raises: the split, written either way, names it as fixed and says
    Paddle raises; check has no fault of it to warn of."""
    case = CRASHES[fault_id]
    out, cfg, plan, text = _split(tmp_path, case, setting)
    mine = [f for f in plan["faults"] if f["id"] == fault_id]
    assert mine and all(f["fixed"] for f in mine), plan["faults"]
    assert "Paddle's own pipeline raises on this program: %s" % fault_id in text, text
    r = _check(case, cfg, out)
    assert fault_id not in r.output, r.output


def test_no_fault_no_line(tmp_path):
    _, _, plan, text = _split(tmp_path, "classic/basic", "reproduce")
    assert plan["faults"] == [] and "Paddle fault" not in text


def test_summary_wording():
    assert summary([]) is None
    assert summary([{"id": "classic-rmsprop-mean-grad-shape", "where": "x", "fixed": True}]) \
        is None
    two = [{"id": "fleet-clip-before-merge", "where": "a", "fixed": False},
           {"id": "fleet-sync-step-counter", "where": "b", "fixed": False}]
    assert summary(two) == ("2 Paddle faults reproduced: fleet-clip-before-merge, "
                            "fleet-sync-step-counter; `paddle_faults: fix` corrects them")
    assert summary([dict(f, fixed=True) for f in two]) == \
        "2 Paddle faults fixed: fleet-clip-before-merge, fleet-sync-step-counter"
    crash = {"id": "classic-dist-table-crash", "where": "t", "fixed": True}
    assert summary([crash]) == \
        "Paddle's own pipeline raises on this program: classic-dist-table-crash"
    assert summary([crash, dict(two[0], fixed=True)]) == \
        ("Paddle's own pipeline raises on this program: classic-dist-table-crash; "
         "1 Paddle fault fixed: fleet-clip-before-merge")
    stuck = [dict(two[0], note="a global-norm clip")]
    assert summary(stuck) == ("1 Paddle fault reproduced: fleet-clip-before-merge; not "
                              "fixable in a split: fleet-clip-before-merge")


def test_docs_give_each_fault_its_four_parts():
    """docs/faults.md: every fault kind has a section saying what Paddle writes, what `fix`
    writes, what still differs and how the model avoids it (the model change, where
    plan/fault_notes.py knows one, word for word; what still differs, likewise)."""
    from transpile.plan.fault_notes import AVOID, STILL
    with open(os.path.join(os.path.dirname(CORPUS), "..", "docs", "faults.md")) as f:
        text = f.read()
    sections = {}
    for part in text.split("\n### `")[1:]:
        sections[part.split("`", 1)[0]] = part.split("\n## ", 1)[0]
    for kind in FAULT_KINDS:
        # a section of its own, or named in the first line of its twin's
        sec = sections.get(kind.id) or next(
            (v for v in sections.values() if "`%s`" % kind.id in v.split("\n")[2]), None)
        assert sec is not None, "docs/faults.md has no section for %s" % kind.id
        for head in ("**Paddle writes**", "**`fix` writes**", "**Still differs**",
                     "**Avoid it in the model**"):
            assert head in sec, (kind.id, head)
        if kind.id in AVOID:
            assert AVOID[kind.id].rstrip(".") in " ".join(sec.split()), kind.id
        if kind.id in STILL and kind.id in sections:
            assert STILL[kind.id].rstrip(".") in " ".join(sec.split()), kind.id


def test_a_finding_says_the_model_change_that_avoids_its_fault():
    from transpile.plan.fault_notes import AVOID
    case = "clip/ps_ctr2_emb_clipglobal_async"
    c = os.path.join(CORPUS, case)
    r = _check(case, c + "/cluster.yaml", c + "/expected")
    assert r.exit_code == 1 and AVOID["ps-sparse-clip-dropped"] in r.output, r.output


def test_a_fault_quoted_by_check_quotes_what_fix_writes():
    """A kind's `brief` (what check's finding quotes of what `fix` writes) is where its `fix`
    starts, and the finding on Paddle's own split quotes it."""
    briefed = [k for k in FAULT_KINDS if k.brief]
    assert briefed and all(k.fix.startswith(k.brief) for k in briefed)
    case = START_FAILS["ps-dense-empty-initializer"]
    c = os.path.join(CORPUS, case)
    r = _check(case, c + "/cluster.yaml", c + "/expected")
    brief = KIND["ps-dense-empty-initializer"].brief
    assert "what `paddle_faults: fix` writes: %s" % brief in r.output.replace("\n", " "), r.output
