"""split_method: balanced (greedy byte balancing), the balance figures of plan.json, the split
summary and report.md, and `pstranspile plan` (every split method side by side)."""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import replace

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import click
import pytest
from click.testing import CliRunner

from transpile import check as check_mod
from transpile import load_config, split
from transpile.core.config import from_dict
from transpile.core.errors import UserError
from transpile.format import programio
from transpile.ir import roles
from transpile.ir.program import Program, Var
from transpile.output import outdir
from transpile.output.runtime import runtime_bytes
from transpile.passes.build import make_op
from transpile.styles.compare import compare, placement, style_plan
from transpile.plan.placed import placed_params
from transpile.plan.placement import best_placement, block_weights, min_max_load
from transpile.plan.slicing import balanced_dispatch
from transpile.render.report import render_report
from transpile.render.show import human_bytes, split_summary_lines
from transpile.simulate import simulate

from golden import tree_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "corpus")
SAMPLES = os.path.join(ROOT, "samples")
EPS3 = ["127.0.0.1:6174", "127.0.0.1:6175", "127.0.0.1:6176"]


# --- the greedy rule ---------------------------------------------------------------------------
def test_largest_block_first_on_the_lightest_endpoint():
    # 5 -> a; 3 -> b; 3 -> b (3 < 5); 1 -> a (5 < 6)
    assert balanced_dispatch([1, 5, 3, 3], ["a", "b"]) == ["a", "a", "b", "b"]


def test_ties_go_to_the_earlier_endpoint_and_the_earlier_block():
    assert balanced_dispatch([2, 2, 2], ["a", "b", "c"]) == ["a", "b", "c"]
    assert balanced_dispatch([2, 2, 2], ["c", "b", "a"]) == ["c", "b", "a"]
    # what an endpoint already holds counts: a is the heaviest, so it is served last
    assert balanced_dispatch([2, 2, 2], ["a", "b", "c"], preload=[1, 0, 0]) == ["b", "c", "a"]


def test_blocks_of_one_parameter_go_to_distinct_endpoints():
    # a is far lighter, but w's second block may not join the first there
    assert balanced_dispatch([4, 4, 1], ["a", "b"], groups=["w", "w", "x"],
                             preload=[0, 100]) == ["a", "b", "a"]
    # with more blocks than endpoints the rule gives way
    assert sorted(balanced_dispatch([1, 1, 1], ["a", "b"], groups=["w"] * 3)) == ["a", "a", "b"]


def test_block_weights_count_the_accumulators():
    # adam on FP32 blocks of 10 and 6 elements: the block, 2 sliced moments, 1 whole beta pow
    accs = [(True, 16, "FP32"), (True, 16, "FP32"), (False, 1, "FP32")]
    assert block_weights([10, 6], "FP32", accs) == [10 * 4 * 3 + 4, 6 * 4 * 3 + 4]
    assert block_weights([10], "FP64", []) == [80]


def _program(params) -> Program:
    """A program holding only optimizer ops: `params` is [(name, shape, optimizer)]."""
    prog = Program.empty()
    b = prog.global_block
    b.add_var(Var.tensor("lr", "FP32", [1], persistable=True))
    for name, shape, opt in params:
        b.add_var(Var.tensor(name, "FP32", shape, persistable=True, is_parameter=True))
        b.add_var(Var.tensor(name + "@GRAD", "FP32", shape))
        ins = {"Param": [name], "Grad": [name + "@GRAD"], "LearningRate": ["lr"]}
        outs = {"ParamOut": [name]}
        if opt == "adam":
            for slot, shp in (("Moment1", shape), ("Moment2", shape), ("Beta1Pow", [1]),
                              ("Beta2Pow", [1])):
                b.add_var(Var.tensor("%s_%s" % (name, slot), "FP32", shp, persistable=True))
                ins[slot] = ["%s_%s" % (name, slot)]
                outs[slot + "Out"] = ["%s_%s" % (name, slot)]
        b.ops.append(make_op(opt, ins, outs, {roles.ROLE_ATTR: roles.OPTIMIZE,
                                              roles.ROLE_VAR_ATTR: [name, name + "@GRAD"]}))
    return prog


@pytest.mark.parametrize("style", ["classic", "fleet"])
def test_accumulators_decide_the_placement(style):
    # by parameter bytes alone A (12000) outweighs B (4800); with adam's moments B costs 14408
    prog = _program([("A", [3000], "sgd"), ("B", [1200], "adam"), ("C", [1000], "sgd")])
    # no startup initialises lr: said to be constant, not a scheduler's
    cfg = from_dict({"pservers": EPS3[:2], "style": style, "split_method": "balanced",
                     "lr_scheduler": False})
    plan = style_plan(prog, None, cfg)
    where = {p.name: [b.endpoint for b in p.blocks] for p in placed_params(plan, prog)}
    assert where == {"B": [EPS3[0]], "A": [EPS3[1]], "C": [EPS3[1]]}
    p = placement(prog, None, cfg)
    assert p.bytes == {EPS3[0]: 1200 * 12 + 8, EPS3[1]: 4000 * 4}
    assert p.effective == "balanced"


def test_exact_search_beats_the_simple_bound():
    # 2 x 16 + 4 on two endpoints: the mean is 18, but 20 is the best there is
    assert min_max_load([16, 16, 4], [0, 0]) == (20, True)
    assert min_max_load([3, 3, 2, 2, 2], [0, 0]) == (6, True)
    # a pinned load counts
    assert min_max_load([5], [10, 0]) == (10, True)
    # greedy gives 7 here; when the search runs out of budget, the lower bound, said to be one
    assert min_max_load([3, 3, 2, 2, 2], [0, 0], budget=1) == (6, False)


# --- every corpus case and sample ----------------------------------------------------------------
def _corpus_cases():
    out = []
    for family in ("classic", "fleet"):
        for name in sorted(os.listdir(os.path.join(CORPUS, family))):
            out.append("%s/%s" % (family, name))
    return out


def _sample_cases():
    return ["%s:%s:%d" % (s, style, n) for s in sorted(os.listdir(SAMPLES))
            if os.path.isfile(os.path.join(SAMPLES, s, "main.pb"))
            for style in ("classic", "fleet") for n in (2, 3)]


@functools.lru_cache(maxsize=None)
def _load(case):
    """(main, startup, config) of a corpus case or a "sample:style:pservers" case."""
    if ":" in case:
        sample, style, n = case.split(":")
        d = os.path.join(SAMPLES, sample)
        cfg = from_dict({"pservers": EPS3[:int(n)], "trainers": 2, "style": style})
    else:
        d = os.path.join(CORPUS, case)
        cfg = load_config(os.path.join(d, "cluster.yaml"))
    start = os.path.join(d, "startup.pb")
    return (programio.load(os.path.join(d, "main.pb")),
            programio.load(start) if os.path.isfile(start) else None, cfg)


def _refused(case):
    main, startup, cfg = _load(case)
    try:
        style_plan(main, startup, cfg)
    except UserError:
        return True
    return False


ALL_CASES = _corpus_cases() + _sample_cases()


@pytest.mark.parametrize("case", ALL_CASES)
def test_balanced_is_no_worse_than_round_robin_and_near_the_best(case):
    if _refused(case):
        pytest.skip("a split Paddle refuses too")
    main, startup, cfg = _load(case)
    rr, hn, bal = compare(main, startup, cfg)
    assert (rr.split_method, hn.split_method, bal.split_method) == (
        "round_robin", "hash_name", "balanced")
    assert bal.imbalance <= rr.imbalance
    assert bal.best_exact
    assert bal.best_imbalance <= bal.imbalance <= max(1.05, bal.best_imbalance)
    # the same blocks, only placed differently
    assert sum(bal.bytes.values()) == sum(rr.bytes.values()) == sum(hn.bytes.values())


@pytest.mark.parametrize("case", ALL_CASES)
def test_plan_json_reports_the_balance(case):
    if _refused(case):
        pytest.skip("a split Paddle refuses too")
    main, startup, cfg = _load(case)
    rr = placement(main, startup, replace(cfg, split_method="round_robin"))
    bal_cfg = replace(cfg, split_method="balanced")
    plan = split(main, startup, bal_cfg).plan
    assert plan["effective"]["split_method"] == "balanced"
    assert plan["imbalance"] == placement(main, startup, bal_cfg).imbalance
    # round robin's figures, derived from the balanced plan, are those of a round robin split
    assert plan["balance"]["round_robin"]["bytes"] == rr.bytes
    assert plan["balance"]["round_robin"]["imbalance"] == rr.imbalance
    assert plan["balance"]["best_imbalance"] == rr.best_imbalance
    assert plan["balance"]["best_exact"] is True


def test_round_robin_split_compares_with_itself():
    main, startup, cfg = _load("classic/async_mlp_adam")
    plan = split(main, startup, cfg).plan
    assert plan["effective"]["split_method"] == "round_robin"
    assert plan["balance"]["round_robin"]["imbalance"] == plan["imbalance"] == 1.9763
    assert plan["balance"]["best_imbalance"] == 1.0253


def test_fleet_keeps_round_robin_unless_balanced_is_asked():
    main, startup, cfg = _load("fleet/mlp_adam_sync")
    for method in ("round_robin", "hash_name"):
        plan = split(main, startup, replace(cfg, split_method=method)).plan
        assert plan["effective"]["split_method"] == "round_robin"
    assert split(main, startup, replace(cfg, split_method="balanced")).plan[
        "effective"]["split_method"] == "balanced"


def test_sparse_tables_keep_their_rules():
    """Fleet's remote tables stay cut evenly by rows, block i on endpoint i."""
    main, startup, cfg = _load("ctr_sparse_adam:fleet:3")
    for method in ("round_robin", "balanced"):
        plan = split(main, startup, replace(cfg, split_method=method)).plan
        tables = [t for t in plan["sparse_tables"] if t["split"] == "rows_evenly"]
        assert tables
        for t in tables:
            assert t["endpoints"] == EPS3[:len(t["endpoints"])]


# --- the splits check clean and train like the original ----------------------------------------
SIM_CASES = ["classic/lr_decay", "classic/rmsprop", "classic/remote_prefetch_lookup_table",
             "fleet/mlp_adam_sync", "mlp_sgd:fleet:3", "lrdecay_momentum:classic:3"]


def _placement_map(main, startup, cfg):
    plan = style_plan(main, startup, cfg)
    return {b.name: b.endpoint for p in placed_params(plan, main) for b in p.blocks}


@pytest.mark.parametrize("case", SIM_CASES)
def test_balanced_split_checks_clean_and_trains_like_the_original(case, tmp_path):
    main, startup, cfg = _load(case)
    cfg = replace(cfg, split_method="balanced", trainer_id="all")
    # the placement is not round robin's: what follows tests the balanced one
    assert _placement_map(main, startup, cfg) != _placement_map(
        main, startup, replace(cfg, split_method="round_robin"))
    result = split(main, startup, cfg)
    files = {k + ".pb": programio.to_bytes(p) for k, p in result.programs.items()}
    files.update({k + "/runtime.json": runtime_bytes(rt) for k, rt in result.runtime.items()})
    outdir.write_tree(str(tmp_path / "split"), files, False)
    report = check_mod.check_dir(main, startup, cfg, str(tmp_path / "split"))
    assert not report.findings, [f.line() for f in report.findings]
    res = simulate(main, startup, cfg, result.programs, result.runtime, steps=3, batch=4, seed=0)
    assert res.error is None, res.error
    assert res.params and res.equal, [(p.name, p.max_abs, p.note) for p in res.params
                                      if not p.ok]


# --- determinism ---------------------------------------------------------------------------------
def test_balanced_splits_are_byte_identical_across_processes(tmp_path):
    sample = os.path.join(SAMPLES, "lrdecay_momentum")
    cluster = tmp_path / "c.yaml"
    cluster.write_text("pservers: [%s]\ntrainers: 2\ntrainer_id: all\nstyle: classic\n"
                       "split_method: balanced\n" % ", ".join(EPS3))
    digests = []
    for seed in ("1", "2"):
        out = tmp_path / ("out" + seed)
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, os.path.join(ROOT, "cli.py"), "split",
                        os.path.join(sample, "main.pb"), "--startup",
                        os.path.join(sample, "startup.pb"), "--cluster", str(cluster),
                        "--out", str(out), "--quiet"], check=True, env=env, cwd=ROOT)
        digests.append(tree_files(str(out)))
    assert digests[0] == digests[1]
    assert "plan.json" in digests[0]


# --- what the user reads ---------------------------------------------------------------------
def test_summary_and_report_compare_with_round_robin():
    main, startup, cfg = _load("classic/async_mlp_adam")
    cfg = replace(cfg, split_method="balanced")
    result = split(main, startup, cfg)
    lines = [t for _, t in split_summary_lines(result.plan, "out")]
    assert "  placement balanced: best possible 1.03; round_robin would give 1.98" in lines
    text = render_report(main, result.programs, result.plan, config=cfg)
    assert "| endpoint | parameter blocks | bytes held | load | round_robin would hold |" in text
    assert "Imbalance (max / mean bytes): 1.03" in text
    assert "Placement balanced: best possible 1.03; round_robin would give 1.98" in text
    rr = result.plan["balance"]["round_robin"]["bytes"]
    for ep, held in result.plan["endpoints"].items():
        assert "| %s | %d | %s |" % (ep, held["param_blocks"], human_bytes(held["bytes"])) \
            in text
        assert text.split("| %s |" % ep)[1].splitlines()[0].endswith(
            " %s |" % human_bytes(rr[ep]))


def _plan_cli():
    from transpile.commands import plan as plan_cli

    @click.group()
    @click.pass_context
    def root(ctx):
        ctx.obj = None

    def handle(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            try:
                return fn(*a, **k)
            except UserError as e:
                click.echo("pstranspile: error: %s" % e, err=True)
                click.get_current_context().exit(2)
        return wrapper

    plan_cli.register(root, handle)
    return root


def test_plan_command_shows_every_method_and_writes_nothing(tmp_path, monkeypatch):
    d = os.path.join(CORPUS, "classic", "async_mlp_adam")
    monkeypatch.chdir(tmp_path)
    args = ["plan", os.path.join(d, "main.pb"), "--startup", os.path.join(d, "startup.pb"),
            "--cluster", os.path.join(d, "cluster.yaml")]
    r = CliRunner().invoke(_plan_cli(), args)
    assert r.exit_code == 0, r.output
    assert os.listdir(tmp_path) == []
    head = next(line for line in r.output.splitlines() if line.startswith("  endpoint"))
    assert head.split() == ["endpoint", "round_robin", "(config)", "hash_name", "balanced"]
    imb = next(line for line in r.output.splitlines() if line.strip().startswith("imbalance"))
    assert imb.split()[-3:] == ["1.976", "1.976", "1.025"]
    assert "best possible with these blocks: 1.025" in r.output

    r = CliRunner().invoke(_plan_cli(), args + ["--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert [m["split_method"] for m in data["methods"]] == ["round_robin", "hash_name",
                                                             "balanced"]
    assert [m["imbalance"] for m in data["methods"]] == [1.9763, 1.9763, 1.0253]
    assert data["best_imbalance"] == 1.0253 and data["split_method"] == "round_robin"


def test_plan_command_marks_what_fleet_ignores_and_refuses_bad_input(tmp_path):
    d = os.path.join(SAMPLES, "mlp_sgd")
    cluster = tmp_path / "c.yaml"
    cluster.write_text("pservers: [%s]\nsplit_method: balanced\n" % ", ".join(EPS3))
    r = CliRunner().invoke(_plan_cli(), ["plan", os.path.join(d, "main.pb"), "--cluster",
                                         str(cluster)])
    assert r.exit_code == 0, r.output
    assert "hash_name*" in r.output and "balanced (config)" in r.output
    assert "* fleet style uses round_robin instead" in r.output
    cluster.write_text("pservers: [%s]\nsplit_method: greedy\n" % EPS3[0])
    r = CliRunner().invoke(_plan_cli(), ["plan", os.path.join(d, "main.pb"), "--cluster",
                                         str(cluster)])
    assert r.exit_code == 2
    assert "split_method" in r.output and "balanced" in r.output


def test_best_placement_of_pinned_tables():
    """Tables pinned by their rules are not moved: the best is measured around them."""
    main, startup, cfg = _load("fleet/ctr_sparse_adam_sync")
    plan = style_plan(main, startup, replace(cfg, split_method="balanced"))
    params = placed_params(plan, main)
    best, exact = best_placement(params, list(plan.endpoints))
    assert exact and best == placement(main, startup, replace(cfg, split_method="balanced"))\
        .imbalance
