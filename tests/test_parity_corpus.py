"""Programs nobody here had seen (issue 45), tests/corpus/parity (its README says what each case
shows): Paddle's own test nets, CTR nets with per-parameter learning rates under a scheduler or
tables initialized from values, a graph net with a table of fewer rows than pservers, and
distributed tables looked up with LoD ids, split by Paddle 2.6.2 in each style.

- `split` equals Paddle's output, or refuses as Paddle does, in one line, writing nothing;
- `check` on Paddle's split names exactly the Paddle faults it shows;
- under `paddle_faults: fix`, `check` is clean and `simulate --expect-equal` trains it like the
  original (slow)."""
import json
import os

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from golden import assert_refused_like_paddle, case_dirs, is_refused, split_and_compare
from transpile.format import programio

CASES = case_dirs("parity")
ORPHAN = "fleet-orphan-sparse-grad-sum"
CLASSIC_ASSIGN = "classic-assign-init-whole-param"
FLEET_ASSIGN = "fleet-assign-init-whole-param"
CRASH = "classic-dist-table-crash"

# case -> (the faults check names on Paddle's split, its exit code)
EXPECT = {
    "classic_bow_dist_half_async": (set(), 0),
    "classic_bow_dist_sync": ({"classic-dist-table-optimizer"}, 0),
    "classic_bow_fluid_dist_async": (set(), 0),
    "classic_ctr_assign_table_async": ({CLASSIC_ASSIGN}, 1),
    "classic_ctr_paramlr_sched_sync": (set(), 0),
    "classic_mlp_assign_fc_sync": ({CLASSIC_ASSIGN}, 1),
    "fleet_bow_dist_sync": ({ORPHAN}, 0),
    "fleet_bow_paramlr_const_sync": ({ORPHAN}, 0),
    "fleet_bow_paramlr_sched_async": ({ORPHAN}, 0),
    "fleet_ctr_assign_table_geo": ({FLEET_ASSIGN}, 1),
    "fleet_ctr_assign_table_sync": ({FLEET_ASSIGN}, 1),
    "fleet_ctr_paramlr_sched_sync": ({ORPHAN}, 0),
    "fleet_graph_two_dist_3ps1t_sync": ({ORPHAN}, 0),
    "fleet_graph_two_dist_3ps_sync": ({ORPHAN}, 0),
    "fleet_mlp_assign_fc_sync": (set(), 0),
    "ps_bow_paramlr_sched_sync": (set(), 0),
    "ps_ctr_paramlr_adam_sched_sync": (set(), 0),
    "ps_ctr_paramlr_sched_async": (set(), 0),
    "fleet_rmsprop_table_sync": (set(), 0),
}


def _id(case):
    return os.path.basename(case)


def _case(name):
    return os.path.join(os.path.dirname(CASES[0]), name)


def _run(*args):
    return CliRunner().invoke(cli_main, list(args))


def _faults(output):
    import re
    return set(re.findall(r"Paddle fault ([a-z0-9-]+)", output))


def _inputs(case):
    return (os.path.join(case, "main.pb"), "--startup", os.path.join(case, "startup.pb"))


def _fix_config(case, tmp_path):
    cfg = tmp_path / "fix.yaml"
    with open(os.path.join(case, "cluster.yaml")) as f:
        cfg.write_text(f.read() + "\npaddle_faults: fix\n")
    return str(cfg)


def _split(case, cfg, out):
    r = _run("split", *_inputs(case), "--cluster", cfg, "--out", out)
    assert r.exit_code == 0, r.output
    return r.output


def test_the_family_is_there():
    names = {_id(c) for c in CASES}
    assert set(EXPECT) <= names
    assert names - set(EXPECT) == {_id(c) for c in CASES if is_refused(c)}
    for what in ("paramlr_sched", "assign", "graph_two_dist_3ps", "bow_dist"):
        for style in ("classic", "fleet"):
            assert any(n.startswith(style) and what in n for n in names), (style, what)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_case_matches_paddle(case, tmp_path):
    output, diffs = split_and_compare(case, str(tmp_path / "out"))
    assert not diffs, "\n".join([output] + diffs[:40])


@pytest.mark.parametrize("case", [c for c in CASES if is_refused(c)], ids=_id)
def test_refusal_is_one_line_and_writes_nothing(case, tmp_path):
    assert_refused_like_paddle(case, str(tmp_path / "out"))


@pytest.mark.parametrize("case", [c for c in CASES if _id(c) in EXPECT], ids=_id)
def test_check_names_paddles_faults(case):
    faults, code = EXPECT[_id(case)]
    r = _run("check", *_inputs(case), "--cluster", os.path.join(case, "cluster.yaml"),
             os.path.join(case, "expected"))
    assert r.exit_code == code and _faults(r.output) == faults, r.output


@pytest.mark.parametrize("name", ["fleet_ctr_paramlr_sched_sync", "ps_ctr_paramlr_sched_async",
                                  "fleet_bow_paramlr_sched_async", "ps_bow_paramlr_sched_sync"])
def test_the_scheduler_is_seen_through_a_parameters_own_rate(name, tmp_path):
    """The trainers keep learning_rate_0 for the scheduler, and plan.json says so."""
    case = _case(name)
    out = str(tmp_path / "out")
    _split(case, os.path.join(case, "cluster.yaml"), out)
    prog = programio.load(os.path.join(out, "trainer_0", "main.pb"))
    assert prog.global_block.var("learning_rate_0").persistable
    with open(os.path.join(out, "plan.json")) as f:
        assert json.load(f)["lr"]["scheduler"] is True


def test_a_constant_rate_keeps_nothing(tmp_path):
    case, out = _case("fleet_bow_paramlr_const_sync"), str(tmp_path / "out")
    _split(case, os.path.join(case, "cluster.yaml"), out)
    prog = programio.load(os.path.join(out, "trainer_0", "main.pb"))
    assert prog.global_block.var("learning_rate_0") is None


@pytest.mark.parametrize("name,shape", [("fleet_graph_two_dist_3ps_sync", ()),
                                        ("fleet_graph_two_dist_3ps1t_sync", (0, 16))])
def test_an_empty_gradient_block_is_declared_as_paddles_sum_declares_it(name, shape, tmp_path):
    """The third pserver's block of the 2-row table holds no rows: merged by a `sum` of the
    trainers' copies, it is declared with no dims; with one trainer, as sliced."""
    case, out = _case(name), str(tmp_path / "out")
    _split(case, os.path.join(case, "cluster.yaml"), out)
    prog = programio.load(os.path.join(out, "pserver_127.0.0.1_6176", "main.pb"))
    assert tuple(prog.global_block.var("etype_emb@GRAD.block2").shape) == shape


@pytest.mark.parametrize("name,var,whole", [("fleet_ctr_assign_table_sync", "emb", (2100, 8)),
                                            ("classic_mlp_assign_fc_sync", "fc_w", (96, 200))])
def test_an_assigned_block_gets_its_own_rows_under_fix(name, var, whole, tmp_path):
    """Paddle's pserver startup assigns the whole parameter to each block (declared with the
    whole shape); under `fix` each block holds its half of the original's values, its shape."""
    case = _case(name)
    out = str(tmp_path / "out")
    text = _split(case, os.path.join(case, "cluster.yaml"), out)
    assert "reproduced: " in text and "assign-init-whole-param" in text
    startup = programio.load(os.path.join(out, "pserver_127.0.0.1_6175", "startup.pb"))
    block = next(n for n in startup.global_block.vars if n.startswith(var + ".block"))
    assert tuple(startup.global_block.var(block).shape) == whole
    fixed = str(tmp_path / "fixed")
    _split(case, _fix_config(case, tmp_path), fixed)
    startup = programio.load(os.path.join(fixed, "pserver_127.0.0.1_6175", "startup.pb"))
    op = next(o for o in startup.global_block.ops if o.type == "assign_value")
    rows = startup.global_block.var(op.output("Out")[0]).shape[0]
    orig = next(o for o in programio.load(os.path.join(case, "startup.pb")).global_block.ops
                if o.type == "assign_value")
    width, index = whole[1], int(op.output("Out")[0].rsplit("block", 1)[1])
    assert list(op.attr("shape")) == [rows, width] and rows * 2 == whole[0]
    start = index * rows * width
    assert list(op.attr("fp32_values")) == \
        list(orig.attr("fp32_values"))[start:start + rows * width]


@pytest.mark.parametrize("name", ["classic_bow_dist_sync", "classic_bow_fluid_dist_async"])
def test_where_paddles_transpiler_raises_the_split_says_so(name, tmp_path):
    """Paddle's DistributeTranspiler raises on a distributed table; split writes its mended
    output in both settings and names the crash."""
    case = _case(name)
    for setting, cfg in (("reproduce", os.path.join(case, "cluster.yaml")),
                         ("fix", _fix_config(case, tmp_path))):
        out = str(tmp_path / setting)
        text = _split(case, cfg, out)
        assert "Paddle's own pipeline raises on this program: %s" % CRASH in text, text
        with open(os.path.join(out, "plan.json")) as f:
            mine = [f for f in json.load(f)["faults"] if f["id"] == CRASH]
        assert mine and all(f["fixed"] for f in mine)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if not is_refused(c)], ids=_id)
def test_fixed_split_checks_clean_and_trains_like_the_original(case, tmp_path):
    cfg, out = _fix_config(case, tmp_path), str(tmp_path / "out")
    _split(case, cfg, out)
    r = _run("check", *_inputs(case), "--cluster", cfg, out)
    assert r.exit_code == 0 and "Paddle fault" not in r.output, r.output
    r = _run("simulate", *_inputs(case), "--cluster", cfg, out, "--steps", "3", "--expect-equal")
    assert r.exit_code == 0, r.output


def test_an_assign_initialized_ps_table_is_refused_naming_the_table(tmp_path):
    # Paddle's own words, and where they come from: the table and the initializer it read
    from golden import split_args
    case = [c for c in CASES if _id(c) == "ps_ctr_assign_table_sync"][0]
    r = CliRunner().invoke(cli_main, split_args(case, str(tmp_path / "out")))
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "could not convert string to float: ''" in r.output
    assert "table emb's rule" in r.output and "assign_value" in r.output, r.output
