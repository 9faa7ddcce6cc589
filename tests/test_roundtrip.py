"""Program format: every corpus program (inputs and Paddle's outputs) reads and writes back
byte for byte, through the model and through the JSON text form."""
import glob
import os

import pytest

from transpile.format import programio, protoread, protowrite, textform
from transpile.ir.program import Attr, Op, Program, Var
from transpile.ir.vartable import VarTable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRAMS = sorted(glob.glob(os.path.join(HERE, "corpus", "**", "*.pb"), recursive=True)
                  + glob.glob(os.path.join(ROOT, "samples", "*", "*.pb")))


def _rel(p):
    return os.path.relpath(p, ROOT)


def test_corpus_is_there():
    assert len(PROGRAMS) > 250


@pytest.mark.parametrize("path", PROGRAMS, ids=_rel)
def test_bytes_round_trip(path):
    data = open(path, "rb").read()
    assert protowrite.encode(protoread.decode(data)) == data


@pytest.mark.parametrize("path", PROGRAMS[::5], ids=_rel)
def test_a_program_read_only_lets_its_var_bytes_go_and_writes_the_same(path):
    """check's programs (decode's read_only) keep no var's bytes; written anyway, each var
    encoded from what it says gives the file's bytes."""
    data = open(path, "rb").read()
    prog = protoread.decode(data)
    held = [v for b in prog.blocks for v in b.vars.values() if v.source is not None]
    assert held or not any(b.vars for b in prog.blocks)
    lean = protoread.decode(data, read_only=True)
    assert all(v.source is None for b in lean.blocks for v in b.vars.values())
    for v in held:
        v.source = None
    assert protowrite.encode(prog) == data


@pytest.mark.parametrize("path", PROGRAMS[::5], ids=_rel)
def test_a_program_read_only_holds_its_vars_in_a_table_answering_as_the_dict(path,
                                                                            monkeypatch):
    """check's programs (decode's read_only) hold a large block's vars as a VarTable (a small
    number per name, a Var made when asked): it answers every question the dict of the
    program read to be written answers, with equal Vars, and refuses to be changed."""
    data = open(path, "rb").read()
    full = protoread.decode(data)
    monkeypatch.setattr(protoread, "TABLE_MIN", 0)      # (every block: corpus programs)
    lean = protoread.decode(data, read_only=True)
    for b, lb in zip(full.blocks, lean.blocks):
        table = lb.vars
        assert isinstance(table, VarTable)
        for v in b.vars.values():
            v.source = None
        assert list(table) == list(b.vars) and list(table.keys()) == list(b.vars.keys())
        assert len(table) == len(b.vars) and len(table.values()) == len(b.vars)
        assert list(table.values()) == list(b.vars.values())
        assert list(table.items()) == list(b.vars.items())
        assert table == b.vars and dict(table) == b.vars
        for name, v in b.vars.items():
            assert name in table and table[name] == v and table.get(name) == v
            assert lb.var(name) == v and table[name].type is table.get(name).type
        assert table.get("no such var") is None and "no such var" not in table
        with pytest.raises(KeyError):
            table["no such var"]
        with pytest.raises(TypeError):
            table["x"] = Var.tensor("x", "FP32", [1])
    assert lean.blocks[0].vars == full.blocks[0].vars


def test_a_var_table_gives_each_kind_of_var_one_entry(monkeypatch):
    """Vars that differ only by name share their kind: the table of a program of many
    slices holds a handful of kinds, not a Var per slice (a block of TABLE_MIN vars or more;
    a smaller one keeps a dict of Vars)."""
    prog = Program.empty()
    for i in range(100):
        prog.global_block.add_var(Var.tensor("w.block%d" % i, "FP32", [8, 4], persistable=True))
    prog.global_block.add_var(Var.tensor("g", "FP32", [8, 4]))
    data = protowrite.encode(prog)
    assert type(protoread.decode(data, read_only=True).global_block.vars) is dict
    monkeypatch.setattr(protoread, "TABLE_MIN", 100)
    table = protoread.decode(data, read_only=True).global_block.vars
    assert len(table) == 101 and len(table._kinds) == 2
    assert table["w.block7"] == prog.global_block.vars["w.block7"]
    assert table["g"].persistable is None and table["w.block0"].persistable is True


@pytest.mark.parametrize("path", PROGRAMS[::7], ids=_rel)
def test_json_round_trip(path):
    data = open(path, "rb").read()
    text = textform.dumps(protoread.decode(data))
    assert protowrite.encode(textform.loads(text)) == data


def _kinds_and_attr_types():
    kinds, attr_types = set(), set()
    for p in PROGRAMS:
        prog = protoread.decode(open(p, "rb").read())
        for b in prog.blocks:
            kinds.update(v.kind for v in b.vars.values())
            for op in b.ops:
                attr_types.update(a.type for a in op.attrs.values())
    return kinds, attr_types


def test_corpus_covers_the_var_kinds_and_attr_types_it_should():
    kinds, attr_types = _kinds_and_attr_types()
    assert {"LOD_TENSOR", "SELECTED_ROWS", "RAW", "STEP_SCOPES"} <= kinds
    assert {"INT", "FLOAT", "STRING", "INTS", "FLOATS", "STRINGS", "BOOLEAN", "BLOCK", "BLOCKS",
            "LONG", "LONGS"} <= attr_types


def test_every_attr_type_and_var_kind_survives_bytes_and_json():
    """Attr types and var kinds the corpus lacks (FLOAT64S, VAR(S), SCALAR(S), READER,
    tuple, unset optional fields...) built through the model round-trip exactly."""
    from transpile.ir.program import Block, Program, TensorDesc, VarType
    op = Op("custom", {"X": ["a", "b"]}, {"Out": ["c"]}, {
        "ints": Attr("INTS", [1, -2]), "longs": Attr("LONGS", [2 ** 40, -1]),
        "f64s": Attr("FLOAT64S", [0.1, 1e300]), "f64": Attr("FLOAT64", -0.5),
        "var": Attr("VAR", "a"), "vars": Attr("VARS", ["a", "b"]),
        "scalar": Attr("SCALAR", {"type": 2, "i": 7}),
        "scalars": Attr("SCALARS", [{"type": 3, "r": 1.5}, {"type": 4, "c": [1.0, -2.0]},
                                    {"type": 1, "b": True}]),
        "bools": Attr("BOOLEANS", [True, False]), "l": Attr("LONG", 2 ** 50),
        "inf": Attr("FLOAT", float("inf")), "blocks": Attr("BLOCKS", [0]),
        "empty": Attr("STRINGS", []), "unset": Attr("INT", None, (("__absent__", "i"),)),
    }, is_target=False)
    vars_ = {
        "a": Var.tensor("a", "FP64", [3, -1], persistable=True, is_parameter=True,
                        stop_gradient=False, need_check_feed=True),
        "sr": Var.tensor("sr", "INT64", [10, 4], kind="SELECTED_ROWS"),
        "arr": Var.tensor("arr", "FP16", [2], kind="LOD_TENSOR_ARRAY", lod_level=None),
        "r": Var("r", VarType("READER", reader=((TensorDesc("FP32", (1, 2)), 1),
                                                (TensorDesc("INT64", ()), None)))),
        "t": Var("t", VarType("TUPLE", tuple_types=("FP32", "INT32"))),
        "s": Var("s", VarType("STRINGS", {"strings": (TensorDesc("PSTRING", (1,)), None)})),
        "raw": Var("raw", VarType("RAW")),
        "feed": Var("feed", VarType("FEED_MINIBATCH"), persistable=True),
        "fetch": Var("fetch", VarType("FETCH_LIST"), persistable=True),
        "vocab": Var("vocab", VarType("VOCAB")),
    }
    prog = Program([Block(0, -1, vars_, [op]), Block(1, 0, {}, [], forward_block_idx=0)],
                   version=0, has_version=True, op_version_map=[("custom", 3)])
    data = protowrite.encode(prog)
    again = protoread.decode(data)
    assert protowrite.encode(again) == data
    assert protowrite.encode(textform.loads(textform.dumps(again))) == data
    assert again.blocks[0].ops[0].attr("longs") == [2 ** 40, -1]
    assert again.blocks[0].vars["r"].type.reader[0][0].dims == (1, 2)
    assert again.blocks[1].forward_block_idx == 0


def test_repeated_attr_names_kept_in_place():
    """Paddle writes reshape2's mkldnn attrs twice; the last one is the value, bytes unchanged."""
    path = os.path.join(HERE, "corpus", "fleet", "ctr_sparse_adam_sync", "main.pb")
    data = open(path, "rb").read()
    prog = protoread.decode(data)
    reshape = next(op for _, _, op in prog.ops() if op.type == "reshape2")
    assert reshape.dup_attrs and "use_mkldnn" in reshape.attrs
    assert protowrite.encode(prog) == data


def test_save_and_load_by_extension(tmp_path):
    src = os.path.join(ROOT, "samples", "mlp_sgd", "main.pb")
    prog = programio.load(src)
    programio.save(prog, str(tmp_path / "m.json"))
    programio.save(programio.load(str(tmp_path / "m.json")), str(tmp_path / "m.pdmodel"))
    assert (tmp_path / "m.pdmodel").read_bytes() == open(src, "rb").read()


def test_a_vartype_keeps_what_its_main_desc_lookup_found():
    """VarType._main is looked up once and kept (main_desc): the kind's own slot, else the
    first desc, else None, the same before and after the first look, through a pickle (a
    forked check sends vars back) and apart from equality."""
    import pickle
    from transpile.ir.program import TensorDesc, VarType, tensor_type
    other = (TensorDesc("INT64", (7,)), None)
    kinds = [tensor_type("LOD_TENSOR", "FP32", (3, 4), 0),
             VarType("LOD_TENSOR", {"selected_rows": other}),      # not its slot: the first
             VarType("RAW"), VarType("FEED_MINIBATCH")]
    want = [((3, 4), "FP32", 0), ((7,), "INT64", None), (None, None, None),
            (None, None, None)]
    for vt, w in zip(kinds, want):
        fresh = pickle.loads(pickle.dumps(vt))
        assert fresh.main_desc is False and vt == fresh
        for t in (vt, vt, fresh):
            assert (t.shape, t.dtype, t.lod_level) == w
        assert vt.main_desc is not False and pickle.loads(pickle.dumps(vt)).shape == w[0]
