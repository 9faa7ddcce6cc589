"""runtime.json: the communicator settings agree with the trainer program and with the mode."""
import os

import pytest

from transpile import load, load_config, split
from transpile.core.config import with_trainer_id
from transpile.plan.fleet import STEP_COUNTER

FLEET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fleet")


def _split(name, trainer_id=0):
    case = os.path.join(FLEET, name)
    cfg = with_trainer_id(load_config(os.path.join(case, "cluster.yaml")), trainer_id)
    return split(load(os.path.join(case, "main.pb")), load(os.path.join(case, "startup.pb")), cfg)


def _ops(prog, type):
    return [op for op in prog.global_block.ops if op.type == type]


@pytest.mark.parametrize("name", ["mlp_sgd_sync", "mlp_adam_async", "ctr_sparse_adam_half_async",
                                  "large_scale_adam_async", "ctr_sparse_adam_geo",
                                  "l2decay_clip_unsplit_sync"])
def test_every_queue_sent_to_is_a_send_context(name):
    r = _split(name)
    rt, main = r.runtime["trainer_0"], r.programs["trainer_0/main"]
    queues = [op.attr("send_varnames")[0] for op in _ops(main, "send")]
    assert queues and set(queues) <= set(rt["send_ctx"])
    for op in _ops(main, "send"):
        ctx = rt["send_ctx"][op.attr("send_varnames")[0]]
        if ctx["var_name"] != STEP_COUNTER and rt["mode"] != "GEO":
            assert op.input("X") == ctx["origin_varnames"]


@pytest.mark.parametrize("name", ["ctr_sparse_adam_sync", "large_scale_adam_async"])
def test_sparse_tables_are_pushed_not_sent(name):
    r = _split(name)
    main = r.programs["trainer_0/main"]
    queues = [op.attr("send_varnames")[0] for op in _ops(main, "send")]
    assert "SparseFeatFactors@GRAD" not in queues
    assert r.runtime["trainer_0"]["send_ctx"]["SparseFeatFactors@GRAD"]["is_sparse"] is True
    push, = _ops(main, "distributed_push_sparse")
    lookup, = _ops(main, "distributed_lookup_table")
    assert push.attr("table_id") == lookup.attr("table_id") == 1


def test_trainer_recv_covers_the_dense_recv_contexts():
    r = _split("ctr_sparse_adam_async")
    recv, = _ops(r.programs["trainer_0/startup"], "recv")
    ctx = r.runtime["trainer_0"]["recv_ctx"]
    assert recv.attr("recv_varnames") == [n for c in ctx.values() for n in c["origin_varnames"]]
    assert all(not c["is_sparse"] for c in ctx.values())


def test_sync_names_each_trainers_grad_blocks_and_lists_the_endpoints():
    rt = _split("mlp_sgd_sync", trainer_id=1).runtime["trainer_1"]
    assert rt["mode"] == "SYNC" and rt["mode_id"] == 0
    assert rt["kwargs"] == {"need_global_step": "0", "trainer_id": 1,
                            "pserver_endpoints": ["127.0.0.1:6174", "127.0.0.1:6175"]}
    w = rt["send_ctx"]["fc_0.w_0@GRAD"]
    assert w["split_varnames"] == ["fc_0.w_0@GRAD.block0.trainer_1",
                                   "fc_0.w_0@GRAD.block1.trainer_1"]
    assert w["split_endpoints"] == ["127.0.0.1:6175", "127.0.0.1:6174"]
    assert w["sections"] == [500, 500] and w["trainer_id"] == 1
    # the parameter is received under its block names, without a trainer suffix
    assert rt["recv_ctx"]["fc_0.w_0"]["split_varnames"] == ["fc_0.w_0.block0", "fc_0.w_0.block1"]


def test_async_has_no_trainer_suffix_and_its_own_flags():
    rt = _split("mlp_sgd_async").runtime["trainer_0"]
    assert rt["kwargs"] == {"need_global_step": "0"}
    assert rt["send_ctx"]["fc_1.b_0@GRAD"]["split_varnames"] == ["fc_1.b_0@GRAD"]
    assert rt["envs"]["communicator_independent_recv_thread"] == "1"
    step = rt["send_ctx"][STEP_COUNTER]
    assert step["is_tensor_table"] is True and step["table_id"] == 0


def test_lr_decay_needs_the_global_step():
    assert _split("lrdecay_momentum_half_async").runtime["trainer_0"]["kwargs"] == \
        {"need_global_step": "1"}


def test_geo_sends_deltas_and_describes_its_tables():
    rt = _split("ctr_sparse_adam_geo").runtime["trainer_0"]
    assert rt["mode"] == "GEO" and rt["recv_type"] == 4
    assert rt["kwargs"]["trainers"] == 2
    assert rt["kwargs"]["sparse_attrs"] == "SparseFeatFactors:10000,16:uniform_random&0&-1.0&1.0"
    assert rt["envs"]["communicator_max_merge_var_num"] == "400"      # geo_push_nums
    table = rt["send_ctx"]["SparseFeatFactors"]
    assert table["split_varnames"] == ["SparseFeatFactors.block0.delta",
                                       "SparseFeatFactors.block1.delta"]
    assert rt["recv_ctx"]["SparseFeatFactors"]["is_sparse"] is True


def test_sparse_tables_keep_program_order_which_numbers_them(tmp_path):
    """PaddleRec's difm looks up SparseFeatFactors, then SparseFeatFactors2, whose names sort
    the other way ('2' < '@'): Paddle's runtime.json keeps program order, which numbers the
    tables the trainer's lookups name; ours is the same, bytes and order."""
    import json
    from click.testing import CliRunner
    from cli import main as cli_main
    from golden import split_args
    from transpile.check.inputs import sparse_numbers
    case = os.path.join(os.path.dirname(__file__), "corpus", "paddlerec-gen", "fleet_difm_async")
    out = str(tmp_path / "out")
    r = CliRunner().invoke(cli_main, split_args(case, out))
    assert r.exit_code == 0, r.output

    def sparse(folder):
        with open(os.path.join(folder, "trainer_0", "runtime.json")) as f:
            send = json.load(f)["send_ctx"]
        return [n for n, c in send.items() if isinstance(c, dict) and c.get("is_sparse")], send

    theirs, _ = sparse(os.path.join(case, "expected"))
    ours, send = sparse(out)
    assert ours == theirs == ["SparseFeatFactors@GRAD", "SparseFeatFactors2@GRAD"]
    assert sorted(ours) != ours
    from transpile.format import programio
    prog = programio.load(os.path.join(out, "trainer_0", "main.pb"))
    numbers = sparse_numbers(send)
    for op in prog.global_block.ops:
        if op.type == "distributed_lookup_table":
            assert numbers[op.attr("table_id")] == op.input("W")[0] + "@GRAD"
