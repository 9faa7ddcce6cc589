"""check/inputs.py: what a Paddle process of a split would reject at its first step.

Each check is seen to fire on a broken split (Paddle's own, where Paddle writes one broken, or a
correct one broken by hand) and to stay clean on correct splits (the corpus's; the
`paddle_faults: fix` splits are checked clean in test_faults.py and test_clip_corpus.py)."""
import pytest

from test_check import Split, run_check
from transpile.check.inputs import sparse_numbers


def _new(case, broken_dir, check=None):
    before = {f.line() for f in run_check(case).findings}
    new = [f for f in run_check(case, broken_dir).findings if f.line() not in before]
    return [f for f in new if check is None or f.check == check]


def test_sparse_numbers_follow_runtime_json_order():
    dense = {"is_sparse": False, "is_tensor_table": False}
    ctx = {"b@GRAD": {"is_sparse": True, "table_id": -1}, "d": dense,
           "a@GRAD": {"is_sparse": True, "table_id": -1}}
    assert sparse_numbers(ctx) == {1: "b@GRAD", 2: "a@GRAD"}      # table 0 is the dense one
    assert sparse_numbers({k: v for k, v in ctx.items() if k != "d"}) == \
        {0: "b@GRAD", 1: "a@GRAD"}
    assert sparse_numbers({"a@GRAD": {"is_sparse": True, "table_id": 7}}) == {7: "a@GRAD"}


# ---------------------------------------------------------------------------------------------
# ids: a fused lookup / push fed ids that are not 2-D

@pytest.mark.parametrize("case,fault", [
    ("paddlerec-fleet/fm_sync", "fleet-lookup-ids-not-2d"),
    ("paddlerec-ps/fm_sync", "ps-lookup-ids-not-2d"),
])
def test_one_d_ids_of_a_fused_lookup_are_named(case, fault, tmp_path):
    s = Split(case, tmp_path)
    prog = s.prog("trainer_0/main")
    block = prog.global_block
    op = next(op for op in block.ops if op.type == "distributed_lookup_table")
    ids = op.input("Ids")[0]
    block.vars[ids] = block.vars[ids].with_shape([-1])
    new = _new(case, s.save(), "trainer")
    assert new and all(f.fault == fault for f in new), [f.line() for f in new]
    assert "must be 2" in new[0].message and ids in new[0].message


# ---------------------------------------------------------------------------------------------
# table ids: runtime.json's sparse order numbers the tables the trainer's lookups name

CTR2 = "clip/fleet_ctr2_emb_clipvalue_async"       # user_emb and item_emb, two sparse tables


def test_two_tables_in_paddles_order_check_clean():
    numbers = sparse_numbers(_runtime(CTR2)["send_ctx"])
    assert len(numbers) == 2
    assert not [f for f in run_check(CTR2).findings if f.check == "send"]


def _runtime(case):
    import json
    import os
    from test_check import case_path
    with open(os.path.join(case_path(case), "expected", "trainer_0", "runtime.json")) as f:
        return json.load(f)


def test_sparse_entries_out_of_order_are_caught(tmp_path):
    s = Split(CTR2, tmp_path)
    rt = s.runtime("trainer_0")
    send = rt["send_ctx"]
    sparse = [k for k, c in send.items() if c.get("is_sparse")]
    assert len(sparse) == 2
    order = list(send)
    i, j = order.index(sparse[0]), order.index(sparse[1])
    order[i], order[j] = order[j], order[i]
    rt["send_ctx"] = {k: send[k] for k in order}
    new = _new(CTR2, s.save(), "send")
    assert new and any("names table" in f.message and "another table" in f.message
                       for f in new), [f.line() for f in new]


def test_a_lookup_naming_another_tables_number_is_caught(tmp_path):
    s = Split(CTR2, tmp_path)
    ops = s.prog("trainer_0/main").global_block.ops
    looks = [op for op in ops if op.type == "distributed_lookup_table"]
    a, b = looks[0].attr("table_id"), looks[1].attr("table_id")
    assert a != b
    looks[0].set_attr("table_id", b)
    new = _new(CTR2, s.save(), "send")
    assert any("names table %d" % b in f.message for f in new), [f.line() for f in new]


# ---------------------------------------------------------------------------------------------
# reads: trainer reads (sends) of vars no op writes, pserver ops reading vars nothing provides

CLASSIC_CLIP = "clip/classic_ctr1_emb_clipvalue_sync"


def test_paddles_classic_clip_split_is_named():
    findings = run_check(CLASSIC_CLIP).findings
    sends = [f for f in findings if f.check in ("send", "trainer")
             and "no op of the trainer writes" in f.message]
    reads = [f for f in findings if f.check == "optimize" and "neither receives" in f.message]
    undeclared = [f for f in findings if f.check == "structure" and "not declared" in f.message]
    assert sends and reads and undeclared
    assert {f.fault for f in sends + reads + undeclared} == {"classic-clip-on-pserver"}


def test_paddles_fleet_decay_of_a_sliced_table_is_named():
    findings = run_check("clip/fleet_ctr1_emb_l2_sync").findings
    reads = [f for f in findings if "neither receives" in f.message]
    assert reads and {f.fault for f in reads} == {"fleet-sparse-decay-whole-table"}
    assert any("SparseFeatFactors" in f.message for f in reads)


@pytest.mark.parametrize("case", ["classic/basic", "paddlerec-classic/fm_sync"])
def test_a_send_of_an_unwritten_var_is_caught(case, tmp_path):
    s = Split(case, tmp_path)
    block = s.prog("trainer_0/main").global_block
    send = next(op for op in block.ops if op.type == "send")
    name = send.input("X")[0]
    writer = max(i for i, op in enumerate(block.ops[:block.ops.index(send)])
                 if name in [n for args in op.outputs.values() for n in args])
    del block.ops[writer]
    new = _new(case, s.save(), "send")
    assert any(name in f.message and "no op of the trainer writes" in f.message
               and not f.fault for f in new), [f.line() for f in new]


@pytest.mark.parametrize("case", ["classic/basic", "fleet/mlp_sgd_sync"])
def test_a_pserver_update_reading_what_it_lacks_is_caught(case, tmp_path):
    s = Split(case, tmp_path)
    ps = s.pservers()[0]
    prog = s.prog(ps + "/main")
    op = next(op for b in prog.blocks[1:] for op in b.ops if op.input("Grad"))
    op.inputs["Grad"] = ["nobody_sends_this@GRAD"]
    new = _new(case, s.save(), "optimize")
    assert any("nobody_sends_this@GRAD" in f.message and "neither receives" in f.message
               for f in new), [f.line() for f in new]


def test_a_reshape_of_the_programs_own_before_a_lookup_is_no_alias():
    """PaddleRec's movie_recommand reshapes its ids before the lookup (reshape2_4.tmp_0):
    Paddle's ps split pulls by those, and check must not take them for the ids fix's `@2D`."""
    case = "paddlerec-gen/ps_movie_recommand_rank_sync"
    report = run_check(case)
    assert report.ok, "\n".join(f.line() for f in report.findings)
