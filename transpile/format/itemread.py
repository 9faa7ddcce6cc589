"""One var or one op of a program read from its message (protoread.py reads the program: its
blocks, their vars and ops piece by piece, what the compiled scanner made of them).
"""
from __future__ import annotations

from operator import attrgetter
from sys import intern as _intern

from ..core.errors import ProgramFormatError
from ..ir.program import Attr, Op, Var, VarAttr
from .opsource import ROLE_ATTR, SHAPE_ATTR, OpSource, VarSource, serialized, vartype_key
from .proto import (ATTR_TYPE_NAME, ATTR_TYPE_NUM, decode_attr, decode_vartype,
                    optional_field)
from .textcheck import check_op_text, check_slots_text, not_text


_VAR_FLAGS = {"persistable": 0, "need_check_feed": 1, "is_parameter": 2, "stop_gradient": 3}


def decode_var(v, seen, wire: bytes | None) -> Var:
    """A Var from its VarDesc message `v` (every required field there: first_incomplete);
    `wire`: the VarDesc bytes the writer copies while the var is unchanged (protobuf's
    serialization of `v`), or None: `v` is serialized here."""
    flags = [None, None, None, None]
    attrs = ()
    typed = None
    types = seen.types
    for fd, x in v.ListFields():
        n = fd.name
        if n == "type":
            raw = x.SerializePartialToString()
            typed = types.get(raw)
            if typed is None:
                vt = decode_vartype(x)
                typed = types[raw] = (vt, vartype_key(vt))
        elif n == "attrs":
            attrs = tuple(VarAttr(a.name, ATTR_TYPE_NAME.get(a.type, a.type),
                                  optional_field(a, "i"), optional_field(a, "s"), tuple(a.ints))
                          for a in x)
        elif n != "name":
            flags[_VAR_FLAGS[n]] = x
    if typed is None:           # no type field: decoded from the (empty) default message
        vt = decode_vartype(v.type)
        typed = (vt, vartype_key(vt))
    name = _intern(v.name)
    p, c, i, s = flags
    var = Var(name, typed[0], p, c, i, s, attrs)
    if seen.share:                  # a program only read: no var keeps its bytes
        return var
    key = (name, p, c, i, s, attrs, typed[1])
    var.source = VarSource(wire if wire is not None else serialized(v), key)
    return var


def _slots_of(o, vars_, check_text: bool):
    if check_text:
        check_slots_text(o, vars_)
    # names are interned: an op's slot names and arguments are then the strings of the other
    # ops and of the vars (protobuf makes a new string each time a field is read)
    return {_intern(x.parameter): x.arguments[:] for x in vars_}


_BLOCK_ATTRS = {ATTR_TYPE_NUM["BLOCK"], ATTR_TYPE_NUM["BLOCKS"]}
_KNOWN_ATTR_TYPES = frozenset(ATTR_TYPE_NAME)
_name_of = attrgetter("name")
_type_of = attrgetter("type")


def shared_names(names: tuple, shared: dict):
    """(names, {name: position}) for a tuple of attr names, both shared with the earlier ops
    of the program that have the same names (most ops of a type do): `shared` holds them.
    The map is shorter than the tuple when a name is repeated."""
    found = shared.get(names)
    if found is None:
        found = shared[names] = (names, {n: i for i, n in enumerate(names)})
    return found


def shared_role(a, seen) -> Attr:
    """The op_role Attr of Attr message `a`; a plain INT one (Paddle's) is shared by the ops
    of the program with the same value: there are a handful of roles."""
    role = decode_attr(a)[1]
    if role.type == "INT" and not role.extra:
        role = seen.roles.setdefault(role.value, role)
    return role


def attr_by_bytes(a, made: dict, decode) -> Attr:
    """decode(a) for Attr message `a`, made once per distinct bytes of the message (equal
    bytes, equal fields) and then shared: the op_role and shape of most ops repeat those of
    others. Read-only, as every Attr an OpSource holds."""
    raw = a.SerializePartialToString()
    attr = made.get(raw)
    if attr is None:
        if len(made) >= ATTRS_KEPT:
            made.clear()
        attr = made[raw] = decode(a)
    return attr


ATTRS_KEPT = 1 << 14       # distinct op_role / shape attrs kept while reading a program


def decoded_attr(a) -> Attr:
    return decode_attr(a)[1]


def decode_op(o, check_text: bool, seen, wire: bytes | None) -> Op:
    """An Op whose attrs stay in its bytes until asked for; `wire`: the OpDesc bytes
    (protobuf's serialization of `o`), or None: `o` is serialized here. Every required
    field is there (first_incomplete); an op without a type is refused.

    The attr wrappers are sliced once (one C call) and read twice (names, types), then
    dropped with the message. An attr named seen.drop is left out (of the op and its bytes)."""
    if check_text and type(o.type) is not str:
        raise not_text("an op type")
    if seen.drop is not None and _dropped(o, seen.drop):
        wire = None
    msg_inputs, msg_outputs = o.inputs, o.outputs
    inputs = _slots_of(o, msg_inputs, check_text)
    outputs = _slots_of(o, msg_outputs, check_text)
    if len(inputs) != len(msg_inputs) or len(outputs) != len(msg_outputs):
        raise ProgramFormatError("op %r repeats a slot name" % o.type)
    attrs = o.attrs[:]
    types = list(map(_type_of, attrs))
    if check_text:
        check_op_text(o, attrs, types)
    layout = shared_names(tuple(map(_name_of, attrs)), seen.names)
    names, positions = layout
    block_attrs = ()
    if not _KNOWN_ATTR_TYPES.issuperset(types):
        for a, t in zip(attrs, types):
            if t not in ATTR_TYPE_NAME:
                raise ProgramFormatError("attr %r has unknown AttrType %d" % (a.name, t))
    if not _BLOCK_ATTRS.isdisjoint(types):
        block_attrs = tuple(n for n, t in zip(names, types) if t in _BLOCK_ATTRS)
    if len(positions) != len(names):
        return _decode_op_eagerly(o, inputs, outputs)
    pos = positions.get(ROLE_ATTR)
    role = None if pos is None else attr_by_bytes(attrs[pos], seen.role_bytes,
                                                   lambda a: shared_role(a, seen))
    pos = positions.get(SHAPE_ATTR)
    decoded = None if pos is None else \
        {SHAPE_ATTR: attr_by_bytes(attrs[pos], seen.shape_bytes, decoded_attr)}
    is_target = o.is_target if o.HasField("is_target") else None
    op_type = _intern(o.type)
    if not op_type:                 # (_decode_tree says where)
        raise ProgramFormatError("an op without a type")
    wire = serialized(o) if wire is None else wire
    return Op(op_type, inputs, outputs, None, is_target,
              source=OpSource(wire, op_type, (inputs, outputs) if seen.share else
                              ({k: v[:] for k, v in inputs.items()},
                               {k: v[:] for k, v in outputs.items()}),
                              is_target, layout, block_attrs, role, decoded))


def _dropped(o, name: str) -> bool:
    """Take the attrs named `name` out of the OpDesc message `o`: whether there were any."""
    at = [i for i, a in enumerate(o.attrs) if a.name == name]
    for i in reversed(at):
        del o.attrs[i]
    return bool(at)


def _decode_op_eagerly(o, inputs: dict, outputs: dict) -> Op:
    """An op whose attrs are all decoded now (the rare op that repeats an attr name)."""
    attrs = {}
    dups = []
    where = {}
    for pos, a in enumerate(o.attrs):
        name, attr = decode_attr(a)
        if name in attrs:
            # Paddle writes some attrs twice (reshape2's mkldnn attrs); the last one counts, the
            # earlier ones are kept with their position only to write the same bytes back
            dups.append((where[name], name, attrs.pop(name)))
        attrs[name] = attr
        where[name] = pos
    dups.sort(key=lambda d: d[0])
    return Op(o.type, inputs, outputs, attrs, is_target=optional_field(o, "is_target"),
              dup_attrs=tuple(dups))
