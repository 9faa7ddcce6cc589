"""Style ps: the plan's arithmetic (table ids, dense shards and dims, rules), the descriptor
text printer, the config, simulate's refusal, and what `check` catches in a broken split."""
import json
import os
import shutil

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from golden import CORPUS, load_case
from transpile.core.config import load_config_text
from transpile.core.errors import ConfigError, RefusedError
from transpile.format import programio
from transpile.format.psdesc import PSParameter, c_escape, parse_text, shortest_float, to_text
from transpile.plan.ps import make_plan
from transpile.plan.ps_tables import get_shard
from transpile.output.psdesc import server_desc, worker_desc

PS = os.path.join(CORPUS, "ps")


# --- the plan ------------------------------------------------------------------------------------
@pytest.mark.parametrize("total,n,shards", [
    (386, 2, [194, 192]), (434, 3, [145, 145, 144]), (131, 2, [66, 65]),
    (2177, 2, [1089, 1088]), (3365, 3, [1122, 1122, 1121]), (386, 3, [129, 129, 128]),
    (1, 3, [1, 0, 0]), (0, 2, [0, 0]), (10, 10, [2, 2, 2, 2, 2, 0, 0, 0, 0, 0])])
def test_dense_shards_follow_paddles_get_shard_and_cover_the_table(total, n, shards):
    assert [get_shard(total, n, i) for i in range(n)] == shards
    assert sum(shards) == total


def test_a_trainer_id_past_the_servers_gets_a_short_or_empty_shard():
    # worker descs compute the dense dims with the trainer's id (mlp_adam_2ps3t: 3 trainers)
    assert [get_shard(2177, 2, t) for t in range(3)] == [1089, 1088, 0]


def test_tables_ids_and_dims_of_two_sparse_tables_and_the_merged_dense_table():
    m, s, c = load_case("ps", "two_tables_sgd_sync")
    plan = make_plan(m, s, c)
    assert [(t.table_id, t.kind, t.table_name) for t in plan.tables] == [
        (0, "sparse", "emb_a"), (1, "sparse", "emb_b"), (2, "dense", "MergedDense"),
        (3, "barrier", "barrier_table")]
    a, b, dense = plan.tables[:3]
    assert (a.table_num, a.table_dim, a.fea_dim, a.embedx_dim) == (10000, 8, 10, 7)
    assert (b.table_num, b.table_dim) == (5000, 4)
    numel = 0
    for g in dense.grads:
        n = 1
        for d in m.global_block.vars[g].shape:
            n *= d
        numel += n
    assert dense.table_num == dense.fea_dim == numel == 578
    assert dense.dims(2, 0) == [get_shard(dense.table_num, 2, 0), 1]
    assert plan.ctxs[2].name == "Dense@GRAD_2" and plan.barrier_table_id == 3
    assert dense.grads == ("linear_0.b_0@GRAD", "linear_0.w_0@GRAD", "linear_2.b_0@GRAD",
                           "linear_2.w_0@GRAD")


def test_adam_rule_and_the_sparse_accessors_adam_rule_even_for_sgd():
    m, s, c = load_case("ps", "ctr_adam_sync")
    t = make_plan(m, s, c).tables[0]
    assert t.rule == "adam" and t.params[-1] == "LearningRate"
    assert t.attr == "beta1&0.8999999761581421#beta2&0.9990000128746033#" \
                     "epsilon&9.99999993922529e-09"
    assert t.sgd_rule.learning_rate == 0.0010000000474974513
    m, s, c = load_case("ps", "dist_table_sgd_sync")
    t = make_plan(m, s, c).tables[0]
    assert t.rule == "sgd" and t.sgd_rule.name == "SparseAdamSGDRule"
    assert (t.sgd_rule.beta1_decay_rate, t.sgd_rule.ada_epsilon) == (0.9, 1e-08)
    assert t.table_num == 0 and t.distributed       # is_distributed: no row count


def test_geo_rule_is_sum_and_never_refuses_another_optimizer():
    m, s, c = load_case("ps", "ctr_adagrad_geo")
    plan = make_plan(m, s, c)
    assert {t.rule for t in plan.tables[:-1]} == {"sum"}
    assert plan.tables[0].table_class == "MemorySparseGeoTable"


def test_data_norm_statistics_get_a_summary_table_of_their_own():
    m, s, c = load_case("ps-gen", "datanorm_sgd_sync")
    plan = make_plan(m, s, c)
    assert [t.kind for t in plan.tables] == ["sparse", "dense", "datanorm", "barrier"]
    dn = plan.tables[2]
    assert plan.ctxs[2].name == "DataNorm@GRAD_2" and dn.table_name == "MergedDense"
    assert (dn.rule, dn.params, dn.table_num) == ("summary", ("Param", "SummaryDecayRate"), 39)
    assert dn.initializers[1] == "fill_constant&0.999999"
    assert dn.attr == "summary_decay_rate&0.9999998807907104"
    assert dn.dims(2, 1) == [19, 1]


def test_adagrad_outside_geo_is_refused_with_paddles_message():
    m, s, c = load_case("ps", "ctr_adagrad_sync")
    with pytest.raises(RefusedError, match="only supported SGD or Adam"):
        make_plan(m, s, c)


def test_a_table_init_written_twice_is_refused():
    m, s, c = load_case("ps", "ctr_adam_sync")
    s = s.copy()
    ops = s.global_block.ops
    ops.append(next(op for op in ops if "SparseFeatFactors" in op.output_names()).copy())
    with pytest.raises(RefusedError, match="table init op num should be 1, now is 2"):
        make_plan(m, s, c)


def test_half_async_is_no_ps_mode():
    with pytest.raises(ConfigError, match="style ps runs sync, async, geo"):
        load_config_text("pservers: [a:1]\nstyle: ps\nmode: half_async\n")


# --- descriptors --------------------------------------------------------------------------------
def test_shortest_float_ends_on_any_value():
    """A NaN (`nonclk_coeff: .nan` once reached it) or a double that is no float32 made it
    loop forever."""
    import math
    assert math.isnan(shortest_float(float("nan")))
    assert shortest_float(float("inf")) == float("inf")
    assert shortest_float(0.1) == 0.1 and shortest_float(1e-300) == 1e-300


def test_printer_matches_text_format_spelling():
    assert shortest_float(0.05000000074505806) == 0.05        # float32 0.05
    assert c_escape('a"b\\c\n\u00e9') == 'a\\"b\\\\c\\n\\303\\251'
    d = PSParameter()
    t = d.server_param.downpour_server_param.downpour_table_param.add()
    t.table_id = 1
    t.type = 1
    t.common.attr = ""
    t.accessor.ctr_accessor_param.nonclk_coeff = 0.1
    t.accessor.embed_sgd_param.adam.weight_bounds.extend([-10.0, 10.0])
    t.accessor.embed_sgd_param.adam.learning_rate = 0.0010000000474974513
    assert to_text(d) == (
        "server_param {\n  downpour_server_param {\n    downpour_table_param {\n"
        "      table_id: 1\n      accessor {\n        ctr_accessor_param {\n"
        "          nonclk_coeff: 0.1\n        }\n        embed_sgd_param {\n"
        "          adam {\n            learning_rate: 0.0010000000474974513\n"
        "            weight_bounds: -10.0\n            weight_bounds: 10.0\n          }\n"
        "        }\n      }\n      common {\n        attr: \"\"\n      }\n"
        "      type: PS_DENSE_TABLE\n    }\n  }\n}\n")


def test_worker_desc_has_both_halves_and_server_desc_its_own_dims():
    m, s, c = load_case("ps", "ctr_adam_sync")
    plan = make_plan(m, s, c)
    w = parse_text(worker_desc(plan, 1))
    assert len(w.worker_param.downpour_worker_param.downpour_table_param) == 3
    assert list(w.server_param.downpour_server_param.downpour_table_param[1].common.dims) == \
        [192, 192, 192, 1, 1, 1]
    srv = parse_text(server_desc(plan, "127.0.0.1:6174"))
    assert not srv.HasField("worker_param")
    assert srv.server_param.downpour_server_param.downpour_table_param[1].common.dims[0] == 194
    with open(os.path.join(PS, "ctr_adam_sync", "expected", "pserver_127.0.0.1_6174",
                           "server_desc.txt")) as f:
        assert server_desc(plan, "127.0.0.1:6174") == f.read()


def test_descriptor_text_reads_the_same_in_any_layout():
    path = os.path.join(PS, "two_tables_sgd_sync", "expected", "trainer_1", "worker_desc.txt")
    with open(path) as f:
        text = f.read()
    one_line = " ".join(text.split())            # not text_format's layout: parsed as a whole
    fast, slow = parse_text(text), parse_text(one_line)
    assert fast.SerializeToString(deterministic=True) == \
        slow.SerializeToString(deterministic=True)
    assert to_text(slow) == text
    with pytest.raises(Exception, match="not a PSParameter text"):
        parse_text(text.replace("table_id: 1", "table_id: x"), "w.txt")


# edits of a table's line that text_format reads its own way (octal, hex, a float's f suffix,
# inf, nan, an enum by number, a bool as t) or refuses (out of range, a field set twice, an
# unknown field or value, an escape, an unclosed or extra brace, a comment)
TABLE_EDITS = [
    ("table_id: 1", "table_id: 010"), ("table_id: 1", "table_id: 0x1"),
    ("table_id: 1", "table_id: -1"), ("table_id: 1", "table_id: 18446744073709551616"),
    ("table_id: 1", "table_id: 1\n      table_id: 1"), ("table_id: 1", "table_id: 1.0"),
    ("table_id: 1", "table_id: \"1\""), ("table_id: 1", "table_ids: 1"),
    ("table_id: 1", "table_id: 1 # one"), ("table_id: 1", "table_id:1"),
    ("nonclk_coeff: 0.1", "nonclk_coeff: 0.1f"), ("nonclk_coeff: 0.1", "nonclk_coeff: inf"),
    ("nonclk_coeff: 0.1", "nonclk_coeff: -nan"), ("nonclk_coeff: 0.1", "nonclk_coeff: 1e99"),
    ("type: PS_DENSE_TABLE", "type: 0"), ("type: PS_DENSE_TABLE", "type: 7"),
    ("type: PS_DENSE_TABLE", "type: PS_DENSE"), ("sync: true", "sync: t"),
    ("sync: true", "sync: yes"), ('name: "sgd"', 'name: "s\\147d"'),
    ('name: "sgd"', 'name: "sgd" "x"'), ("common {", "common {\n      }\n      common {"),
    ("common {", "common: {"), ("common {", "common <"), ("common {", "common {\n{"),
]


def test_table_text_reads_as_text_formats_parse():
    from google.protobuf import text_format
    path = os.path.join(PS, "two_tables_sgd_sync", "expected", "trainer_1", "worker_desc.txt")
    with open(path) as f:
        text = f.read()
    for old, new in [(None, None)] + TABLE_EDITS:
        edited = text if old is None else text.replace(old, new, 1)
        assert edited != text or old is None, old
        want = PSParameter()
        try:
            text_format.Parse(edited, want)
        except text_format.ParseError:
            with pytest.raises(Exception, match="not a PSParameter text"):
                parse_text(edited)
            continue
        assert parse_text(edited).SerializeToString(deterministic=True) == \
            want.SerializeToString(deterministic=True), new


# --- commands ----------------------------------------------------------------------------------
def _args(case, *more):
    return [os.path.join(case, "main.pb"), "--startup", os.path.join(case, "startup.pb"),
            "--cluster", os.path.join(case, "cluster.yaml")] + list(more)


def test_simulate_runs_a_ps_split_and_names_its_differences():
    case = os.path.join(PS, "two_tables_sgd_sync")
    r = CliRunner().invoke(cli_main, ["simulate"] + _args(case, "--steps", "2", "--batch", "4",
                                                          os.path.join(case, "expected")))
    assert r.exit_code == 0, r.output
    assert "result: all 6 parameters equal" in r.output
    assert "the ps reference against the original as written" in r.output
    assert "ps-sparse-init" in r.output and "ps-sparse-grad-batch-scale" in r.output
    r = CliRunner().invoke(cli_main, ["simulate"] + _args(case, "--steps", "2", "--batch", "4",
                                                          "--format", "json", "--no-why"))
    out = json.loads(r.output)
    assert r.exit_code == 0 and out["equal"]
    names = {p["name"]: p for p in out["ps_reference_vs_original"]["params"]}
    assert names["emb_a"]["max_abs"] > 0 and names["emb_a"]["why"] == []


def test_plan_shows_tables_and_shards():
    r = CliRunner().invoke(cli_main, ["plan"] + _args(os.path.join(PS, "ctr_adam_sync")))
    assert r.exit_code == 0, r.output
    assert "MergedDense" in r.output and "Dense@GRAD_1 -> table 1" in r.output


# --- check ---------------------------------------------------------------------------------------
def _broken(tmp_path, case, edit):
    """A copy of Paddle's split of `case` with `edit(dir)` applied; check's output and exit."""
    d = str(tmp_path / "split")
    shutil.copytree(os.path.join(PS, case, "expected"), d)
    edit(d)
    r = CliRunner().invoke(cli_main, ["check"] + _args(os.path.join(PS, case), d))
    return r.exit_code, r.output


def _edit_program(path, change):
    prog = programio.load(path)
    change(prog)
    with open(path, "wb") as f:
        f.write(programio.to_bytes(prog))


def _edit_text(path, old, new, count=1):
    with open(path) as f:
        text = f.read()
    assert old in text
    with open(path, "w") as f:
        f.write(text.replace(old, new, count))


def _drop(type_):
    def change(prog):
        ops = prog.global_block.ops
        del ops[next(i for i, op in enumerate(ops) if op.type == type_)]
    return change


def _set_attr(type_, name, value):
    def change(prog):
        op = next(op for op in prog.global_block.ops if op.type == type_)
        op.set_attr(name, value)
    return change


@pytest.mark.parametrize("case,edit,found", [
    ("ctr_adam_sync", lambda d: _edit_program(os.path.join(d, "trainer_0", "main.pb"),
                                              _drop("send")), "is sent 0 times"),
    ("ctr_adam_sync", lambda d: _edit_program(os.path.join(d, "trainer_0", "main.pb"),
                                              _drop("send_barrier")), "0 send_barrier"),
    ("ctr_adam_async", lambda d: _edit_program(os.path.join(d, "trainer_1", "main.pb"),
                                               _drop("distributed_push_sparse")),
     "is not pushed"),
    ("two_tables_sgd_sync", lambda d: _edit_program(
        os.path.join(d, "trainer_0", "main.pb"),
        _set_attr("distributed_lookup_table", "table_id", 1)), "reads table 1"),
    ("ctr_adam_sync", lambda d: _edit_program(
        os.path.join(d, "trainer_0", "main.pb"),
        _set_attr("send_barrier", "trainer_id", 1)), "trainer_id 1"),
    ("ctr_adam_geo", lambda d: _edit_program(
        os.path.join(d, "pserver_127.0.0.1_6175", "main.pb"),
        _set_attr("listen_and_serv", "Fanin", 3)), "Fanin is 3"),
    ("ctr_adam_geo", lambda d: _edit_program(os.path.join(d, "trainer_0", "main.pb"),
                                             _drop("send")), "0 sends of sparse table 0"),
    ("ctr_adam_sync", lambda d: _edit_text(
        os.path.join(d, "pserver_127.0.0.1_6175", "server_desc.txt"), "dims: 192",
        "dims: 191"), "add up to 385"),
    ("ctr_adam_sync", lambda d: _edit_text(
        os.path.join(d, "trainer_0", "worker_desc.txt"), "fea_dim: 10", "fea_dim: 9", 2),
     "accessor SparseAccessor fea_dim 9"),
    ("mlp_sgd_sync", lambda d: os.remove(os.path.join(d, "trainer_1", "worker_desc.txt")),
     "no worker_desc.txt"),
    ("mlp_sgd_async", lambda d: _edit_text(
        os.path.join(d, "pserver_127.0.0.1_6174", "server_desc.txt"), "sync: false",
        "sync: true"), "sync True"),
])
def test_check_catches_a_broken_split(tmp_path, case, edit, found):
    code, out = _broken(tmp_path, case, edit)
    assert code == 1 and found in out, out


def test_descriptors_in_pieces_share_the_tables_every_role_has():
    """DescWriter's pieces: what a sink writes one after the other equals Paddle's files, and
    the runs of tables that are the same for every role are one bytes object made once (only
    a dense table's dims differ between pservers and trainers)."""
    from transpile.output.psdesc import DescWriter
    m, s, c = load_case("ps", "ctr_adam_sync")
    plan = make_plan(m, s, c)
    descs = DescWriter(plan)
    pieces = {}
    for ep in ("127.0.0.1:6174", "127.0.0.1:6175"):
        pieces[ep] = descs.server_desc_pieces(ep)
        path = os.path.join(PS, "ctr_adam_sync", "expected", "pserver_" + ep.replace(":", "_"),
                            "server_desc.txt")
        with open(path, "rb") as f:
            assert b"".join(pieces[ep]) == f.read()
    with open(os.path.join(PS, "ctr_adam_sync", "expected", "trainer_1", "worker_desc.txt"),
              "rb") as f:
        assert b"".join(descs.worker_desc_pieces(1)) == f.read()
    a, b = pieces.values()
    assert len(a) == len(b) and [x is y for x, y in zip(a, b)].count(False) == 1
    assert any(x is y and len(x) > 100 for x, y in zip(a, b))       # a run of tables, shared


def test_field_text_with_a_memo_prints_each_table_as_without():
    """A memo shared across tables (DescWriter's) gives each sub-message's text once; the
    text of every table, at any indent and under any field name, is as printed afresh, and
    shared sub-messages are found in it."""
    from transpile.format.psdesc import field_text
    with open(os.path.join(PS, "ctr_adam_sync", "expected", "pserver_127.0.0.1_6174",
                           "server_desc.txt")) as f:
        srv = parse_text(f.read())
    tables = list(srv.server_param.downpour_server_param.downpour_table_param)
    assert len(tables) >= 3
    memo: dict = {}
    for indent, name in ((4, "downpour_table_param"), (2, "downpour_table_param"), (4, "t")):
        for t in tables + tables:
            assert field_text(name, t, indent, memo) == field_text(name, t, indent)
    assert memo and all(text.endswith("}\n") for text in memo.values())
    assert len({k[2:] for k in memo}) >= 3          # kept apart by indent and field name


def test_descriptors_read_by_table_as_protobuf_reads_them_whole():
    """parse_text's fast path (walked by position, table by table) gives protobuf's own
    parse of every descriptor of the corpus; a text laid out otherwise, or holding a line
    break other than "\\n", is left to the whole-text parse (None), which reads it the same."""
    import glob
    from google.protobuf import text_format
    from transpile.format.psdesc import _parse_by_table
    paths = sorted(glob.glob(os.path.join(CORPUS, "ps*", "*", "expected", "*",
                                          "*_desc.txt")))
    fast_ones = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        whole = PSParameter()
        text_format.Parse(text, whole)
        fast = _parse_by_table(text)
        if fast is None:                    # (a section the fast path does not know)
            assert "fs_client_param {" in text, path
            continue
        fast_ones += 1
        assert fast.SerializeToString(deterministic=True) == \
            whole.SerializeToString(deterministic=True), path
    assert fast_ones > 40
    with open(paths[0], encoding="utf-8") as f:
        text = f.read()
    assert _parse_by_table(text) is not None
    odd = [text.replace("\n", "\r\n"), text.replace("table_name: \"", "table_name: \"\x0c"),
           text.rstrip("\n"), text.replace("    }\n", "    }  \n", 1), text + "\n",
           text.replace("  }\n}\n", "  }\n}", 1), " " + text]
    for variant in odd:
        fast = _parse_by_table(variant)
        if fast is not None:
            whole = PSParameter()
            text_format.Parse(variant, whole)
            assert fast.SerializeToString(deterministic=True) == \
                whole.SerializeToString(deterministic=True)
    assert _parse_by_table(odd[0]) is None and _parse_by_table(odd[1]) is None
    assert _parse_by_table(odd[2]) is None and _parse_by_table(odd[6]) is None
