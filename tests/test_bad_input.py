"""Issue: never a traceback, never a half-written split. One test per kind of bad input, run
through `pstranspile split` as a user would: one error line naming the file, exit 2, no DIR."""
import os

import pytest
from click.testing import CliRunner

from cli import main
from transpile.format import programio
from transpile.ir.program import Attr

HERE = os.path.dirname(os.path.abspath(__file__))
CASE = os.path.join(HERE, "corpus", "classic", "basic")
MAIN = os.path.join(CASE, "main.pb")
STARTUP = os.path.join(CASE, "startup.pb")
CLUSTER = os.path.join(CASE, "cluster.yaml")


def split(tmp_path, main_pb=MAIN, cluster=CLUSTER, startup=STARTUP, extra=()):
    out = tmp_path / "out"
    args = ["split", str(main_pb), "--cluster", str(cluster), "--out", str(out)]
    if startup:
        args += ["--startup", str(startup)]
    r = CliRunner().invoke(main, args + list(extra))
    return r, out


def assert_refused(r, out, *needles):
    assert r.exit_code == 2, r.output
    line = r.output.strip()
    assert len(line.splitlines()) == 1 and line.startswith("pstranspile: error: "), r.output
    assert "Traceback" not in r.output
    for n in needles:
        assert n in line, line
    assert not out.exists()


def write_prog(tmp_path, prog, name="main.pb"):
    p = tmp_path / name
    programio.save(prog, str(p))
    return p


def yaml(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


# --- program files ---------------------------------------------------------------------------
def test_missing_pb(tmp_path):
    r, out = split(tmp_path, main_pb=tmp_path / "none.pb")
    assert_refused(r, out, "none.pb: no such file")


def test_empty_pb(tmp_path):
    (tmp_path / "e.pb").write_bytes(b"")
    r, out = split(tmp_path, main_pb=tmp_path / "e.pb")
    assert_refused(r, out, "e.pb: empty file")


def test_truncated_pb(tmp_path):
    (tmp_path / "t.pb").write_bytes(open(MAIN, "rb").read()[:5000])
    r, out = split(tmp_path, main_pb=tmp_path / "t.pb")
    assert_refused(r, out, "t.pb: not a valid ProgramDesc", "truncated", "at byte")


def test_corrupt_pb(tmp_path):
    data = bytearray(open(MAIN, "rb").read())
    data[0] = 0x07                     # wire type 7 does not exist
    (tmp_path / "c.pb").write_bytes(bytes(data))
    r, out = split(tmp_path, main_pb=tmp_path / "c.pb")
    assert_refused(r, out, "c.pb: not a valid ProgramDesc", "at byte 0")


def test_bytes_that_are_not_a_program(tmp_path):
    (tmp_path / "x.pb").write_bytes(b"PK\x03\x04 this is a zip file, not a program")
    r, out = split(tmp_path, main_pb=tmp_path / "x.pb")
    assert_refused(r, out, "x.pb: not a")


def test_json_program_missing_field(tmp_path):
    (tmp_path / "m.json").write_text('{"blocks": [{"parent_idx": -1}]}')
    r, out = split(tmp_path, main_pb=tmp_path / "m.json")
    assert_refused(r, out, "m.json: program.blocks[0]: missing field 'idx'")


def test_json_program_wrong_type(tmp_path):
    (tmp_path / "m.json").write_text(
        '{"blocks": [{"idx": 0, "parent_idx": -1, "vars": [{"name": "w", "type": "LOD_TENSOR",'
        ' "dtype": "FP32", "shape": ["a"]}]}]}')
    r, out = split(tmp_path, main_pb=tmp_path / "m.json")
    assert_refused(r, out, "m.json:", "vars[0](w).shape", "expected an integer")


def test_block_index_out_of_range(tmp_path):
    prog = programio.load(MAIN)
    prog.blocks[0].idx = 3
    r, out = split(tmp_path, main_pb=write_prog(tmp_path, prog))
    assert_refused(r, out, "block 0 has idx 3")


def test_block_attr_pointing_nowhere(tmp_path):
    prog = programio.load(MAIN)
    prog.blocks[0].ops[0].attrs["sub_block"] = Attr("BLOCK", 7)
    r, out = split(tmp_path, main_pb=write_prog(tmp_path, prog))
    assert_refused(r, out, "points at block 7, which does not exist")


def test_op_argument_naming_no_var(tmp_path):
    prog = programio.load(MAIN)
    prog.blocks[0].ops[0].inputs["X"] = ["no_such_var"]
    p = write_prog(tmp_path, prog)
    r, out = split(tmp_path, main_pb=p)
    assert_refused(r, out, str(p), "block 0 op 0 (mul): X argument 'no_such_var' names no var")


def test_no_optimizer_ops(tmp_path):
    prog = programio.load(MAIN)
    prog.blocks[0].ops = [op for op in prog.blocks[0].ops if "Param" not in op.inputs]
    r, out = split(tmp_path, main_pb=write_prog(tmp_path, prog))
    assert_refused(r, out, "nothing to split: no optimizer ops found",
                   "was minimize() called before the program was saved?")


def _param(prog):
    return next(v for v in prog.global_block.vars.values() if v.is_parameter)


def test_parameter_unknown_dtype(tmp_path):
    prog = programio.load(MAIN)
    p = _param(prog)
    slot = next(iter(p.type.descs))
    p.type.descs[slot] = (type(p.type.descs[slot][0])("RAW", p.shape), None)
    r, out = split(tmp_path, main_pb=write_prog(tmp_path, prog))
    assert_refused(r, out, "parameter %r has an unknown dtype RAW" % p.name)


@pytest.mark.parametrize("dim", [0, -3])
def test_parameter_zero_or_negative_dim(tmp_path, dim):
    prog = programio.load(MAIN)
    p = _param(prog)
    prog.global_block.vars[p.name] = p.with_shape([dim] + list(p.shape[1:]))
    r, out = split(tmp_path, main_pb=write_prog(tmp_path, prog))
    assert_refused(r, out, "parameter %r has shape [%d" % (p.name, dim), "must be > 0")


# --- cluster configs -------------------------------------------------------------------------
@pytest.mark.parametrize("text, needles", [
    ("pservers: [a:1\n", ["YAML syntax error at line 2"]),
    ("pservers: [a:1]\ntrainer: 2\n", ["unknown key 'trainer' (line 2); did you mean 'trainers'?"]),
    ("pservers: [a:1]\ntrainers: '2'\n", ["trainers (line 2): expected an integer"]),
    ("pservers: [a:1]\nslice_var_up: 3\n", ["slice_var_up (line 2): expected true or false"]),
    ("pservers: []\n", ["pservers (line 1): the list is empty"]),
    ("pservers: [a:1, a:1]\n", ["'a:1' is listed twice"]),
    ("pservers: [localhost]\n", ["'localhost' is not host:port"]),
    ("pservers: [a:65536]\n", ["the port must be in 1-65535"]),
    ("pservers: [a:1]\ntrainers: 0\n", ["trainers (line 2): must be >= 1"]),
    ("pservers: [a:1]\ntrainers: 2\ntrainer_id: 5\n", ["trainer_id (line 3): 5 is out of range"]),
    ("pservers: [a:1]\nmode: turbo\n", ["mode (line 2): must be one of sync, async"]),
    ("pservers: [a:1]\nstyle: horovod\n", ["style (line 2): must be one of fleet, classic"]),
])
def test_bad_config(tmp_path, text, needles):
    r, out = split(tmp_path, cluster=yaml(tmp_path, text))
    assert_refused(r, out, "c.yaml", *needles)


def test_trainer_id_option_out_of_range(tmp_path):
    r, out = split(tmp_path, extra=["--trainer-id", "7"])
    assert_refused(r, out, "--trainer-id 7 is out of range")


# --- the output folder -------------------------------------------------------------------------
def test_refuses_existing_non_empty_dir_without_force(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = CliRunner().invoke(main, ["split", MAIN, "--cluster", CLUSTER, "--out", str(out)])
    assert r.exit_code == 2 and "it holds no split" in r.output
    assert os.listdir(out) == ["keep.txt"]
    assert CliRunner().invoke(main, ["split", MAIN, "--cluster", CLUSTER, "--out",
                                     str(out / "s")]).exit_code == 0
    r = CliRunner().invoke(main, ["split", MAIN, "--cluster", CLUSTER, "--out", str(out / "s")])
    assert r.exit_code == 2 and "it holds a split (use --force" in r.output


def test_failed_split_leaves_previous_dir_as_it_was(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    previous = '{\n "schema": "pstranspile-plan",\n "version": 0\n}\n'
    (out / "plan.json").write_text(previous)
    (tmp_path / "bad.pb").write_bytes(b"\x0a\xff")
    r = CliRunner().invoke(main, ["split", str(tmp_path / "bad.pb"), "--cluster", CLUSTER,
                                  "--out", str(out), "--force"])
    assert r.exit_code == 2 and "bad.pb" in r.output
    assert os.listdir(out) == ["plan.json"] and (out / "plan.json").read_text() == previous
    assert sorted(os.listdir(tmp_path)) == ["bad.pb", "out"]


def test_optimizer_op_without_grad(tmp_path):
    """Found by tests/fuzz_cli.py: an optimizer op whose Grad slot is empty."""
    prog = programio.load(MAIN)
    sgd = next(op for op in prog.blocks[0].ops if op.type == "sgd")
    sgd.inputs["Grad"] = []
    r, out = split(tmp_path, main_pb=write_prog(tmp_path, prog))
    assert_refused(r, out, "needs exactly one Param and one Grad input")


def test_a_var_of_an_unknown_dtype_is_named_whatever_shares_its_type():
    """validate_structure looks at each VarType once (vars share them): the first var of a
    bad one is named, after any number of vars of good ones."""
    from transpile.core.errors import ProgramFormatError
    from transpile.ir.program import Block, Program, TensorDesc, Var, VarType, tensor_type
    from transpile.ir.validate import validate_structure
    good = tensor_type("LOD_TENSOR", "FP32", (4, 2), 0)
    bad = VarType("SELECTED_ROWS", {"selected_rows": (TensorDesc(99, (4, 2)), None)})
    names = ["a%d" % i for i in range(5)] + ["b", "c"]
    types = [good] * 5 + [bad, bad]
    block = Block(0, -1, {n: Var(n, t) for n, t in zip(names, types)}, [])
    with pytest.raises(ProgramFormatError, match="block 0 var 'b': unknown dtype 99"):
        validate_structure(Program([block]))
    block.vars.pop("b")
    with pytest.raises(ProgramFormatError, match="var 'c'"):
        validate_structure(Program([block]))
    block.vars.pop("c")
    validate_structure(Program([block]))
