"""plan.json (transpile/output/planjson.py, docs/plan-json.md) on corpus cases of both styles: the
blocks tile each parameter, every block lives where the plan says, the grads' sent names are
what the trainer sends, the bytes add up; and the split command's summary / --format json /
--quiet."""
import json
import os

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from transpile import load, load_config, split
from transpile.ir.program import Program
from transpile.output.planjson import op_changes
from transpile.output.result import endpoint_dir

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
CASES = ["classic/basic", "classic/dist_lookup_table", "classic/half_async_mlp",
         "classic/lr_decay_conditional", "classic/remote_prefetch_lookup_table",
         "fleet/ctr_sparse_adam_sync", "fleet/large_scale_adam_async",
         "fleet/lrdecay_momentum_half_async", "fleet/mlp_adam_sync", "fleet/ctr_sparse_adam_geo"]


def _split(case):
    d = os.path.join(CORPUS, case)
    main, startup = load(os.path.join(d, "main.pb")), load(os.path.join(d, "startup.pb"))
    cfg = load_config(os.path.join(d, "cluster.yaml"))
    return main, split(main, startup, cfg), cfg


def _args(case, out):
    d = os.path.join(CORPUS, case)
    return ["split", os.path.join(d, "main.pb"), "--startup", os.path.join(d, "startup.pb"),
            "--cluster", os.path.join(d, "cluster.yaml"), "--out", out]


@pytest.fixture(scope="module", params=CASES)
def split_case(request):
    return (request.param,) + _split(request.param)


def test_blocks_tile_each_parameter(split_case):
    _, main, res, _ = split_case
    for p in res.plan["params"]:
        blocks = p["blocks"]
        if any(t["name"] == p["name"] and t["split"] == "rows_per_pserver"
               for t in res.plan["sparse_tables"]):
            continue        # classic's distributed table: ceil(rows / pservers) on each
        assert [b["index"] for b in blocks] == list(range(len(blocks)))
        row = 0
        for b in blocks:
            assert b["row_offset"] == row
            assert b["shape"][1:] == p["shape"][1:]
            assert b["rows"] == b["shape"][0]
            row += b["rows"]
        assert row == p["shape"][0], p["name"]
        assert sum(b["bytes"] for b in blocks) == p["bytes"]


def test_every_block_is_declared_on_its_endpoint(split_case):
    case, _, res, _ = split_case
    large_scale = {t["name"] for t in res.plan["sparse_tables"]
                   if t["distributed"] and case.startswith("fleet")}
    for p in res.plan["params"]:
        for b in p["blocks"]:
            pmain = res.programs[endpoint_dir(b["endpoint"]) + "/main"]
            if p["name"] in large_scale:
                # large-scale rows live in the pserver's table, named in its optimize block
                ops = [op for blk in pmain.blocks for op in blk.ops
                       if op.attr("tablename") == b["name"]]
                assert ops, b["name"]
                continue
            assert b["name"] in pmain.global_block.vars, (b["name"], b["endpoint"])
            if b["name"] == p["name"]:
                continue        # whole (or classic's distributed table, same name everywhere)
            for other in res.plan["config"]["pservers"]:
                if other != b["endpoint"]:
                    omain = res.programs[endpoint_dir(other) + "/main"]
                    assert b["name"] not in omain.global_block.vars


def test_accumulator_blocks_are_declared_on_their_endpoint(split_case):
    case, _, res, _ = split_case
    for p in res.plan["params"]:
        for a in p["accumulators"]:
            for b in a["blocks"]:
                pmain = res.programs[endpoint_dir(b["endpoint"]) + "/main"]
                v = pmain.global_block.vars.get(b["name"])
                if v is not None:
                    assert list(v.shape) == b["shape"]
                else:       # a large-scale table holds it as a value column
                    assert case.startswith("fleet/large_scale")


def test_sent_grad_names_are_what_the_trainer_sends(split_case):
    case, _, res, cfg = split_case
    plan = res.plan
    for tid in plan["trainer_ids"]:
        if case.startswith("classic"):
            sent = set()
            for op in res.programs["trainer_%d/main" % tid].global_block.ops:
                if op.type == "send":
                    sent.update(op.input("X"))
                    sent.update(op.attr("send_varnames") or [])
        else:
            rt = res.runtime["trainer_%d" % tid]
            sent = {n for ctx in rt["send_ctx"].values() for n in ctx["split_varnames"]}
        for g in plan["grads"]:
            if any(t["name"] == g["param"] and t["split"] == "rows_evenly" and
                   not case.endswith("_geo") for t in plan["sparse_tables"]):
                continue        # pushed by distributed_push_sparse, not a send queue
            for b in g["blocks"]:
                assert b["sent"][str(tid)] in sent, (g["name"], b["sent"][str(tid)])


def test_grads_are_merged_in_the_block_listen_and_serv_names(split_case):
    _, _, res, _ = split_case
    for g in res.plan["grads"]:
        for b in g["blocks"]:
            pmain = res.programs[endpoint_dir(b["endpoint"]) + "/main"]
            las = next(op for op in pmain.global_block.ops if op.type == "listen_and_serv")
            assert "%s:%d" % (b["merged"], b["block"]) in las.attr("grad_to_block_id")


def test_moved_ops_land_in_pserver_blocks(split_case):
    _, main, res, _ = split_case
    ops = main.global_block.ops
    for r in res.plan["ops"]["removed"]:
        assert ops[r["index"]].type == r["type"]
        for m in r["moved_to"]:
            pmain = res.programs[endpoint_dir(m["endpoint"]) + "/main"]
            assert 0 < m["block"] < len(pmain.blocks)


def test_endpoint_bytes_sum_to_the_total(split_case):
    _, _, res, _ = split_case
    plan = res.plan
    held = plan["endpoints"]
    assert sorted(held) == sorted(plan["config"]["pservers"])
    assert sum(h["bytes"] for h in held.values()) == plan["total_bytes"] > 0
    params = sum(b["bytes"] for p in plan["params"] for b in p["blocks"])
    assert sum(h["param_bytes"] for h in held.values()) == params
    mean = plan["total_bytes"] / len(held)
    assert plan["imbalance"] == round(max(h["bytes"] for h in held.values()) / mean, 4)
    for ep, h in held.items():
        assert h["param_blocks"] == sum(b["endpoint"] == ep for p in plan["params"]
                                        for b in p["blocks"])


def test_plan_is_json_and_deterministic():
    _, a, _ = _split("fleet/ctr_sparse_adam_sync")
    _, b, _ = _split("fleet/ctr_sparse_adam_sync")
    assert json.dumps(a.plan, sort_keys=True) == json.dumps(b.plan, sort_keys=True)
    assert a.plan["schema"] == "pstranspile-plan" and a.plan["version"] == 1


def test_op_changes_is_a_multiset_difference():
    main, res, _ = _split("classic/basic")
    trainer = res.programs["trainer_0/main"]
    removed, inserted = op_changes(main, trainer)
    assert removed == 2                 # the two sgd ops
    assert inserted == sum(len(b.ops) for b in trainer.blocks) - \
        (sum(len(b.ops) for b in main.blocks) - removed)
    assert op_changes(Program.empty(), trainer) == (0, len(trainer.global_block.ops))


# --- the CLI ---------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["classic/basic", "fleet/ctr_sparse_adam_sync"])
def test_summary_shows_endpoints_imbalance_and_op_counts(case, tmp_path):
    r = CliRunner().invoke(cli_main, _args(case, str(tmp_path / "out")))
    assert r.exit_code == 0, r.output
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    for ep in plan["config"]["pservers"]:
        assert ep in r.output
    assert "imbalance (max/mean bytes): %.2f" % plan["imbalance"] in r.output
    assert "█" in r.output
    line = next(ln for ln in r.output.splitlines() if "trainer_0/main.pb" in ln)
    p = plan["programs"]["trainer_0/main"]
    assert line.split()[1:] == [str(p["ops"]), str(p["removed"]), str(p["inserted"])]
    assert "\x1b[" not in r.output          # not a terminal: plain text


def test_format_json_prints_plan_json(tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(cli_main, _args("fleet/mlp_adam_sync", str(out)) +
                           ["--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == json.loads((out / "plan.json").read_text())
    assert r.output == (out / "plan.json").read_text()


@pytest.mark.parametrize("flags", [["--quiet"], ["--quiet", "--format", "json"]])
def test_quiet_prints_nothing(flags, tmp_path):
    r = CliRunner().invoke(cli_main, _args("classic/basic", str(tmp_path / "o")) + flags)
    assert r.exit_code == 0
    assert r.output == ""
    assert (tmp_path / "o" / "plan.json").exists()


def _reference_json(obj, depth=3, indent=""):
    """json_bytes' format spelled out with json.dumps (what output/outdir.py must write)."""
    def compact(o):
        return json.dumps(o, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
    inner = indent + " "
    if depth == 0 or not isinstance(obj, (dict, list)) or not obj:
        return compact(obj)
    if isinstance(obj, dict):
        items = ["%s%s: %s" % (inner, compact(str(k)), _reference_json(obj[k], depth - 1, inner))
                 for k in sorted(obj)]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    items = [inner + _reference_json(x, depth - 1, inner) for x in obj]
    return "[\n" + ",\n".join(items) + "\n" + indent + "]"


def test_json_bytes_format(split_case):
    from transpile.output.outdir import json_bytes
    _, _, res, _ = split_case
    for obj in [res.plan] + list(res.runtime.values()):
        for depth in (0, 1, 2, 3, 5):
            assert json_bytes(obj, depth) == (_reference_json(obj, depth) + "\n").encode()
    odd = {"b": [1.5, float("nan"), -float("inf"), None, True, 10 ** 20, "ü\"\n"],
           "a": {"z": [], "y": {}, "x": [[1, {"k": (1, 2)}], "s"]}, "": 0, "c": ()}
    for depth in range(5):
        assert json_bytes(odd, depth) == (_reference_json(odd, depth) + "\n").encode()


def test_one_line_fields_written_by_kind_as_the_encoder_writes_them():
    """A context's fields (one line each) are written by their kind where it is a str, an int,
    a bool or a list of one of those, else by the JSON encoder: the same text either way."""
    from transpile.output.outdir import _value, json_bytes
    values = ["", "a\"b\\c\n\t\u0001ü€😀", 0, -7, 10 ** 30, True, False, None, 1.5,
              float("nan"), [], ["x", "ü\n"], [1, -2, 10 ** 20], [1, True], [True, False],
              ["a", 1], [1, "a"], [1.5, 2], [[1], [2]], [{"b": 1, "a": 2}], {"b": [1], "a": "x"},
              (1, 2)]
    for v in values:
        want = json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
        assert _value(v) == want, v
    ctx = {"k%02d" % i: v for i, v in enumerate(values)}
    assert json_bytes({"c": ctx}, 2) == (_reference_json({"c": ctx}, 2) + "\n").encode()


def test_json_chunks_write_a_large_plan_in_pieces_with_the_same_bytes():
    """plan.json is written piece by piece (never one string): the pieces join to exactly
    json_bytes' format, across the batches of one-line items too."""
    from transpile.output import outdir
    big = {"params": [{"name": "p%d" % i, "blocks": [i, i + 1]} for i in range(1300)],
           "endpoints": {"e%d" % i: {"bytes": i} for i in range(700)}, "n": 1}
    for depth in (1, 2, 3):
        pieces = list(outdir.json_chunks(big, depth))
        assert b"".join(pieces) == (_reference_json(big, depth) + "\n").encode()
        if depth >= 2:          # (at depth 1 each top-level value is one compact line)
            assert max(map(len, pieces)) < len(b"".join(pieces)) / 3


def test_entries_encoded_ahead_are_written_as_json_chunks_would(split_case):
    """split encodes plan.json's early entries while the programs are built (json_entry) and
    json_chunks writes them as given: the same bytes as encoding the whole plan at the end,
    whichever entries are ready; a dict shown less than 2 levels deep has no entries apart."""
    from transpile.output import outdir
    _, _, res, _ = split_case
    plan = res.plan
    whole = b"".join(outdir.json_chunks(plan))
    keys = sorted(plan)
    for ready_keys in (keys, keys[::2], ["params"], ["params", "notes", "faults"]):
        ready = {k: outdir.json_entry(plan, k) for k in ready_keys}
        assert b"".join(outdir.json_chunks(plan, ready=ready)) == whole
    odd = {"b": {"k": [1, {"x": "ü"}]}, "a": [], "c": {"keep": {"z": 1, "a": 2}}}
    for depth in (2, 3, 4):
        ready = {"b": outdir.json_entry(odd, "b", depth, {"keep"}),
                 "c": outdir.json_entry(odd, "c", depth, {"keep"})}
        assert b"".join(outdir.json_chunks(odd, depth, {"keep"}, ready)) == \
            b"".join(outdir.json_chunks(odd, depth, {"keep"}))
    with pytest.raises(ValueError):
        list(outdir.json_chunks(odd, 1, ready={"b": b"{}"}))


def test_every_style_makes_plan_json_in_two_steps():
    """Every style implements plan_parts (plan_json is it finished); a style without it is
    told so. The early entries are the finished dict's own, all but the few the programs
    decide."""
    from transpile.core.config import load_config
    from transpile.format.programio import load
    from transpile.split import split
    from transpile.styles.base import Style
    from transpile.styles.registry import all_styles, style_of

    class Neither(Style):
        pass
    with pytest.raises(NotImplementedError):
        Neither().plan_json(None, None, [])
    assert all("plan_parts" in type(s).__dict__ and "plan_json" not in type(s).__dict__
               for s in all_styles())
    late = {"classic": {"grads", "ops", "programs"}, "fleet": {"grads", "ops", "programs"},
            "ps": {"programs"}}
    faults = []
    for case in ("classic/lr_decay", "fleet/ctr_sparse_adam_geo", "ps/ctr_adam_sync",
                 "ps/ctr_adam_geo", "clip/ps_ctr1_emb_clipvalue_sync"):
        d = os.path.join(CORPUS, case)
        main, startup = load(os.path.join(d, "main.pb")), load(os.path.join(d, "startup.pb"))
        config = load_config(os.path.join(d, "cluster.yaml"))
        style = style_of(config)
        ids = config.trainer_ids()
        prep = style.prepare(main, startup, config, ids)
        parts = style.plan_parts(prep, ids)
        whole = split(main, startup, config).plan
        assert set(whole) - set(parts.early) == late[config.style], case
        assert {k: whole[k] for k in parts.early} == parts.early, case
        assert style.plan_json(prep, split(main, startup, config), ids) == whole
        faults.append(bool(parts.early.get("faults")))
    assert faults == [False, False, False, False, True]     # ps: faults are early too
