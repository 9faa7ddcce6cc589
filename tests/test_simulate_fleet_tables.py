"""simulate: Fleet's sparse tables by table id (distributed_lookup_table with a table_id,
distributed_push_sparse), executed with the table semantics of the split itself
(simulate/runs/tableid.py)."""
from __future__ import annotations

import copy

import pytest

from transpile.simulate import simulate
from transpile.simulate.runs.tableid import sparse_contexts

from test_simulate import load_case

CASE = "fleet/ctr_sparse_adam_sync"


def run(case, progs, rts=None, steps=5, batch=4):
    main, startup, cfg, _, rts0 = load_case(case)
    return simulate(main, startup, cfg, progs, rts if rts is not None else rts0, steps=steps,
                    batch=batch, seed=0)


def _without_dangling_sums(progs):
    """The trainers' sums of grads no op writes (what Paddle keeps after it replaces the
    lookup_table_grad ops by distributed_push_sparse) taken out: a consistent split."""
    for key, prog in progs.items():
        if key.startswith("trainer_") and key.endswith("/main"):
            b = prog.global_block
            written = {n for op in b.ops for n in op.output_names()}
            b.ops = [op for op in b.ops
                     if not (op.type == "sum" and any(n not in written for n in op.input("X")))]
    return progs


def _trainer_op(progs, type_):
    return next(op for op in progs["trainer_0/main"].global_block.ops if op.type == type_)


def test_paddles_split_sums_empty_grads_and_trains():
    """The trainer keeps `sum` of SparseFeatFactors@GRAD@RENAME@block0@{0,1}, which the removed
    lookup_table_grad ops used to write: empty SelectedRows, which Paddle's sum skips, and
    nothing reads the sum's result: the split trains like the original."""
    _, _, _, progs, _ = load_case(CASE)
    res = run(CASE, progs, steps=1)
    assert res.error is None and res.exit_code == 0, res.error


def test_a_consistent_split_trains_like_the_original():
    """Without the dangling sum, the table is looked up from the pservers' row blocks by
    table_id and its grad pushed through runtime.json's send_ctx: equal to the original."""
    _, _, _, progs, _ = load_case(CASE)
    res = run(CASE, _without_dangling_sums(progs))
    assert res.error is None and res.exit_code == 0, res.error
    table = next(p for p in res.params if p.name == "SparseFeatFactors")
    assert table.ok and table.changed and not res.unchanged


def test_a_table_block_the_pserver_does_not_optimize_is_caught():
    _, _, _, progs, _ = load_case(CASE)
    progs = _without_dangling_sums(progs)
    for key, prog in progs.items():
        if key.startswith("pserver_") and key.endswith("/main"):
            for b in prog.blocks[1:]:
                b.ops = [op for op in b.ops
                         if op.input("Param") != ["SparseFeatFactors.block1"]]
    res = run(CASE, progs)
    assert res.exit_code == 1 and res.error is None
    assert "SparseFeatFactors" in {p.name for p in res.params if not p.ok}


def test_the_push_delivers_the_grad_or_the_table_does_not_train():
    _, _, _, progs, _ = load_case(CASE)
    progs = _without_dangling_sums(progs)
    b = progs["trainer_0/main"].global_block
    b.ops = [op for op in b.ops if op.type != "distributed_push_sparse"]
    res = run(CASE, progs, steps=1)
    # the pservers' optimize blocks of the table never get the grad
    assert res.exit_code == 1
    assert "SparseFeatFactors@GRAD.block0" in (res.error or "")


def test_a_table_id_no_context_names_is_a_finding():
    _, _, _, progs, _ = load_case(CASE)
    progs = _without_dangling_sums(progs)
    _trainer_op(progs, "distributed_lookup_table").set_attr("table_id", 7)
    res = run(CASE, progs, steps=1)
    assert res.exit_code == 1
    assert "table_id 7" in res.error and "no sparse send_ctx" in res.error
    assert "1 = SparseFeatFactors@GRAD" in res.error


def test_a_table_id_of_another_table_is_a_finding():
    """paddlerec-fleet/fm_sync has two tables (ids 1 and 2 after the dense table 0): the
    lookup of embedding_1.w_0 pointed at embedding_0.w_0's context."""
    case = "paddlerec-fleet/fm_sync"
    _, _, _, progs, _ = load_case(case)
    op = next(o for o in progs["trainer_0/main"].global_block.ops
              if o.type == "distributed_lookup_table" and o.input("W") == ["embedding_1.w_0"])
    op.set_attr("table_id", 1)
    res = run(case, progs, steps=1)
    assert res.exit_code == 1
    assert "embedding_1.w_0 has table_id 1, which is the send_ctx of embedding_0.w_0@GRAD" \
        in res.error


def test_a_block_no_pserver_serves_is_a_finding():
    main, startup, cfg, progs, rts = load_case(CASE)
    progs = _without_dangling_sums(progs)
    rts = copy.deepcopy(rts)
    ctx = rts["trainer_0"]["send_ctx"]["SparseFeatFactors@GRAD"]
    ctx["split_varnames"][1] = "Nowhere@GRAD.block1.trainer_0"
    res = run(CASE, progs, rts, steps=1)
    assert res.exit_code == 1
    assert "serves no block of the table for Nowhere@GRAD.block1.trainer_0" in res.error


def test_a_real_models_split_without_dangling_sums_trains_alike():
    """fm (two 1000001-row tables, each looked up once): Paddle's split has no dangling sum."""
    _, _, _, progs, _ = load_case("paddlerec-fleet/fm_sync")
    res = run("paddlerec-fleet/fm_sync", progs)
    assert res.exit_code == 0, res.error
    assert {"embedding_0.w_0", "embedding_1.w_0"} <= {p.name for p in res.params if p.changed}


def test_table_ids_count_the_sparse_contexts():
    """The ids Paddle's distributed_ops_pass gives: sparse contexts in order, from 1 when a
    dense table (0) exists, from 0 when none does; a context's own table_id wins."""
    def ctx(sparse, tid=-1, tensor=False):
        return {"is_sparse": sparse, "table_id": tid, "is_tensor_table": tensor}
    rt = {"send_ctx": {"fc@GRAD": ctx(False), "a@GRAD": ctx(True), "b@GRAD": ctx(True),
                       "@PS_STEP_COUNTER@": ctx(False, 2, True)}}
    assert {k: v[0] for k, v in sparse_contexts(rt).items()} == {1: "a@GRAD", 2: "b@GRAD"}
    rt = {"send_ctx": {"a@GRAD": ctx(True), "b@GRAD": ctx(True, 5)}}
    assert {k: v[0] for k, v in sparse_contexts(rt).items()} == {0: "a@GRAD", 5: "b@GRAD"}


# --- large-scale tables -----------------------------------------------------------------------
LARGE = "fleet/large_scale_adam_sync"


def test_a_large_scale_table_runs_with_paddles_fused_adam():
    """The pservers keep the table as large-scale tables (lookup_sparse_table_init) updated by
    lookup_sparse_table_fuse_adam, whose arithmetic is not adam's: the run says so."""
    _, _, _, progs, _ = load_case(LARGE)
    res = run(LARGE, _without_dangling_sums(progs))
    assert res.error is None and res.exit_code == 1
    assert "SparseFeatFactors" in {p.name for p in res.params if not p.ok}
    assert any("lookup_sparse_table_fuse_adam updates the large-scale table "
               "SparseFeatFactors.block0 with Paddle's fused kernel" in n for n in res.notes)


@pytest.mark.parametrize("case", [LARGE, "fleet/large_scale_adam_async",
                                  "fleet/large_scale_adam_half_async"])
def test_a_large_scale_table_with_sgd_trains_like_the_original(case):
    """sgd on both sides (fuse_sgd on the pservers): lookups from the large-scale tables'
    rows and the pushed grads reach them like the original's table. The tables start from the
    original's rows also where the pserver declares no var for the block (Paddle's async
    pservers: its rows are its grad's, `T@GRAD.blockN`)."""
    from transpile.ir.program import Op
    main, startup, cfg, progs, rts = load_case(case)
    main = main.copy()
    ops = main.global_block.ops
    for i, op in enumerate(ops):
        if op.input("Param") == ["SparseFeatFactors"]:
            ops[i] = Op("sgd", {"Param": ["SparseFeatFactors"], "Grad": op.input("Grad"),
                                "LearningRate": op.input("LearningRate")},
                        {"ParamOut": ["SparseFeatFactors"]})
    progs = _without_dangling_sums(progs)
    for key, prog in progs.items():
        for _, _, op in prog.ops():
            if op.type == "lookup_sparse_table_fuse_adam":
                op.type = "lookup_sparse_table_fuse_sgd"
    res = simulate(main, startup, cfg, progs, rts, steps=5, batch=4, seed=0)
    assert not [n for n in res.notes if "does not initialize" in n], res.notes
    assert res.exit_code == 0, (res.error, [(p.name, p.max_rel) for p in res.params])
    assert next(p for p in res.params if p.name == "SparseFeatFactors").changed


def test_large_scale_metas_are_read():
    from transpile.simulate.model.largescale import parse_meta
    m = parse_meta("T.block0:Param,Moment1,Moment2:16,16,16:0:T@GRAD.block0:T.block0,T_m1,T_m2,"
                   "kSparseIDs@T.block0:uniform_random&0&-1.0&1.0,fill_constant&0.0,"
                   "fill_constant&0.0:none")
    assert m["name"] == "T.block0" and m["grad"] == "T@GRAD.block0"
    assert m["values"] == ["Param", "Moment1", "Moment2"] and m["dims"] == [16, 16, 16]
    assert m["inits"][0] == "uniform_random&0&-1.0&1.0"


def test_fused_adam_corrects_the_bias_with_the_powers_it_just_wrote():
    """lookup_sparse_table_fuse_adam as Paddle 2.0's kernel computes it: the new beta powers
    are written first; where the outputs are the inputs (as Fleet wires them) the learning rate
    is scaled with beta^(t+1), not adam's beta^t. Hand-computed for one row, one step."""
    import numpy as np
    from types import SimpleNamespace
    from transpile.ir.program import Attr, Op
    from transpile.simulate.model import keyed, largescale
    from transpile.simulate.model.values import SelectedRows

    def run(pow_out):
        scope = {"lr": np.array([0.1]), "b1p": np.array([0.9]), "b2p": np.array([0.999]),
                 "g": SelectedRows(np.array([3]), np.array([[2.0]]), 10)}
        ex = SimpleNamespace(read=scope.__getitem__,
                             write=lambda b, n, v: scope.__setitem__(n, v))
        init = Op("fill_constant", {}, {"Out": ["T"]}, {"value": Attr.infer(1.0)})
        zero = Op("fill_constant", {}, {"Out": ["m"]}, {"value": Attr.infer(0.0)})
        ps = SimpleNamespace(endpoint="e", large_scale={"T": {"grad": "g", "values": {
            "Param": keyed.lazy_table(init, 0, 10, (1,), np.float64),
            "Moment1": keyed.lazy_table(zero, 0, 10, (1,), np.float64),
            "Moment2": keyed.lazy_table(zero, 0, 10, (1,), np.float64)}}})
        cluster = SimpleNamespace(note=lambda msg: None)
        op = Op("lookup_sparse_table_fuse_adam",
                {"Grad": ["g"], "LearningRate": ["lr"], "Beta1Pow": ["b1p"], "Beta2Pow": ["b2p"]},
                {"Beta1PowOut": [pow_out[0]], "Beta2PowOut": [pow_out[1]]},
                {"tablename": Attr.infer("T"), "beta1": Attr.infer(0.9),
                 "beta2": Attr.infer(0.999), "epsilon": Attr.infer(1e-8)})
        largescale.fuse(cluster, ps, ex, op)
        return float(ps.large_scale["T"]["values"]["Param"].get(np.array([3]))[0, 0])

    m1, m2 = 0.1 * 2.0, 0.001 * 4.0
    step = m1 / (np.sqrt(m2) + 1e-8)
    adam = 1.0 - 0.1 * np.sqrt(1 - 0.999) / (1 - 0.9) * step
    ahead = 1.0 - 0.1 * np.sqrt(1 - 0.999 ** 2) / (1 - 0.9 ** 2) * step
    assert np.isclose(run(("b1p_out", "b2p_out")), adam, rtol=1e-12)
    assert np.isclose(run(("b1p", "b2p")), ahead, rtol=1e-12)
    assert not np.isclose(adam, ahead, rtol=1e-3)
