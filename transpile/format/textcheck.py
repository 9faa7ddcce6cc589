"""What reading a program as one message tree checks of its text (protoread.py's slow path,
taken only when the C pass over the program found text that is not UTF-8): protobuf hands
invalid UTF-8 back as bytes, and the first such field is named."""
from __future__ import annotations

from ..core.errors import ProgramFormatError
from .proto import ATTR_TYPE_NUM

# AttrType codes whose value is text
_TEXT_ATTRS = {ATTR_TYPE_NUM["STRING"]: "s", ATTR_TYPE_NUM["VAR"]: "var_name"}
_TEXTS_ATTRS = {ATTR_TYPE_NUM["STRINGS"]: "strings", ATTR_TYPE_NUM["VARS"]: "vars_name"}


def not_text(what) -> ProgramFormatError:
    return ProgramFormatError("%s is not valid UTF-8 text" % what)


def check_slots_text(o, slots) -> None:
    """Raise on the first slot or argument name of op `o` (OpDesc.Var messages) that is not
    UTF-8."""
    for x in slots:
        if type(x.parameter) is not str or not all(type(a) is str for a in x.arguments):
            raise not_text("a slot or argument name of op %r" % (o.type,))


def _bad_text(a, t: int) -> bool:
    return t in _TEXT_ATTRS and type(getattr(a, _TEXT_ATTRS[t])) is bytes \
        or t in _TEXTS_ATTRS and any(type(x) is bytes for x in getattr(a, _TEXTS_ATTRS[t]))


def check_op_text(o, attrs: list, types: list) -> None:
    """Raise on the first text field of op `o` that is not UTF-8 (`attrs`: its Attr
    messages, `types` their AttrType codes)."""
    if type(o.type) is not str:
        raise not_text("an op type")
    for a, t in zip(attrs, types):
        if type(a.name) is not str:
            raise not_text("an attr name of op %r" % (o.type,))
        if _bad_text(a, t):
            raise not_text("attr %r of op %r" % (a.name, o.type))


def check_var_text(v, block_idx: int) -> None:
    """Raise when var `v`'s name or an attr of it is not UTF-8."""
    if type(v.name) is not str or any(type(a.name) is not str or type(a.s) is bytes
                                      for a in v.attrs):
        raise not_text("a var name in block %d" % block_idx)
