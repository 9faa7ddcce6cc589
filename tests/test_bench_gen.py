"""bench/gen.py: the generated programs look like Paddle's and round-trip. No timing here."""
import importlib.util
import json
import os
import sys

import pytest

from transpile.core.config import load_config
from transpile.format import programio
from transpile.format.proto import ProgramDesc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_gen():
    spec = importlib.util.spec_from_file_location("bench_gen", os.path.join(ROOT, "bench",
                                                                            "gen.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_gen"] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _load_gen()
# the generator's op vocabulary: bench/gen_ops.py, importable once gen.py put bench/ on sys.path
from gen_ops import BACKWARD, LOSS, LRSCHED, OPTIMIZE, PADDLE_VERSION  # noqa: E402

OPTIMIZERS = {"sgd": (), "momentum": ("Velocity",),
              "adam": ("Moment1", "Moment2", "Beta1Pow", "Beta2Pow")}
COMMON_ATTRS = {"op_callstack", "op_device", "op_namescope", "op_role", "op_role_var",
                "with_quant_attr"}
CASES = [(kind, opt, lr) for kind in ("mlp", "ctr") for opt in OPTIMIZERS
         for lr in (False, True)]

_cache = {}


def programs(kind, optimizer, lr_decay=False, ops=600, **kw):
    key = (kind, optimizer, lr_decay, ops, tuple(sorted(kw.items())))
    if key not in _cache:
        _cache[key] = gen.generate_programs(kind, ops, optimizer, lr_decay, **kw)
    return _cache[key]


@pytest.mark.parametrize("kind,optimizer,lr_decay", CASES)
def test_round_trip_byte_identical(kind, optimizer, lr_decay):
    main, startup, _ = programs(kind, optimizer, lr_decay)
    for prog in (main, startup):
        data = programio.to_bytes(prog)                  # what gen.py writes
        # as protobuf itself writes them
        assert ProgramDesc.FromString(data).SerializeToString(deterministic=True) == data
        back = programio.from_bytes(data)
        assert programio.to_bytes(back) == data          # and they read back losslessly
        assert back == prog


@pytest.mark.parametrize("kind", ["mlp", "ctr"])
@pytest.mark.parametrize("ops", [200, 1000, 4000])
def test_op_count_within_a_few_percent(kind, ops):
    main, _, _ = programs(kind, "adam", ops=ops)
    n = len(main.global_block.ops)
    assert abs(n - ops) <= max(4, 0.03 * ops), n


@pytest.mark.parametrize("kind,optimizer,lr_decay", CASES)
def test_grads_and_one_optimizer_op_per_parameter(kind, optimizer, lr_decay):
    main, startup, _ = programs(kind, optimizer, lr_decay)
    blk = main.global_block
    params = [v.name for v in main.parameters()]
    assert params
    # every parameter's grad is made by a backward op that names the pair in op_role_var
    pairs = set()
    for op in blk.ops:
        rv = op.attr("op_role_var")
        assert len(rv) % 2 == 0
        if op.attr("op_role") == BACKWARD and rv:
            assert rv[1] in op.output_names()
            pairs.update(zip(rv[::2], rv[1::2]))
    assert pairs == {(p, p + "@GRAD") for p in params}
    # exactly one optimizer op per parameter, with op_role_var (param, grad) and the LR var
    opt_ops = [op for op in blk.ops if op.attr("op_role") == OPTIMIZE]
    assert {op.type for op in opt_ops} == {optimizer}
    assert sorted(op.input("Param")[0] for op in opt_ops) == sorted(params)
    lr = "tmp_3" if lr_decay else "learning_rate_0"
    for op in opt_ops:
        p = op.input("Param")[0]
        assert op.attr("op_role_var") == [p, p + "@GRAD"]
        assert op.input("Grad") == [p + "@GRAD"] and op.output("ParamOut") == [p]
        assert op.input("LearningRate") == [lr]
        # accumulators: persistable in main, declared and initialised in startup
        for slot in OPTIMIZERS[optimizer]:
            acc = op.input(slot)[0]
            assert op.output(slot + "Out") == [acc]
            assert blk.vars[acc].is_persistable
            assert acc in startup.global_block.vars
    inits = {a for op in startup.global_block.ops for a in op.output("Out")}
    for v in blk.vars.values():
        if v.is_persistable:
            assert v.name in inits, v.name       # params, accumulators, LR, step counter
    # the main program holds parameters and their grads as Paddle declares them
    for p in params:
        assert blk.vars[p].persistable and blk.vars[p].is_parameter
        assert p + "@GRAD" in blk.vars


@pytest.mark.parametrize("kind", ["mlp", "ctr"])
def test_looks_like_paddle(kind):
    main, startup, _ = programs(kind, "momentum", True)
    for prog in (main, startup):
        assert prog.version == PADDLE_VERSION and prog.op_version_map
        names = list(prog.global_block.vars)
        assert names == sorted(names)
        for op in prog.global_block.ops:
            assert COMMON_ATTRS <= set(op.attrs)
    ops = main.global_block.ops
    roles = [op.attr("op_role") for op in ops]
    # increment first, then forward, loss, LR schedule, backward, optimize
    assert ops[0].type == "increment" and roles[0] == LRSCHED
    assert ops[0].input("X") == ["@LR_DECAY_COUNTER@"]
    assert roles.count(LOSS) == 1 and roles.count(LOSS | 1) == 1
    assert roles.index(OPTIMIZE) > max(i for i, r in enumerate(roles) if r == BACKWARD)
    assert sum(r == LRSCHED for r in roles) == 7
    # grad ops carry their forward op's callstack; Paddle-like tracebacks
    cs = ops[1].attr("op_callstack")
    assert cs and cs[0].startswith('  File "') and cs[1].startswith("    ")
    assert any(op.type.endswith("_grad") for op in ops)


def test_ctr_sparse_tables():
    main, _, info = programs("ctr", "adam")
    blk = main.global_block
    lookups = [op for op in blk.ops if op.type == "lookup_table_v2"]
    assert len(lookups) == info["slots"] > 1
    for op in lookups:
        assert op.attr("is_sparse") is True and op.attr("is_distributed") is False
        w = op.input("W")[0]
        assert blk.vars[w + "@GRAD"].kind == "SELECTED_ROWS"
    assert {op.type for op in blk.ops} >= {"sequence_pool", "sequence_pool_grad", "concat",
                                           "concat_grad", "lookup_table_v2_grad",
                                           "softmax_with_cross_entropy"}
    main1, _, _ = programs("ctr", "sgd", table="v1", distributed=True)
    ops1 = [op for op in main1.global_block.ops if op.type == "lookup_table"]
    assert ops1 and all(op.attr("is_distributed") is True for op in ops1)


def test_deterministic_by_seed():
    a = programio.to_bytes(gen.generate_programs("mlp", 300, "adam", seed=3)[0])
    b = programio.to_bytes(gen.generate_programs("mlp", 300, "adam", seed=3)[0])
    c = programio.to_bytes(gen.generate_programs("mlp", 300, "adam", seed=4)[0])
    assert a == b and a != c


def test_cli_writes_programs_and_cluster_configs(tmp_path):
    out = tmp_path / "g"
    assert gen.main(["--kind", "ctr", "--ops", "300", "--optimizer", "adam", "--lr-decay",
                     "--out", str(out)]) == 0
    main = programio.load(str(out / "main.pb"))
    startup = programio.load(str(out / "startup.pb"))
    assert abs(len(main.global_block.ops) - 300) <= 9
    assert startup.global_block.ops
    for n in (2, 16, 64):
        for style in ("fleet", "classic"):
            cfg = load_config(str(out / ("cluster_p%d_%s.yaml" % (n, style))))
            assert len(cfg.pservers) == n and cfg.trainers == 2
            assert cfg.mode == "sync" and cfg.style == style


def test_a_saved_program_made_a_bench_input(tmp_path, monkeypatch):
    """bench/saved_input.py: a folder holding a saved main.pb and startup.pb (a corpus case
    here; corpus-perf's programs in use) becomes an input folder bench/run.py takes as its
    input of that kind and size (its info.json's keys) without generating one; bench/gen.py's
    configs whatever else is called `gen` (tools/gen's, imported by other tests)."""
    import types
    monkeypatch.setitem(sys.modules, "gen", types.ModuleType("gen"))
    spec = importlib.util.spec_from_file_location("bench_saved_input",
                                                  os.path.join(ROOT, "bench", "saved_input.py"))
    saved = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(saved)
    src = os.path.join(ROOT, "tests", "corpus", "classic", "basic")
    out = tmp_path / "mlp_5000_sgd"
    assert saved.main([src, str(out), "--kind", "mlp", "--ops", "5000",
                       "--optimizer", "sgd"]) == 0
    for name in ("main.pb", "startup.pb"):
        with open(os.path.join(src, name), "rb") as a, open(out / name, "rb") as b:
            assert a.read() == b.read()
    info = json.loads((out / "info.json").read_text())
    main = programio.load(str(out / "main.pb"))
    assert {k: info[k] for k in ("kind", "ops_requested", "optimizer", "lr_decay", "seed")} == \
        {"kind": "mlp", "ops_requested": 5000, "optimizer": "sgd", "lr_decay": False, "seed": 0}
    assert info["ops_main"] == len(main.global_block.ops) and info["params"] > 0
    for n in (2, 16, 64):
        for style in ("fleet", "classic", "ps"):
            cfg = load_config(str(out / ("cluster_p%d_%s.yaml" % (n, style))))
            assert len(cfg.pservers) == n and cfg.style == style and cfg.mode == "sync"
