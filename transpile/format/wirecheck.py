"""Where a program's bytes go wrong, walked with framework.proto's schema: the offset of the
first field that cannot be read, or that is not a field of its message, and of the first op,
var or attr that lacks a field framework.proto requires (or an op without a type). The
reader's errors say these offsets (protoread.py). Of a program that reads, only its ops' types
are looked at here (first_incomplete, when it is read as one tree).

Fields are named by their path, as protobuf names them: `blocks[0].ops[3].type`.
"""
from __future__ import annotations

from typing import Optional

from google.protobuf.descriptor import FieldDescriptor

from ..core.errors import ProgramFormatError
from .wire import read_varint


class Located(ProgramFormatError):
    """A program refused at a byte offset while it is read piece by piece (wireruns.py):
    not read again as one tree."""


TYPELESS = "an op without a type (an empty name)"

_WIRE_OF = {FieldDescriptor.TYPE_DOUBLE: 1, FieldDescriptor.TYPE_FLOAT: 5,
            FieldDescriptor.TYPE_INT64: 0, FieldDescriptor.TYPE_UINT64: 0,
            FieldDescriptor.TYPE_INT32: 0, FieldDescriptor.TYPE_FIXED64: 1,
            FieldDescriptor.TYPE_FIXED32: 5, FieldDescriptor.TYPE_BOOL: 0,
            FieldDescriptor.TYPE_STRING: 2, FieldDescriptor.TYPE_MESSAGE: 2,
            FieldDescriptor.TYPE_BYTES: 2, FieldDescriptor.TYPE_UINT32: 0,
            FieldDescriptor.TYPE_ENUM: 0, FieldDescriptor.TYPE_SFIXED32: 5,
            FieldDescriptor.TYPE_SFIXED64: 1, FieldDescriptor.TYPE_SINT32: 0,
            FieldDescriptor.TYPE_SINT64: 0}


def _repeated(field) -> bool:
    rep = getattr(field, "is_repeated", None)
    return bool(rep) if rep is not None else field.label == field.LABEL_REPEATED


def _name(path: str, field, index: int) -> str:
    own = field.name + ("[%d]" % index if _repeated(field) else "")
    return path + "." + own if path else own


def first_problem(data: bytes, desc, start: int = 0, end: Optional[int] = None,
                  path: str = "", text: bool = False) -> Optional[tuple]:
    """(offset, what) of the first field of data[start:end], message `desc`, that protobuf
    cannot read (its framing: a truncated number or length, an invalid wire type) or that is
    no field of its message (an unknown number, or a known one with another wire type), or
    with `text` a string that is not UTF-8, looking inside every message field; None when
    there is none."""
    end = len(data) if end is None else end
    counts: dict = {}
    i = start
    while i < end:
        at = i
        key, i = read_varint(data, i, end)
        if key is None:
            return at, "%sa field key runs past the end (truncated?)" % _in(path)
        number, wtype = key >> 3, key & 7
        if number == 0:
            return at, "%sfield number 0" % _in(path)
        payload = None
        if wtype == 0:
            value, i = read_varint(data, i, end)
            if value is None:
                return at, "%sfield %d: a number runs past the end (truncated?)" % (_in(path),
                                                                                   number)
        elif wtype in (1, 5):
            i += 8 if wtype == 1 else 4
            if i > end:
                return at, "%sfield %d runs past the end (truncated?)" % (_in(path), number)
        elif wtype == 2:
            n, j = read_varint(data, i, end)
            if n is None or j + n > end:
                return at, "%sfield %d's length runs past the end (truncated?)" % (_in(path),
                                                                                  number)
            payload, i = (j, j + n), j + n
        else:
            return at, "%sfield %d: wire type %d, which framework.proto never writes" % (
                _in(path), number, wtype)
        field = desc.fields_by_number.get(number)
        if field is None:
            return at, "%sfield %d is no field of %s" % (_in(path), number, desc.name)
        want = _WIRE_OF[field.type]
        if wtype != want and not (wtype == 2 and _repeated(field) and want != 2):
            return at, "%s: wire type %d, where %s has %d" % (
                _name(path, field, counts.get(number, 0)), wtype, field.name, want)
        index = counts.get(number, 0)
        counts[number] = index + 1
        if field.type == FieldDescriptor.TYPE_MESSAGE and payload is not None:
            inner = first_problem(data, field.message_type, payload[0], payload[1],
                                  _name(path, field, index), text)
            if inner is not None:
                return inner
        elif text and field.type == FieldDescriptor.TYPE_STRING and payload is not None:
            try:
                data[payload[0]:payload[1]].decode("utf-8")
            except UnicodeDecodeError:
                return at, "%s is not UTF-8 text" % _name(path, field, index)
    return None


def _in(path: str) -> str:
    return path + ": " if path else ""


def offset_of(data: bytes, desc, steps: list, start: int = 0,
              end: Optional[int] = None) -> int:
    """The offset of the field that `steps` ([(field name, index)], from message `desc` at
    data[start:end]) names: each step's field key, the index-th of its field (a singular
    field: its last); the message's own start for no steps. Skips the payloads on the way,
    so it costs the number of fields passed, not the bytes."""
    end = len(data) if end is None else end
    at = start
    for name, index in steps:
        field = desc.fields_by_name[name]
        found = None
        seen = 0
        i = start
        while i < end:
            key_at = i
            key, i = read_varint(data, i, end)
            if key is None:
                break
            wtype = key & 7
            if wtype == 2:
                n, i = read_varint(data, i, end)
                if n is None:
                    break
                payload, i = (i, i + n), i + n
            elif wtype == 0:
                _, i = read_varint(data, i, end)
                payload = None
            else:
                i += 8 if wtype == 1 else 4
                payload = None
            if key >> 3 == field.number:
                if seen == index or not _repeated(field):
                    found = (key_at, payload)
                    if _repeated(field):
                        break
                seen += 1
        if found is None:
            return at
        at = found[0]
        if found[1] is None or field.message_type is None:
            return at
        desc, (start, end) = field.message_type, found[1]
    return at


def first_incomplete(msg) -> Optional[tuple]:
    """([(field name, index)] to the first message of the ProgramDesc message `msg` that lacks
    a required field (an op, a var, an attr, a slot...) or to the first op without a type,
    and what is wrong with it); None when there is none. Vars are looked at one by one only
    in a block protobuf says is incomplete; ops for their type too. (wireruns.Run finds the
    same first item reading run by run.)"""
    if msg.HasField("op_version_map") and not msg.op_version_map.IsInitialized():
        missing = msg.op_version_map.FindInitializationErrors()[0]
        return [("op_version_map", 0)] + steps_of(missing)[:-1], lacks(missing)
    for b, block in enumerate(msg.blocks):
        at = [("blocks", b)]
        for name in ("idx", "parent_idx"):
            if not block.HasField(name):
                return at, lacks(name)
        complete = block.IsInitialized()
        for field in ("ops",) if complete else ("vars", "ops"):
            for k, item in enumerate(getattr(block, field)):
                if not complete and not item.IsInitialized():
                    missing = item.FindInitializationErrors()[0]
                    return at + [(field, k)] + steps_of(missing)[:-1], lacks(missing)
                if field == "ops" and not item.type:
                    return at + [("ops", k)], TYPELESS
    return None


def lacks(missing: str) -> str:
    return "lacks the field %s, which framework.proto requires" % missing.rsplit(".", 1)[-1]


def where_incomplete(data: bytes, desc, steps: list, what: str) -> str:
    """"<path>: <what>, at byte N of M" for first_incomplete's answer."""
    return "%s: %s, at byte %d of %d" % (describe(desc, steps), what,
                                         offset_of(data, desc, steps), len(data))


def steps_of(path: str) -> list:
    """[(field name, index)] of a FindInitializationErrors path ("attrs[2].name")."""
    out = []
    for part in path.split("."):
        name, _, index = part.partition("[")
        out.append((name, int(index.rstrip("]")) if index else 0))
    return out


def describe(desc, steps: list) -> str:
    """Steps from message `desc` named as protobuf names them: blocks[0].ops[3]."""
    out = []
    for name, index in steps:
        field = desc.fields_by_name[name]
        out.append("%s[%d]" % (name, index) if _repeated(field) else name)
        desc = field.message_type
    return ".".join(out)
