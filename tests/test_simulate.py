"""simulate: the original program and Paddle's own split trained side by side with numpy."""
from __future__ import annotations

import json
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # tiny matrices: threads only cost time

import click
import pytest
from click.testing import CliRunner

from transpile.core.config import load_config
from transpile.core.errors import UserError
from transpile.format import programio
from transpile.ir.program import Op, Program
from transpile.simulate import simulate
from transpile.simulate.runs.splitprograms import rename_trainer_program

CORPUS = os.path.join(os.path.dirname(__file__), "corpus")

# Sync cases whose every op has a kernel: Paddle's split must train exactly like the original.
EQUAL_SYNC = [
    "classic/basic", "classic/decayed_adagrad", "classic/empty_pserver_block", "classic/l2decay",
    "classic/l2decay_piecewise", "classic/large_block_size", "classic/load_slice_var",
    "classic/lr_decay", "classic/lr_decay_conditional", "classic/no_slice_var",
    "classic/rmsprop", "fleet/mlp_adam_sync", "fleet/mlp_sgd_sync",
    # remote tables: distributed_lookup_table by height_sections on the pservers' table blocks,
    # the trainers' copies only fake_init'ed (never read); word2vec's 5 neg_label ids a sample
    "classic/fake_init", "classic/remote_prefetch_lookup_table",
]

_cache: dict = {}


def load_case(case):
    """(main, startup, config, {"trainer_0/main": Program, ...}, {"trainer_0": runtime})."""
    if case not in _cache:
        d = os.path.join(CORPUS, case)
        exp = os.path.join(d, "expected")
        progs, rts = {}, {}
        for sub in sorted(os.listdir(exp)):
            for kind in ("main", "startup"):
                f = os.path.join(exp, sub, kind + ".pb")
                if os.path.isfile(f):
                    progs["%s/%s" % (sub, kind)] = programio.load(f)
            rt = os.path.join(exp, sub, "runtime.json")
            if os.path.isfile(rt):
                with open(rt) as fh:
                    rts[sub] = json.load(fh)
        _cache[case] = (programio.load(os.path.join(d, "main.pb")),
                        programio.load(os.path.join(d, "startup.pb")),
                        load_config(os.path.join(d, "cluster.yaml")), progs, rts)
    main, startup, cfg, progs, rts = _cache[case]
    return main, startup, cfg, {k: p.copy() for k, p in progs.items()}, rts


def run(case, progs=None, steps=5, batch=2, **kw):
    main, startup, cfg, p, rts = load_case(case)
    return simulate(main, startup, cfg, p if progs is None else progs, rts, steps=steps,
                    batch=batch, seed=0, **kw)


@pytest.mark.parametrize("case", EQUAL_SYNC)
def test_paddle_sync_split_trains_like_the_original(case):
    res = run(case)
    assert res.error is None, res.error
    assert res.params and all(p.ok for p in res.params), \
        [(p.name, p.max_abs, p.max_rel, p.note) for p in res.params if not p.ok]
    assert res.exit_code == 0
    assert any("trainer_1 derived from trainer_0" in n for n in res.notes)


def test_equal_means_trained_alike_not_untrained():
    """One step without the pservers' sgd already differs: the equality above is earned."""
    _, _, _, progs, _ = load_case("classic/basic")
    _pserver_block_ops(progs, lambda op: op.type == "sgd")
    res = run("classic/basic", progs=progs, steps=1)
    assert res.exit_code == 1 and not res.equal


# --- splits broken on purpose --------------------------------------------------------------
def _pserver_block_ops(progs, pred):
    for key, prog in progs.items():
        if key.startswith("pserver_") and key.endswith("/main"):
            for b in prog.blocks[1:]:
                b.ops = [op for op in b.ops if not pred(op)]


def test_dropping_the_averaging_scale_is_caught():
    _, _, _, progs, _ = load_case("classic/basic")
    _pserver_block_ops(progs, lambda op: op.type == "scale")
    res = run("classic/basic", progs=progs)
    assert res.exit_code == 1
    assert {p.name for p in res.params if not p.ok} == {"fc_b", "fc_w"}


def test_dropping_an_optimizer_op_is_caught():
    _, _, _, progs, _ = load_case("fleet/mlp_adam_sync")
    dropped = []

    def pred(op):
        if op.type == "adam" and op.input("Param") == ["fc_1.w_0"]:
            dropped.append(op)
            return True
        return False
    _pserver_block_ops(progs, pred)
    assert dropped
    res = run("fleet/mlp_adam_sync", progs=progs, steps=2)
    assert res.exit_code == 1
    bad = {p.name for p in res.params if not p.ok}
    assert "fc_1.w_0" in bad


def test_shrinking_a_block_var_is_caught():
    _, _, _, progs, _ = load_case("classic/basic")
    ps = progs["pserver_127.0.0.1_6174/main"]
    v = ps.global_block.vars["fc_w.block1"]
    ps.global_block.vars["fc_w.block1"] = v.with_shape([400, 1000])
    res = run("classic/basic", progs=progs, steps=1)
    assert res.exit_code == 1
    assert "fc_w.block1" in res.error and "[400, 1000]" in res.error


def test_a_missing_send_is_caught():
    _, _, _, progs, _ = load_case("classic/basic")
    tr = progs["trainer_0/main"]
    tr.global_block.ops = [op for op in tr.global_block.ops
                           if not (op.type == "send" and "fc_b@GRAD.trainer_0" in op.input("X"))]
    res = run("classic/basic", progs=progs, steps=1)
    assert res.exit_code == 1
    assert "fc_b@GRAD.trainer_0" in res.error and "holds no value" in res.error


def test_an_op_without_kernel_is_named():
    _, _, _, progs, _ = load_case("classic/basic")
    tr = progs["trainer_0/main"]
    tr.global_block.ops.insert(0, Op("frobnicate", {"X": ["x"]}, {"Out": ["fc_0.tmp_0"]}))
    with pytest.raises(UserError, match="frobnicate"):
        run("classic/basic", progs=progs, steps=1)


@pytest.mark.parametrize("case", ["fleet/ctr_sparse_adam_sync", "fleet/large_scale_adam_sync"])
def test_a_sum_of_lookup_grads_nothing_writes_adds_empty_rows(case):
    """Paddle 2.6.2's FleetTranspiler replaces the table's lookup_table_grad ops by
    distributed_push_sparse but keeps the sum of the grads they wrote: the vars are empty
    SelectedRows, which Paddle's sum skips (measured on its executor), and nothing reads the
    sum's result: the trainer runs (fleet-orphan-sparse-grad-sum is dead code)."""
    res = run(case, steps=1)
    assert res.error is None
    if case == "fleet/ctr_sparse_adam_sync":
        assert res.exit_code == 0


def test_an_empty_selected_rows_fails_where_paddle_fails():
    """What no op writes, declared SELECTED_ROWS, is an empty SelectedRows: `sum` and
    `merge_selected_rows` pass it on; an op that needs its rows fails, as Paddle's kernels
    fail ("Tensor holds no memory")."""
    from transpile.ir.program import Var
    from transpile.simulate.model.executor import Executor
    from transpile.simulate.model.values import SimError
    prog = Program.empty()
    block = prog.global_block
    for n in ("g@RENAME@0", "g@RENAME@1", "g", "m", "t"):
        block.add_var(Var.tensor(n, "FP32", [10, 4], kind="SELECTED_ROWS" if n != "t"
                                 else "LOD_TENSOR"))
    block.ops += [Op("sum", {"X": ["g@RENAME@0", "g@RENAME@1"]}, {"Out": ["g"]}),
                  Op("merge_selected_rows", {"X": ["g"]}, {"Out": ["m"]}),
                  Op("get_tensor_from_selected_rows", {"X": ["m"]}, {"Out": ["t"]})]
    ex = Executor("trainer", prog)
    ex.run_block(0, 0, 2)
    assert ex.scope.get("m").no_memory
    with pytest.raises(SimError, match="reads m, an empty SelectedRows"):
        ex.run_block(0, 2)


# --- what Paddle's splits really do ----------------------------------------------------------
def _pservers(progs):
    return [p for k, p in progs.items() if k.startswith("pserver_") and k.endswith("/main")]


def test_fleet_sync_freezes_the_lr_decay_counter():
    """FleetTranspiler drops the increment of @LR_DECAY_COUNTER@ and, in sync mode, the trainer
    never sends @PS_STEP_COUNTER@: the pservers' LR block sees the startup value -1 forever
    (lr 0.1 * 0.9**floor(-1/1000) = 0.111 instead of 0.1). Put the increment back into the
    pservers' LR block and the split trains like the original."""
    res = run("fleet/lrdecay_momentum_sync")
    assert res.error is None and res.exit_code == 1
    assert {p.name for p in res.params if not p.ok} == {"fc_0.b_0", "fc_0.w_0", "fc_1.b_0",
                                                         "fc_1.w_0"}
    assert any("@LR_DECAY_COUNTER@" in n and "[-1]" in n for n in res.notes)
    main, _, _, progs, _ = load_case("fleet/lrdecay_momentum_sync")
    inc = next(op for op in main.global_block.ops if op.type == "increment")
    for ps in _pservers(progs):
        ps.blocks[1].ops.insert(0, inc.copy())
    fixed = run("fleet/lrdecay_momentum_sync", progs=progs)
    assert fixed.exit_code == 0, [(p.name, p.max_rel) for p in fixed.params]
    assert not any("@LR_DECAY_COUNTER@" in n for n in fixed.notes)


def test_local_table_is_fake_init_and_read_before_any_recv():
    """The classic transpiler fake_inits every is_sparse table on the trainer (shape, no
    memory) and receives it only at the end of a step, yet the trainer's own lookup_table reads
    it first: a real trainer fails at step 1. Receive the table blocks in the trainer's startup
    instead and the split trains like the original."""
    res = run("classic/local_lookup_table")
    assert res.exit_code == 1
    assert "shared_w" in res.error and "fake_init" in res.error and "lookup_table" in res.error
    _, _, _, progs, _ = load_case("classic/local_lookup_table")
    start, main = progs["trainer_0/startup"], progs["trainer_0/main"]
    b = start.global_block
    b.ops = [op for op in b.ops if op.type != "fake_init"]
    parts = ["shared_w.block0", "shared_w.block1"]
    for n in parts:
        b.vars[n] = main.global_block.vars[n]
    recv = Op("recv", {}, {"Out": parts})
    recv.set_attr("epmap", ["127.0.0.1:6174", "127.0.0.1:6175"])
    concat = Op("concat", {"X": parts}, {"Out": ["shared_w"]})
    concat.set_attr("axis", 0)
    b.ops += [recv, concat]
    fixed = run("classic/local_lookup_table", progs=progs)
    assert fixed.exit_code == 0, (fixed.error, [(p.name, p.max_rel) for p in fixed.params])


def _sgd_for_table(main, table):
    """The original with the table's optimizer swapped for sgd at the same learning rate."""
    main = main.copy()
    ops = main.global_block.ops
    for i, op in enumerate(ops):
        if op.input("Param") == [table] and op.type != "sgd":
            ops[i] = Op("sgd", {"Param": [table], "Grad": op.input("Grad"),
                                "LearningRate": op.input("LearningRate")}, {"ParamOut": [table]})
    return main


def test_dist_table_is_sgd_and_summed_not_averaged():
    """The classic dist_lookup_table split (split_ids / prefetch / merge_ids; auto-grown tables
    on the pservers) trains the table with sgd where the original has adam, and sums the
    trainers' sparse grads without the 1/trainers its dense blocks apply."""
    one = run("classic/dist_lookup_table", steps=1)
    assert one.error is None and one.exit_code == 1
    assert {p.name for p in one.params if not p.ok} == {"shared_w"}
    assert any("grows by first lookup" in n for n in one.notes)
    assert any("updates shared_w with sgd; the original updates shared_w with adam" in n
               for n in one.notes)
    assert any("sums the trainers' shared_w@GRAD without the 1/trainers" in n for n in one.notes)
    main, startup, cfg, progs, rts = load_case("classic/dist_lookup_table")
    sgd_main = _sgd_for_table(main, "shared_w")
    # sgd in the original too: what is left is the missing average (after one step; later
    # steps read the table's rows again, and the dense layers follow it)
    res = simulate(sgd_main, startup, cfg, progs, rts, steps=1, batch=4, seed=0)
    assert {p.name for p in res.params if not p.ok} == {"shared_w"}
    for ps in _pservers(progs):
        blk = next(b for b in ps.blocks if any(op.type == "sgd" for op in b.ops))
        scale = Op("scale", {"X": ["shared_w@GRAD"]}, {"Out": ["shared_w@GRAD"]})
        scale.set_attr("scale", 1.0 / cfg.trainers)
        blk.ops.insert(1, scale)
    fixed = simulate(sgd_main, startup, cfg, progs, rts, steps=5, batch=4, seed=0)
    assert fixed.exit_code == 0, [(p.name, p.max_rel) for p in fixed.params]


def test_fleet_clips_each_trainers_grad_before_averaging():
    """Fleet moves clip (op_role backward) onto the trainers: the pservers average clipped
    grads, mean(clip(g_i)) != clip(mean(g_i)). Widen the clip and the difference is gone."""
    res = run("fleet/l2decay_clip_unsplit_sync", batch=4)
    assert res.exit_code == 1 and res.error is None
    main, startup, cfg, progs, rts = load_case("fleet/l2decay_clip_unsplit_sync")
    main = main.copy()
    for prog in [main] + list(progs.values()):
        for _, _, op in prog.ops():
            if op.type == "clip":
                op.set_attr("min", -1e9)
                op.set_attr("max", 1e9)
    wide = simulate(main, startup, cfg, progs, rts, steps=5, batch=4, seed=0)
    assert wide.exit_code == 0, [(p.name, p.max_rel) for p in wide.params]


def test_options_come_as_one_object():
    """simulate() takes its options as a SimOptions (`options=`), a field given by name over
    it; both ways run the same (seen failing before SimOptions: simulate took no `options`)."""
    from transpile.simulate import SimOptions
    main, startup, cfg, progs, rts = load_case("classic/basic")
    seen = []
    opts = SimOptions(steps=2, batch=4, seed=0, progress=lambda d, t: seen.append((d, t)))
    one = simulate(main, startup, cfg, progs, rts, options=opts)
    _, _, _, progs, rts = load_case("classic/basic")
    other = simulate(main, startup, cfg, progs, rts, options=SimOptions(steps=7, batch=4),
                     steps=2)
    assert (one.steps, one.batch, one.exit_code) == (other.steps, other.batch, 0) == (2, 4, 0)
    assert [(p.name, p.max_abs) for p in one.params] == \
        [(p.name, p.max_abs) for p in other.params]
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]     # the original's 2 steps, the split's 2
    with pytest.raises(TypeError):
        simulate(main, startup, cfg, progs, rts, stepz=2)


def test_the_one_step_loop():
    """runner.train_steps: each step's global batch fed, cut into the trainers' shards and
    stepped; `more` asked only once `steps` are taken; `done` after each step."""
    from transpile.simulate.runs.runner import train_steps

    class Feeder:
        def feed(self, s):
            return "batch%d" % s

        def shard(self, glob, t, n):
            return "%s/%d of %d" % (glob, t, n)

    class Stepper:
        taken: list = []

        def step(self, s, shards, per):
            self.taken.append((s, shards, per))

    asked, done = [], []
    stepper = Stepper()
    n = train_steps(stepper, Feeder(), 2, 3, per=4, start=1,
                    more=lambda s: asked.append(s) or s < 4, done=done.append)
    assert n == 4 and asked == [3, 4] and done == [2, 3, 4]
    assert stepper.taken == [(s, ["batch%d/0 of 2" % s, "batch%d/1 of 2" % s], 4)
                             for s in (1, 2, 3)]


def test_rename_trainer_program():
    _, _, _, progs, _ = load_case("classic/basic")
    t1 = rename_trainer_program(progs["trainer_0/main"], 0, 1)
    names = set(t1.global_block.vars)
    assert "fc_w@GRAD.block0.trainer_1" in names and "fc_b@GRAD.trainer_1" in names
    assert not any(".trainer_0" in n for n in names)
    assert all(op.attr("trainer_id") == 1 for op in t1.global_block.ops
               if "trainer_id" in op.attrs)
    assert "fc_b@GRAD.trainer_0" in progs["trainer_0/main"].global_block.vars   # input kept


# --- feeds and kernels -------------------------------------------------------------------------
def test_feeds_follow_the_programs_grouping():
    """word2vec's neg_label is declared [-1, 1] but reshaped to [-1, 5, 8] after its lookup:
    5 ids a sample, one sequence of 5 per sample; input_word (no sequence op) one id."""
    from transpile.simulate.model.feeds import Feeder
    main, *_ = load_case("classic/fake_init")
    f = Feeder(main, 4, 0, float)
    glob = f.feed(0)
    assert glob["neg_label"][0].shape == (20, 1)
    assert glob["input_word"][0].shape == (4, 1)
    shard = f.shard(glob, 1, 2)
    assert shard["neg_label"][0].shape == (10, 1)
    assert (shard["neg_label"][0] == glob["neg_label"][0][10:]).all()



def test_kernel_gradients_match_finite_differences():
    """softmax_with_cross_entropy + sequence_pool + elementwise_add(axis=1) + mul, by hand."""
    import numpy as np
    from transpile.ir.program import Block, Program, Var
    from transpile.simulate.model.executor import Executor

    def t(name, shape, dtype="FP64", lod=0):
        return Var.tensor(name, dtype, shape, lod_level=lod)
    b = Block(0, -1)
    for v in (t("e", [-1, 3], lod=1), t("p", [-1, 3]), t("w", [3, 4]), t("h", [-1, 4]),
              t("bias", [4]), t("z", [-1, 4]), t("lab", [-1, 1], "INT64"), t("sm", [-1, 4]),
              t("loss", [-1, 1]), t("m", []), t("m@GRAD", []), t("loss@GRAD", [-1, 1]),
              t("z@GRAD", [-1, 4]), t("h@GRAD", [-1, 4]), t("bias@GRAD", [4]),
              t("p@GRAD", [-1, 3]), t("w@GRAD", [3, 4]), t("e@GRAD", [-1, 3]), t("mi", [])):
        b.add_var(v)
    b.ops = [
        Op("sequence_pool", {"X": ["e"]}, {"Out": ["p"], "MaxIndex": ["mi"]}),
        Op("mul", {"X": ["p"], "Y": ["w"]}, {"Out": ["h"]}),
        Op("elementwise_add", {"X": ["h"], "Y": ["bias"]}, {"Out": ["z"]}),
        Op("softmax_with_cross_entropy", {"Logits": ["z"], "Label": ["lab"]},
           {"Softmax": ["sm"], "Loss": ["loss"]}),
        Op("reduce_mean", {"X": ["loss"]}, {"Out": ["m"]}),
        Op("fill_constant", {}, {"Out": ["m@GRAD"]}),
        Op("reduce_mean_grad", {"X": ["loss"], "Out@GRAD": ["m@GRAD"]}, {"X@GRAD": ["loss@GRAD"]}),
        Op("softmax_with_cross_entropy_grad", {"Softmax": ["sm"], "Label": ["lab"],
                                               "Loss@GRAD": ["loss@GRAD"]},
           {"Logits@GRAD": ["z@GRAD"]}),
        Op("elementwise_add_grad", {"X": ["h"], "Y": ["bias"], "Out@GRAD": ["z@GRAD"]},
           {"X@GRAD": ["h@GRAD"], "Y@GRAD": ["bias@GRAD"]}),
        Op("mul_grad", {"X": ["p"], "Y": ["w"], "Out@GRAD": ["h@GRAD"]},
           {"X@GRAD": ["p@GRAD"], "Y@GRAD": ["w@GRAD"]}),
        Op("sequence_pool_grad", {"X": ["e"], "Out@GRAD": ["p@GRAD"]}, {"X@GRAD": ["e@GRAD"]}),
    ]
    b.ops[0].set_attr("pooltype", "AVERAGE")
    b.ops[2].set_attr("axis", 1)
    b.ops[4].set_attr("reduce_all", True)
    b.ops[5].set_attr("shape", [])
    b.ops[5].set_attr("value", 1.0)
    b.ops[5].set_attr("dtype", 6)
    for i in (6,):
        b.ops[i].set_attr("reduce_all", True)
    b.ops[8].set_attr("axis", 1)
    prog = Program([b])
    rng = np.random.default_rng(0)
    A = {"e": rng.normal(size=(5, 3)), "w": rng.normal(size=(3, 4)), "bias": rng.normal(size=4),
         "lab": np.array([[1], [3]])}

    def loss(vals, grads=False):
        ex = Executor("t", prog)
        for k, v in vals.items():
            ex.scope.put(k, v, [[0, 2, 5]] if k == "e" else None)
        ex.run_block(0, 0, None if grads else 5)
        return ex.scope
    sc = loss(A, grads=True)
    for name in ("e", "w", "bias"):
        g = sc.get(name + "@GRAD")
        num = np.zeros_like(A[name])
        for idx in np.ndindex(*A[name].shape):
            for sign in (1, -1):
                B = dict(A)
                B[name] = A[name].copy()
                B[name][idx] += sign * 1e-6
                num[idx] += sign * float(loss(B).get("m")) / 2e-6
        assert np.allclose(g, num, atol=1e-6), name


# --- the command -----------------------------------------------------------------------------
def _group():
    from transpile.commands.common import handle_errors
    from transpile.commands.simulate import register

    @click.group()
    def g():
        pass
    register(g, handle_errors)
    return g


def test_cli_equal_and_broken(tmp_path):
    d = os.path.join(CORPUS, "fleet/mlp_sgd_sync")
    args = ["simulate", os.path.join(d, "main.pb"), os.path.join(d, "expected"),
            "--startup", os.path.join(d, "startup.pb"), "--cluster",
            os.path.join(d, "cluster.yaml"), "--steps", "2", "--batch", "2"]
    r = CliRunner().invoke(_group(), args)
    assert r.exit_code == 0, r.output
    assert "fc_0.w_0" in r.output and "equal within rtol" in r.output
    # the same split with one pserver block's optimizer gone
    import shutil
    split = tmp_path / "split"
    shutil.copytree(os.path.join(d, "expected"), split)
    ps = split / "pserver_127.0.0.1_6175" / "main.pb"
    prog = programio.load(str(ps))
    for blk in prog.blocks[1:]:
        blk.ops = [op for op in blk.ops if op.type != "sgd"]
    programio.save(prog, str(ps))
    args[2] = str(split)
    r = CliRunner().invoke(_group(), args)
    assert r.exit_code == 1, r.output
    assert "DIFFERS" in r.output


def test_cli_bad_input_exits_2(tmp_path):
    d = os.path.join(CORPUS, "classic/basic")
    r = CliRunner().invoke(_group(), ["simulate", os.path.join(d, "main.pb"), str(tmp_path),
                                      "--cluster", os.path.join(d, "cluster.yaml")])
    assert r.exit_code == 2
    assert "no trainer_<id>/ or pserver" in r.output


def test_async_step_counter_notifies_the_pservers():
    """Fleet async: each trainer step sends @PS_STEP_COUNTER@ to every pserver, which sets
    @LR_DECAY_COUNTER@ to the sum over trainers and reruns its LR-decay block."""
    import numpy as np
    from transpile.simulate import Reference, split_programs_from
    from transpile.simulate.runs.cluster import Cluster
    from transpile.simulate.model.executor import Executor
    from transpile.simulate.model.feeds import Feeder
    main, startup, cfg, progs, rts = load_case("fleet/lrdecay_momentum_async")
    ref = Reference(main, startup)
    orig = Executor("original", startup)
    orig.run_block(0)
    ref.init = dict(orig.scope.vars)
    cluster = Cluster(split_programs_from(progs, rts, cfg), cfg, float_dtype=np.float64,
                      seed=0, reference=ref)
    cluster.startup()
    feeder = Feeder(main, 2, 0, np.float64)
    for s in range(3):
        glob = feeder.feed(s)
        cluster.step(s, [feeder.shard(glob, t.tid, 2) for t in cluster.trainers], 1)
    for ps in cluster.pservers.values():
        assert ps.decay_counters == {0: 3, 1: 3}
        assert np.asarray(ps.value("@LR_DECAY_COUNTER@")).tolist() == [6]
