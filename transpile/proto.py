"""The Paddle ProgramDesc wire format: schema, decode to the model, encode from it.

This is the only module that imports protobuf. The schema of
`paddle/fluid/framework/framework.proto` (package `paddle.framework.proto`, Paddle 2.6) is built
here in Python with descriptor_pb2, so nothing needs protoc at install or run time.

Decoding is lossless: every field that is set in the input (including optional fields that are set
to their default value) is remembered, so `encode(decode(b)) == b` for bytes that Paddle wrote.
Writing is in transpile/protowrite.py (`encode`, `op_bytes` and `var_bytes` are re-exported
here); it uses this module's schema, so protobuf is still imported here only.
"""
from __future__ import annotations

import copy as _copy
from operator import attrgetter

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, EncodeError

from .errors import ProgramFormatError
from .program import (ATTR_FIELD, Attr, Block, Op, Program, TensorDesc, Var, VarAttr, VarType)

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
_TextView = message_factory.GetMessageClass(
    _pool.FindMessageTypeByName(_PKG + ".text.ProgramDesc"))
_ScalarMsg = message_factory.GetMessageClass(_pool.FindMessageTypeByName(_PKG + ".Scalar"))
_BlockDescMsg = message_factory.GetMessageClass(_pool.FindMessageTypeByName(_PKG + ".BlockDesc"))
_OpDescMsg = message_factory.GetMessageClass(_pool.FindMessageTypeByName(_PKG + ".OpDesc"))
_VarDescMsg = message_factory.GetMessageClass(_pool.FindMessageTypeByName(_PKG + ".VarDesc"))

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


def _decode_attr(a) -> tuple[str, Attr]:
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


def _decode_vartype(vt) -> VarType:
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


def _opt(msg, name):
    return getattr(msg, name) if msg.HasField(name) else None


_VAR_FLAGS = {"persistable": 0, "need_check_feed": 1, "is_parameter": 2, "stop_gradient": 3}


def _decode_var(v, types: dict) -> Var:
    """`types`: VarType bytes -> (VarType decoded from them, its part of var_key), shared by
    the vars of one program that have the same type (a VarType is never changed in place:
    Var.copy() copies it), so each distinct type is decoded and keyed once."""
    flags = [None, None, None, None]
    attrs = ()
    typed = None
    for fd, x in v.ListFields():
        n = fd.name
        if n == "type":
            raw = x.SerializePartialToString()
            typed = types.get(raw)
            if typed is None:
                vt = _decode_vartype(x)
                typed = types[raw] = (vt, _vartype_key(vt))
        elif n == "attrs":
            attrs = tuple(VarAttr(a.name, ATTR_TYPE_NAME.get(a.type, a.type), _opt(a, "i"),
                                  _opt(a, "s"), tuple(a.ints)) for a in x)
        elif n != "name":
            flags[_VAR_FLAGS[n]] = x
    if typed is None:           # no type field: decoded from the (empty) default message
        vt = _decode_vartype(v.type)
        typed = (vt, _vartype_key(vt))
    name = v.name
    p, c, i, s = flags
    var = Var(name, typed[0], p, c, i, s, attrs)
    var.source = VarSource(v, (name, p, c, i, s, attrs, typed[1]))
    return var


def var_key(v: Var) -> tuple:
    """Everything the VarDesc of `v` says, as one comparable value (_decode_var builds the
    same tuple from what it read)."""
    return (v.name, v.persistable, v.need_check_feed, v.is_parameter, v.stop_gradient,
            v.attrs, _vartype_key(v.type))


def _vartype_key(vt: VarType) -> tuple:
    """Everything a VarType says, as one comparable value (descs in their order: the order
    they are written in)."""
    return (vt.type, tuple((k, t.dtype, t.dims, lod) for k, (t, lod) in vt.descs.items()),
            vt.reader, vt.tuple_types)


class VarSource:
    """A var as it was read: its VarDesc message and what it said (var_key), to tell whether
    the var is still the same and its bytes can be copied."""
    __slots__ = ("msg", "key")

    def __init__(self, msg, key: tuple):
        self.msg = msg
        self.key = key

    def raw(self) -> bytes:
        return self.msg.SerializeToString(deterministic=True)


def _not_text(what):
    return ProgramFormatError("%s is not valid UTF-8 text" % what)


def _slots_of(o, vars_, check_text: bool):
    if check_text:
        for x in vars_:
            if type(x.parameter) is not str or not all(type(a) is str for a in x.arguments):
                raise _not_text("a slot or argument name of op %r" % (o.type,))
    # a slice of a repeated field is a plain list made in one call (list() goes through
    # the container's iterator, a third slower)
    return {x.parameter: x.arguments[:] for x in vars_}


# AttrType codes whose value is text (checked when reading: invalid UTF-8 comes back as bytes)
_TEXT_ATTRS = {ATTR_TYPE_NUM["STRING"]: "s", ATTR_TYPE_NUM["VAR"]: "var_name"}
_TEXTS_ATTRS = {ATTR_TYPE_NUM["STRINGS"]: "strings", ATTR_TYPE_NUM["VARS"]: "vars_name"}
_BLOCK_ATTRS = {ATTR_TYPE_NUM["BLOCK"], ATTR_TYPE_NUM["BLOCKS"]}
_KNOWN_ATTR_TYPES = frozenset(ATTR_TYPE_NAME)
_name_of = attrgetter("name")
_type_of = attrgetter("type")


class OpSource:
    """An op as it was read: its OpDesc message, its slots as decoded, and its attrs, decoded
    one by one on demand (see program.Op). The message is never modified.

    Only the attr names are read eagerly, as a tuple shared by the ops with the same names
    (with the name -> position map), so an op holds no object per attr until one is asked
    for: `index` (name -> Attr message) is built on first use only."""
    __slots__ = ("msg", "type", "inputs", "outputs", "is_target", "names", "_positions",
                 "block_attrs", "_index", "_decoded", "_chunks")

    def __init__(self, msg, op_type: str, inputs: dict, outputs: dict, is_target, names: tuple,
                 positions: dict, block_attrs: tuple):
        self.msg = msg
        self.type = op_type             # the Op's own string (msg.type would make another)
        self.inputs = {k: v[:] for k, v in inputs.items()}
        self.outputs = {k: v[:] for k, v in outputs.items()}
        self.is_target = is_target
        self.names = names              # the attr names in file order (no name twice)
        self._positions = positions     # attr name -> its position in msg.attrs
        self.block_attrs = block_attrs  # names of the BLOCK / BLOCKS attrs
        self._index = None
        self._decoded: dict = {}
        self._chunks = None

    @property
    def index(self) -> dict:
        """attr name -> its Attr message, in file order (made on first use, then kept)."""
        if self._index is None:
            self._index = dict(zip(self.names, self.msg.attrs))
        return self._index

    def attr_chunks(self) -> list:
        """[(name, the attr's OpDesc.attrs entry as bytes)] in file order (made once)."""
        if self._chunks is None:
            from .protowrite import length_delimited
            self._chunks = [(a.name, length_delimited(b"\x22",
                                                      a.SerializeToString(deterministic=True)))
                            for a in self.msg.attrs]
        return self._chunks

    def raw(self) -> bytes:
        """The OpDesc bytes as read (written again from the message each time: keeping them
        would hold a second copy of the program)."""
        return self.msg.SerializeToString(deterministic=True)

    def get(self, name: str):
        """The Attr `name` (shared: callers must not change it), or None."""
        a = self._decoded.get(name)
        if a is None:
            pos = self._positions.get(name)
            if pos is None:
                return None
            a = self._decoded[name] = _decode_attr(self.msg.attrs[pos])[1]
        return a

    def has(self, name: str) -> bool:
        return name in self._positions

    def decode_all(self) -> dict:
        """Every attr, as new Attr objects the op owns."""
        out = {}
        for name in self.names:
            a = self.get(name)
            out[name] = Attr(a.type, _copy.copy(a.value), a.extra)
        return out

    def same_attr(self, name: str, attr: Attr) -> bool:
        return name in self._positions and self.get(name) == attr

    def unchanged(self, op: Op) -> bool:
        """`op` still is what was read (its message can be written as it is)."""
        if op.type != self.type or op.is_target != self.is_target or op.dup_attrs \
                or op.attr_patch or op.inputs != self.inputs or op.outputs != self.outputs:
            return False
        if not op.attrs_decoded:
            return True
        attrs = op.attrs
        return tuple(attrs) == self.names and all(self.get(n) == a for n, a in attrs.items())


def _bad_text(a, t: int) -> bool:
    return t in _TEXT_ATTRS and type(getattr(a, _TEXT_ATTRS[t])) is bytes \
        or t in _TEXTS_ATTRS and any(type(x) is bytes for x in getattr(a, _TEXTS_ATTRS[t]))


def _check_op_text(o, attrs: list, types: list) -> None:
    """Raise on the first text field of op `o` that is not UTF-8 (the slow path, taken only
    when the one C pass over the whole program found some)."""
    if type(o.type) is not str:
        raise _not_text("an op type")
    for a, t in zip(attrs, types):
        if type(a.name) is not str:
            raise _not_text("an attr name of op %r" % (o.type,))
        if _bad_text(a, t):
            raise _not_text("attr %r of op %r" % (a.name, o.type))


def _shared_names(names: tuple, shared: dict):
    """(names, {name: position}) for a tuple of attr names, both shared with the earlier ops
    of the program that have the same names (most ops of a type do): `shared` holds them.
    The map is shorter than the tuple when a name is repeated."""
    found = shared.get(names)
    if found is None:
        found = shared[names] = (names, {n: i for i, n in enumerate(names)})
    return found


def _decode_op(o, check_text: bool, shared: dict) -> Op:
    """An Op whose attrs stay in the message until asked for. `shared`: see _shared_names.

    The attr wrappers are sliced once (one C call) and read twice (names, types), then
    dropped: keeping one wrapper object per attr would cost memory for the whole run."""
    if check_text and type(o.type) is not str:
        raise _not_text("an op type")
    msg_inputs, msg_outputs = o.inputs, o.outputs
    inputs = _slots_of(o, msg_inputs, check_text)
    outputs = _slots_of(o, msg_outputs, check_text)
    if len(inputs) != len(msg_inputs) or len(outputs) != len(msg_outputs):
        raise ProgramFormatError("op %r repeats a slot name" % o.type)
    attrs = o.attrs[:]
    types = list(map(_type_of, attrs))
    if check_text:
        _check_op_text(o, attrs, types)
    names, positions = _shared_names(tuple(map(_name_of, attrs)), shared)
    block_attrs = ()
    if not _KNOWN_ATTR_TYPES.issuperset(types):
        for a, t in zip(attrs, types):
            if t not in ATTR_TYPE_NAME:
                raise ProgramFormatError("attr %r has unknown AttrType %d" % (a.name, t))
    if not _BLOCK_ATTRS.isdisjoint(types):
        block_attrs = tuple(n for n, t in zip(names, types) if t in _BLOCK_ATTRS)
    if len(positions) != len(names):
        return _decode_op_eagerly(o, inputs, outputs)
    is_target = o.is_target if o.HasField("is_target") else None
    op_type = o.type
    return Op(op_type, inputs, outputs, None, is_target,
              source=OpSource(o, op_type, inputs, outputs, is_target, names, positions,
                              block_attrs))


def _decode_op_eagerly(o, inputs: dict, outputs: dict) -> Op:
    """An op whose attrs are all decoded now (the rare op that repeats an attr name)."""
    attrs = {}
    dups = []
    where = {}
    for pos, a in enumerate(o.attrs):
        name, attr = _decode_attr(a)
        if name in attrs:
            # Paddle writes some attrs twice (reshape2's mkldnn attrs); the last one counts, the
            # earlier ones are kept with their position only to write the same bytes back
            dups.append((where[name], name, attrs.pop(name)))
        attrs[name] = attr
        where[name] = pos
    dups.sort(key=lambda d: d[0])
    return Op(o.type, inputs, outputs, attrs, is_target=_opt(o, "is_target"),
              dup_attrs=tuple(dups))


def _decode_block(b, check_text: bool, types: dict, shared: dict) -> Block:
    """`types`: see _decode_var; `shared`: see _shared_names (both for the whole program)."""
    vars_ = {}
    for v in b.vars:
        if check_text and (type(v.name) is not str or any(
                type(a.name) is not str or type(a.s) is bytes for a in v.attrs)):
            raise _not_text("a var name in block %d" % b.idx)
        var = _decode_var(v, types)
        if var.name in vars_:
            raise ProgramFormatError("block %d declares var %r twice" % (b.idx, var.name))
        vars_[var.name] = var
    return Block(b.idx, b.parent_idx, vars_, [_decode_op(o, check_text, shared) for o in b.ops],
                 forward_block_idx=_opt(b, "forward_block_idx"))


def _has_unknown_fields(msg) -> bool:
    try:
        from google.protobuf import unknown_fields
        return len(unknown_fields.UnknownFieldSet(msg)) > 0
    except Exception:  # pragma: no cover - older runtimes
        return False


def decode(data: bytes) -> Program:
    """Parse ProgramDesc bytes into a Program. Raises ProgramFormatError on anything unusable."""
    if not data:
        raise ProgramFormatError("empty file: no ProgramDesc bytes")
    msg = ProgramDesc()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        where = _where(data)
        if not where:
            where = " (%s)" % (str(e).split(": ")[-1] or type(e).__name__)
        raise ProgramFormatError("not a valid ProgramDesc%s" % where) from None
    if _has_unknown_fields(msg):
        raise ProgramFormatError("not a ProgramDesc: it holds fields that framework.proto "
                                 "does not define")
    if not msg.blocks:
        raise ProgramFormatError("not a ProgramDesc: it has no blocks")
    version = None
    has_version = msg.HasField("version")
    if has_version:
        version = _opt(msg.version, "version")
    ovm = None
    if msg.HasField("op_version_map"):
        ovm = [(p.op_name, p.op_version.version) for p in msg.op_version_map.pair]
        if any(type(name) is not str for name, _ in ovm):
            raise _not_text("an op name in op_version_map")
    # all text is checked by one C parse; field by field only to say where it fails
    check_text = not _text_is_utf8(data)
    types: dict = {}
    shared: dict = {}
    blocks = [_decode_block(b, check_text, types, shared) for b in msg.blocks]
    if check_text:
        raise _not_text("a text field")
    return Program(blocks, version=version, has_version=has_version, op_version_map=ovm)


def _text_is_utf8(data: bytes) -> bool:
    try:
        _TextView().ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError):
        return False
    return True


def _where(data: bytes) -> str:
    found = first_bad_offset(data)
    if found is None:
        return ""
    off, why = found
    return ": %s at byte %d of %d" % (why, off, len(data))


def first_bad_offset(data: bytes, start: int = 0, end: int | None = None, depth: int = 0):
    """(offset, reason) of the first malformed wire-format element, looking inside nested
    length-delimited fields where they look like messages; None when the framing is sound."""
    end = len(data) if end is None else end
    i = start
    while i < end:
        at = i
        key, i = _varint(data, i, end)
        if key is None:
            return at, "a field key runs past the end (truncated?)"
        wtype = key & 7
        if key >> 3 == 0:
            return at, "field number 0"
        if wtype == 0:
            v, i = _varint(data, i, end)
            if v is None:
                return at, "a number runs past the end (truncated?)"
        elif wtype in (1, 5):
            i += 8 if wtype == 1 else 4
            if i > end:
                return at, "a fixed-size field runs past the end (truncated?)"
        elif wtype == 2:
            n, j = _varint(data, i, end)
            if n is None or j + n > end:
                return at, "field %d's length runs past the end (truncated?)" % (key >> 3)
            if depth < 6 and _looks_nested(data, j, j + n):
                inner = first_bad_offset(data, j, j + n, depth + 1)
                if inner is not None:
                    return inner
            i = j + n
        else:
            return at, "wire type %d is not valid" % wtype
    return None


def _looks_nested(data, j, end):
    # strings are length-delimited too: only look inside payloads that start like a message
    return end > j and (data[j] & 7) in (0, 2) and (data[j] >> 3) in range(1, 22)


def _varint(data, i, end):
    shift = value = 0
    while i < end:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            return None, i
    return None, i


# writing lives in transpile/protowrite.py; these are part of this module's API
from .protowrite import encode, encode_chunks, op_bytes, var_bytes  # noqa: E402,F401
