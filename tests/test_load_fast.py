"""Reading a program holds little per op: attr names shared between ops, no attr object until an
attr is asked for, and the same model and bytes as before."""
from transpile.format import opsource, protoread, protowrite
from transpile.ir.program import Attr

from golden import SCALE_ATTRS, program_message


def _program_bytes(ops) -> bytes:
    return program_message(ops).SerializeToString()


def test_ops_with_the_same_attr_names_share_them_and_hold_no_attr_until_asked():
    prog = protoread.decode(_program_bytes([("scale", SCALE_ATTRS), ("scale", SCALE_ATTRS)]))
    a, b = prog.global_block.ops
    assert a.source.names == ("op_role", "op_callstack", "scale")
    assert a.source.names is b.source.names
    assert a.source._index is None and not a.source._decoded
    assert a.attr("scale") == 2.0 and a.has_attr("op_callstack") and not a.has_attr("nope")
    assert a.source._index is None            # get / has do not build the index
    assert list(a.source._decoded) == ["scale"]


def test_index_maps_names_to_the_attr_messages_in_file_order():
    prog = protoread.decode(_program_bytes([("scale", SCALE_ATTRS)]))
    src = prog.global_block.ops[0].source
    assert list(src.index) == ["op_role", "op_callstack", "scale"]
    assert [m.name for m in src.index.values()] == list(src.index)
    assert src.index["op_callstack"].strings == ["a", "b"]
    assert prog.global_block.ops[0].attr_names() == list(src.index)


def test_a_repeated_attr_name_still_decodes_eagerly_and_round_trips():
    attrs = SCALE_ATTRS + [("op_role", "INT", "i", 7)]
    data = _program_bytes([("reshape2", attrs)])
    op = protoread.decode(data).global_block.ops[0]
    assert op.source is None and op.attr("op_role") == 7
    assert op.dup_attrs == ((0, "op_role", Attr("INT", 0)),)
    assert protowrite.encode(protoread.decode(data)) == data


def test_block_attrs_are_found_without_decoding_the_others():
    attrs = SCALE_ATTRS + [("sub_block", "BLOCK", "block_idx", 0)]
    op = protoread.decode(_program_bytes([("while", attrs)])).global_block.ops[0]
    assert op.block_attr_names() == ["sub_block"] and op.block_refs() == [0]
    assert list(op.source._decoded) == ["sub_block"]


def test_an_unchanged_op_and_var_are_written_from_what_was_read():
    data = _program_bytes([("scale", SCALE_ATTRS)])
    prog = protoread.decode(data)
    op, var = prog.global_block.ops[0], prog.global_block.vars["x"]
    assert op.source.unchanged(op)
    assert var.source.key == opsource.var_key(var)
    op.attrs                                  # decoded, still equal
    assert op.source.unchanged(op)
    op.inputs["X"].append("x")
    assert not op.source.unchanged(op)
    resized = var.with_shape([4, 9])         # keeps the source, no longer says the same
    assert resized.source is var.source and resized.source.key != opsource.var_key(resized)
    assert protowrite.encode(protoread.decode(data)) == data
