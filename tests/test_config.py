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
