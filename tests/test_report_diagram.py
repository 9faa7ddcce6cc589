"""report.md's diagram of who sends what to whom: its figures are plan.json's, and mermaid's own
parser (the npm package, run by Node) reads every diagram we make, on every style and mode, a
cluster with more pservers than are drawn, names that need escaping."""
import json
import os
import re
import shutil
import subprocess
from dataclasses import replace

import pytest

from golden import CORPUS, load_case
from transpile import load, load_config, split
from transpile.core.errors import RefusedError
from transpile.render.diagram import MAX_PSERVERS, diagram_lines

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SAMPLES = os.path.join(ROOT, "samples")
CONFIGS = os.path.join(ROOT, "configs")
VERSION = open(os.path.join(HERE, "mermaid", "version.txt")).read().strip()
BUNDLE = os.path.join(HERE, ".node", "mermaid-" + VERSION, "dist", "mermaid.esm.min.mjs")


def _plan(main, startup, cfg):
    return split(main, startup, cfg).plan


def _sample(name, config, **changes):
    d = os.path.join(SAMPLES, name)
    cfg = load_config(os.path.join(CONFIGS, config))
    cfg = replace(cfg, trainer_id="all", **changes)
    return _plan(load(os.path.join(d, "main.pb")), load(os.path.join(d, "startup.pb")), cfg)


def _mermaid(plan) -> str:
    text = "\n".join(diagram_lines(plan))
    m = re.search(r"```mermaid\n(.*?)```", text, re.S)
    assert m, text
    return m.group(1)


def _edges(diagram: str) -> list:
    """(source, [label lines], target) of each edge."""
    out = []
    for src, label, dst in re.findall(r'^\s*(\w+) -\.?->\|"(.*)"\| (\w+)$', diagram, re.M):
        out.append((src, label.split("<br/>"), dst))
    return out


# --- the figures ---------------------------------------------------------------------------------

def test_classic_edges_carry_the_blocks_and_bytes_of_plan_json():
    plan = _sample("ctr_sparse_adam", "classic_sync.yaml")
    edges = _edges(_mermaid(plan))
    eps = plan["config"]["pservers"]
    for i, ep in enumerate(eps):
        dense = [b for p in plan["params"] if not p["sparse"] for b in p["blocks"]
                 if b["endpoint"] == ep]
        up = next(lab for s, lab, d in edges if s == "T" and d == "P%d" % i)
        down = next(lab for s, lab, d in edges if s == "P%d" % i and d == "T")
        from transpile.render.show import human_bytes
        size = human_bytes(sum(b["bytes"] for b in dense))
        assert up[0] == "%d gradient blocks, %s" % (len(dense), size)
        assert down[0] == "%d parameter blocks, %s" % (len(dense), size)
        # the remote table: pulled and pushed by id, 16 floats a row
        assert "push: gradient rows of SparseFeatFactors (64 B per id)" in up
        assert "pull: rows of SparseFeatFactors (64 B per id)" in down


def test_ps_edges_name_the_tables_the_slots_and_the_dense_values():
    plan = _sample("ctr_sparse_adam", "ps_sync.yaml")
    d = _mermaid(plan)
    assert 'TB0["table 0: SparseFeatFactors<br/>MemorySparseTable, 10000 x 16' in d
    assert "TB1[\"table 1: MergedDense<br/>MemoryDenseTable, 3009 values (4 params)" in d
    edges = {(s, d2): lab for s, lab, d2 in _edges(d)}
    assert edges[("TB0", "T")] == ["pull: rows by 2 id slots (C1, C2)", "16 values (64 B) per id"]
    assert edges[("T", "TB1")][1] == "3009 values, 11.8 KiB"
    assert edges[("TB1", "T")] == ["pull: 4 parameters", "3009 values, 11.8 KiB"]
    assert edges[("T", "TB2")] == ["send_barrier, each step"]


def test_geo_sends_deltas_and_gets_rows_back():
    plan = _sample("ctr_sparse_adam", "geo.yaml")
    labels = [x for _, lab, _ in _edges(_mermaid(plan)) for x in lab]
    assert "row deltas of SparseFeatFactors (64 B per row)" in labels
    assert not [x for x in labels if x.startswith("push:") or "gradient" in x]


def test_many_pservers_fold_into_one_node_with_their_sums():
    eps = ["10.0.0.%d:6174" % i for i in range(12)]
    plan = _sample("mlp_sgd", "two_pservers.yaml", pservers=eps, style="classic")
    d = _mermaid(plan)
    shown = re.findall(r"^\s*(P\d+)\[", d, re.M)
    assert len(shown) == MAX_PSERVERS - 1
    assert 'PR["5 more pservers<br/>10.0.0.7:6174 … 10.0.0.11:6174' in d
    total = sum(int(x) for x in re.findall(r'(\d+) gradient blocks?,', d))
    assert total == sum(len(p["blocks"]) for p in plan["params"])


def _many_tables_plan(style):
    import importlib.util
    import sys
    spec = importlib.util.spec_from_file_location("bench_gen_diagram",
                                                  os.path.join(ROOT, "bench", "gen.py"))
    gen = importlib.util.module_from_spec(spec)
    sys.modules["bench_gen_diagram"] = gen
    spec.loader.exec_module(gen)
    main, startup, _ = gen.generate_programs("ctr", 300, "adam", vocab=1000, slots=12)
    from transpile.core.config import load_config_text
    cfg = load_config_text(gen.cluster_yaml(2, style) + "trainer_id: all\n", "c.yaml")
    return _plan(main, startup, cfg)


def test_many_sparse_tables_fold_into_one_node():
    plan = _many_tables_plan("ps")
    sparse = [t for t in plan["tables"] if t["kind"] == "sparse"]
    assert len(sparse) == 12
    d = _mermaid(plan)
    assert len(re.findall(r'^\s*TB\d+\["table \d+: emb_', d, re.M)) == 5
    assert 'TBS["7 more sparse tables' in d
    assert "pull: rows of 7 tables by 7 id slots" in d
    fleet = _mermaid(_many_tables_plan("fleet"))
    assert "push: gradient rows of 12 tables (64 B per id)" in fleet


# --- mermaid's own parser ----------------------------------------------------------------------

def _node():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: mermaid's parser runs in Node.js")
    assert os.path.exists(BUNDLE), (
        "mermaid %s is not unpacked in tests/.node: run `make install-test` (or `make mermaid`)"
        % VERSION)
    return node


def _parse_all(texts: list) -> list:
    r = subprocess.run([_node(), os.path.join(HERE, "mermaid", "parse.mjs"), BUNDLE],
                       input=json.dumps(texts), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_the_parser_runs_and_refuses_a_broken_diagram():
    got = _parse_all(["flowchart LR\n  a -->|x| b\n", "flowchart LR\n  a -->|x|\n",
                      'flowchart LR\n  T["a"b"] --> P\n'])
    assert got[0] == {"ok": True, "type": "flowchart-v2"}
    assert not got[1]["ok"] and "Parse error" in got[1]["error"]
    assert not got[2]["ok"]


CORPUS_CASES = [("classic", "dist_lookup_table"), ("classic", "local_lookup_table"),
                ("classic", "lr_decay"), ("fleet", "large_scale_adam_sync"),
                ("fleet", "ctr_sparse_adam_geo"), ("fleet", "ctr_sparse_adam_half_async"),
                ("ps", "two_tables_sgd_geo"), ("ps", "dist_table_sgd_async"),
                ("ps-gen", "datanorm_sgd_sync"), ("ps-gen", "ctr_sgd_3ps1t_sync"),
                ("ps-gen", "allsparse_adam_sync"), ("paddlerec-ps", "xdeepfm_sync")]


def test_mermaid_parses_every_diagram_we_make():
    plans = {}
    for sample in ("ctr_sparse_adam", "mlp_sgd", "lrdecay_momentum"):
        for config in ("classic_sync.yaml", "two_pservers.yaml", "async.yaml", "geo.yaml",
                       "ps_sync.yaml"):
            try:
                plans["%s %s" % (sample, config)] = _sample(sample, config)
            except RefusedError:       # as Paddle: geo without a table, ps with momentum
                assert "geo" in config or (config, sample) == ("ps_sync.yaml",
                                                               "lrdecay_momentum")
    plans["one trainer"] = _sample("ctr_sparse_adam", "ps_sync.yaml", trainers=1)
    plans["12 pservers"] = _sample("ctr_sparse_adam", "classic_sync.yaml",
                                   pservers=["10.0.0.%d:6174" % i for i in range(12)])
    for family, name in CORPUS_CASES:
        main, startup, cfg = load_case(family, name)
        plans[family + "/" + name] = _plan(main, startup, replace(cfg, trainer_id="all"))
    odd = _sample("ctr_sparse_adam", "ps_sync.yaml")
    odd["tables"][0]["name"] = 'emb"#1<x>'
    odd["trainers"]["0"]["pull"][0]["ids"] = ['id"a', "b#c"]
    plans["names to escape"] = odd
    plans["12 tables, ps"] = _many_tables_plan("ps")
    plans["12 tables, fleet"] = _many_tables_plan("fleet")
    names = sorted(plans)
    got = _parse_all([_mermaid(plans[n]) for n in names])
    bad = {n: g for n, g in zip(names, got) if g != {"ok": True, "type": "flowchart-v2"}}
    assert not bad, bad
    assert len(names) >= 25


def test_the_guides_diagrams_parse():
    import glob
    from docs_examples import blocks
    texts = []
    for page in [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs",
                                                                               "*.md"))):
        texts += ["\n".join(body) + "\n" for info, body, _ in blocks(open(page).read())
                  if info == "mermaid"]
    assert texts
    assert all(g["ok"] for g in _parse_all(texts)), _parse_all(texts)


def test_the_corpus_cases_exist():
    for family, name in CORPUS_CASES:
        assert os.path.isdir(os.path.join(CORPUS, family, name)), (family, name)
