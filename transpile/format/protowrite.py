"""Writing the model as ProgramDesc bytes (transpile/format/protoread.py reads them).

What is still as it was read is copied as bytes (an op's or var's message serialized again, an
attr's bytes); everything else is written field by field in field-number order, as protobuf
writes a message, without building messages: a large split is mostly copies and a few kinds of
new ops and vars, whose recurring pieces (names, VarTypes, attrs such as op_role) are made once.
tests/test_encode.py checks the result against protobuf's own serialization.

`FAST`: the compiled fast path (wirewrite_c.c) that writes op heads, plain vars and block bodies
in one go, or None (not built, or PSTRANSPILE_PURE_PYTHON=1): the same bytes either way
(tests/test_wirewrite.py).
"""
from __future__ import annotations

from typing import Optional

from ..core.bytebound import ByteBound
from ..core.errors import ProgramFormatError
from ..ir.program import ATTR_FIELD, Attr, Block, Op, Program
from .opsource import forget_kept
from .proto import ATTR_TYPE_NUM, BlockDescMsg, EncodeError, OpDescMsg, ProgramDesc, fd_is_repeated
from .varwrite import FAST, var_bytes
from .wire import length_delimited, varint_bytes


def _set_scalar(m, d):
    m.type = d["type"]
    for k, v in d.items():
        if k == "type":
            continue
        if k == "c":
            m.c.r, m.c.i = v
        else:
            setattr(m, k, v)


def _set_attr_field(m, name, value):
    if name == "scalar":
        _set_scalar(m.scalar, value)
    elif name == "scalars":
        for d in value:
            _set_scalar(m.scalars.add(), d)
    elif fd_is_repeated(name):
        getattr(m, name).extend(value)
    else:
        setattr(m, name, value)


def _encode_attr(m, name, attr: Attr):
    m.name = name
    m.type = ATTR_TYPE_NUM[attr.type]
    main = ATTR_FIELD[attr.type]
    absent = any(k == "__absent__" for k, _ in attr.extra)
    if not absent:
        _set_attr_field(m, main, attr.value)
    for k, v in attr.extra:
        if k != "__absent__":
            _set_attr_field(m, k, v)


def op_bytes(op: Op) -> bytes:
    """The OpDesc bytes of `op`: the bytes it was read from while it is unchanged; else written
    field by field in field-number order (inputs 1, outputs 2, type 3, attrs 4, is_target 5),
    the attrs still as read copied as bytes."""
    src = op.source
    if src is not None and src.unchanged(op):
        return src.raw()
    head = FAST.op_head(op.inputs, op.outputs, op.type) if FAST is not None else None
    parts = [head] if head is not None else _op_head(op)
    if src is not None and not op.attrs_decoded:
        patch = op.attr_patch
        parts.append(src.attrs_bytes() if not patch else _patched_attrs(src, patch))
    elif not op.dup_attrs and len(op.attrs) <= _SHARED_MOST and \
            (shared := _shared_attrs(op.attrs)) is not None:
        parts.append(shared)
    else:
        entries = list(op.attrs.items())
        for pos, name, attr in op.dup_attrs:
            entries.insert(min(pos, len(entries)), (name, attr))
        parts += [_attr_chunk(name, attr) for name, attr in entries]
    if op.is_target is not None:
        parts.append(b"\x28\x01" if op.is_target else b"\x28\x00")
    return b"".join(parts)


def _op_head(op: Op) -> list:
    """OpDesc fields 1-3 (inputs, outputs, type) as a list of byte strings."""
    parts = []
    for key, slots, single in ((b"\x0a", op.inputs, _INPUTS), (b"\x12", op.outputs, _OUTPUTS)):
        for slot, args in slots.items():
            if len(args) == 1:
                parts.append(single[slot, args[0]])
            else:
                body = _SLOT_NAMES[slot] + b"".join(map(_ARGUMENTS.__getitem__, args))
                parts += (key, varint_bytes(len(body)), body)
    parts.append(_OP_TYPES[op.type])
    return parts


def _patched_attrs(src, patch: dict) -> bytes:
    """The attrs of an op read as `src` with `patch` set: each as read, or as patched, in file
    order, then the new ones. Kept per source and patch: a pserver copies an init once per
    block it holds, mostly with the same patched shape."""
    chunks = tuple([(name, _attr_chunk(name, new)) for name, new in patch.items()])
    made = src.patched
    out = made.get(chunks) if made is not None else None
    if out is None:
        new = dict(chunks)
        parts = [new.get(name, raw) for name, raw in src.attr_chunks()]
        parts += [raw for name, raw in chunks if not src.has(name)]
        out = b"".join(parts)
        if PATCHED.keep(src, len(out), made is not None):
            made = src.patched          # (None again if every holder let go)
            if made is None:
                made = src.patched = {}
            elif len(made) >= _PATCHES_KEPT:
                made.clear()
            made[chunks] = out
    return out


# attrs made of shared Attr objects (an OpTemplate's: the sum and scale merging each grad block
# on every pserver) -> their bytes: {(id of each Attr, in order): (names, Attrs, bytes)}. An
# entry holds its Attrs, so no other live object has their ids: the same key is the same Attr
# objects. Only Attrs of one immutable value are taken (an Attr is never changed in place).
_SHARED_ATTRS: dict = {}
_SHARED_KEPT = 64         # (a pserver builds one sum and one scale template)
_SHARED_MOST = 4        # attrs of an op looked up so (a template's few; a send has ten, lists)
_SCALARS = (str, int, bool, float)


def _shared_attrs(attrs: dict) -> Optional[bytes]:
    """The OpDesc.attrs entries of `attrs` (a new op's own dict, in its order), looked up by
    the identity of its Attrs where they were written before; None when an Attr holds more
    than one immutable value (a list; extra fields): the caller writes them one by one."""
    made = tuple(attrs.values())
    key = tuple(map(id, made))
    hit = _SHARED_ATTRS.get(key)
    if hit is not None:
        return hit[2] if hit[0] == tuple(attrs) else None
    for a in made:
        if a.value.__class__ not in _SCALARS or a.extra:
            return None
    out = b"".join([_attr_chunk(name, a) for name, a in attrs.items()])
    if len(_SHARED_ATTRS) >= _SHARED_KEPT:
        _SHARED_ATTRS.clear()
    _SHARED_ATTRS[key] = (tuple(attrs), made, out)
    return out


_PATCHES_KEPT = 16      # patched attrs kept per source op
# ... and in all at most about 4 MiB of them: a split to many pservers patches the copies of
# thousands of ops (attrs with their call stacks), megabytes held to the end
PATCHED = ByteBound(4 << 20, lambda src: setattr(src, "patched", None))


# Bytes written again and again (names in slots, attrs such as op_role = 0): made once. The
# caches are emptied when they grow large, so memory stays bounded on any program.
_ATTR_CHUNKS: dict = {}
_CACHE_LIMIT = 1 << 17


class _Made(dict):
    """key -> the bytes `make(key)`, made on first use and then looked up with the dict's own
    [] (a slot's arguments: with map); emptied when it holds more than _CACHE_LIMIT."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, key) -> bytes:
        if len(self) > _CACHE_LIMIT:
            self.clear()
        out = self[key] = self.make(key)
        return out


def _text_field(key: bytes) -> _Made:
    """text -> that text as the string field with wire key `key` (key, length, UTF-8 bytes)."""
    return _Made(lambda text: length_delimited(key, text.encode("utf-8")))


_SLOT_NAMES = _text_field(b"\x0a")      # OpDesc.Var.parameter = 1
_ARGUMENTS = _text_field(b"\x12")       # OpDesc.Var.arguments = 2
_OP_TYPES = _text_field(b"\x1a")        # OpDesc.type = 3


def _one_arg_slots(key: bytes) -> _Made:
    """(slot, argument) -> a slot holding that one argument as the OpDesc field with wire key
    `key`, key and length included: most slots hold one name, and each name is in several ops
    (a grad block is summed, scaled, read)."""
    return _Made(lambda slot_arg: length_delimited(
        key, _SLOT_NAMES[slot_arg[0]] + _ARGUMENTS[slot_arg[1]]))


_INPUTS = _one_arg_slots(b"\x0a")       # OpDesc.inputs = 1
_OUTPUTS = _one_arg_slots(b"\x12")      # OpDesc.outputs = 2


_EXACT = (str, int, bool)


def _attr_chunk(name: str, attr: Attr) -> bytes:
    """An OpDesc.attrs entry, key and length included. Cached by the repr of the value, which
    tells apart what == does not (-0.0 and 0.0, NaNs, 1 and True)."""
    v = attr.value
    if v.__class__ in _EXACT and not attr.extra:        # == tells these apart: no repr
        k = (name, attr.type, v.__class__, v)
    else:
        k = (name, attr.type, repr(v), repr(attr.extra))
    out = _ATTR_CHUNKS.get(k)
    if out is None:
        if len(_ATTR_CHUNKS) > _CACHE_LIMIT:
            _ATTR_CHUNKS.clear()
        m = OpDescMsg()
        _encode_attr(m.attrs.add(), name, attr)
        out = _ATTR_CHUNKS[k] = m.SerializePartialToString(deterministic=True)
    return out


# wire keys (field number << 3 | wire type) of the repeated fields written here
_KEY_BLOCK = b"\x0a"      # ProgramDesc.blocks = 1, length-delimited
_KEY_VAR = b"\x1a"        # BlockDesc.vars = 3
_KEY_OP = b"\x22"         # BlockDesc.ops = 4


# a var's or op's key and length, made once per length below _HEADS (the lengths most have)
_HEADS = 1 << 14
_VAR_HEADS = _Made(lambda n: _KEY_VAR + varint_bytes(n))
_OP_HEADS = _Made(lambda n: _KEY_OP + varint_bytes(n))


def release_caches() -> None:
    """Empty the writer's caches (attr entries, patched attrs, names and heads as bytes, the
    bytes of input ops read from their file more than once): once a split's programs are
    written, what comes after (plan.json, report.md) writes no program, and the megabytes they
    hold would only raise the peak of what does."""
    PATCHED.forget()
    forget_kept()
    _ATTR_CHUNKS.clear()
    _SHARED_ATTRS.clear()
    for made in (_SLOT_NAMES, _ARGUMENTS, _OP_TYPES, _INPUTS, _OUTPUTS, _VAR_HEADS, _OP_HEADS):
        made.clear()


def _block_head(idx, parent_idx) -> bytes:
    """BlockDesc fields 1-2 (idx, parent_idx: int32, both required), written directly; any
    other value goes through protobuf (which refuses what is not an int32)."""
    if idx.__class__ is int and parent_idx.__class__ is int and \
            _INT32_MIN <= idx <= _INT32_MAX and _INT32_MIN <= parent_idx <= _INT32_MAX:
        return b"\x08" + varint_bytes(idx) + b"\x10" + varint_bytes(parent_idx)
    return BlockDescMsg(idx=idx, parent_idx=parent_idx).SerializePartialToString(
        deterministic=True)


_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def _block_bytes(b: Block) -> bytes:
    """The BlockDesc of `b`: its head, then each var and op as a field of it."""
    head = _block_head(b.idx, b.parent_idx)
    tail = b"" if b.forward_block_idx is None else BlockDescMsg(
        forward_block_idx=b.forward_block_idx).SerializePartialToString()
    if FAST is not None:
        return FAST.block(head, list(map(var_bytes, b.vars.values())), list(map(op_bytes, b.ops)),
                          tail)
    parts = [head]
    add = parts.append
    for heads, key, items, to_bytes in ((_VAR_HEADS, _KEY_VAR, b.vars.values(), var_bytes),
                                        (_OP_HEADS, _KEY_OP, b.ops, op_bytes)):
        for item in items:
            raw = to_bytes(item)
            n = len(raw)
            add(heads[n] if n < _HEADS else key + varint_bytes(n))
            add(raw)
    add(tail)
    return b"".join(parts)


# a block of more ops than this is written in pieces of this many ops, and of as many vars
# (_large_block_chunks)
_OPS_PER_PIECE = 1024


def _framed(n: int) -> int:
    """The bytes of a BlockDesc var or op field whose message is `n` bytes: key, length, body."""
    return 1 + ((n.bit_length() + 6) // 7 or 1) + n


def _large_block_chunks(b: Block):
    """The BlockDesc field of a block of many ops (a trainer's global block) as _block_bytes
    frames it, in pieces of _OPS_PER_PIECE vars or ops, never joined into one string and never
    all held: the block's size is summed first (an op still as read by its length in the
    input, without reading it; a changed op or a var by its bytes), then each piece is made as
    it is written (ops still as read read from their input again, in runs where they lie one
    after the other there: _op_pieces). The bytes of the vars and of the new ops (no input
    bytes: a send, a recv, small) made for the size are kept for the writing, up to
    _MADE_KEPT bytes; the others are made again (a changed copy of an input op holds its call
    stack: holding a trainer's changed ops until they are written cost more memory than
    making them twice costs time)."""
    head = _block_head(b.idx, b.parent_idx)
    tail = b"" if b.forward_block_idx is None else BlockDescMsg(
        forward_block_idx=b.forward_block_idx).SerializePartialToString()
    left = [_MADE_KEPT]         # bytes that may still be kept
    vars_ = list(b.vars.values())
    var_made = [_kept(var_bytes(v), left) for v in vars_]
    size = len(head) + len(tail) + sum([_framed(n if n.__class__ is int else len(n))
                                        for n in var_made])
    ops = b.ops
    # where each op still as read is in its file ((file, start, end)), else None; the bytes
    # of a new op kept (else None)
    where = [None] * len(ops)
    made = [None] * len(ops)
    for i, op in enumerate(ops):
        src = op.source
        if src is not None and src.unchanged(op):
            size += _framed(src.size())
            where[i] = src.place()
        else:
            raw = op_bytes(op)
            size += _framed(len(raw))
            if src is None and _kept(raw, left) is raw:
                made[i] = raw
    yield _KEY_BLOCK + varint_bytes(size)
    yield head
    n = _OPS_PER_PIECE
    for start in range(0, len(vars_), n):
        yield FAST.block(b"", [raw if raw.__class__ is bytes else var_bytes(v)
                               for v, raw in zip(vars_[start:start + n],
                                                 var_made[start:start + n])], [], b"")
    del vars_, var_made
    yield from _op_pieces(ops, where, made)
    yield tail


# bytes of a large block's vars and new ops kept from its size's summing to its writing
_MADE_KEPT = 1 << 20


def _kept(raw: bytes, left: list):
    """`raw` when it may be kept (`left[0]`: the bytes that still may be, counted down), else
    its length."""
    if left[0] >= len(raw):
        left[0] -= len(raw)
        return raw
    return len(raw)


# the most bytes of a run of ops _op_pieces reads from their file at once
_RUN_BYTES = 1 << 20


def _op_pieces(ops: list, where: list, made: list):
    """The BlockDesc op fields of `ops` as _block_bytes frames them, in pieces: a run of ops
    still as read that lie one after the other in their file (each one's field key and length
    right after the one before: the bytes a block's op fields are) copied as the file's bytes,
    up to _RUN_BYTES in one read, the framing of the run's first op written here (the file's
    may be longer); the ops between made _OPS_PER_PIECE at a time. `where`: per op, (file,
    start, end) where it is still as read in its file, else None; `made`: per op, its bytes
    when they were kept, else None."""
    i, count = 0, len(ops)
    while i < count:
        j = i + 1
        if where[i] is not None:
            f, first, end = where[i]
            while j < count and end - first < _RUN_BYTES and _follows(where[j - 1], where[j]):
                end = where[j][2]
                j += 1
            if j > i + 1:
                yield _KEY_OP + varint_bytes(where[i][2] - first) + f.read(first, end)
                i = j
                continue
        while j < count and j - i < _OPS_PER_PIECE and not (
                j + 1 < count and _follows(where[j], where[j + 1])):
            j += 1
        yield FAST.block(b"", [], [op_bytes(ops[k]) if made[k] is None else made[k]
                                   for k in range(i, j)], b"")
        i = j


def _follows(a, b) -> bool:
    """Whether the op at `b` ((file, start, end) or None) lies right after the op at `a` in
    the same file: only its field key and shortest length between them."""
    if a is None or b is None or b[0] is not a[0]:
        return False
    n = b[2] - b[1]
    return b[1] - a[2] == _framed(n) - n


def _tail_bytes(program: Program) -> bytes:
    """The ProgramDesc fields after the blocks: version and op_version_map."""
    tail = ProgramDesc()
    if program.has_version:
        tail.version.SetInParent()
        if program.version is not None:
            tail.version.version = program.version
    if program.op_version_map is not None:
        tail.op_version_map.SetInParent()
        for name, ver in program.op_version_map:
            tail.op_version_map.pair.add(op_name=name).op_version.version = ver
    return tail.SerializePartialToString(deterministic=True)


def encode_chunks(program: Program):
    """The ProgramDesc bytes of `program` as an iterator of byte strings, block by block, to
    be written one after the other (f.writelines): the program's bytes are never all held at
    once, only one block's.

    Written field by field in field-number order, as protobuf writes a message, so that the
    vars and ops still as they were read are copied as bytes instead of being rebuilt.
    Raises ProgramFormatError (while iterating) on a model that cannot be written."""
    try:
        for b in program.blocks:
            if FAST is not None and len(b.ops) > _OPS_PER_PIECE:
                yield from _large_block_chunks(b)
                continue
            # one write per block: writing ops piece by piece costs more than joining them
            body = _block_bytes(b)
            yield _KEY_BLOCK + varint_bytes(len(body))
            yield body
            del body
        yield _tail_bytes(program)
    except (TypeError, ValueError, KeyError, EncodeError) as e:
        raise ProgramFormatError("cannot encode program: %s" % e) from None


def encode(program: Program) -> bytes:
    """Serialize a Program to ProgramDesc bytes (deterministic: the same model, the same
    bytes); see encode_chunks."""
    return b"".join(encode_chunks(program))
