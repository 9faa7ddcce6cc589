"""The reader's compiled fast path (wirescan_c.c), when it was built.

`FAST` is the C module, configured with framework.proto's schema from proto.py, or None: not
built (no C compiler when the package was installed), or turned off with the environment
variable PSTRANSPILE_PURE_PYTHON=1. Either way the program read is the same (protoread.py
takes from it only blocks whose vars and ops are protobuf's own serialization, and
tests/test_wirescan.py compares both paths).
"""
from __future__ import annotations

import importlib
import os

from google.protobuf.descriptor import FieldDescriptor

from .proto import OpDescMsg, VarDescMsg

PURE_ENV = "PSTRANSPILE_PURE_PYTHON"

# the C module's kinds of field (wirescan_c.c: K_INT32...)
_KINDS = {FieldDescriptor.TYPE_INT32: 1, FieldDescriptor.TYPE_INT64: 2,
          FieldDescriptor.TYPE_BOOL: 3, FieldDescriptor.TYPE_ENUM: 4,
          FieldDescriptor.TYPE_FLOAT: 5, FieldDescriptor.TYPE_DOUBLE: 6,
          FieldDescriptor.TYPE_STRING: 7, FieldDescriptor.TYPE_MESSAGE: 8}


def label_of(f) -> tuple[bool, bool]:
    """(repeated, required) of a field descriptor (newer protobuf has no `label`)."""
    if hasattr(f, "is_repeated"):
        return f.is_repeated, f.is_required
    return f.label == f.LABEL_REPEATED, f.label == f.LABEL_REQUIRED


def schema(*roots) -> tuple[list, list]:
    """(messages, the index of each root) for configure(): every message type reachable from
    the roots' descriptors, each a list of (number, kind, repeated, required, index of its
    message type or -1, enum values)."""
    order: list = []
    index: dict = {}

    def visit(desc) -> int:
        if desc.full_name not in index:
            index[desc.full_name] = len(order)
            order.append(desc)
            for f in desc.fields:
                if f.message_type is not None:
                    visit(f.message_type)
        return index[desc.full_name]

    roots_at = [visit(r) for r in roots]
    messages = []
    for desc in order:
        fields = []
        for f in desc.fields:
            kind = _KINDS.get(f.type)
            if kind is None:
                raise ValueError("%s: field type %d has no fast path" % (f.full_name, f.type))
            sub = index[f.message_type.full_name] if f.message_type is not None else -1
            values = tuple(v.number for v in f.enum_type.values) if f.enum_type else ()
            repeated, required = label_of(f)
            if repeated and kind != 8 and f.is_packed:
                raise ValueError("%s: packed fields have no fast path" % f.full_name)
            fields.append((f.number, kind, repeated, required, sub, values))
        messages.append(fields)
    return messages, roots_at


# the INTERFACE each compiled module must have (its C source's): a module built from an older
# source (an editable install not built again) is not used
INTERFACES = {"wirescan_c": 3, "wirewrite_c": 0}


def compiled(name: str):
    """This package's compiled module `name` (wirescan_c, wirewrite_c), or None: not built (no
    C compiler at install), built from an older source (INTERFACES), or turned off with
    PURE_ENV."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None
    try:
        module = importlib.import_module("." + name, __package__)
    except ImportError:
        return None
    return module if getattr(module, "INTERFACE", 0) == INTERFACES[name] else None


def _load():
    wirescan_c = compiled("wirescan_c")
    if wirescan_c is None:
        return None
    messages, (op_index, var_index) = schema(OpDescMsg.DESCRIPTOR, VarDescMsg.DESCRIPTOR)
    wirescan_c.configure(messages, op_index, var_index)
    return wirescan_c


FAST = _load()
