"""Hostile cluster configs, generated: `config check` and `split` end with 0, 1 or 2 and one line,
in seconds, whatever the config holds (numbers out of every range, NaN, text where numbers go,
control characters in hosts, duplicate keys, aliases, YAML 1.1's base-60 numbers and yes / on
booleans), and a failed split leaves nothing behind. The config-side twin of
test_robustness.py's mangled programs.

The default run is short (`make test`); CONFIG_FUZZ_EXAMPLES=2000 runs longer.
"""
import json
import os
import signal
import time

from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cli import main
from transpile.core.ps_strategy import SCHEMA

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SAMPLE = os.path.join(ROOT, "samples", "ctr_sparse_adam")
EXAMPLES = int(os.environ.get("CONFIG_FUZZ_EXAMPLES", "25"))
SECONDS = 20            # per command: a config that hangs or runs away fails the test

# scalars as YAML text (flow style): the values a careless or hostile hand writes
huge = st.sampled_from(["1e40", "10000000000000000000000000000000000000000", "-1",
                        "2147483648", "4294967296", "1000000", "99999", "0", "1:30",
                        "010", "0x10", "1_000"])
floats = st.sampled_from([".nan", ".NaN", ".inf", "-.inf", "1.0e39", "-1.5", "0.5", "1e-3",
                          "3.5e38", "0.0"])
words = st.sampled_from(["yes", "no", "on", "off", "true", "false", "~", "null", "''",
                         '"\\0"', '"\\u202e"', '"a\\tb"', "all", "sync", "geo", "ps",
                         "classic", "SparseFeatFactors", "SparseAdamSGDRule", '"x" ', "[]",
                         "{}", "[1, 2]", "[-10.0, 10.0]", "{a: 1}", "{name: {a: 1}}"])
scalar = st.one_of(huge, floats, words, st.integers(-10, 10).map(str))
hosts = st.one_of(
    st.sampled_from(["127.0.0.1", "HOST", "host", "a", "[::1]", "a.b-c", "x" * 300, "-a",
                     "a/b", "a b", "ä", "\\u202ehost", "a\\0b", "[zz]", ""]),
    st.text(alphabet="ab.-:_\\0019", min_size=0, max_size=6))
ports = st.one_of(st.integers(-1, 70000).map(str),
                  st.sampled_from(["٦١٧٤", "6174 ", "0x10", "", "06174", "1:30"]))
endpoints = st.tuples(hosts, ports).map(lambda hp: '"%s:%s"' % hp)


def _leaves(msg: str, prefix: tuple = ()) -> list:
    """Every field path of table_parameters' settings under message `msg` (a repeated
    message's `num` too)."""
    out = []
    for field, kind, repeated in SCHEMA[msg]:
        path = prefix + (field,)
        if kind in SCHEMA:
            out += _leaves(kind, path) + ([path + ("num",)] if repeated else [])
        else:
            out.append(path)
    return out


LEAVES = _leaves("TableParameter")


def _nested(settings: list) -> str:
    """[(path, value text)] as one YAML flow mapping (a later path into a value that is no
    mapping is dropped)."""
    tree: dict = {}
    for path, value in settings:
        node = tree
        for k in path[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                break
        else:
            node[path[-1]] = value

    def text(node):
        if not isinstance(node, dict):
            return node
        return "{" + ", ".join("%s: %s" % (k, text(v)) for k, v in node.items()) + "}"
    return text(tree)


tables = st.tuples(
    st.sampled_from(["SparseFeatFactors", "SparseFeatFactors", "emb", "a.b", "1", "on"]),
    st.lists(st.tuples(st.sampled_from(LEAVES), scalar), min_size=1, max_size=3).map(
        _nested)).map(lambda t: "{%s: %s}" % t)
fleet_tables = st.lists(st.tuples(
    st.sampled_from(["sparse_shard_num", "sparse_learning_rate", "sparse_weight_bounds",
                     "sparse_optimizer", "sparse_accessor_class", "sparse_embedx_dim",
                     "sparse_cache_rate", "use_cvm", "sparse_enable_cache"]), scalar),
    max_size=4).map(lambda kv: "{SparseFeatFactors: {%s}}" % ", ".join("%s: %s" % p for p in kv))

top = {"trainers": scalar, "trainer_id": scalar, "mode": scalar, "min_block_size": scalar,
       "geo_push_nums": scalar, "slice_var_up": scalar, "lr_scheduler": scalar,
       "split_method": scalar, "paddle_faults": scalar, "adam_d2sum": scalar,
       "table_parameters": tables, "fleet_desc_configs": fleet_tables,
       "fs_client_param": st.sampled_from(["{uri: a}", "{uri: a, user: no}", "{uri: 1}",
                                           "{uri: {a: 1}}", "[]"])}
# YAML that is hostile as YAML: aliases (a small bomb), duplicate keys at some depth
raw_lines = st.sampled_from([
    "adam_d2sum: &a true\nslice_var_up: *a",
    "table_parameters: {T: {shard_num: 1, shard_num: 2}}",
    "trainers: 2\ntrainers: 3",
    "fs_client_param: &b {uri: &c [*c]}",
    "fs_client_param:\n  uri: a\n  <<: {user: b}",
    "table_parameters:\n  A: &l0 [x, x, x, x, x, x, x, x, x, x]\n"
    "  B: &l1 [*l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0]\n"
    "  C: &l2 [*l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1]\n"
    "  D: &l3 [*l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2]\n"
    "  E: [*l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3, *l3]"])


# a config each style splits the sample with: the fuzz changes a key or two of it
VALID = {"ps": {"mode": "async", "trainers": "2",
                "table_parameters": "{SparseFeatFactors: {shard_num: 10, accessor: "
                                    "{embedx_threshold: 10, ctr_accessor_param: "
                                    "{nonclk_coeff: 0.1}, embed_sgd_param: "
                                    "{name: SparseAdamSGDRule}}}}"},
         "fleet": {"mode": "sync", "trainers": "2"},
         "classic": {"mode": "sync", "trainers": "2"}}


@st.composite
def configs(draw) -> str:
    style = draw(st.sampled_from(sorted(VALID)))
    keys = dict(VALID[style])
    eps = ['"127.0.0.1:6174"', '"127.0.0.1:6175"']
    if draw(st.integers(0, 3)) == 0:
        eps[draw(st.integers(0, 1))] = draw(endpoints)
    for key in draw(st.lists(st.sampled_from(sorted(top)), max_size=2, unique=True)):
        keys[key] = draw(top[key])
    if style == "ps" and draw(st.booleans()):
        keys["table_parameters"] = draw(tables)
    lines = ["style: %s" % style, "pservers: [%s]" % ", ".join(eps)]
    lines += ["%s: %s" % kv for kv in sorted(keys.items())]
    if draw(st.integers(0, 4)) == 0:
        lines.append(draw(raw_lines))
    return "\n".join(lines) + "\n"


class Hang(BaseException):
    """A command ran past SECONDS (BaseException: the CLI's handlers let it through)."""


def _alarm(signum, frame):
    raise Hang()


def _run(args):
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SECONDS)
    try:
        return CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _clean(result, what):
    assert result.exit_code in (0, 1, 2), (what, result.exit_code, result.output)
    assert "Traceback" not in result.output, result.output
    if result.exit_code == 2:
        assert len(result.output.strip().splitlines()) == 1, result.output


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(configs())
def test_hostile_configs_end_in_one_line_in_seconds(tmp_path, text):
    cfg = tmp_path / ("c%d.yaml" % time.monotonic_ns())
    cfg.write_text(text, encoding="utf-8")
    checked = _run(["config", "check", str(cfg)])
    _clean(checked, "config check")
    out = str(tmp_path / ("out%d" % time.monotonic_ns()))
    r = _run(["split", os.path.join(SAMPLE, "main.pb"), "--startup",
              os.path.join(SAMPLE, "startup.pb"), "--cluster", str(cfg), "--out", out, "-q"])
    _clean(r, "split")
    event("config check %d, split %d" % (checked.exit_code, r.exit_code))
    if r.exit_code != 0:
        assert not os.path.exists(out)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")], os.listdir(tmp_path)
    if r.exit_code == 0:                    # what it wrote names only what the config allows
        plan = json.load(open(os.path.join(out, "plan.json")))
        assert 1 <= plan["config"]["trainers"] <= 10000
