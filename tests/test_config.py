"""Cluster config: defaults, validation, and errors that name file, key and line."""
import pytest

from transpile.core.config import ClusterConfig, load_config, load_config_text, with_trainer_id
from transpile.core.errors import ConfigError


def test_defaults_fill_in():
    cfg = load_config_text("pservers: [127.0.0.1:6174, 127.0.0.1:6175]\n")
    assert cfg == ClusterConfig(pservers=("127.0.0.1:6174", "127.0.0.1:6175"))
    assert (cfg.trainers, cfg.trainer_id, cfg.mode, cfg.style) == (1, 0, "sync", "fleet")
    assert (cfg.slice_var_up, cfg.min_block_size, cfg.split_method, cfg.geo_push_nums) == \
        (True, 8192, "round_robin", 100)


def test_full_config_and_trainer_ids():
    cfg = load_config_text("""
pservers:
  - "10.0.0.1:6174"
  - "10.0.0.2:6174"
trainers: 3
trainer_id: all
mode: half_async
style: classic
slice_var_up: false
min_block_size: 1024
split_method: hash_name
geo_push_nums: 7
""")
    assert cfg.trainer_ids() == [0, 1, 2]
    assert cfg.mode == "half_async" and cfg.style == "classic" and not cfg.slice_var_up
    assert with_trainer_id(cfg, 2).trainer_ids() == [2]


@pytest.mark.parametrize("text, needle", [
    ("pservers: [a:1]\ntrainer: 2\n", "unknown key 'trainer' (line 2); did you mean 'trainers'?"),
    ("pservers: [a:1]\nmode: fast\n", "mode (line 2): must be one of sync, async, half_async, geo"),
    ("pservers: [a:1]\nstyle: tf\n", "style (line 2): must be one of fleet, classic"),
    ("pservers: []\n", "pservers (line 1): the list is empty"),
    ("pservers: [a:1, a:1]\n", "'a:1' is listed twice"),
    ("pservers: [a]\n", "'a' is not host:port"),
    ("pservers: [a:0]\n", "the port must be in 1-65535"),
    ("pservers: [a:70000]\n", "the port must be in 1-65535"),
    ("pservers: [a:x]\n", "the port must be a number"),
    ("pservers: [a:1]\ntrainers: 0\n", "trainers (line 2): must be >= 1"),
    ("pservers: [a:1]\ntrainers: two\n", "trainers (line 2): expected an integer"),
    ("pservers: [a:1]\ntrainers: 2\ntrainer_id: 2\n", "trainer_id (line 3): 2 is out of range"),
    ("pservers: [a:1]\nslice_var_up: maybe\n", "slice_var_up (line 2): expected true or false"),
    ("pservers: [a:1]\nmin_block_size: 0\n", "min_block_size (line 2): must be >= 1"),
    ("pservers: [a:1]\nsplit_method: random\n", "split_method (line 2): must be one of"),
    ("trainers: 2\n", "pservers: missing"),
    ("", "the config is empty"),
    ("- a\n- b\n", "must be a mapping"),
    ("pservers: [a:1\n", "YAML syntax error at line 2"),
    ("pservers: [a:1]\npservers: [b:1]\n", "line 2: key 'pservers' appears twice"),
])
def test_errors_name_the_key_and_line(text, needle):
    with pytest.raises(ConfigError) as e:
        load_config_text(text, "c.yaml")
    assert str(e.value).startswith("c.yaml: ")
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(str(tmp_path / "nope.yaml"))
    p = tmp_path / "bin.yaml"
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(str(p))


def test_trainer_id_override_is_checked():
    cfg = load_config_text("pservers: [a:1]\ntrainers: 2\n")
    with pytest.raises(ConfigError, match="out of range"):
        with_trainer_id(cfg, 5)


# --- hostile configs (issue #46): refused in one line naming the key, in a moment -------------
PS = "style: ps\npservers: [a:1]\n"


@pytest.mark.parametrize("text, needle", [
    # duplicate keys at every level (the last had won silently)
    (PS + "table_parameters:\n  T:\n    shard_num: 3\n    shard_num: 4\n",
     "line 6: key 'shard_num' appears twice in one mapping"),
    ("pservers: [a:1]\nfs_client_param: {uri: a, uri: b}\n", "key 'uri' appears twice"),
    # YAML 1.1's surprises: base 60, octal, yes / on where a number or text goes
    ("pservers: [a:1]\ntrainers: 1:30\n",
     "trainers (line 2): expected an integer, got '1:30' (a base-60 number to YAML 1.1"),
    ("pservers: [a:1]\ntrainers: 010\n", "got '010' (an octal number to YAML 1.1"),
    ("pservers: [a:1]\ntrainers: yes\n", "got 'yes' (a boolean to YAML 1.1; write true or"),
    ("pservers: [a:1]\nslice_var_up: on\n", "slice_var_up (line 2): expected true or false, "
     "got 'on' (a boolean to YAML 1.1; write true or false)"),
    ("pservers: [a:1]\nmode: off\n", "mode (line 2): must be one of sync, async, half_async, "
     "geo, got 'off'"),
    (PS + "fleet_desc_configs: {use_cvm: no, T: {}}\n",
     "fleet_desc_configs.use_cvm (line 3): expected true or false, got 'no'"),
    # numbers: finite, within their ranges
    (PS + "table_parameters: {T: {accessor: {ctr_accessor_param: {nonclk_coeff: .nan}}}}\n",
     "table_parameters.T.accessor.ctr_accessor_param.nonclk_coeff (line 3): expected a finite "
     "number, got nan"),
    (PS + "table_parameters: {T: {accessor: {ctr_accessor_param: "
     "{delete_after_unseen_days: .inf}}}}\n", "delete_after_unseen_days (line 3): expected a "
     "finite number, got inf"),
    (PS + "table_parameters: {T: {shard_merge_rate: .nan}}\n", "shard_merge_rate (line 3): "
     "expected a finite number"),
    (PS + "table_parameters: {T: {sparse_table_cache_rate: -.inf}}\n",
     "sparse_table_cache_rate (line 3): expected a finite number"),
    (PS + "table_parameters: {T: {accessor: {embed_sgd_param: {adam: {learning_rate: .NaN}}}}}"
     "\n", "learning_rate (line 3): expected a finite number"),
    (PS + "table_parameters: {T: {shard_merge_rate: 1.0e39}}\n",
     "shard_merge_rate (line 3): 1e+39 is beyond a float's range"),
    (PS + "fleet_desc_configs: {T: {sparse_learning_rate: .nan}}\n",
     "fleet_desc_configs.T.sparse_learning_rate (line 3): expected a finite number"),
    (PS + "table_parameters: {T: {accessor: {table_accessor_save_param: "
     "{num: 1000000000, param: 1}}}}\n",
     "table_accessor_save_param.num (line 3): must be <= 100, got 1000000000"),
    ("pservers: [a:1]\ntrainers: 1000000\n", "trainers (line 2): must be <= 10000"),
    (PS + "trainers: 10000000000000000000000000000000000000000\n",
     "trainers (line 3): must be <= 10000"),
    ("pservers: [a:1]\ntrainers: 300\ntrainer_id: all\n", "trainer_id (line 3): all: writes a "
     "folder per trainer, at most 256 of them (trainers is 300)"),
    ("pservers: [a:1]\nmin_block_size: 2147483648\n", "min_block_size (line 2): must be <= "
     "2147483647"),
    ("pservers: [a:1]\ngeo_push_nums: 1e40\n", "geo_push_nums (line 2): expected an integer"),
    # hosts as Paddle's endpoints are: letters, digits, '.', '-', IPv6 in brackets
    ('pservers: ["a\\0b:6174"]\n', "'a\\x00b:6174': the host may hold letters, digits"),
    ('pservers: ["\\u202ehost:6174"]\n', "'\\u202ehost:6174': the host may hold"),
    ('pservers: ["a b:6174"]\n', "the host may hold"),
    ('pservers: ["a/b:6174"]\n', "the host may hold"),
    ('pservers: ["%s:6174"]\n' % ("h" * 241), "the host is 241 characters long, at most 240"),
    ('pservers: ["a:\\u0666\\u0661\\u0667\\u0664"]\n', "the port must be a number"),
    ("pservers: [HOST:6174, host:6174]\n",
     "'host:6174' is listed twice (as 'HOST:6174': host names ignore case)"),
    ("pservers: [a:6174, a:06174]\n", "'a:06174' is listed twice (as 'a:6174'"),
    ("pservers: [a:1]\ntable_parameters: {x: &a [*a]}\n", "line 2: an alias refers to a node "
     "it is in"),
])
def test_hostile_values_are_refused_naming_the_key(text, needle):
    with pytest.raises(ConfigError) as e:
        load_config_text(text, "c.yaml")
    assert str(e.value).startswith("c.yaml: ")
    assert needle in str(e.value), str(e.value)
    assert "\n" not in str(e.value) and len(str(e.value)) < 400


@pytest.mark.parametrize("key", ["trainers", "mode", "table_parameters", "fs_client_param",
                                 "pservers"])
def test_an_alias_bomb_is_refused_before_it_is_built(key):
    """9 levels of 9 aliases (387 million values once expanded): config check and split were
    killed at 60 s with 1.8-3.9 GB."""
    import time
    levels = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"] + [
        "l%d: &l%d [%s]" % (i, i, ", ".join(["*l%d" % (i - 1)] * 9)) for i in range(1, 9)]
    text = "style: ps\npservers: [a:1]\n" if key != "pservers" else "style: ps\n"
    text += "%s:\n%s\n" % (key, "\n".join("  " + x for x in levels))
    start = time.monotonic()
    with pytest.raises(ConfigError, match="its aliases \\(\\*name\\) expand it by more than "
                                          "10000 values"):
        load_config_text(text, "c.yaml")
    assert time.monotonic() - start < 2


def test_what_yaml_1_2_reads_as_it_always_was():
    """The stricter resolvers leave what a config writes in practice as it was."""
    cfg = load_config_text("pservers: ['[::1]:6174', a-b.c:1]\ntrainers: 0x10\n"
                           "slice_var_up: False\nmin_block_size: 1_000\nlr_scheduler: TRUE\n")
    assert cfg.pservers == ("[::1]:6174", "a-b.c:1") and cfg.trainers == 16
    assert cfg.slice_var_up is False and cfg.min_block_size == 1000 and cfg.lr_scheduler is True
    cfg = load_config_text("style: ps\npservers: [a:1]\ntable_parameters: &t {T: {"
                           "shard_num: 3}}\nfleet_desc_configs: {use_cvm: 0}\n")
    assert cfg.table_parameters == {"T": {"shard_num": 3}}
    assert load_config_text("pservers: [a:1]\ntrainers: 256\ntrainer_id: all\n").trainer_ids() \
        == list(range(256))


def test_trainer_id_all_on_the_command_line_is_bounded_too():
    cfg = load_config_text("pservers: [a:1]\ntrainers: 300\n")
    with pytest.raises(ConfigError, match="--trainer-id all: writes a folder per trainer, at "
                                          "most 256"):
        with_trainer_id(cfg, "all")


@pytest.mark.parametrize("setting", ["{name: {a: 1}}", "{name: [1, 2]}"])
def test_a_rule_name_that_is_no_text_is_a_finding_not_an_internal_error(tmp_path, setting):
    """`embed_sgd_param: {name: {a: 1}}` was an internal error (exit 3, "unhashable type:
    'dict'") in config check and in split."""
    import os
    from click.testing import CliRunner
    from cli import main
    sample = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "samples", "ctr_sparse_adam")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("style: ps\npservers: [127.0.0.1:6174]\ntable_parameters:\n"
                   "  SparseFeatFactors: {accessor: {embed_sgd_param: %s}}\n" % setting)
    r = CliRunner().invoke(main, ["config", "check", str(cfg)])
    assert r.exit_code == 2 and "embed_sgd_param.name (line 4): expected " in r.output, r.output
    r = CliRunner().invoke(main, ["split", os.path.join(sample, "main.pb"), "--startup",
                                  os.path.join(sample, "startup.pb"), "--cluster", str(cfg),
                                  "--out", str(tmp_path / "out"), "-q"])
    assert r.exit_code in (0, 2) and "internal error" not in r.output, r.output


def test_a_split_of_more_per_trainer_copies_than_a_split_can_write_is_refused(tmp_path,
                                                                              monkeypatch):
    """trainers: 1000 of a 5k-op program to 64 classic pservers: 20 million per-trainer
    gradient copies (gigabytes, minutes); refused before any program is built."""
    import os
    from click.testing import CliRunner
    from cli import main
    import sys
    split_module = sys.modules["transpile.split"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cfg = tmp_path / "c.yaml"
    cfg.write_text("style: classic\npservers: [127.0.0.1:6174, 127.0.0.1:6175]\n"
                   "trainers: 20\n")
    monkeypatch.setattr(split_module, "MAX_TRAINER_COPIES", 50)
    args = ["split", os.path.join(root, "samples", "mlp_sgd", "main.pb"), "--cluster", str(cfg),
            "--out", str(tmp_path / "out")]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and "c.yaml: trainers: 20 trainers x 5 gradient blocks: the " \
        "pservers would declare 100 per-trainer gradient copies" in r.output, r.output
    assert sorted(os.listdir(tmp_path)) == ["c.yaml"]
    monkeypatch.setattr(split_module, "MAX_TRAINER_COPIES", 100)
    assert CliRunner().invoke(main, args).exit_code == 0
