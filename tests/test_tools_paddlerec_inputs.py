"""tools/gen/paddlerec_inputs.py's pure-Python parts (no Paddle): PaddleRec's config flattening,
git blob hashes, model names, the reports written from model.json files."""
import json
import os
import subprocess
import sys

import pytest

GEN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "gen")
sys.path.insert(0, GEN)

import paddlerec_inputs as pi  # noqa: E402
import paddlerec_report as report  # noqa: E402

CONFIG = """
runner:
  train_batch_size: 2
  use_gpu: True
hyper_parameters:
  optimizer:
    class: Adam
    learning_rate: 0.001
  sparse_feature_number: 1000001
  fc_sizes: [512, 256]
other_part:
  ignored: 1
"""


def _tree(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(tmp_path)


def test_config_flattened_as_paddlerec_load_yaml(tmp_path):
    tree = _tree(tmp_path, {"models/rank/x/config.yaml": CONFIG,
                            "models/rank/x/static_model.py": ""})
    rel = pi.config_file(tree, "models/rank/x")
    cfg = pi.load_config(tree, rel, {"runner.train_batch_size": 8})
    assert rel == "models/rank/x/config.yaml"
    assert cfg["hyper_parameters.optimizer.learning_rate"] == 0.001
    assert cfg["hyper_parameters.fc_sizes"] == [512, 256]
    assert cfg["runner.use_gpu"] is True and cfg["runner.train_batch_size"] == 8
    assert not any(k.startswith("other_part") for k in cfg)
    assert cfg["config_abs_dir"] == os.path.join(tree, "models", "rank", "x")


def test_named_runner_list_and_config_choice(tmp_path):
    tree = _tree(tmp_path, {"models/a/b/one.yaml": "runner:\n- name: r1\n  epochs: 3\n",
                            "models/a/c/x.yaml": "", "models/a/c/y.yaml": ""})
    cfg = pi.load_config(tree, pi.config_file(tree, "models/a/b"), {})
    assert cfg["runner.r1.epochs"] == 3 and cfg["runner.r1.name"] == "r1"
    with pytest.raises(ValueError, match="2 other yaml"):
        pi.config_file(tree, "models/a/c")


def test_git_blob_matches_git(tmp_path):
    p = tmp_path / "f.py"
    p.write_bytes(b"import paddle\n\xc3\xa9\n")
    want = subprocess.run(["git", "hash-object", str(p)], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert pi.git_blob(str(p)) == want


def test_model_names():
    assert pi.model_name("models/match/multiview-simnet") == "multiview_simnet"
    assert pi.model_name("models/recall/word2vec/benchmark") == "word2vec_benchmark"
    assert pi.model_name("models/rank/fm") == "fm"


def _doc(name, ops):
    return {"model": name, "loss": "mean_0.tmp_0", "patched": [], "param_values": 10,
            "params": [{"name": "w"}], "optimizer": {"class": "paddle.optimizer.Adam",
                                                     "lr_scheduler": None},
            "lookup_tables": {"emb": {"shape": [10, 4], "is_sparse": True,
                                      "is_distributed": False}},
            "feeds": [{"name": f"C{i}", "shape": [-1, 1], "dtype": "int64"} for i in range(3)],
            "main": {"ops": 3, "blocks": 1, "bytes": 2048, "op_counts": ops},
            "startup": {"ops": 1, "bytes": 1024, "op_counts": {"fill_constant": 1}}}


def test_reports(tmp_path):
    for name, ops in (("a", {"adam": 2, "mul": 1}), ("b", {"sgd": 1})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.json").write_text(json.dumps(_doc(name, ops)))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "error.txt").write_text("TypeError: boom (at x.py:1 in f)\n")
    report.write_reports(str(tmp_path), {"c": "needs dygraph"})
    ops = (tmp_path / "OPS.md").read_text()
    assert "| `fill_constant` | 2 | 2 | a (s), b (s) |" in ops
    assert "| `adam` | 1 | 2 | a |" in ops
    summary = (tmp_path / "SUMMARY.md").read_text()
    assert "3 models: 2 built, 1 not built" in summary
    assert "C0 .. C2 (3 x [-1, 1]:int64)" in summary and "emb 10x4" in summary
    assert "| c | not built | TypeError: boom (at x.py:1 in f). Note: needs dygraph |" in summary
