"""A program is read piece by piece from its bytes (protoread._decode_pieces): ops and vars keep
their own bytes, not a message tree. Whatever it leaves alone is read as one tree
(protoread._decode_tree, the way every program used to be read): both must give the same model, the same bytes written
back and the same errors."""
import glob
import os
import random

import pytest

from transpile.core.errors import ProgramFormatError
from transpile.format import opsource, proto, protoread, protowrite, wire, wireruns
from transpile.ir.program import Attr

from fuzz_cli import mutate
from golden import SCALE_ATTRS, program_message

HERE = os.path.dirname(os.path.abspath(__file__))
PB_FILES = sorted(glob.glob(os.path.join(HERE, "corpus", "*", "*", "*.pb")))
BASIC = os.path.join(HERE, "corpus", "classic", "basic", "main.pb")


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _outcome(read, data: bytes):
    """What reading `data` with `read` gives: the error, or the model and its bytes."""
    try:
        prog = read(data)
    except ProgramFormatError as e:
        return "error", str(e)
    try:
        out = protowrite.encode(prog)
    except ProgramFormatError as e:
        out = "cannot write: %s" % e
    model = [(b.idx, b.parent_idx, b.forward_block_idx, list(b.vars.values()), b.ops)
             for b in prog.blocks]
    return "read", repr(model), (prog.version, prog.has_version, prog.op_version_map), out


def _no_tree(monkeypatch):
    """Make reading fail if it falls back to one message tree."""
    def refuse(data):
        raise AssertionError("read as one tree")
    monkeypatch.setattr(protoread, "_decode_tree", refuse)


@pytest.mark.parametrize("path", PB_FILES, ids=lambda p: os.path.relpath(p, HERE))
def test_corpus_files_are_read_from_their_bytes_alone(path, monkeypatch):
    data = _read(path)
    expected = _outcome(protoread._decode_tree, data)
    _no_tree(monkeypatch)
    assert _outcome(protoread.decode, data) == expected
    assert protowrite.encode(protoread.decode(data)) == data
    for b in protoread.decode(data).blocks:
        for op in b.ops:
            if op.source is not None:
                assert type(op.source.wire) is bytes and op.source.wire in data
        for v in b.vars.values():
            assert type(v.source.wire) is bytes and v.source.wire in data


def test_runs_of_any_size_read_the_same(monkeypatch):
    data = _read(BASIC)
    expected = _outcome(protoread.decode, data)
    _no_tree(monkeypatch)
    for size in (0, 1, 300, 5000):
        monkeypatch.setattr(wireruns, "RUN_BYTES", size)
        assert _outcome(protoread.decode, data) == expected


def test_mangled_bytes_read_and_fail_exactly_as_one_tree():
    files = [_read(p) for p in PB_FILES[:6]]
    rnd = random.Random(7)
    for _ in range(300):
        data = mutate(rnd.choice(files), rnd, rnd.choice(files))
        if data:
            assert _outcome(protoread.decode, data) == _outcome(protoread._decode_tree, data)


def _field(key: bytes, payload: bytes) -> bytes:
    return wire.length_delimited(key, payload)


def _op_type_first(p) -> bytes:
    """The bytes of `p` (one block, one op) with the op's type written before its slots:
    valid, but not the order protobuf writes."""
    block = proto.BlockDescMsg()
    block.CopyFrom(p.blocks[0])
    op = block.ops[0]
    body = proto.OpDescMsg(type=op.type).SerializeToString()
    op.ClearField("type")
    body += op.SerializePartialToString(deterministic=True)
    block.ClearField("ops")
    return _field(b"\x0a", block.SerializeToString(deterministic=True) + _field(b"\x22", body))


def test_bytes_not_in_protobufs_order_are_written_as_protobuf_writes_them(monkeypatch):
    p = program_message([("scale", SCALE_ATTRS)])
    canonical = p.SerializeToString(deterministic=True)
    data = _op_type_first(p)
    assert data != canonical and proto.ProgramDesc.FromString(data) == \
        proto.ProgramDesc.FromString(canonical)
    expected = _outcome(protoread._decode_tree, data)
    _no_tree(monkeypatch)
    prog = protoread.decode(data)
    op = prog.global_block.ops[0]
    assert op.source.raw() == p.blocks[0].ops[0].SerializeToString(deterministic=True)
    assert protowrite.encode(prog) == canonical
    assert _outcome(protoread.decode, data) == expected


def test_a_required_field_missing_is_refused_where_it_is_read():
    """(It was read, and refused when written: Paddle's own parser refuses it.)"""
    p = program_message([("scale", SCALE_ATTRS)])
    p.blocks[0].vars[0].type.lod_tensor.tensor.ClearField("data_type")
    p.blocks[0].ops[0].attrs[2].ClearField("type")
    data = p.SerializePartialToString(deterministic=True)
    got = _outcome(protoread.decode, data)
    assert got == _outcome(protoread._decode_tree, data)
    assert got[-1].startswith("not a valid ProgramDesc: blocks[0].vars[0].type.lod_tensor."
                              "tensor: lacks the field data_type, which framework.proto "
                              "requires, at byte "), got


def test_text_that_is_not_utf8_is_reported_where_it_is():
    p = program_message([("scale", SCALE_ATTRS + [("op_device", "STRING", "s", "gpu")])])
    data = p.SerializeToString(deterministic=True).replace(b"gpu", b"g\xffu")
    with pytest.raises(ProgramFormatError, match="attr 'op_device' of op 'scale' is not valid"):
        protoread.decode(data)
    assert _outcome(protoread.decode, data) == _outcome(protoread._decode_tree, data)


def test_unknown_fields_are_refused_as_before():
    data = program_message([("scale", SCALE_ATTRS)]).SerializeToString() + b"\x78\x01"
    with pytest.raises(ProgramFormatError, match="fields that framework.proto does not define"):
        protoread.decode(data)


def test_attrs_are_parsed_from_the_op_bytes_only_when_asked_and_not_kept(monkeypatch):
    prog = protoread.decode(program_message([("scale", SCALE_ATTRS)] * 10).SerializeToString())
    ops = prog.global_block.ops
    parsed = []
    real = proto.OpDescMsg.FromString
    monkeypatch.setattr(proto.OpDescMsg, "FromString",
                        staticmethod(lambda b: parsed.append(b) or real(b)))
    assert [op.attr("op_role") for op in ops] == [0] * 10      # decoded while reading
    assert ops[0].find_attr("op_role") is ops[9].find_attr("op_role")
    assert not parsed
    assert ops[0].attr("scale") == 2.0 and ops[0].attr("op_callstack") == ["a", "b"]
    assert len(parsed) == 1                                  # one parse for both
    for op in ops:
        assert op.attrs_as_read()["op_callstack"].strings == ["a", "b"]
    assert len(opsource._PARSED) <= opsource._PARSED_KEPT


def test_attr_chunks_are_the_attrs_as_protobuf_writes_them():
    data = program_message([("scale", SCALE_ATTRS)]).SerializeToString()
    src = protoread.decode(data).global_block.ops[0].source
    msg = proto.OpDescMsg.FromString(src.raw())
    assert src.attr_chunks() == [
        (a.name, wire.length_delimited(b"\x22", a.SerializeToString()))
        for a in msg.attrs]


def test_a_patched_op_is_written_with_its_other_attrs_copied():
    data = program_message([("scale", SCALE_ATTRS)]).SerializeToString()
    prog = protoread.decode(data)
    op = prog.global_block.ops[0]
    op.set_attr("scale", 3.0)
    again = protoread.decode(protowrite.encode(prog)).global_block.ops[0]
    assert again.attrs == {"op_role": Attr("INT", 0), "op_callstack": Attr("STRINGS", ["a", "b"]),
                           "scale": Attr("FLOAT", 3.0)}


def test_attrs_bytes_are_the_attr_entries_one_after_the_other():
    """The writer copies an unpatched op's attrs as one slice of its bytes: it must be exactly
    its attr entries in order, also where something else sits between them."""
    for path in PB_FILES[:12]:
        for op in protoread.decode(_read(path)).global_block.ops:
            if op.source is not None:
                chunks = op.source.attr_chunks()
                assert op.source.attrs_bytes() == b"".join(raw for _, raw in chunks)
                assert [n for n, _ in chunks] == list(op.source.names)
    # an is_target field between two attrs (valid wire, not protobuf's order)
    a1 = proto.OpDescMsg(type="t")
    a1.attrs.add(name="a", type=proto.ATTR_TYPE_NUM["INT"], i=1)
    a2 = proto.OpDescMsg()
    a2.attrs.add(name="b", type=proto.ATTR_TYPE_NUM["INT"], i=2)
    wire = a1.SerializeToString() + b"\x28\x01" + a2.SerializePartialToString()
    src = opsource.OpSource(wire, "t", ({}, {}), True, (("a", "b"), {"a": 0, "b": 1}), (), None,
                            None)
    assert src.attrs_bytes() == b"".join(raw for _, raw in src.attr_chunks())
    assert src.attrs_bytes() == a1.SerializeToString()[3:] + a2.SerializePartialToString()
