"""The Paddle ProgramDesc schema, and decoding its attr and var-type messages into the model.

This module, the reader (protoread.py, with opsource.py) and the writer (protowrite.py) are the
only ones that use protobuf. The schema of `paddle/fluid/framework/framework.proto` (package
`paddle.framework.proto`, Paddle 2.6) is built here in Python with descriptor_pb2, so nothing
needs protoc at install or run time.

Decoding is lossless: every field that is set in the input (including optional fields that are set
to their default value) is remembered, so `encode(decode(b)) == b` for bytes that Paddle wrote.
Reading is in transpile/format/protoread.py (the program is never held as one message tree: each
op and var keeps its own bytes, transpile/format/opsource.py), writing in
transpile/format/protowrite.py; the wire-level primitives both use are in wire.py.
"""
from __future__ import annotations

from sys import intern as _intern

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, EncodeError  # noqa: F401 (EncodeError: API)

from ..core.errors import ProgramFormatError
from ..ir.program import ATTR_FIELD, Attr, TensorDesc, VarType

_PKG = "paddle.framework.proto"

# label, type codes of descriptor_pb2.FieldDescriptorProto
_OPT, _REQ, _REP = 1, 2, 3
_T = {"double": 1, "float": 2, "int64": 3, "int32": 5, "bool": 8, "string": 9, "message": 11,
      "enum": 14}

VAR_TYPE_ENUM = [
    ("BOOL", 0), ("INT16", 1), ("INT32", 2), ("INT64", 3), ("FP16", 4), ("FP32", 5), ("FP64", 6),
    ("SIZE_T", 19), ("UINT8", 20), ("INT8", 21), ("BF16", 22), ("COMPLEX64", 23),
    ("COMPLEX128", 24), ("LOD_TENSOR", 7), ("SELECTED_ROWS", 8), ("FEED_MINIBATCH", 9),
    ("FETCH_LIST", 10), ("STEP_SCOPES", 11), ("LOD_RANK_TABLE", 12), ("LOD_TENSOR_ARRAY", 13),
    ("PLACE_LIST", 14), ("READER", 15), ("RAW", 17), ("TUPLE", 18), ("STRING", 25),
    ("STRINGS", 26), ("VOCAB", 27), ("FEED_LIST", 28), ("PSTRING", 29), ("SPARSE_COO", 30),
    ("SPARSE_CSR", 31)]
ATTR_TYPE_ENUM = [
    ("INT", 0), ("FLOAT", 1), ("STRING", 2), ("INTS", 3), ("FLOATS", 4), ("STRINGS", 5),
    ("BOOLEAN", 6), ("BOOLEANS", 7), ("BLOCK", 8), ("LONG", 9), ("BLOCKS", 10), ("LONGS", 11),
    ("FLOAT64S", 12), ("VAR", 13), ("VARS", 14), ("FLOAT64", 15), ("SCALAR", 16), ("SCALARS", 17)]

VAR_TYPE_NAME = {n: s for s, n in VAR_TYPE_ENUM}
VAR_TYPE_NUM = {s: n for s, n in VAR_TYPE_ENUM}
ATTR_TYPE_NAME = {n: s for s, n in ATTR_TYPE_ENUM}
ATTR_TYPE_NUM = {s: n for s, n in ATTR_TYPE_ENUM}

# fields of VarType that hold a tensor description, and the shape of their message
TENSOR_SLOTS = {"selected_rows": "TensorDesc", "lod_tensor": "LoDTensorDesc",
                "tensor_array": "LoDTensorArrayDesc", "string": "TensorDesc",
                "strings": "TensorDesc", "vocab": "TensorDesc", "sparse_coo": "TensorDesc",
                "sparse_csr": "TensorDesc"}


def _field(name, number, label, ftype, type_name=None, default=None):
    f = descriptor_pb2.FieldDescriptorProto(name=name, number=number, label=label, type=_T[ftype])
    if type_name:
        f.type_name = "." + _PKG + "." + type_name
    if default is not None:
        f.default_value = default
    return f


def _message(name, fields, nested=(), enums=()):
    m = descriptor_pb2.DescriptorProto(name=name)
    m.field.extend(_field(*f) for f in fields)
    m.nested_type.extend(nested)
    m.enum_type.extend(enums)
    return m


def _enum(name, values):
    e = descriptor_pb2.EnumDescriptorProto(name=name)
    for vname, number in values:
        e.value.add(name=vname, number=number)
    return e


def _schema() -> descriptor_pb2.FileDescriptorProto:
    """framework.proto as a FileDescriptorProto (field numbers and labels as Paddle 2.6 has them)."""
    f = descriptor_pb2.FileDescriptorProto(name="paddle/fluid/framework/framework.proto",
                                           package=_PKG)
    f.enum_type.append(_enum("AttrType", ATTR_TYPE_ENUM))
    f.message_type.extend([
        _message("Version", [("version", 1, _OPT, "int64", None, "0")]),
        _message("Complex", [("r", 1, _REQ, "double"), ("i", 2, _REQ, "double")]),
        _message("Scalar", [
            ("type", 1, _REQ, "enum", "Scalar.Type"), ("b", 2, _OPT, "bool"),
            ("i", 3, _OPT, "int64"), ("r", 4, _OPT, "double"),
            ("c", 5, _OPT, "message", "Complex")],
            enums=[_enum("Type", [("BOOLEAN", 1), ("LONG", 2), ("FLOAT64", 3),
                                  ("COMPLEX128", 4)])]),
        _message("OpDesc", [
            ("type", 3, _REQ, "string"), ("inputs", 1, _REP, "message", "OpDesc.Var"),
            ("outputs", 2, _REP, "message", "OpDesc.Var"),
            ("attrs", 4, _REP, "message", "OpDesc.Attr"),
            ("is_target", 5, _OPT, "bool", None, "false")],
            nested=[
                _message("Attr", [
                    ("name", 1, _REQ, "string"), ("type", 2, _REQ, "enum", "AttrType"),
                    ("i", 3, _OPT, "int32"), ("f", 4, _OPT, "float"), ("s", 5, _OPT, "string"),
                    ("ints", 6, _REP, "int32"), ("floats", 7, _REP, "float"),
                    ("strings", 8, _REP, "string"), ("b", 10, _OPT, "bool"),
                    ("bools", 11, _REP, "bool"), ("block_idx", 12, _OPT, "int32"),
                    ("l", 13, _OPT, "int64"), ("blocks_idx", 14, _REP, "int32"),
                    ("longs", 15, _REP, "int64"), ("float64s", 16, _REP, "double"),
                    ("var_name", 17, _OPT, "string"), ("vars_name", 18, _REP, "string"),
                    ("float64", 19, _OPT, "double"), ("scalar", 20, _OPT, "message", "Scalar"),
                    ("scalars", 21, _REP, "message", "Scalar")]),
                _message("Var", [("parameter", 1, _REQ, "string"),
                                 ("arguments", 2, _REP, "string")])]),
        _message("VarType", [
            ("type", 1, _REQ, "enum", "VarType.Type"),
            ("selected_rows", 2, _OPT, "message", "VarType.TensorDesc"),
            ("lod_tensor", 3, _OPT, "message", "VarType.LoDTensorDesc"),
            ("tensor_array", 4, _OPT, "message", "VarType.LoDTensorArrayDesc"),
            ("reader", 5, _OPT, "message", "VarType.ReaderDesc"),
            ("tuple", 7, _OPT, "message", "VarType.Tuple"),
            ("string", 8, _OPT, "message", "VarType.TensorDesc"),
            ("strings", 9, _OPT, "message", "VarType.TensorDesc"),
            ("vocab", 10, _OPT, "message", "VarType.TensorDesc"),
            ("sparse_coo", 11, _OPT, "message", "VarType.TensorDesc"),
            ("sparse_csr", 12, _OPT, "message", "VarType.TensorDesc")],
            nested=[
                _message("TensorDesc", [("data_type", 1, _REQ, "enum", "VarType.Type"),
                                        ("dims", 2, _REP, "int64")]),
                _message("LoDTensorDesc", [("tensor", 1, _REQ, "message", "VarType.TensorDesc"),
                                           ("lod_level", 2, _OPT, "int32", None, "0")]),
                _message("LoDTensorArrayDesc", [
                    ("tensor", 1, _REQ, "message", "VarType.TensorDesc"),
                    ("lod_level", 2, _OPT, "int32", None, "0")]),
                _message("ReaderDesc", [("lod_tensor", 1, _REP, "message",
                                         "VarType.LoDTensorDesc")]),
                _message("Tuple", [("element_type", 1, _REP, "enum", "VarType.Type")])],
            enums=[_enum("Type", VAR_TYPE_ENUM)]),
        _message("VarDesc", [
            ("name", 1, _REQ, "string"), ("type", 2, _REQ, "message", "VarType"),
            ("persistable", 3, _OPT, "bool", None, "false"),
            ("need_check_feed", 4, _OPT, "bool", None, "false"),
            ("is_parameter", 5, _OPT, "bool", None, "false"),
            ("stop_gradient", 6, _OPT, "bool", None, "false"),
            ("attrs", 7, _REP, "message", "VarDesc.Attr")],
            nested=[_message("Attr", [("name", 1, _REQ, "string"),
                                      ("type", 2, _REQ, "enum", "AttrType"),
                                      ("i", 3, _OPT, "int32"), ("s", 4, _OPT, "string"),
                                      ("ints", 5, _REP, "int32")])]),
        _message("BlockDesc", [
            ("idx", 1, _REQ, "int32"), ("parent_idx", 2, _REQ, "int32"),
            ("vars", 3, _REP, "message", "VarDesc"), ("ops", 4, _REP, "message", "OpDesc"),
            ("forward_block_idx", 5, _OPT, "int32", None, "-1")]),
        _message("OpVersion", [("version", 1, _REQ, "int32")]),
        _message("OpVersionMap", [("pair", 1, _REP, "message", "OpVersionMap.OpVersionPair")],
                 nested=[_message("OpVersionPair", [
                     ("op_name", 1, _REQ, "string"),
                     ("op_version", 2, _REQ, "message", "OpVersion")])]),
        _message("ProgramDesc", [
            ("blocks", 1, _REP, "message", "BlockDesc"),
            ("version", 4, _OPT, "message", "Version"),
            ("op_version_map", 5, _OPT, "message", "OpVersionMap")]),
    ])
    return f


def _text_schema() -> descriptor_pb2.FileDescriptorProto:
    """Every text field of a ProgramDesc (names, op types, slots, attr text) seen through
    proto3, whose parser checks that strings are UTF-8 (proto2's, framework.proto's, does not):
    parsing a ProgramDesc with it checks all of its text in C, the other fields being skipped
    as unknown. Only when that fails is the text checked field by field (to say where)."""
    f = descriptor_pb2.FileDescriptorProto(name="pstranspile/text.proto",
                                           package=_PKG + ".text", syntax="proto3")
    ref = "." + _PKG + ".text."
    for name, fields in (("ProgramDesc", [("blocks", 1, _REP, "message", "BlockDesc"),
                                          ("op_version_map", 5, _OPT, "message", "OVMap")]),
                         ("OVMap", [("pair", 1, _REP, "message", "OVPair")]),
                         ("OVPair", [("op_name", 1, _OPT, "string")]),
                         ("BlockDesc", [("vars", 3, _REP, "message", "VarDesc"),
                                        ("ops", 4, _REP, "message", "OpDesc")]),
                         ("VarDesc", [("name", 1, _OPT, "string"),
                                      ("attrs", 7, _REP, "message", "VarAttr")]),
                         ("VarAttr", [("name", 1, _OPT, "string"), ("s", 4, _OPT, "string")]),
                         ("OpDesc", [("inputs", 1, _REP, "message", "Slot"),
                                     ("outputs", 2, _REP, "message", "Slot"),
                                     ("type", 3, _OPT, "string"),
                                     ("attrs", 4, _REP, "message", "Attr")]),
                         ("Slot", [("parameter", 1, _OPT, "string"),
                                   ("arguments", 2, _REP, "string")]),
                         ("Attr", [("name", 1, _OPT, "string"), ("s", 5, _OPT, "string"),
                                   ("strings", 8, _REP, "string"),
                                   ("var_name", 17, _OPT, "string"),
                                   ("vars_name", 18, _REP, "string")])):
        m = f.message_type.add(name=name)
        for fname, number, label, ftype, *type_name in fields:
            fd = m.field.add(name=fname, number=number, label=label, type=_T[ftype])
            if type_name:
                fd.type_name = ref + type_name[0]
    return f


_pool = descriptor_pool.DescriptorPool()
_pool.Add(_schema())
_pool.Add(_text_schema())
ProgramDesc = message_factory.GetMessageClass(_pool.FindMessageTypeByName(_PKG + ".ProgramDesc"))
TextView = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName(_PKG + ".text.ProgramDesc"))
BlockDescMsg = message_factory.GetMessageClass(_pool.FindMessageTypeByName(_PKG + ".BlockDesc"))
OpDescMsg = message_factory.GetMessageClass(_pool.FindMessageTypeByName(_PKG + ".OpDesc"))
VarDescMsg = message_factory.GetMessageClass(_pool.FindMessageTypeByName(_PKG + ".VarDesc"))
AttrMsg = message_factory.GetMessageClass(_pool.FindMessageTypeByName(_PKG + ".OpDesc.Attr"))
VarTypeMsg = message_factory.GetMessageClass(_pool.FindMessageTypeByName(_PKG + ".VarType"))

# ----------------------------------------------------------------------------------------------
# decode


def _decode_scalar(s):
    d = {"type": int(s.type)}
    for fd, v in s.ListFields():
        if fd.name == "c":
            d["c"] = [v.r, v.i]
        elif fd.name != "type":
            d[fd.name] = v
    return d


def decode_attr(a) -> tuple[str, Attr]:
    tname = ATTR_TYPE_NAME.get(a.type)
    if tname is None:
        raise ProgramFormatError("attr %r has unknown AttrType %d" % (a.name, a.type))
    main = ATTR_FIELD[tname]
    value = None
    extra = []
    main_present = False
    for fd, v in a.ListFields():
        n = fd.name
        if n in ("name", "type"):
            continue
        if n in ("scalar",):
            v = _decode_scalar(v)
        elif n == "scalars":
            v = [_decode_scalar(x) for x in v]
        elif n == "strings":
            # names as a rule (send_varnames, epmap...), repeated on many ops and equal to
            # the vars' names (interned when read): each one string, not a copy per op
            v = list(map(_intern, v))
        elif fd_is_repeated(n):
            v = list(v)
        if n == main:
            value, main_present = v, True
        else:
            extra.append((n, v))
    if not main_present:
        if fd_is_repeated(main):
            value = []
        else:
            extra.append(("__absent__", main))
    return a.name, Attr(tname, value, tuple(extra))


_REPEATED_ATTR_FIELDS = {"ints", "floats", "strings", "bools", "blocks_idx", "longs", "float64s",
                         "vars_name", "scalars"}


def fd_is_repeated(field_name: str) -> bool:
    return field_name in _REPEATED_ATTR_FIELDS


def _decode_tensor(t) -> TensorDesc:
    dt = t.data_type
    return TensorDesc(VAR_TYPE_NAME.get(dt, dt), tuple(t.dims))


def decode_vartype(vt) -> VarType:
    fields = vt.ListFields()
    kind = VAR_TYPE_NAME.get(vt.type)
    if kind is None:
        raise ProgramFormatError("unknown VarType %d" % vt.type)
    out = VarType(kind)
    for fd, v in fields:
        n = fd.name
        if n == "type":
            continue
        if n == "reader":
            out.reader = tuple((_decode_tensor(x.tensor),
                                x.lod_level if x.HasField("lod_level") else None)
                               for x in v.lod_tensor)
        elif n == "tuple":
            out.tuple_types = tuple(VAR_TYPE_NAME.get(x, x) for x in v.element_type)
        elif TENSOR_SLOTS[n] == "TensorDesc":
            out.descs[n] = (_decode_tensor(v), None)
        else:
            out.descs[n] = (_decode_tensor(v.tensor),
                            v.lod_level if v.HasField("lod_level") else None)
    return out


def optional_field(msg, name):
    return getattr(msg, name) if msg.HasField(name) else None


def text_is_utf8(data: bytes) -> bool:
    try:
        TextView().ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError):
        return False
    return True


def where_malformed(data: bytes, text: bool = False) -> str:
    """": <what>, at byte N of M" of the first field of ProgramDesc bytes that cannot be read
    or is no field of its message, or with `text` that is not UTF-8 (wirecheck.py), or ""."""
    from .wirecheck import first_problem
    found = first_problem(data, ProgramDesc.DESCRIPTOR, text=text)
    if found is None:
        return ""
    off, why = found
    return ": %s, at byte %d of %d" % (why, off, len(data))
