"""Writing a var as VarDesc bytes (protowrite.py writes the blocks that hold them).

A var still as it was read is copied as its bytes; a plain var (one tensor description, no
attrs: almost every var a split makes) is written directly, its VarType's bytes made once per
VarType object (VarType.encoded) and its flags' bytes once per combination; any other var
through protobuf's own serialization. The same bytes as protobuf's (tests/test_encode.py),
with the compiled writer or without it (tests/test_wirewrite.py).
"""
from __future__ import annotations

from ..ir.program import TensorDesc, Var
from .opsource import var_key
from .proto import ATTR_TYPE_NUM, TENSOR_SLOTS, VAR_TYPE_NUM, VarDescMsg
from .wire import length_delimited, varint_bytes
from .wirescan import compiled

FAST = compiled("wirewrite_c")


def _encode_tensor(m, t: TensorDesc):
    m.data_type = VAR_TYPE_NUM[t.dtype] if isinstance(t.dtype, str) else t.dtype
    m.dims.extend(t.dims)


def _encode_var(m, v: Var):
    m.name = v.name
    vt = v.type
    m.type.type = VAR_TYPE_NUM[vt.type]
    for slot, (t, lod) in vt.descs.items():
        sub = getattr(m.type, slot)
        if TENSOR_SLOTS[slot] == "TensorDesc":
            _encode_tensor(sub, t)
        else:
            _encode_tensor(sub.tensor, t)
            if lod is not None:
                sub.lod_level = lod
    if vt.reader is not None:
        r = m.type.reader
        r.SetInParent()
        for t, lod in vt.reader:
            x = r.lod_tensor.add()
            _encode_tensor(x.tensor, t)
            if lod is not None:
                x.lod_level = lod
    if vt.tuple_types is not None:
        m.type.tuple.SetInParent()
        m.type.tuple.element_type.extend(VAR_TYPE_NUM[x] if isinstance(x, str) else x
                                         for x in vt.tuple_types)
    for f in ("persistable", "need_check_feed", "is_parameter", "stop_gradient"):
        val = getattr(v, f)
        if val is not None:
            setattr(m, f, val)
    for a in v.attrs:
        x = m.attrs.add(name=a.name, type=ATTR_TYPE_NUM[a.type] if isinstance(a.type, str)
                        else a.type)
        if a.i is not None:
            x.i = a.i
        if a.s is not None:
            x.s = a.s
        x.ints.extend(a.ints)


def var_bytes(v: Var) -> bytes:
    """The VarDesc bytes of `v`: the bytes it was read from while it is unchanged."""
    src = v.source
    if src is not None and src.key == var_key(v):
        return src.raw()
    vt = v.type
    vtype = vt.encoded
    if vtype is not None and not v.attrs and FAST is not None:
        # a plain var whose VarType was written before (most new vars of a split): the
        # flags' bytes looked up, the rest in C, as _plain_var_bytes does
        tail = _FLAG_BYTES.get((v.persistable, v.need_check_feed, v.is_parameter,
                                v.stop_gradient))
        if tail is not None:
            return FAST.plain_var(v.name, vtype, tail)
    if not v.attrs and vt.reader is None and vt.tuple_types is None and len(vt.descs) == 1:
        return _plain_var_bytes(v)
    m = VarDescMsg()
    _encode_var(m, v)
    return m.SerializeToString(deterministic=True)


# VarType field keys of the tensor descriptions (field number << 3 | 2)
_DESC_KEY = {"selected_rows": b"\x12", "lod_tensor": b"\x1a", "tensor_array": b"\x22",
             "string": b"\x42", "strings": b"\x4a", "vocab": b"\x52", "sparse_coo": b"\x5a",
             "sparse_csr": b"\x62"}
_FLAG_KEYS = (b"\x18", b"\x20", b"\x28", b"\x30")  # VarDesc fields 3-6 (varint)


def _vartype_bytes(kind, slot, dtype, dims, lod) -> bytes:
    """The VarDesc `type` field (key and length included) of a one-tensor VarType."""
    dtype = VAR_TYPE_NUM[dtype] if isinstance(dtype, str) else dtype
    tensor = [b"\x08", varint_bytes(dtype)]
    for d in dims:
        tensor += (b"\x10", varint_bytes(d))
    tensor = b"".join(tensor)
    if TENSOR_SLOTS[slot] != "TensorDesc":       # LoDTensorDesc / LoDTensorArrayDesc
        tensor = b"\x0a" + varint_bytes(len(tensor)) + tensor
        if lod is not None:
            tensor += b"\x10" + varint_bytes(lod)
    vtype = b"\x08" + varint_bytes(VAR_TYPE_NUM[kind]) + _DESC_KEY[slot] + \
        varint_bytes(len(tensor)) + tensor
    return b"\x12" + varint_bytes(len(vtype)) + vtype


def _plain_var_bytes(v: Var) -> bytes:
    """VarDesc bytes of a var with one tensor description and no attrs (almost every var),
    written directly in the order protobuf writes them. Vars mostly share a few VarType
    objects: each keeps its encoded bytes (VarType.encoded)."""
    vt = v.type
    vtype = vt.encoded
    if vtype is None:
        (slot, (t, lod)), = vt.descs.items()
        vtype = vt.encoded = _vartype_bytes(vt.type, slot, t.dtype, t.dims, lod)
    flags = (v.persistable, v.need_check_feed, v.is_parameter, v.stop_gradient)
    tail = _FLAG_BYTES.get(flags)
    if tail is None:
        tail = _FLAG_BYTES[flags] = b"".join(
            key + (b"\x01" if flag else b"\x00")
            for key, flag in zip(_FLAG_KEYS, flags) if flag is not None)
    if FAST is not None:
        return FAST.plain_var(v.name, vtype, tail)
    return length_delimited(b"\x0a", v.name.encode("utf-8")) + vtype + tail   # (name = 1)


# (persistable, need_check_feed, is_parameter, stop_gradient) -> their fields' bytes
_FLAG_BYTES: dict = {}
