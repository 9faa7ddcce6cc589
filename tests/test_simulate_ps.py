"""simulate for style ps: the split's trainers against pservers built from server_desc.txt
(pscluster.py), compared with the ps reference (psref.py), and the ps reference compared with
the original, each difference named (pswhy.py, psexplain.py)."""
from __future__ import annotations

import dataclasses
import os
import re

import numpy as np
import pytest

from transpile.core.config import load_config
from transpile.format import programio
from transpile.simulate import simulate
from transpile.simulate.runs.loading import load_descs
from transpile.split import split

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
_cache: dict = {}


def case(name):
    if name not in _cache:
        d = os.path.join(CORPUS, name)
        main = programio.load(os.path.join(d, "main.pb"))
        startup = programio.load(os.path.join(d, "startup.pb"))
        cfg = load_config(os.path.join(d, "cluster.yaml"))
        _cache[name] = (main, startup, cfg)
    return _cache[name]


def ours(name):
    """Our split of a corpus case: (programs, descriptor texts)."""
    main, startup, cfg = case(name)
    res = split(main, startup, cfg, trainer_ids=list(range(cfg.trainers)))
    return {k: p.copy() for k, p in res.programs.items()}, dict(res.texts)


def paddles(name):
    """Paddle's own split of a corpus case (expected/)."""
    exp = os.path.join(CORPUS, name, "expected")
    progs = {}
    for sub in sorted(os.listdir(exp)):
        for kind in ("main", "startup"):
            f = os.path.join(exp, sub, kind + ".pb")
            if os.path.isfile(f):
                progs["%s/%s" % (sub, kind)] = programio.load(f)
    return progs, load_descs(exp)


def run(name, progs, texts, steps=3, batch=4, **kw):
    main, startup, cfg = case(name)
    kw.setdefault("why", False)
    return simulate(main, startup, cfg, progs, {}, steps=steps, batch=batch, seed=0,
                    expect_equal=True, ps_options=dict(texts=texts, **kw))


def _trained_reference(main, startup, cfg, steps):
    """The ps reference of `main` (our descriptors of it, the startup's values) trained
    `steps` steps of batch 4."""
    from transpile.simulate.ps.run import RefRun, reference_descs, train_reference
    from transpile.simulate.ps.tables import TableOptions
    from transpile.simulate.model.feeds import Feeder
    from transpile.simulate.model.executor import Executor
    ex = Executor("startup", startup, float_dtype=np.float64, seed=0)
    ex.run_block(0)
    plan, texts = reference_descs(main, startup, cfg)
    return train_reference(RefRun(main, dict(ex.scope.vars), plan, cfg,
                                  Feeder(main, 4, 0, np.float64), steps=steps, batch=4, seed=0,
                                  fdt=np.float64), texts, TableOptions(seed=0))


def param(res, name):
    return next(p for p in res.params if p.name == name)


@pytest.mark.parametrize("name,split_of", [
    ("ps/ctr_adam_sync", ours), ("ps/two_tables_sgd_sync", paddles),
    ("ps/two_tables_sgd_async", ours), ("ps-tables/std_adagrad_sync", paddles)])
def test_a_ps_split_trains_like_the_ps_reference(name, split_of):
    res = run(name, *split_of(name))
    assert res.error is None and res.exit_code == 0, (res.error, res.params)
    # not vacuous: the tables hold rows and the dense params moved
    assert all(p.ok for p in res.params)
    assert all(p.changed for p in res.params if p.trainable), res.params


def test_the_first_push_creates_the_row_and_loses_its_embedx_gradient():
    """Hand-computed: one trainer's first push on a SparseAdamSGDRule row (zero_init): embed_w
    goes 0 -> -lr * sign(g) (Adam's first step: m / sqrt(v) = sign(g), lr_t's bias correction
    cancels), embedx_w keeps its initial draw (the extending push's gradient is lost), and the
    rule state counts one push (beta powers b1^2, b2^2)."""
    main, startup, cfg = case("ps/ctr_adam_sync")
    ref = _trained_reference(main, startup, dataclasses.replace(cfg, trainers=1), steps=1)
    table = ref.servers[0].table(0)
    rows = ref.table_rows("SparseFeatFactors")
    assert rows and all(len(r) == table.accessor.dim for r in rows.values())
    acc = table.accessor
    for key, row in rows.items():
        assert abs(abs(row[acc.embed_w]) - 0.001) < 1e-6
        fresh = table.create_rows([key])[0]
        np.testing.assert_array_equal(row[acc.embedx_w:acc.embedx_w + 7],
                                      fresh[acc.embedx_w:acc.embedx_w + 7])
        assert row[acc.show] >= 1
        b1 = row[acc.embed_state + 2]
        assert abs(b1 - np.float32(0.9) ** 2) < 1e-6


def test_the_ps_reference_drops_a_steps_temporaries():
    """The ps reference's trainers keep after a step only what their pushes read besides the
    persistables (ffm's slice grads were kept to the end of each step: 1.3 GB, ps sync at 2.5
    GB, 0.6 GB now); the run trains as before (the split still equals it)."""
    main, startup, cfg = case("ps/ctr_adam_sync")
    ref = _trained_reference(main, startup, cfg, steps=2)
    block = main.global_block
    keep = ref._read_after_step()
    # what only the ops the reference skips (optimizer, LR schedule) read is never freed
    skipped = {n for i, op in enumerate(block.ops) if i not in set(ref.run_ops)
               for n in op.input_names()}
    assert keep
    for tr in ref.trainers:
        left = [n for n in tr.scope.vars if n in block.vars and not block.var(n).persistable
                and n not in keep and n not in skipped]
        assert not left, left
    res = run("ps/ctr_adam_sync", *ours("ps/ctr_adam_sync"))
    assert res.error is None and res.exit_code == 0, (res.error, res.params)


def _drop_send(progs):
    main = progs["trainer_1/main"]
    main.global_block.ops = [op for op in main.global_block.ops if op.type != "send"]
    return progs


def _edit_desc(texts, fn, which=0):
    keys = sorted(k for k in texts if k.endswith("server_desc.txt"))
    texts = dict(texts)
    texts[keys[which]] = fn(texts[keys[which]])
    return texts


def _double_first_lr(t):
    return re.sub(r"learning_rate: ([0-9.eE+-]+)",
                  lambda m: "learning_rate: %r" % (2 * float(m.group(1))), t, count=1)


def _naive_rule(t):
    return t.replace('embedx_sgd_param {\n          name: "SparseAdamSGDRule"',
                     'embedx_sgd_param {\n          name: "SparseNaiveSGDRule"', 1)


def _drop_dense_table(t):
    return re.sub(r"downpour_table_param \{\n\s*table_id: 1\n.*?type: PS_DENSE_TABLE\n\s*\}\n",
                  "", t, count=1, flags=re.S)


def _dense_lr(t):
    return t.replace('initializers: "fill_constant&0.0010000000474974513"\n        entry: "none"'
                     '\n        trainer_num: 2\n        sync: true\n        table_num: 386',
                     'initializers: "fill_constant&0.002"\n        entry: "none"'
                     '\n        trainer_num: 2\n        sync: true\n        table_num: 386', 1)


@pytest.mark.parametrize("edit", ["drop_send", "sparse_lr", "rule", "dense_shard", "dense_lr"])
def test_a_broken_ps_split_is_caught(edit):
    progs, texts = ours("ps/ctr_adam_sync")
    if edit == "drop_send":
        progs = _drop_send(progs)
    else:
        fn = {"sparse_lr": _double_first_lr, "rule": _naive_rule,
              "dense_shard": _drop_dense_table, "dense_lr": _dense_lr}[edit]
        new = _edit_desc(texts, fn, 1 if edit == "dense_shard" else 0)
        assert new != texts
        texts = new
    res = run("ps/ctr_adam_sync", progs, texts)
    assert res.exit_code == 1
    assert res.error is not None or not all(p.ok for p in res.params)


def test_the_differences_from_the_original_are_named_and_sized():
    progs, texts = ours("ps/ctr_adam_sync")
    res = run("ps/ctr_adam_sync", progs, texts, why=True)
    why = {w.id: w for w in res.ps.why["SparseFeatFactors"]}
    assert {"ps-sparse-init", "ps-sparse-lazy-rows", "ps-sparse-trainer-sum",
            "ps-sparse-adam-row-beta-pow", "ps-float32-tables"} <= set(why)
    assert why["ps-sparse-init"].size > 1e-3 and why["ps-sparse-adam-row-beta-pow"].size is None
    assert {w.id for w in res.ps.why["linear_0.w_0"]} >= {"ps-dense-adam-beta-pow"}
    orig = {p.name: p for p in res.ps.original}
    assert orig["SparseFeatFactors"].max_abs > 1e-3
    again = run("ps/ctr_adam_sync", progs, texts, why=True, program_init=True)
    assert again.exit_code == 0
    assert "ps-sparse-init" not in {w.id for w in again.ps.why["SparseFeatFactors"]}


def test_a_split_with_no_sparse_table_trains_the_reference_once(monkeypatch):
    # every effect pswhy.py sizes by a rerun is one of the sparse tables: with none, a rerun
    # cannot change a value (deepfefm in ps: 20k ops, seven reruns were two thirds of its time)
    import transpile.simulate.ps.run as psrun
    calls = []
    real = psrun.train_reference
    monkeypatch.setattr(psrun, "train_reference",
                        lambda *a, **k: calls.append(k.get("variant")) or real(*a, **k))
    progs, texts = ours("ps/mlp_adam_sync")
    res = run("ps/mlp_adam_sync", progs, texts, why=True)
    assert res.exit_code == 0 and calls == [None]
    assert {w.id for w in res.ps.why["linear_0.w_0"]} >= {"ps-dense-adam-beta-pow"}
    calls.clear()
    progs, texts = ours("ps/ctr_adam_sync")     # a sparse table: its effects are sized
    run("ps/ctr_adam_sync", progs, texts, why=True)
    assert len(calls) > 1
