"""The writer copies what is unchanged as bytes and writes changed ops and new vars directly,
field by field: on every corpus split (both styles) its bytes must be exactly what protobuf
writes for the same model, message by message; with its compiled fast path (wirewrite_c.c)
and without."""
import os

import pytest

from transpile.format import proto, protoread, protowrite, varwrite
from transpile.ir.program import Attr, Op, Var
from transpile.split import split

from golden import case_dirs, load_case


def _op_message(op: Op):
    """The op as an OpDesc message built field by field (the attrs still as read copied)."""
    m = proto.OpDescMsg()
    src = op.source
    m.type = op.type
    for slot, args in op.inputs.items():
        m.inputs.add(parameter=slot, arguments=args)
    for slot, args in op.outputs.items():
        m.outputs.add(parameter=slot, arguments=args)
    # the attrs as read, from the op's bytes parsed here (not the reader's own parse)
    read = proto.OpDescMsg.FromString(src.raw()).attrs if src is not None else ()
    if src is not None and not op.attrs_decoded:
        patch = dict(op.attr_patch)
        if not patch:
            m.attrs.extend(read)
        for a in (read if patch else ()):
            new = patch.pop(a.name, None)
            if new is None:
                m.attrs.add().CopyFrom(a)
            else:
                protowrite._encode_attr(m.attrs.add(), a.name, new)
        for name, new in patch.items():
            protowrite._encode_attr(m.attrs.add(), name, new)
    else:
        entries = list(op.attrs.items())
        for pos, name, attr in op.dup_attrs:
            entries.insert(min(pos, len(entries)), (name, attr))
        for name, attr in entries:
            if src is not None and src.same_attr(name, attr):
                m.attrs.add().CopyFrom(read[src.names.index(name)])
            else:
                protowrite._encode_attr(m.attrs.add(), name, attr)
    if op.is_target is not None:
        m.is_target = op.is_target
    return m


def _reference(prog) -> bytes:
    """The program serialized by protobuf from messages built for every var and op."""
    msg = proto.ProgramDesc()
    for b in prog.blocks:
        mb = msg.blocks.add(idx=b.idx, parent_idx=b.parent_idx)
        for v in b.vars.values():
            varwrite._encode_var(mb.vars.add(), v)
        for op in b.ops:
            mb.ops.add().CopyFrom(_op_message(op))
        if b.forward_block_idx is not None:
            mb.forward_block_idx = b.forward_block_idx
    if prog.has_version:
        msg.version.SetInParent()
        if prog.version is not None:
            msg.version.version = prog.version
    if prog.op_version_map is not None:
        msg.op_version_map.SetInParent()
        for name, ver in prog.op_version_map:
            msg.op_version_map.pair.add(op_name=name).op_version.version = ver
    return msg.SerializeToString(deterministic=True)


@pytest.fixture(params=["compiled", "python"], autouse=True)
def writer(request, monkeypatch):
    """Each test runs with the compiled writer and with the pure-Python one."""
    if request.param == "python":
        monkeypatch.setattr(protowrite, "FAST", None)
        monkeypatch.setattr(varwrite, "FAST", None)
    elif protowrite.FAST is None:
        pytest.skip("the C fast path is not built here")
    return request.param


CASES = [(fam, os.path.basename(d)) for fam in ("classic", "fleet") for d in case_dirs(fam)
         if not os.path.exists(os.path.join(d, "expected", "error.txt"))]


@pytest.mark.parametrize("family,name", CASES, ids=["%s/%s" % c for c in CASES])
def test_split_programs_encode_as_protobuf_would(family, name):
    main, startup, config = load_case(family, name)
    result = split(main, startup, config)
    assert result.programs
    for key, prog in result.programs.items():
        assert protowrite.encode(prog) == _reference(prog), key


def test_patched_and_renamed_ops_and_new_vars():
    main, _, _ = load_case("classic", os.path.basename(case_dirs("classic")[0]))
    prog = main.shallow_copy()
    block = prog.global_block
    for i, op in enumerate(block.ops):
        new = op.copy()
        if i % 3 == 0:
            new.set_attr("pstranspile_new", [1, 2, -3])
        if i % 3 == 1 and new.attr_names():
            first = new.attr_names()[0]
            new.replace_attr(first, Attr("STRING", "changed"))
        if i % 2 == 0:
            new.inputs = {k: [a + "@x" for a in v] + [""] for k, v in new.inputs.items()}
        if i % 5 == 0:
            new.is_target = True
        block.ops[i] = new
    for name, v in list(block.vars.items())[:50]:
        w = v.with_shape([-1, 7, 3])
        w.persistable, w.stop_gradient = True, False
        block.vars[name] = w
    block.vars["ünïcode"] = Var.tensor("ünïcode", "INT64", (-1,), kind="SELECTED_ROWS")
    block.ops.append(Op("x", {"X": ["ünïcode"]}, {}, {"a": Attr("INT", -5)}))
    # values == calls equal but that are written differently must not share cached bytes
    for value in (0.0, -0.0, float("nan"), 1.0):
        block.ops.append(Op("y", {}, {}, {"v": Attr("FLOAT", value),
                                          "w": Attr("FLOATS", [value, -value])}))
    block.ops.append(Op("y", {}, {}, {"v": Attr("INT", 1), "b": Attr("BOOLEAN", True)}))
    block.ops.append(Op("y", {}, {}, {"v": Attr("BOOLEAN", True), "b": Attr("INT", 1)}))
    assert protowrite.encode(prog) == _reference(prog)
    again = protoread.decode(protowrite.encode(prog))
    assert protowrite.encode(again) == protowrite.encode(prog)


def test_released_caches_are_empty_and_encode_the_same_bytes():
    """release_caches (split's, once every program is written) empties the writer's caches;
    what is encoded after is the same bytes, patched copies included."""
    main, startup, config = load_case("classic", os.path.basename(case_dirs("classic")[0]))
    programs = split(main, startup, config).programs
    first = {key: protowrite.encode(prog) for key, prog in programs.items()}
    caches = (protowrite._ATTR_CHUNKS, protowrite._SLOT_NAMES, protowrite._ARGUMENTS,
              protowrite._INPUTS, protowrite._OP_TYPES)
    assert protowrite._ATTR_CHUNKS and protowrite.PATCHED.holders     # (names: the Python writer's)
    protowrite.release_caches()
    assert not any(caches) and not protowrite.PATCHED.holders
    assert not protowrite._OUTPUTS and not protowrite._VAR_HEADS and not protowrite._OP_HEADS
    assert {key: protowrite.encode(prog) for key, prog in programs.items()} == first
