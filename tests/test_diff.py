"""`diff`: op alignment, what counts as a difference, renderers, folders, the CLI, speed."""
import json
import os
import time

import pytest
from click.testing import CliRunner

from transpile.format import programio, protoread, protowrite, textform
from transpile.ir.program import Attr, Op, Program
from transpile.core import jsonfmt
from transpile.diff import programs as diff_mod
from transpile.diff import seqmatch
from transpile.render import diff_render

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
BASIC = os.path.join(CORPUS, "classic", "basic", "expected")
TRAINER = os.path.join(BASIC, "trainer_0", "main.pb")
PSERVER = os.path.join(BASIC, "pserver_127.0.0.1_6174", "main.pb")


def load(path):
    return programio.load(path)


def changes(d, kind=None):
    return [o for b in d.blocks for o in b.ops if kind is None or o.kind == kind]


def test_same_program_no_differences():
    a = load(TRAINER)
    d = diff_mod.diff_programs(a, load(TRAINER))
    assert not d.changed
    assert "no differences" in diff_render.render_text(d)


def test_control_vars_compared_by_position():
    a = load(TRAINER)
    b = a.copy()
    names = sorted({n for _, _, op in b.ops() for n in op.input_names() + op.output_names()
                    if n.startswith("__control_var@")})
    assert names
    new = {n: "__control_var@0.%d" % (123456 + i) for i, n in enumerate(names)}
    for _, _, op in b.ops():
        for slots in (op.inputs, op.outputs):
            for k, v in slots.items():
                slots[k] = [new.get(x, x) for x in v]
    blk = b.global_block
    blk.vars = {new.get(k, k): v for k, v in blk.vars.items()}
    for k, v in blk.vars.items():
        v.name = k
    assert not diff_mod.diff_programs(a, b).changed
    # but a control var used in another place is a difference
    send_barrier = next(op for op in b.global_block.ops if op.type == "send_barrier")
    send_barrier.inputs["X"] = list(reversed(send_barrier.inputs["X"]))
    assert diff_mod.diff_programs(a, b).changed


def test_debug_attrs_ignored_unless_strict():
    a = load(TRAINER)
    b = a.copy()
    b.global_block.ops[0].set_attr("op_callstack", ["somewhere else"])
    b.global_block.ops[1].set_attr("op_namescope", "/other/")
    assert not diff_mod.diff_programs(a, b).changed
    d = diff_mod.diff_programs(a, b, strict=True)
    assert [o.a_index for o in changes(d)] == [0, 1]
    assert any("op_callstack" in x for x in changes(d)[0].details)


def test_attr_change_named_old_to_new():
    a = load(PSERVER)
    b = a.copy()
    b.blocks[1].ops[1].set_attr("scale", 1.0)
    d = diff_mod.diff_programs(a, b)
    (o,) = changes(d)
    assert (o.kind, o.type, o.a_index, o.b_index) == ("change", "scale", 1, 1)
    assert o.details == ["attr scale: 0.5 -> 1.0"]
    assert d.blocks[1].status == "changed" and not d.blocks[2].changed


def test_insert_delete_aligned_by_lcs():
    a = load(TRAINER)
    b = a.copy()
    ops = b.global_block.ops
    ops.insert(0, Op("fill_constant", {}, {"Out": ["new_var"]}, {"value": Attr("FLOAT", 1.0)}))
    del ops[11]          # the first send (index 10 before the insert)
    d = diff_mod.diff_programs(a, b)
    # the barrier waits for one send less: the only other change (control vars are named by
    # their writers, so the later ones are not renumbered)
    assert [(o.kind, o.type, o.a_index, o.b_index) for o in changes(d)] == [
        ("insert", "fill_constant", None, 0), ("delete", "send", 10, None),
        ("change", "send_barrier", 14, 14)]
    assert changes(d)[2].details[0].startswith("input X: [")


def test_changed_slots_pair_same_type_ops():
    a = load(PSERVER)
    b = a.copy()
    sgd = b.blocks[2].ops[2]
    sgd.inputs["Grad"] = ["clip_0.tmp_0"]
    d = diff_mod.diff_programs(a, b)
    (o,) = changes(d)
    assert o.kind == "change" and o.type == "sgd"
    assert o.details == ['input Grad: ["fc_w@GRAD.block1"] -> ["clip_0.tmp_0"]']


def test_vars_added_removed_changed():
    a = load(PSERVER)
    b = a.copy()
    g = b.global_block
    g.vars["fc_w.block1"] = g.vars["fc_w.block1"].with_shape((499, 1000))
    del g.vars["fc_b@GRAD.trainer_1"]
    g.vars["extra"] = g.vars["fc_b"].with_shape((3,), name="extra")
    d = diff_mod.diff_programs(a, b)
    got = {(v.kind, v.name): v.details for v in d.blocks[0].vars}
    assert got[("changed", "fc_w.block1")] == ["shape: [500, 1000] -> [499, 1000]"]
    assert ("removed", "fc_b@GRAD.trainer_1") in got and ("added", "extra") in got


def test_blocks_added_and_parent_changes():
    a = load(os.path.join(CORPUS, "classic", "lr_decay_conditional", "expected", "trainer_0",
                          "main.pb"))
    b = load(TRAINER)
    d = diff_mod.diff_programs(a, b)
    assert [bd.status for bd in d.blocks[1:]] == ["removed"] * 3
    c = a.copy()
    c.blocks[2].parent_idx = 1
    d = diff_mod.diff_programs(a, c)
    assert d.blocks[2].details == ["parent_idx: 0 -> 1"]


def test_pb_and_json_forms_compare_equal(tmp_path):
    j = tmp_path / "main.json"
    j.write_text(textform.dumps(load(TRAINER)))
    assert not diff_mod.diff_programs(load(TRAINER), load(str(j))).changed


def test_renderers():
    a = load(PSERVER)
    b = a.copy()
    b.blocks[1].ops[1].set_attr("scale", 1.0)
    del b.blocks[2].ops[1]
    d = diff_mod.diff_programs(a, b, a_name="a.pb", b_name="b.pb")
    text = diff_render.render_text(d)
    assert "~ op 1 scale(X=fc_b@GRAD) -> (Out=fc_b@GRAD)" in text
    assert "attr scale: 0.5 -> 1.0" in text
    assert "- op 1 scale(X=fc_w@GRAD.block1)" in text
    md = diff_render.render_markdown(d)
    assert "### Block 1" in md and "| ~ | op 1 `scale(" in md
    js = json.loads(diff_render.render_json(d))
    assert js["same"] is False and [b["idx"] for b in js["blocks"]] == [1, 2]
    assert js["blocks"][1]["ops"][0]["kind"] == "delete"


def test_trees(tmp_path):
    import shutil
    t = tmp_path / "split"
    shutil.copytree(BASIC, t)
    assert not diff_mod.diff_trees(BASIC, str(t)).changed
    p = load(str(t / "pserver_127.0.0.1_6175" / "main.pb"))
    p.global_block.ops[0].set_attr("Fanin", 3)
    programio.save(p, str(t / "pserver_127.0.0.1_6175" / "main.pb"))
    os.remove(t / "trainer_0" / "startup.pb")
    td = diff_mod.diff_trees(BASIC, str(t))
    assert [(f.path, f.status) for f in td.files] == [
        ("pserver_127.0.0.1_6175/main.pb", "changed"), ("trainer_0/startup.pb", "missing")]


def test_runtime_json_compared_as_json(tmp_path):
    import shutil
    src = os.path.join(CORPUS, "fleet", "mlp_sgd_sync", "expected")
    t = tmp_path / "split"
    shutil.copytree(src, t)
    rt = json.loads((t / "trainer_0" / "runtime.json").read_text())
    rt["send_ctx"]["fc_0.b_0@GRAD"]["split_endpoints"] = ["127.0.0.1:6175"]
    (t / "trainer_0" / "runtime.json").write_text(json.dumps(rt, indent=4))
    td = diff_mod.diff_trees(src, str(t))
    (f,) = td.files
    assert f.path == "trainer_0/runtime.json"
    assert f.details == ['send_ctx.fc_0.b_0@GRAD.split_endpoints: ["127.0.0.1:6174"] -> '
                         '["127.0.0.1:6175"]']


def _chain(n, tag=""):
    ops = [Op("relu", {"X": ["v%d" % i]}, {"Out": ["v%d" % (i + 1)]},
              {"op_role": Attr("INT", 0), "tag": Attr("STRING", tag)}) for i in range(n)]
    p = Program.empty()
    p.global_block.ops = ops
    return p


def test_large_programs_are_fast():
    a = _chain(20000)
    b = a.copy()
    ops = b.global_block.ops
    for i in range(0, 20000, 97):
        ops[i].set_attr("tag", "x")
    del ops[5000:5010]
    ops.insert(15000, Op("scale", {"X": ["q"]}, {"Out": ["q"]}))
    t = time.time()
    d = diff_mod.diff_programs(a, b)
    assert time.time() - t < 10
    assert len(changes(d, "delete")) == 10 and len(changes(d, "insert")) == 1
    assert len(changes(d, "change")) == len([i for i in range(0, 20000, 97)
                                             if not 5000 <= i < 5010])


# ---------------------------------------------------------------------------------------------
# CLI

# the real command line, as a user runs it
from cli import main as _root  # noqa: E402


def cli(*args):
    return CliRunner().invoke(_root, ["diff"] + list(args))


def test_cli_exit_codes(tmp_path):
    assert cli(TRAINER, TRAINER).exit_code == 0
    r = cli(TRAINER, PSERVER)
    assert r.exit_code == 1 and "summary:" in r.output
    assert cli(TRAINER, str(tmp_path / "missing.pb")).exit_code == 2
    assert cli(TRAINER, str(tmp_path / "x.txt")).exit_code == 2
    assert cli(TRAINER, BASIC).exit_code == 2            # a file and a folder


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_cli_formats(fmt):
    r = cli("--format", fmt, TRAINER, PSERVER)
    assert r.exit_code == 1
    if fmt == "json":
        assert json.loads(r.output)["same"] is False
    elif fmt == "markdown":
        assert r.output.startswith("## `")


def test_cli_folders_and_strict(tmp_path):
    r = cli(BASIC, BASIC)
    assert r.exit_code == 0 and "no differences" in r.output
    a = load(TRAINER)
    a.global_block.ops[0].set_attr("op_device", "gpu:0")
    p = str(tmp_path / "t.pb")
    programio.save(a, p)
    assert cli(TRAINER, p).exit_code == 0
    r = cli("--strict", TRAINER, p)
    assert r.exit_code == 1 and "op_device" in r.output


def test_set_ordered_attrs_and_runs_compare_as_sets():
    a = load(PSERVER)
    b = a.copy()
    las = b.global_block.ops[0]
    las.set_attr("grad_to_block_id", list(reversed(las.attr("grad_to_block_id"))))
    assert not diff_mod.diff_programs(a, b).changed
    assert diff_mod.diff_programs(a, b, strict=True).changed
    p = Program.empty()
    p.global_block.ops = [Op("fake_init", {}, {"Out": [n]}) for n in ("t1", "t2", "t3")]
    q = p.copy()
    q.global_block.ops.reverse()
    assert not diff_mod.diff_programs(p, q).changed
    q.global_block.ops[0].outputs["Out"] = ["t4"]
    (o,) = changes(diff_mod.diff_programs(p, q))
    assert (o.kind, o.a_index, o.b_index) == ("change", 2, 0)      # real positions


def test_op_defaults_make_absent_attrs_equal():
    a = load(PSERVER)
    b = a.copy()
    scale = b.blocks[1].ops[1]
    bias = scale.attrs.pop("bias")
    assert changes(diff_mod.diff_programs(a, b))
    defaults = {"scale": {"bias": bias.value}}
    assert not diff_mod.diff_programs(a, b, op_defaults=defaults).changed
    assert diff_mod.diff_programs(a, b, op_defaults={"scale": {"bias": 7.0}}).changed
    assert diff_mod.diff_programs(a, b, strict=True, op_defaults=defaults).changed


def test_cli_op_defaults(tmp_path):
    a = load(PSERVER)
    a.blocks[1].ops[1].attrs.pop("bias")
    p = str(tmp_path / "p.pb")
    programio.save(a, p)
    # Paddle's registered defaults ship with the tool: a dropped default attr is no difference
    assert cli(PSERVER, p).exit_code == 0
    assert cli("--strict", PSERVER, p).exit_code == 1
    d = tmp_path / "defaults.json"
    d.write_text(json.dumps({"defaults": {"scale": {"bias": 1.5}}}))
    assert cli("--op-defaults", str(d), PSERVER, p).exit_code == 1
    d.write_text(json.dumps({"defaults": {"scale": {"bias": 0.0}}}))
    assert cli("--op-defaults", str(d), PSERVER, p).exit_code == 0
    d.write_text("[1, 2]")
    assert cli("--op-defaults", str(d), PSERVER, p).exit_code == 2


# ---------------------------------------------------------------------------------------------
# the fast paths give what the plain comparison gives

def test_alignment_is_difflibs():
    """The LCS shortcut for unique op keys finds what difflib.SequenceMatcher finds."""
    import difflib
    import random
    rng = random.Random(7)
    fast = 0
    for _ in range(3000):
        kind = rng.random()
        if kind < 0.4:
            pool = list(range(rng.randint(1, 40)))
            a = rng.sample(pool, rng.randint(0, len(pool)))
            b = rng.sample(pool, rng.randint(0, len(pool)))
        elif kind < 0.8:        # an edited copy: deletes, inserts, a moved run
            a = list(range(rng.randint(0, 60)))
            b = [x for x in a if rng.random() > 0.15]
            for _ in range(rng.randint(0, 4)):
                b.insert(rng.randint(0, len(b)), 100 + rng.randint(0, 30))
            if b:
                i = rng.randint(0, len(b) - 1)
                j = rng.randint(i, len(b))
                run = b[i:j]
                del b[i:j]
                k = rng.randint(0, len(b))
                b[k:k] = run
        else:                   # repeated keys: difflib itself
            a = [rng.randint(0, 4) for _ in range(rng.randint(0, 30))]
            b = [rng.randint(0, 4) for _ in range(rng.randint(0, 30))]
        fast += seqmatch.unique_matching_blocks(a, b) is not None
        want = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        assert [tuple(c) for c in seqmatch.difflib_opcodes(a, b)] == \
            [tuple(c) for c in want], (a, b)
    assert fast > 2000


def _split_case(case):
    from transpile import load_config, split
    d = os.path.join(CORPUS, case)
    main = load(os.path.join(d, "main.pb"))
    startup = load(os.path.join(d, "startup.pb"))
    return main, startup, split(main, startup, load_config(os.path.join(d, "cluster.yaml")))


def _decoded_copy(prog):
    """A copy that shares nothing with `prog` and has every attr decoded: the plain path."""
    p = programio.from_bytes(programio.to_bytes(prog))
    for _, _, op in p.ops():
        op.attrs
    return p


@pytest.mark.parametrize("case", ["classic/lr_decay_conditional", "fleet/mlp_adam_sync",
                                  "fleet/ctr_sparse_adam_sync"])
@pytest.mark.parametrize("strict", [False, True])
def test_shared_ops_compare_as_copies(case, strict):
    """Original against trainer, as a split leaves them (the trainer shares the ops it keeps,
    undecoded), gives what two separately read programs give, decoded or not."""
    main, startup, r = _split_case(case)
    for key in ("trainer_0/main", "trainer_0/startup"):
        b = r.programs[key]
        a = main if key.endswith("/main") else startup
        ops = [op for _, _, op in a.ops()] + [op for _, _, op in b.ops()]
        decoded = [op.attrs_decoded for op in ops]
        got = diff_mod.diff_programs(a, b, strict)
        # compared without decoding every attr
        assert [op.attrs_decoded for op in ops] == decoded
        read = diff_mod.diff_programs(programio.from_bytes(programio.to_bytes(a)),
                                      programio.from_bytes(programio.to_bytes(b)), strict)
        plain = diff_mod.diff_programs(_decoded_copy(a), _decoded_copy(b), strict)
        assert got.changed
        for d in (read, plain):
            assert diff_render.render_text(d) == diff_render.render_text(got)
            assert diff_render.render_json(d) == diff_render.render_json(got)


def test_shared_op_with_a_renamed_var_attr():
    """A VAR attr naming a control var: the same op on both sides still differs when only one
    side renames that var."""
    p = Program.empty()
    p.global_block.ops = [Op("relu", {"X": ["x"]}, {"Out": ["y"]},
                             {"v": Attr("VAR", "__control_var@7"), "k": Attr("INT", 1)})]
    a = programio.from_bytes(programio.to_bytes(p))
    b = a.shallow_copy()
    b.global_block.ops.append(Op("send", {"X": ["y"]}, {"Out": ["__control_var@7"]}))
    d = diff_mod.diff_programs(a, b)
    assert [(o.kind, o.a_index, o.b_index) for o in changes(d)] == [
        ("change", 0, 0), ("insert", None, 1)]
    assert changes(d)[0].details == [
        'attr v: "__control_var@7" -> "__control_var@send(y)"']


def test_json_rendering_is_json_dumps():
    """render_json writes what json.dumps(indent=1) of the asdict-built dict writes."""
    from dataclasses import asdict
    a = load(PSERVER)
    b = a.copy()
    b.blocks[1].ops[1].set_attr("scale", float("nan"))
    b.blocks[1].ops[1].set_attr("note", "ünïcode \"quoted\"\n")
    del b.blocks[2].ops[1]
    del b.global_block.vars["fc_b@GRAD.trainer_1"]
    d = diff_mod.diff_programs(a, b, a_name="a.pb", b_name="b.pb")
    plain = {"a": d.a, "b": d.b, "same": not d.changed, "details": d.details,
             "blocks": [asdict(x) for x in d.blocks if x.changed]}
    assert d.to_dict() == plain
    assert diff_render.render_json(d) == json.dumps(plain, indent=1, ensure_ascii=False) + "\n"
    for v in ({}, [], [[]], {"k": [1, 2.5, None, True, {"x": []}]}, {1: "non-string key"},
              [float("inf"), -float("inf"), 10 ** 30, "", ("t", 1)]):
        assert jsonfmt.dumps_indented(v) == json.dumps(v, indent=1, ensure_ascii=False)


def test_nan_attrs_compare_equal_to_themselves():
    """A NaN in an attr (scalar or in a list) is the same value on both sides, not a change."""
    a = load(PSERVER)
    a.blocks[1].ops[1].set_attr("scale", float("nan"))
    a.blocks[1].ops[1].set_attr("w", [float("nan"), 1.0], "FLOATS")
    b = protoread.decode(protowrite.encode(a))
    assert not diff_mod.diff_programs(a, b).changed
    b.blocks[1].ops[1].set_attr("w", [float("nan"), 2.0], "FLOATS")
    d = diff_mod.diff_programs(a, b)
    assert [x for o in changes(d) for x in o.details] == ['attr w: ["nan", 1.0] -> ["nan", 2.0]']


def _var_kinds(changes) -> list:
    """[(kind, name)] in name order, of VarChanges or of a VarNames (the diff without
    details)."""
    from transpile.diff.result import VarNames
    if not isinstance(changes, VarNames):
        return [(v.kind, v.name) for v in changes]
    out = [("added", n) for n in changes.added] + [("removed", n) for n in changes.removed]
    out += [(v.kind, v.name) for v in changes.changed]
    return sorted(out, key=lambda kn: kn[1])


@pytest.mark.parametrize("case", ["classic/lr_decay_conditional", "classic/basic",
                                  "fleet/mlp_adam_sync", "fleet/ctr_sparse_adam_sync"])
def test_diff_without_details_finds_the_same_changes(case):
    """report.md's diff (details=False) says where ops and vars changed, as the full diff does,
    without saying how: no op rendered, a changed op with at most one of its changes."""
    main, startup, r = _split_case(case)
    several = False
    for key in ("trainer_0/main", "trainer_0/startup"):
        a = main if key.endswith("/main") else startup
        full = diff_mod.diff_programs_and_names(a, r.programs[key])[0]
        brief = diff_mod.diff_programs_and_names(a, r.programs[key], details=False)[0]
        assert [bd.status for bd in brief.blocks] == [bd.status for bd in full.blocks]

        def where(d):
            return [[(o.kind, o.type, o.a_index, o.b_index) for o in bd.ops] for bd in d.blocks]
        assert where(brief) == where(full)
        assert [_var_kinds(bd.vars) for bd in brief.blocks] == \
            [[(v.kind, v.name) for v in bd.vars] for bd in full.blocks]
        assert all(o.op == "" and len(o.details) <= 1 for o in changes(brief))
        assert all(o.op for o in changes(full))
        several |= any(len(o.details) > 1 for o in changes(full))
    assert changes(full), "the split changed nothing: this compares nothing"
    assert several or case.startswith("fleet/"), "no op with several changes to cut short"


def test_op_keys_are_flat_and_stand_for_the_nested_slots():
    """An op's key is one flat tuple (a tuple per slot made a split's trainer main's keys ~5
    MiB); nested_key gives back (type, inputs, outputs) with each slot's renamed args, the
    slots sorted by name and empty ones left out (kept under strict)."""
    from transpile.diff.ops import Side, nested_key
    prog = load(TRAINER)
    for strict in (False, True):
        side = Side(prog, strict, {})
        ops = prog.global_block.ops
        keys = side.op_keys(ops)
        assert side.rename and all(type(k) is tuple for k in keys)
        for op, key in zip(ops, keys):
            want = (op.type,) + tuple(
                tuple(sorted((k, tuple(side.name(x) for x in v)) for k, v in slots.items()
                             if v or strict))
                for slots in (op.inputs, op.outputs))
            assert nested_key(key) == want
        # two ops have equal keys exactly when their nested forms are equal
        assert len(set(keys)) == len(set(map(nested_key, keys)))


def test_vars_looked_up_by_renamed_names_without_a_renamed_copy():
    """_diff_vars looks a block's vars up by their renamed names (control vars) through a
    view of the block's own dict: the same answers as the renamed dict it stands for."""
    from transpile.diff.ops import Side
    prog = load(TRAINER)
    side = Side(prog, False, {})
    block = prog.global_block
    assert side.rename
    view = diff_mod._Renamed(side, block)
    renamed = {side.name(n): v for n, v in block.vars.items()}
    assert list(view.items()) == list(renamed.items())
    asked = list(renamed) + list(block.vars) + ["__control_var@nowhere", "no_such_var"]
    for n in asked:
        assert (n in view) == (n in renamed) and view.get(n) is renamed.get(n)
