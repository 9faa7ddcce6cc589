"""The writer's compiled fast path (transpile/format/wirewrite_c.c) against its pure-Python path:
the same bytes for op heads (slots and type), plain vars and block bodies, at the edges of the
wire format (long names whose lengths take several varint bytes, non-ASCII names, empty slots),
and None (the Python path) for slots of other types than it takes. Whole programs are written
both ways in tests/test_encode.py (against protobuf's own serialization) and whole splits in
tests/test_wirescan.py (PSTRANSPILE_PURE_PYTHON turns both fast paths off), which also checks
that both are built where a C compiler is."""
from collections import OrderedDict

import pytest

from transpile.core.errors import ProgramFormatError
from transpile.format import protoread, protowrite, varwrite
from transpile.ir.program import Attr, Block, Op, Program, Var

FAST = protowrite.FAST
needs_fast = pytest.mark.skipif(FAST is None, reason="the C fast path is not built here")

LONG = "n" * 200                 # a name whose length takes two varint bytes
HUGE = "h" * 20000               # and three, with the slot around it
HEADS = [
    ({}, {}, "t"),
    ({"X": ["a"]}, {"Out": ["b"]}, "sum"),
    ({"X": ["a", "b", "c"], "Y": []}, {"Out": []}, "concat"),
    ({"X": [LONG]}, {LONG: [LONG, "x"]}, LONG),
    ({"X": [HUGE]}, {"Out": [HUGE, HUGE]}, "big"),
    ({"ünï": ["名字", "é"]}, {"Out": ["ø"]}, "ÿ"),
    ({"X": ("a", "b")}, {"Out": ("c",)}, "tuples"),
    ({"X": [""]}, {"": [""]}, "e"),          # (an op without a type is refused when read)
]


@needs_fast
@pytest.mark.parametrize("inputs,outputs,type", HEADS)
def test_op_heads_are_the_same_both_ways(inputs, outputs, type):
    op = Op(type, inputs, outputs)
    assert FAST.op_head(inputs, outputs, type) == b"".join(protowrite._op_head(op))


class _ListSub(list):
    pass


@needs_fast
@pytest.mark.parametrize("inputs", [
    OrderedDict([("X", ["a"])]),            # a dict subclass may order its items otherwise
    {"X": _ListSub(["a"])},
    {"X": ["a", 1]},
    {1: ["a"]},
    {"X": "a"},
])
def test_slots_of_other_types_are_left_to_python(inputs):
    assert FAST.op_head(inputs, {}, "t") is None
    assert FAST.op_head({}, inputs, "t") is None


def _program_with(op: Op, var: Var = None) -> Program:
    prog = Program.empty()
    prog.global_block.ops.append(op)
    if var is not None:
        prog.global_block.vars[var.name] = var
    return prog


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python"])
def test_text_that_cannot_be_utf8_is_a_format_error_both_ways(fast, monkeypatch):
    if fast and FAST is None:
        pytest.skip("the C fast path is not built here")
    monkeypatch.setattr(protowrite, "FAST", FAST if fast else None)
    monkeypatch.setattr(varwrite, "FAST", FAST if fast else None)
    for prog in (_program_with(Op("t", {"X": ["\ud800"]}, {})),
                 _program_with(Op("\ud800", {}, {})),
                 _program_with(Op("t", {}, {}), Var.tensor("\udfff", "FP32", (2,)))):
        with pytest.raises(ProgramFormatError):
            protowrite.encode(prog)


def _edge_program() -> Program:
    prog = Program.empty()
    b = prog.global_block
    for inputs, outputs, type in HEADS:
        b.ops.append(Op(type, dict(inputs), dict(outputs), {"a": Attr("INT", 3)},
                        is_target=type == "sum" or None))
    for name in ("v", LONG, HUGE, "ünï"):
        b.vars[name] = Var.tensor(name, "FP32", (-1, 3), persistable=True)
    b.vars["rows"] = Var.tensor("rows", "INT64", (7,), kind="SELECTED_ROWS")
    sub = Block(1, 0)
    sub.forward_block_idx = 0
    sub.ops.append(Op("big", {"X": [HUGE]}, {}, {"blob": Attr("STRING", HUGE)}))
    prog.blocks.append(sub)
    return prog


@needs_fast
def test_a_program_at_the_edges_is_written_the_same_both_ways(monkeypatch):
    prog = _edge_program()
    fast = protowrite.encode(prog)
    monkeypatch.setattr(protowrite, "FAST", None)
    monkeypatch.setattr(varwrite, "FAST", None)
    assert protowrite.encode(prog) == fast
    back = protoread.decode(fast)
    assert [op.type for op in back.blocks[0].ops] == [t for _, _, t in HEADS]
    assert back.blocks[1].forward_block_idx == 0 and list(back.blocks[0].vars)[2] == HUGE


@needs_fast
def test_block_frames_each_item_and_refuses_what_is_not_bytes():
    body = FAST.block(b"H", [b"v", b"w" * 300], [b"o" * 20000], b"T")
    assert body == (b"H" + b"\x1a\x01v" + b"\x1a\xac\x02" + b"w" * 300
                    + b"\x22\xa0\x9c\x01" + b"o" * 20000 + b"T")
    assert FAST.block(b"", [], [], b"") == b""
    with pytest.raises(TypeError):
        FAST.block(b"", ["v"], [], b"")
    assert FAST.plain_var("ü", b"V", b"T") == b"\x0a\x02" + "ü".encode() + b"VT"


@pytest.mark.parametrize("idx,parent", [(0, -1), (1, 0), (127, 128), (300, 2 ** 31 - 1),
                                        (2 ** 31 - 1, -(2 ** 31)), (5, -7)])
def test_block_heads_written_directly_are_protobufs(idx, parent):
    from transpile.format.proto import BlockDescMsg
    want = BlockDescMsg(idx=idx, parent_idx=parent).SerializePartialToString(deterministic=True)
    assert protowrite._block_head(idx, parent) == want


@pytest.mark.parametrize("idx,parent", [(2 ** 31, 0), (0, -(2 ** 31) - 1)])
def test_a_block_index_out_of_int32_is_refused(idx, parent):
    prog = Program([Block(0, -1), Block(idx, parent)])
    with pytest.raises(ProgramFormatError, match="cannot encode program"):
        protowrite.encode(prog)


@needs_fast
def test_a_var_written_again_takes_the_same_bytes():
    # the second var of a VarType takes the short path (its VarType's bytes kept)
    a, b = Var.tensor("a", "FP32", (3, 4), persistable=True), Var.tensor("b", "FP32", (3, 4))
    b.type = a.type
    first = [protowrite.var_bytes(v) for v in (a, b)]
    again = [protowrite.var_bytes(v) for v in (a, b)]
    assert first == again
    assert first[1] == protowrite._SLOT_NAMES["b"] + a.type.encoded + \
        varwrite._FLAG_BYTES[(None, None, None, None)]
