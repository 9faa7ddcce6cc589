"""Style ps with the table settings users write (table_parameters as PaddleRec writes it,
fleet_desc_configs, fs_client_param, adam_d2sum) against Paddle 2.6.2's own output:
tests/corpus/ps-tables (Paddle's splits, programs and descriptors) and tests/corpus/ps-tables-made
(Paddle's descriptors of more settings on shared inputs); refusals as Paddle refuses; `check`
clean on Paddle's splits and catching every descriptor field changed; `config check` naming
the key of a setting Paddle skips or its server cannot run."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from golden import (CORPUS, assert_refused_like_paddle, case_dirs, is_refused, split_and_compare,
                    split_args, tree_files)
from transpile import load_config
from transpile.check import check_split, load_split
from transpile.core.config import load_config_text
from transpile.core.errors import ConfigError
from transpile.format import programio

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CASES = case_dirs("ps-tables")
MADE = os.path.join(CORPUS, "ps-tables-made")
MADE_CASES = sorted(d for d in os.listdir(MADE) if d != "inputs")


def _id(case):
    return os.path.basename(case)


def _check_args(case, split_dir, main=None, startup=None):
    return ["check", main or os.path.join(case, "main.pb"), "--startup",
            startup or os.path.join(case, "startup.pb"), "--cluster",
            os.path.join(case, "cluster.yaml"), split_dir]


# --- Paddle's splits --------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_case_matches_paddle(case, tmp_path):
    output, diffs = split_and_compare(case, str(tmp_path / "out"))
    assert not diffs, "\n".join([output] + diffs[:40])


@pytest.mark.parametrize("case", [c for c in CASES if is_refused(c)], ids=_id)
def test_refusal_says_paddles_reason_in_one_line_and_writes_nothing(case, tmp_path):
    assert_refused_like_paddle(case, str(tmp_path / "out"), reason=True)


@pytest.mark.parametrize("case", [c for c in CASES if not is_refused(c)], ids=_id)
def test_paddles_split_checks_clean(case):
    r = CliRunner().invoke(cli_main, _check_args(case, os.path.join(case, "expected")))
    assert r.exit_code == 0, r.output


def test_the_family_is_there():
    assert len(CASES) == 14 and sum(map(is_refused, CASES)) == 2
    assert len(MADE_CASES) >= 26


def _made(name):
    case = os.path.join(MADE, name)
    with open(os.path.join(case, "case.json")) as f:
        info = json.load(f)
    inputs = os.path.join(MADE, "inputs", info["input"])
    return case, os.path.join(inputs, "main.pb"), os.path.join(inputs, "startup.pb")


@pytest.mark.parametrize("name", MADE_CASES)
def test_made_case_descriptors_equal_paddles_byte_for_byte(name, tmp_path):
    case, main, startup = _made(name)
    out = tmp_path / "out"
    r = CliRunner().invoke(cli_main, ["-q", "split", main, "--startup", startup, "--cluster",
                                      os.path.join(case, "cluster.yaml"), "--out", str(out)])
    err = os.path.join(case, "expected", "error.txt")
    if os.path.isfile(err):
        with open(err) as f:
            assert r.exit_code == 2 and f.read().strip() in r.output, r.output
        assert r.output.count("\n") == 1 and not out.exists()
        return
    assert r.exit_code == 0, r.output
    for rel in ("trainer_0/worker_desc.txt", "pserver_127.0.0.1_6174/server_desc.txt"):
        with open(os.path.join(case, "expected", rel)) as a, open(out / rel) as b:
            assert a.read() == b.read(), rel
    r = CliRunner().invoke(cli_main, _check_args(case, str(out), main, startup))
    assert r.exit_code in (0, 1), r.output


def test_output_is_byte_identical_whatever_the_hash_seed(tmp_path):
    case = os.path.join(CORPUS, "ps-tables", "two_tables_mixed_async")
    trees = []
    for seed in ("0", "4242"):
        out = str(tmp_path / ("out" + seed))
        subprocess.run([sys.executable, os.path.join(ROOT, "cli.py"), "-q"]
                       + split_args(case, out), check=True, cwd=ROOT,
                       env=dict(os.environ, PYTHONHASHSEED=seed))
        trees.append(tree_files(out))
    assert trees[0] == trees[1] and "trainer_1/worker_desc.txt" in trees[0]


# --- check: every field ------------------------------------------------------------------------
def _edit(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text, old
    with open(path, "w") as f:
        f.write(text.replace(old, new, 1))


SERVER = "pserver_127.0.0.1_6174/server_desc.txt"


@pytest.mark.parametrize("case,old,new,found", [
    # the edits of the issue, on Paddle's split of ctr_adam (defaults) and of config_online's block
    ("ps/ctr_adam_sync", 'table_class: "MemorySparseTable"', 'table_class: "NoSuchTable"',
     "table 0 (SparseFeatFactors): table_class is \"NoSuchTable\""),
    ("ps/ctr_adam_sync", 'table_class: "MemoryDenseTable"', 'table_class: "MemorySparseTable"',
     "table 1 (Dense@GRAD_1): table_class is \"MemorySparseTable\""),
    ("ps/ctr_adam_sync", "learning_rate: 0.0010000000474974513", "learning_rate: 0.5",
     "accessor.embed_sgd_param.adam.learning_rate is 0.5"),
    ("ps/ctr_adam_sync", "shard_num: 1000", "shard_num: 10", "shard_num is 10"),
    ("ps/ctr_adam_sync", "initial_range: 0.024485105648636818", "initial_range: 0.5",
     "accessor.embed_sgd_param.adam.initial_range is 0.5"),
    ("ps/ctr_adam_sync", "weight_bounds: 10.0", "weight_bounds: 5.0",
     "accessor.embed_sgd_param.adam.weight_bounds is [-10.0, 5.0]"),
    ("ps/ctr_adam_sync", "embedx_threshold: 0", "embedx_threshold: 3",
     "accessor.embedx_threshold is 3"),
    ("ps-tables/ctr_common_async", "delete_threshold: 0.8", "delete_threshold: -1.0",
     "ctr_accessor_param.delete_threshold is -1.0"),
    ("ps-tables/ctr_common_async", "weight_bounds: -10.0\n            weight_bounds: 10.0",
     "weight_bounds: 10.0\n            weight_bounds: -10.0", "min above max"),
    ("ps-tables/d2sum_sync", 'params: "D2Sum"', 'params: "Moment1"', "common.params is"),
    ("ps-tables/fs_client_sync", 'hadoop_bin: "hadoop"', 'hadoop_bin: "hdfs"',
     "fs_client_param.hadoop_bin is 'hdfs'"),
    ("ps-tables/fs_client_sync", 'server_class: "BrpcPsServer"', 'server_class: "X"',
     "service_param.server_class is 'X'"),
])
def test_check_names_the_table_and_the_field_changed(tmp_path, case, old, new, found):
    case = os.path.join(CORPUS, case)
    d = str(tmp_path / "split")
    shutil.copytree(os.path.join(case, "expected"), d)
    _edit(os.path.join(d, SERVER), old, new)
    r = CliRunner().invoke(cli_main, _check_args(case, d))
    assert r.exit_code == 1 and found in r.output, r.output


KEY_VALUE = re.compile(r"^(\s*)(\w+): (.+)$")


def _mutant(value: str) -> str:
    """The changed value of a `key: value` line (the team's desc-field edit rule)."""
    if value.startswith('"'):
        return '"X' + value[1:]
    if value in ("true", "false"):
        return "false" if value == "true" else "true"
    if re.match(r"^-?[0-9.eE+-]+$", value):
        if "." in value or "e" in value.lower():
            return repr(float(value) * 3 + 1)
        return str(int(value) * 2 + 1)
    return value + "_X"


@pytest.mark.parametrize("case", ["fleet_desc_async", "fs_client_sync", "d2sum_sync"])
def test_check_catches_every_field_of_a_server_desc_changed(tmp_path, case):
    case = os.path.join(CORPUS, "ps-tables", case)
    d = str(tmp_path / "split")
    shutil.copytree(os.path.join(case, "expected"), d)
    cfg = load_config(os.path.join(case, "cluster.yaml"))
    main = programio.load(os.path.join(case, "main.pb"))
    startup = programio.load(os.path.join(case, "startup.pb"))
    split = load_split(d, cfg)
    path = os.path.join(d, SERVER)
    with open(path) as f:
        lines = f.read().split("\n")
    assert not check_split(main, startup, cfg, split).findings
    missed, n = [], 0
    for i, line in enumerate(lines):
        m = KEY_VALUE.match(line)
        if not m:
            continue
        n += 1
        with open(path, "w") as f:
            f.write("\n".join(lines[:i] + ["%s%s: %s" % (m.group(1), m.group(2),
                                                         _mutant(m.group(3)))] + lines[i + 1:]))
        if not check_split(main, startup, cfg, split).findings:
            missed.append(line.strip())
    assert n > 100 and not missed, missed


def test_check_without_startup_leaves_the_initializers_alone(tmp_path):
    case = os.path.join(CORPUS, "ps-tables", "sparse_naive_sync")
    args = _check_args(case, os.path.join(case, "expected"))
    del args[2:4]
    r = CliRunner().invoke(cli_main, args)
    assert r.exit_code == 0, r.output
    d = str(tmp_path / "split")
    shutil.copytree(os.path.join(case, "expected"), d)
    _edit(os.path.join(d, SERVER), "learning_rate: 0.02", "learning_rate: 0.03")
    r = CliRunner().invoke(cli_main, args[:-1] + [d])
    assert r.exit_code == 1 and "table_parameters.SparseFeatFactors.accessor.embed_sgd_param" \
        ".naive.learning_rate" in r.output, r.output


# --- the config ----------------------------------------------------------------------------------
PS = "style: ps\npservers: [127.0.0.1:6174]\nmode: async\n"


@pytest.mark.parametrize("text, needle", [
    ("table_parameters:\n  emb:\n    shard_num: 10.5\n",
     "table_parameters.emb.shard_num (line 6): expected an integer, got 10.5 (Paddle: TypeError:"
     " 'float' object cannot be interpreted as an integer)"),
    ("table_parameters:\n  emb:\n    accessor:\n      fea_dim: -1\n",
     "table_parameters.emb.accessor.fea_dim (line 7): must be in 0..4294967295"),
    ("table_parameters:\n  emb:\n    accessor:\n      embed_sgd_param:\n        adagrad:\n"
     "          learning_rate: 1e-3\n", "reads a number without a dot, like 1e-8, as a string"),
    ("table_parameters: [1]\n", "table_parameters (line 4): expected a mapping"),
    ("adam_d2sum: 1\n", "The type of `flag` is invalid, expected type is bool"),
    ("fleet_desc_configs:\n  emb:\n    sparse_lr: 1.0\n", "strategy key 'sparse_lr' not support"),
    ("fleet_desc_configs:\n  emb:\n    sparse_accessor_class: Foo\n",
     "support sparse_accessor_class"),
    ("fs_client_param:\n  uri: 5\n", "fs_client_param.uri (line 5): expected a string"),
])
def test_settings_paddle_refuses_name_the_key_and_paddles_reason(text, needle):
    with pytest.raises(ConfigError) as e:
        load_config_text(PS + text, "c.yaml")
    assert needle in e.value.message and "\n" not in e.value.message


def test_settings_belong_to_style_ps():
    with pytest.raises(ConfigError, match="table_parameters .line 2.: a setting of style ps"):
        load_config_text("pservers: [a:1]\ntable_parameters: {}\n")


def test_the_config_keeps_the_settings_as_written_and_makes_the_strategys_entries():
    cfg = load_config_text(PS + "adam_d2sum: true\ntable_parameters:\n  emb:\n    shard_num: 5\n"
                           "    accessor:\n      table_accessor_save_param:\n        num: 2\n"
                           "        param: [1, 2]\n        converter: c\n"
                           "fleet_desc_configs:\n  emb_b: {sparse_embedx_dim: 2}\n"
                           "fs_client_param: {uri: 'afs://x'}\n")
    assert cfg.to_dict()["table_parameters"] == {"emb": {"shard_num": 5, "accessor": {
        "table_accessor_save_param": {"num": 2, "param": [1, 2], "converter": "c"}}}}
    (k1, n1, e1), (k2, n2, e2) = cfg.strategy_tables()
    assert (k1, n1, k2, n2) == ("table_parameters", "emb", "fleet_desc_configs", "emb_b")
    assert e1["accessor"]["table_accessor_save_param"] == [
        {"param": 1, "converter": "c"}, {"param": 2, "converter": "c"}]
    assert (e2["accessor"]["fea_dim"], e2["accessor"]["embedx_dim"]) == (5, 2)
    assert cfg.fs_client() == {"uri": "afs://x", "user": "", "passwd": "",
                               "hadoop_bin": "hadoop"}
    assert "adam_d2sum" not in load_config_text(PS).to_dict()


@pytest.mark.parametrize("text, needle", [
    ("table_parameters:\n  emb:\n    accesor: {fea_dim: 3}\n",
     "table_parameters.emb.accesor (line 6): no field of TableParameter: Paddle skips it without"
     " a word; did you mean 'accessor'?"),
    ("table_parameters:\n  emb:\n    accessor: {accessor_class: CtrComonAccessor}\n",
     "table_parameters.emb.accessor.accessor_class (line 6): 'CtrComonAccessor' is no sparse "
     "accessor"),
    ("table_parameters:\n  emb:\n    accessor:\n      embed_sgd_param: {name: FooRule}\n",
     "'FooRule' is no SGD rule"),
    ("table_parameters:\n  emb:\n    accessor:\n      embed_sgd_param:\n"
     "        adagrad: {learning_rate: 0.1}\n", "embed_sgd_param.name (line 7): missing"),
    ("table_parameters:\n  emb:\n    accessor:\n      embed_sgd_param:\n"
     "        name: SparseAdaGradV2SGDRule\n        adagrad: {learning_rate: 0.1}\n",
     "adagrad.initial_g2sum (line 9): missing: Paddle fills in no parameter"),
    ("table_parameters:\n  emb:\n    accessor:\n      embed_sgd_param:\n"
     "        name: SparseNaiveSGDRule\n        adagrad: {learning_rate: 0.1}\n",
     "SparseNaiveSGDRule reads naive:, not adagrad:"),
    ("table_parameters:\n  emb:\n    accessor:\n      embedx_sgd_param:\n"
     "        name: SparseAdaGradSGDRule\n        adagrad: {weight_bounds: [1.0, -1.0]}\n",
     "min above max"),
    ("table_parameters:\n  emb:\n    accessor:\n      ctr_accessor_param: {base_threshold: -1}\n",
     "base_threshold (line 7): is -1: must not be negative"),
    ("table_parameters:\n  emb:\n    accessor:\n      embed_sgd_param:\n"
     "        name: SparseAdamSGDRule\n        adam: {beta1_decay_rate: 0.5}\n",
     "Paddle writes 0.9 over it"),
    ("table_parameters:\n  emb.w_0: {shard_num: 3}\n", "PaddleRec splits keys at '.'"),
    ("fs_client_param: {user: u}\n", "fs_client_param.uri (line 4): missing"),
])
def test_config_check_names_the_key_of_a_setting_paddle_skips_or_cannot_run(
        tmp_path, text, needle):
    p = tmp_path / "c.yaml"
    p.write_text(PS + text)
    r = CliRunner().invoke(cli_main, ["config", "check", str(p)])
    if r.exit_code == 0:        # a setting Paddle reads and drops: a warning, an error if strict
        assert r.stderr.count("\n") == 1 and "warning: " in r.stderr and needle in r.stderr
        r = CliRunner().invoke(cli_main, ["config", "check", "--strict",
                                                          str(p)])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr


def test_config_check_with_the_program_knows_the_tables_and_their_widths(tmp_path):
    case = os.path.join(CORPUS, "ps-tables", "two_tables_mixed_async")
    r = CliRunner().invoke(cli_main, ["config", "check", os.path.join(case, "cluster.yaml"),
                                      "--program", os.path.join(case, "main.pb")])
    assert r.exit_code == 2 and "table_parameters.embedding (line 44): names no sparse table" \
        " of the program (emb_a, emb_b)" in r.output, r.output
    case = os.path.join(CORPUS, "ps-tables", "bad_fea_dim_sync")
    r = CliRunner().invoke(cli_main, ["config", "check", os.path.join(case, "cluster.yaml"),
                                      "--program", os.path.join(case, "main.pb")])
    assert r.exit_code == 2 and "The fea_dim is wrong" in r.output
    case = os.path.join(CORPUS, "ps-tables", "ctr_common_async")
    r = CliRunner().invoke(cli_main, ["config", "check", os.path.join(case, "cluster.yaml"),
                                      "--program", os.path.join(case, "main.pb")])
    assert r.exit_code == 0 and "CtrCommonAccessor" in r.output and "adam_d2sum: true" \
        in r.output, r.output


# --- what the split says ------------------------------------------------------------------------
def test_report_plan_and_plan_json_show_accessor_rules_and_thresholds(tmp_path):
    case = os.path.join(CORPUS, "ps-tables", "two_tables_mixed_async")
    out = tmp_path / "out"
    r = CliRunner().invoke(cli_main, split_args(case, str(out)))
    assert r.exit_code == 0 and "note: table_parameters.embedding names no sparse table" \
        in r.output, r.output
    report = (out / "report.md").read_text()
    assert "| 0 | emb_a | embed rule | SparseAdaGradSGDRule (lr 0.1, g2sum 2, range 0.0001, " \
        "bounds [-10, 10]) |" in report
    assert "| 0 | emb_a | thresholds | nonclk 0.1, click 1, base 2, delta 0.5," in report
    assert "| 1 | emb_b | accessor | SparseAccessor, fea_dim 6, embedx_dim 3, " \
        "embedx_threshold 0 |" in report
    plan = json.loads((out / "plan.json").read_text())
    a = plan["tables"][0]["accessor"]
    assert (a["class"], a["embedx_threshold"], a["ctr"]["delta_threshold"]) == \
        ("CtrCommonAccessor", 4, 0.5)
    assert plan["tables"][0]["settings_from"] == "table_parameters.emb_a"
    r = CliRunner().invoke(cli_main, ["plan", os.path.join(case, "main.pb"), "--startup",
                                      os.path.join(case, "startup.pb"), "--cluster",
                                      os.path.join(case, "cluster.yaml")])
    assert "embedx rule  SparseNaiveSGDRule (lr 0.5, range 0.0346272" in r.output, r.output
