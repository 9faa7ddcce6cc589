"""Passes as named units: the pipelines each style runs, --list-passes, --dump-after, errors
that name the pass, and plans that name ops by uid (not by an index earlier passes change)."""
import os

import pytest
from click.testing import CliRunner

from golden import CORPUS, load_case
from cli import main
from transpile.core.errors import UserError
from transpile.format import programio
from transpile.ir.program import Op
from transpile.passes.fleet import trainer as fleet_trainer
from transpile.passes.pipeline import Pass, PassEnv, PassFailed, Pipeline, named
from transpile.plan.fleet import make_plan
from transpile.split import pass_listing, split


def _args(case, out):
    c = os.path.join(CORPUS, case)
    return ["split", os.path.join(c, "main.pb"), "--startup", os.path.join(c, "startup.pb"),
            "--cluster", os.path.join(c, "cluster.yaml"), "--out", out]


def test_every_style_lists_its_pipelines():
    listing = pass_listing()
    styles = {style for style, _, _, _ in listing}
    assert styles == {"classic", "fleet", "ps"}
    kinds = {(style, kind) for style, _, kind, _ in listing}
    for style in styles:
        for kind in ("trainer main", "trainer startup", "pserver main", "pserver startup"):
            assert (style, kind) in kinds
    fleet_geo = [p for s, modes, k, p in listing if s == "fleet" and k == "trainer main"
                 and "geo" in modes]
    assert [name for name, _ in fleet_geo[0]] == ["demote_clip_ops", "append_sends",
                                                  "send_table_rows"]
    # every pass says what it does
    assert all(doc for _, _, _, passes in listing for _, doc in passes)


def test_list_passes_needs_no_other_option():
    r = CliRunner().invoke(main, ["split", "--list-passes"])
    assert r.exit_code == 0, r.output
    assert "fuse_sparse_lookups" in r.output and "ps style, trainer main" in r.output


def test_dump_after_writes_the_program_after_that_pass(tmp_path):
    out = str(tmp_path / "out")
    r = CliRunner().invoke(main, _args("fleet/ctr_sparse_adam_sync", out)
                           + ["--dump-after", "fuse_sparse_lookups", "--quiet"])
    assert r.exit_code == 0, r.output
    path = os.path.join(out, "dump", "trainer_0", "main.fuse_sparse_lookups.json")
    prog = programio.load(path)
    types = [op.type for op in prog.global_block.ops]
    # after the fusion, before append_sends: lookups fused, no send yet
    assert "distributed_lookup_table" in types and "send" not in types
    assert not os.path.exists(os.path.join(out, "dump", "trainer_0",
                                           "startup.fuse_sparse_lookups.json"))


def test_dump_after_a_pass_no_pipeline_runs_writes_nothing(tmp_path):
    out = str(tmp_path / "out")
    r = CliRunner().invoke(main, _args("fleet/ctr_sparse_adam_sync", out)
                           + ["--dump-after", "no_such_pass"])
    assert r.exit_code == 2 and "no_such_pass" in r.output and "--list-passes" in r.output
    assert not os.path.exists(out)


def test_an_error_names_the_pass_and_the_program():
    m, s, c = load_case("fleet", "ctr_sparse_adam_sync")
    s = s.copy()
    gone = "SparseFeatFactors"
    s.global_block.vars.pop(gone)
    s.global_block.ops = [op for op in s.global_block.ops if gone not in op.output_names()]
    with pytest.raises(UserError) as e:
        split(m, s, c)
    assert "(pass fake_init_tables, trainer_0/startup)" in str(e.value)


def test_a_bug_in_a_pass_is_named_and_stays_internal():
    m, s, c = load_case("fleet", "mlp_sgd_sync")

    def broken(prog, env):
        raise KeyError("oops")

    pipe = Pipeline("trainer main", (named(broken),))
    with pytest.raises(PassFailed, match="pass broken failed on trainer_9/main: KeyError"):
        pipe.run(m, PassEnv(make_plan(m, s, c), m, s), "trainer_9/main")


def test_the_op_an_error_is_about_is_named():
    m, s, c = load_case("fleet", "mlp_sgd_sync")
    target = m.global_block.ops[3]

    def refuse(prog, env):
        raise UserError("no good", op=target)

    with pytest.raises(UserError, match=r"no good \(pass refuse, k, at op 0:3 %s\)"
                       % target.type):
        Pipeline("p", (named(refuse),)).run(m, PassEnv(None, m, s), "k")


def test_plans_name_ops_by_uid_whatever_earlier_passes_inserted():
    """A pass that inserts ops before the optimizer (and copies every op) does not make
    delete_optimizer_ops delete the wrong ones: the plan names ops by uid, not position."""
    m, s, c = load_case("fleet", "mlp_adam_sync")
    plan = make_plan(m, s, c)
    env = PassEnv(plan, m, s)

    def shuffle(prog, env):
        out = prog.shallow_copy()
        block = out.global_block
        block.ops = [Op("fill_constant", {}, {"Out": ["x%d" % i]}) for i in range(5)] + \
            [op.copy() for op in block.ops]
        return out

    direct = fleet_trainer.delete_optimizer_ops(m, env)
    after = Pipeline("p", (Pass("shuffle", shuffle),
                           named(fleet_trainer.delete_optimizer_ops))).run(m, env)
    assert [op.type for op in after.global_block.ops][5:] == \
        [op.type for op in direct.global_block.ops]
    assert not any(op.uid in set(plan.optimize_ops) for op in after.global_block.ops)
