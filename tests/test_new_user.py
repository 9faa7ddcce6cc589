"""What a new user reads when something is off (issue 44): simulate's relative difference, the
batch sizes it offers, a split made for another mode, a missing --startup."""
from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

from cli import main as cli_main
from transpile.format import programio
from transpile.ir.program import Var

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CTR = os.path.join(ROOT, "samples", "ctr_sparse_adam")
MLP = os.path.join(ROOT, "samples", "mlp_sgd")
CORPUS = os.path.join(HERE, "corpus")


def _config(tmp_path, style, mode, name=None):
    p = tmp_path / (name or "%s_%s.yaml" % (style, mode))
    p.write_text("pservers: [127.0.0.1:6174, 127.0.0.1:6175]\ntrainers: 2\ntrainer_id: all\n"
                 "mode: %s\nstyle: %s\n" % (mode, style))
    return str(p)


def _invoke(*args):
    return CliRunner().invoke(cli_main, [str(a) for a in args])


# --- max rel is the documented formula ---------------------------------------------------------
def test_max_rel_is_the_difference_over_the_movement_even_within_rounding():
    """docs/simulate.md: max rel = max |a-b| / max |final - initial|. A difference of 4e-10 on a
    parameter that moved by 2e-4 is 2e-6, not 0 (it was zeroed below the rounding floor)."""
    from transpile.simulate.explain.compare import compare_pairs
    from transpile.simulate.explain.pscompare import diff_of
    var = Var.tensor("b", "FP32", [1])
    a, b = np.array([0.5]), np.array([0.5 + 4e-10])
    d = compare_pairs(var, [("trainer_0", a, b)], 1e-6, moved=2e-4)
    assert d.max_abs == pytest.approx(4e-10) and d.max_rel == pytest.approx(2e-6)
    assert d.ok             # within the rounding noise of a float64 run: not a difference
    e = diff_of("b", (1,), a, b, 2e-4, 1e-6, False)
    assert e.max_rel == pytest.approx(2e-6) and e.ok
    # beyond the rounding noise, the same ratio fails
    d = compare_pairs(var, [("trainer_0", a, a + 4e-6)], 1e-6, moved=2.0)
    assert d.max_rel == pytest.approx(2e-6) and not d.ok and d.note == "worst: trainer_0"


def test_a_line_ok_only_by_rounding_says_so():
    from types import SimpleNamespace
    from transpile.simulate.explain.compare import ParamDiff
    from transpile.simulate.explain.render import render
    lines = []
    res = SimpleNamespace(params=[ParamDiff("b", (1,), 4e-10, 2e-6, True)], error=None,
                          rtol=1e-6, steps=5, faults=[], equal=True, unchanged=[],
                          partly_unchanged=[], ps=None)
    render(res, None, lines.append)
    assert lines[1].endswith("2.000e-06  ok (within rounding)"), lines


# --- batch sizes -----------------------------------------------------------------------------
def test_auc_buckets_are_not_a_batch_size():
    """auc's persistable statistics are [8193] (its buckets): not a batch the program fixes."""
    from transpile.simulate.model.batchsize import candidates
    prog = programio.load(os.path.join(CORPUS, "paddlerec-classic", "esmm_sync", "main.pb"))
    assert any(op.type == "auc" for _, _, op in prog.ops())
    assert 8193 not in candidates(prog)


# --- a split made for another mode ---------------------------------------------------------
@pytest.fixture(scope="module")
def ps_geo_split(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("geo")
    out = tmp / "split"
    r = _invoke("split", os.path.join(CTR, "main.pb"), "--startup",
                os.path.join(CTR, "startup.pb"), "--cluster", _config(tmp, "ps", "geo"),
                "--out", out, "-q")
    assert r.exit_code == 0, r.output
    return tmp, out


@pytest.mark.parametrize("plan_json", [True, False])
def test_simulate_says_the_split_and_the_config_disagree(ps_geo_split, tmp_path, plan_json):
    import shutil
    tmp, out = ps_geo_split
    folder = tmp_path / "split"
    shutil.copytree(out, folder)
    if not plan_json:           # a split Paddle wrote: its descriptors tell the mode
        os.remove(folder / "plan.json")
    r = _invoke("simulate", os.path.join(CTR, "main.pb"), folder, "--startup",
                os.path.join(CTR, "startup.pb"), "--cluster", _config(tmp_path, "ps", "sync"))
    assert r.exit_code == 2, r.output
    where = "its plan.json" if plan_json else "its worker_desc.txt"
    assert r.output.strip() == (
        "pstranspile: error: %s was split for ps style, geo mode (%s), the config for ps "
        "style, sync mode: simulate a split with the config it was made with" % (folder, where))


def test_the_modes_a_paddle_split_says(tmp_path):
    """Fleet's runtime.json names its mode; ps descriptors tell geo (every rule `sum`, dense
    ones too) and sync from the others."""
    from transpile.simulate.runs.loading import load_descs, load_split_dir, made_for
    for case, want in (("fleet/ctr_sparse_adam_async", ("fleet", ("async",))),
                       ("ps/mlp_sgd_geo", ("ps", ("geo",))),
                       ("ps/mlp_sgd_sync", ("ps", ("sync",))),
                       ("ps/mlp_sgd_async", ("ps", ("async", "half_async")))):
        d = os.path.join(CORPUS, case, "expected")
        _, runtime = load_split_dir(d)
        assert made_for(d, runtime, load_descs(d))[:2] == want, case


# --- a missing --startup -------------------------------------------------------------------
NO_TABLE_STARTUP = ("pstranspile: error: no --startup: MAIN's startup program declares and "
                    "initializes its embedding table (SparseFeatFactors); give the startup "
                    "program saved with MAIN (--startup FILE)")


@pytest.mark.parametrize("style,mode", [("ps", "sync"), ("ps", "geo"), ("fleet", "sync"),
                                        ("fleet", "async"), ("classic", "sync")])
def test_a_missing_startup_is_one_message_in_every_style(tmp_path, style, mode):
    cfg = _config(tmp_path, style, mode)
    r = _invoke("split", os.path.join(CTR, "main.pb"), "--cluster", cfg, "--out",
                tmp_path / "out")
    assert r.exit_code == 2 and r.output.strip() == NO_TABLE_STARTUP, r.output
    assert not (tmp_path / "out").exists()
    r = _invoke("plan", os.path.join(CTR, "main.pb"), "--cluster", cfg)
    assert r.exit_code == 2 and r.output.strip() == NO_TABLE_STARTUP, r.output


def test_simulate_needs_the_startup(tmp_path):
    r = _invoke("simulate", os.path.join(MLP, "main.pb"), "--cluster",
                _config(tmp_path, "fleet", "sync"))
    assert r.exit_code == 2, r.output
    assert r.output.strip() == (
        "pstranspile: error: no --startup: the original run starts from MAIN's startup program "
        "(its initializers); give the startup program saved with MAIN (--startup FILE)")


def test_a_split_without_startup_warns_that_it_initializes_nothing(tmp_path):
    r = _invoke("split", os.path.join(MLP, "main.pb"), "--cluster",
                _config(tmp_path, "fleet", "sync"), "--out", tmp_path / "out")
    assert r.exit_code == 0, r.output
    assert ("warning: no --startup: the startup programs written initialize no parameter, so "
            "Paddle cannot train the split; give the startup program saved with MAIN "
            "(--startup FILE)") in r.output


def test_split_help_says_when_startup_is_needed():
    r = _invoke("split", "--help")
    text = " ".join(r.output.split())
    assert "needed for a split Paddle can run" in text and "empty startup program" not in text


# --- the docs' modes are the styles' -------------------------------------------------------
def test_the_modes_docs_styles_lists_are_the_ones_config_check_takes():
    """docs/styles.md's table lists each style's modes; classic has no geo (config check
    refuses `style: classic, mode: geo`)."""
    import re
    from transpile.core.styles import STYLES
    with open(os.path.join(ROOT, "docs", "styles.md"), encoding="utf-8") as f:
        rows = [line for line in f if re.match(r"\| `(ps|fleet|classic)`", line)]
    assert len(rows) == len(STYLES)
    for row in rows:
        style = re.match(r"\| `(\w+)`", row).group(1)
        listed = re.findall(r"`(sync|async|half_async|geo)`", row.rsplit("|", 2)[1])
        assert tuple(listed) == STYLES[style].modes, (style, listed)


# --- help --------------------------------------------------------------------------------
def test_help_examples_name_files_that_exist_and_options_that_work(tmp_path):
    import re
    r = _invoke("show", "--help")
    for path in re.findall(r"samples/\S+", r.output):
        assert os.path.exists(os.path.join(ROOT, path)), path
    assert "--quiet" in _invoke("config", "check", "--help").output
    cfg = os.path.join(ROOT, "configs", "ps_sync.yaml")
    r = _invoke("config", "check", "--quiet", cfg)
    assert r.exit_code == 0 and r.output == "", r.output
    top = _invoke("--help").output
    for command in ("split", "report", "check", "simulate"):
        assert "pstranspile %s " % command in top, command


# --- an unbounded table is explained -------------------------------------------------------
def test_an_unbounded_table_is_explained_where_it_is_shown(tmp_path):
    """A sparse_embedding table (is_distributed) has no row count in Paddle's descriptors:
    the summary and report.md say what `unbounded` means."""
    main = programio.load(os.path.join(CTR, "main.pb"))
    for _, _, op in main.ops():
        if op.type in ("lookup_table", "lookup_table_v2", "lookup_table_grad",
                       "lookup_table_v2_grad") and op.input("W") == ["SparseFeatFactors"]:
            op.set_attr("is_distributed", True)
    mp = tmp_path / "main.pb"
    programio.save(main, str(mp))
    out = tmp_path / "out"
    r = _invoke("split", mp, "--startup", os.path.join(CTR, "startup.pb"), "--cluster",
                os.path.join(ROOT, "configs", "ps_sync.yaml"), "--out", out)
    assert r.exit_code == 0, r.output
    want = ("unbounded: table 0 (SparseFeatFactors): a distributed table (sparse_embedding, "
            "is_distributed), to which Paddle's descriptors give no row count (table_num 0): "
            "the servers make its rows as the ids arrive")
    assert "unbounded x 16" in r.output and "  " + want + "\n" in r.output
    assert "Size %s." % want in (out / "report.md").read_text()


# --- many pservers -------------------------------------------------------------------------
@pytest.mark.parametrize("style", ["ps", "fleet", "classic"])
def test_many_pservers_are_folded_and_warned_about(tmp_path, style):
    """60 pservers for a program of 20 blocks' worth (163009 values, min_block_size 8192):
    the summary shows 8 endpoints and says how many more, and warns; report.md folds the
    list of pservers."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("pservers: [%s]\ntrainers: 2\ntrainer_id: all\nstyle: %s\n" % (
        ", ".join("10.0.0.%d:6174" % i for i in range(60)), style))
    out = tmp_path / "out"
    r = _invoke("split", os.path.join(CTR, "main.pb"), "--startup",
                os.path.join(CTR, "startup.pb"), "--cluster", cfg, "--out", out)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert sum(1 for line in lines if line.startswith("  10.0.0.")) == 8
    assert "  … and 52 more endpoints: plan.json's `endpoints` lists them" in lines
    assert "  … and 112 more pserver programs: report.md and plan.json's `programs` list " \
           "them" in lines
    assert any(line.startswith("  warning: 60 pservers for 20 blocks worth placing (163009 "
                               "parameter values, in blocks of min_block_size 8192): each "
                               "holds ") for line in lines), r.output
    assert len(lines) < 40
    report = (out / "report.md").read_text().splitlines()
    assert report[2] == ("Style **%s**, mode **sync**, 2 trainer(s), 60 pservers: 10.0.0.0:6174, "
                         "10.0.0.1:6174, 10.0.0.2:6174, …" % style)
    assert max(len(line) for line in report[:8]) < 1200


def test_a_few_pservers_for_a_big_model_get_no_warning(tmp_path):
    r = _invoke("split", os.path.join(CTR, "main.pb"), "--startup",
                os.path.join(CTR, "startup.pb"), "--cluster",
                os.path.join(ROOT, "configs", "ps_sync.yaml"), "--out", tmp_path / "out")
    assert r.exit_code == 0 and "warning" not in r.output, r.output


# --- make demo -------------------------------------------------------------------------------
def test_make_demo_shows_style_ps_and_the_others_a_line_each(tmp_path, monkeypatch):
    """`make demo`'s commands (make -n), run here: style ps on samples/ctr_sparse_adam first,
    fleet and classic a line each, and short (the reports stay in the folder)."""
    import shlex
    import shutil
    import subprocess
    if shutil.which("make") is None:
        pytest.skip("no make")
    out = tmp_path / "demo-out"
    text = subprocess.run(["make", "-n", "demo", "DEMO_OUT=%s" % out], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.replace("\\\n", " ")
    monkeypatch.chdir(ROOT)
    printed, styles = [], []
    for line in text.splitlines():
        words = shlex.split(line)
        if words[:2] == ["mkdir", "-p"]:
            os.makedirs(words[2], exist_ok=True)
        elif words and words[0] == "echo":
            printed.append(" ".join(words[1:]))
        elif words and words[0].endswith("/pstranspile"):
            args = [w for w in words[1:] if w != "2>/dev/null"]
            r = CliRunner().invoke(cli_main, args)
            assert r.exit_code == 0, (line, r.output)
            if "2>/dev/null" in words or "--quiet" in args[:1]:
                printed += r.stdout.splitlines()
            else:
                printed += r.output.splitlines()
            if "--cluster" in args:
                styles.append(args[args.index("--cluster") + 1])
    assert styles[0] == "configs/ps_sync.yaml" and "samples/ctr_sparse_adam/main.pb" in text
    assert printed[2].startswith("split (ps style, sync mode")
    assert "%s/fleet: ok (6 program(s), 1 warning(s))" % out in printed
    assert "%s/classic: ok (8 program(s), 0 warning(s))" % out in printed
    assert len(printed) < 60, "\n".join(printed)
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    said = readme[readme.index("make demo"):readme.index("make test")]
    assert "samples/ctr_sparse_adam" in said and "style ps" in said, said
