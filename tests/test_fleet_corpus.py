"""Fleet style against Paddle's own Fleet output (tests/corpus/fleet), plus the properties the
comparison alone would not catch: refusals write nothing, output is byte-identical whatever
PYTHONHASHSEED, inputs are left untouched, and the slicing arithmetic."""
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from golden import case_dirs, is_refused, load_case, split_and_compare, split_args, tree_files
from transpile import split
from transpile.format.programio import to_bytes
from transpile.plan.fleet import make_plan
from transpile.plan.slicing import (FLEET_MIN_BLOCK_SIZE, origin_varname, slice_rows_evenly,
                                    slice_variable)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CASES = case_dirs("fleet")
FLEET = os.path.join(HERE, "corpus", "fleet")


@pytest.mark.parametrize("case", CASES, ids=os.path.basename)
def test_case_matches_paddle(case, tmp_path):
    output, diffs = split_and_compare(case, str(tmp_path / "out"))
    assert not diffs, "\n".join([output] + diffs[:40])


@pytest.mark.parametrize("case", [c for c in CASES if is_refused(c)], ids=os.path.basename)
def test_refused_case_exits_2_with_one_line_and_writes_nothing(case, tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(cli_main, split_args(case, str(out)))
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "geo mode" in r.output
    assert not out.exists()


def test_geo_refusal_messages_say_why():
    m, s, c = load_case("fleet", "mlp_sgd_geo")
    with pytest.raises(Exception, match="geo mode needs a sparse parameter"):
        split(m, s, c)
    m, s, c = load_case("fleet", "large_scale_adam_geo")
    with pytest.raises(Exception, match="geo mode can not handle large-scale embedding tables"):
        split(m, s, c)


@pytest.mark.parametrize("name", ["ctr_sparse_adam_sync", "large_scale_adam_async",
                                  "lrdecay_momentum_half_async", "ctr_sparse_adam_geo"])
def test_output_is_byte_identical_whatever_the_hash_seed(name, tmp_path):
    case = os.path.join(FLEET, name)
    trees = []
    for seed in ("0", "4242"):
        out = str(tmp_path / ("out" + seed))
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, os.path.join(ROOT, "cli.py"), "-q"]
                       + split_args(case, out) + ["--trainer-id", "all"],
                       check=True, env=env, cwd=ROOT)
        trees.append(tree_files(out))
    assert trees[0].keys() == trees[1].keys() and "trainer_1/runtime.json" in trees[0]
    assert trees[0] == trees[1]


def test_split_leaves_its_inputs_alone_and_repeats_exactly():
    m, s, c = load_case("fleet", "large_scale_adam_sync")
    before = (to_bytes(m), to_bytes(s))
    first = split(m, s, c)
    second = split(m, s, c)
    assert (to_bytes(m), to_bytes(s)) == before
    assert {k: to_bytes(p) for k, p in first.programs.items()} == \
        {k: to_bytes(p) for k, p in second.programs.items()}
    assert first.runtime == second.runtime


# --- the plan ----------------------------------------------------------------------------------
def _dense_block_sizes(shape, count):
    return slice_variable(shape, count, FLEET_MIN_BLOCK_SIZE)


def test_dense_blocks_follow_fleet_min_block_size_and_whole_rows():
    assert _dense_block_sizes((1000, 1000), 2) == [500000, 500000]
    assert _dense_block_sizes((1000, 1), 2) == [1000]               # < 81920 elements: one block
    assert _dense_block_sizes((64, 32), 2) == [2048]
    # 3 rows of 81920: two pservers, blocks of whole rows (2 rows + 1 row)
    assert _dense_block_sizes((3, 81920), 2) == [163840, 81920]
    assert _dense_block_sizes((200000,), 3) == [100000, 100000]     # only 2 blocks reach 81920
    assert _dense_block_sizes((250000,), 3) == [83334, 83334, 83332]


def test_sparse_tables_split_by_rows_one_block_per_endpoint():
    assert slice_rows_evenly((10000, 16), 2) == [80000, 80000]
    assert slice_rows_evenly((10001, 16), 2) == [80024, 80008]    # extra row to the first
    assert slice_rows_evenly((5, 3), 1) == [15]


def test_plan_dispatch_round_robin_dense_continues_sparse_restarts():
    m, s, c = load_case("fleet", "ctr_sparse_adam_sync")
    plan = make_plan(m, s, c)
    a, b = c.pservers
    held = {ep: [x.name for x in plan.ep_params[ep]] for ep in c.pservers}
    assert held[a] == ["fc_0.b_0", "fc_1.b_0", "SparseFeatFactors.block0"]
    assert held[b] == ["fc_0.w_0", "fc_1.w_0", "SparseFeatFactors.block1"]
    assert plan.table_ids["SparseFeatFactors"] == 1          # table 0 is the dense one
    assert [p.param for p in plan.sparse_pairs] == ["SparseFeatFactors"]
    assert plan.param_slices["fc_0.w_0"][0].name == "fc_0.w_0"     # < 81920 elements: whole


def test_origin_varname_strips_block_and_trainer_suffixes():
    assert origin_varname("fc_0.w_0@GRAD.block1.trainer_0") == "fc_0.w_0@GRAD"
    assert origin_varname("fc_0.w_0.block0") == "fc_0.w_0"
    assert origin_varname("clip_0.tmp_0.trainer_1") == "clip_0.tmp_0"


def test_a_scheduled_learning_rate_stays_on_the_trainer():
    from transpile.passes.fleet.trainer import MAIN
    from transpile.passes.pipeline import PassEnv
    m, s, c = load_case("fleet", "mlp_sgd_async")
    plain = MAIN.run(m, PassEnv(make_plan(m, s, c), m, s))
    assert "learning_rate_0" not in plain.global_block.vars
    scheduled = MAIN.run(m, PassEnv(make_plan(m, s, c, lr_scheduler=True), m, s))
    lr = scheduled.global_block.vars["learning_rate_0"]
    assert lr.persistable and lr.shape == m.global_block.vars["learning_rate_0"].shape
    assert [op.type for op in scheduled.global_block.ops] == \
        [op.type for op in plain.global_block.ops]


def test_endpoint_of_names_every_endpoint_holding_a_slice_once_in_order():
    """endpoint_of (Paddle's build_ctx lookup): the endpoints holding a slice of that name,
    each once, in endpoint order: one string per slice held by one endpoint, a tuple when
    several hold it (a split to many pservers has a hundred thousand slices)."""
    from types import SimpleNamespace
    from transpile.plan.fleet import FleetPlan
    from transpile.plan.slicing import VarBlock

    def blk(name, ep):
        return VarBlock(name, name, 0, 0, (4,), "FP32", ep)
    eps = ("a:1", "b:2", "c:3")
    fake = SimpleNamespace(endpoints=eps, ep_params={
        "a:1": (blk("w", "a:1"), blk("t", "a:1")), "b:2": (blk("t", "b:2"),),
        "c:3": (blk("t", "c:3"), blk("t", "c:3"))}, ep_grads={
        "a:1": (blk("w@GRAD", "a:1"), blk("w@GRAD", "a:1")), "b:2": (), "c:3": ()})
    fake._slice_endpoints = FleetPlan._slice_endpoints.func(fake)
    of = lambda name: FleetPlan.endpoint_of(fake, name)     # noqa: E731
    assert of("w") == ["a:1"] and of("w@GRAD") == ["a:1"]
    assert of("t") == ["a:1", "b:2", "c:3"] and of("nowhere") == []
    assert of("t") is not of("t")               # a list of its own each time
    m, s, c = load_case("fleet", "ctr_sparse_adam_sync")
    plan = make_plan(m, s, c)
    for ep in plan.endpoints:
        for b in plan.ep_params[ep] + plan.ep_grads[ep]:
            assert plan.endpoint_of(b.name) == [e for e in plan.endpoints if any(
                x.name == b.name for x in plan.ep_params[e] + plan.ep_grads[e])]
