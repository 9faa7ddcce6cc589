"""The pure-Python reader's pieces (protoread.py): a message's fields found in its bytes, and
the runs of a block's vars or ops parsed a run at a time (about RUN_BYTES each), so that no
message tree of the whole program is made. A run says where an item of it lacks a field
framework.proto requires, or where an op has no type: a Located error with the item's byte
offset and path (`blocks[0].ops[3]`), refused while reading, before any work is done on it.
"""
from __future__ import annotations

from .proto import (DecodeError, EncodeError, OpDescMsg, ProgramDesc, TextView, VarDescMsg)
from .wire import NotPlain, field_end, read_varint, varint_bytes
from .wirecheck import TYPELESS, Located, describe, lacks, offset_of, steps_of

KEY_BLOCKS = 0x0A           # ProgramDesc.blocks = 1, length-delimited
KEY_VARS = 0x1A             # BlockDesc.vars = 3
KEY_OPS = 0x22              # BlockDesc.ops = 4
RUN_BYTES = 1 << 20         # vars / ops parsed (and checked) about this many bytes at a time


def split_fields(data: bytes, start: int, end: int, keys: tuple) -> tuple[list, bytes]:
    """Walk the fields of the message data[start:end]: ([(key, field start, payload start,
    payload end)] of its length-delimited fields with one of `keys`, and the bytes of all its
    other fields, in order (a message of its own)."""
    rest: list = []
    found = list(fields(data, start, end, keys, rest))
    return found, b"".join(rest)


def fields(data: bytes, start: int, end: int, keys: tuple, rest: list):
    """split_fields' walk as it goes: (key, field start, payload start, payload end) of each
    length-delimited field with one of `keys`, the bytes of the others added to `rest` (a
    block's first run is read before the rest of the block is walked)."""
    i = start
    while i < end:
        at = i
        key = data[i]
        i += 1
        if key & 0x80:
            key, i = read_varint(data, at, end)
            if key is None:
                raise NotPlain()
        if key in keys:
            n = data[i] if i < end else 0x80
            i += 1
            if n & 0x80:
                n, i = read_varint(data, i - 1, end)
                if n is None:
                    raise NotPlain()
            j = i + n
            if j > end:
                raise NotPlain()
            yield key, at, i, j
        else:
            j = field_end(data, key, i, end)
            rest.append(data[at:j])
        i = j


def runs(data: bytes, items: list):
    """The Run of each run of vars or ops next to each other in the file, of about RUN_BYTES
    at most (items from split_fields)."""
    run: list = []
    for item in items:
        if run and (item[0] != run[0][0] or item[1] != run[-1][3]
                    or item[3] - run[0][1] > RUN_BYTES):
            yield Run(data, run)
            run = []
        run.append(item)
    if run:
        yield Run(data, run)


# BlockDesc idx = 0, parent_idx = 0: the required fields of the block a run is wrapped in
_RUN_HEAD = b"\x08\x00\x10\x00"


class Run:
    """Vars or ops next to each other in a block (`key`: KEY_VARS or KEY_OPS): `spans` their
    (key, field start, payload start, payload end), `wrapped` the bytes of a one-block
    ProgramDesc holding them (parsed at the depth they are at in the file), `wires` the
    payload of each."""

    def __init__(self, data: bytes, spans: list):
        first, last = spans[0][1], spans[-1][3]
        self.key, self.spans = spans[0][0], spans
        self.wrapped = b"".join((bytes((KEY_BLOCKS,)),
                                 varint_bytes(len(_RUN_HEAD) + last - first), _RUN_HEAD,
                                 memoryview(data)[first:last]))
        self.wires = [data[i:j] for _, _, i, j in spans]

    @property
    def field(self) -> str:
        return "vars" if self.key == KEY_VARS else "ops"

    def items(self, data: bytes, block: int, first: int) -> tuple:
        """(the messages of the run, their bytes or None), after checking that their text is
        UTF-8. The bytes are what the writer copies: the items' own bytes when they are
        protobuf's deterministic serialization of the items (Paddle writes that, with every
        required field); else None: the reader serializes each item (what an unchanged op
        or var was always written as). An item without a required field: Located (the
        run's items are the `first`... of the file's block `block`)."""
        parse(TextView, self.wrapped)
        msg = parse(ProgramDesc, self.wrapped)
        items = getattr(msg.blocks[0], self.field)
        if len(items) != len(self.wires):
            raise NotPlain()
        try:
            same = msg.SerializeToString(deterministic=True) == self.wrapped
        except EncodeError:         # a required field is missing: which, and where
            ops = self.key == KEY_OPS
            k = next(k for k, item in enumerate(items)
                     if not item.IsInitialized() or ops and not item.type)
            if items[k].IsInitialized():
                raise self._located(data, block, first, k, [], TYPELESS) from None
            missing = items[k].FindInitializationErrors()[0]
            raise self._located(data, block, first, k, steps_of(missing)[:-1],
                                lacks(missing)) from None
        return items, self.wires if same else [None] * len(self.wires)

    def refuse_typeless(self, data: bytes, block: int, first: int, msgs) -> None:
        """Raise Located at the first op of the run without a type, if there is one."""
        for k, o in enumerate(msgs):
            if not o.type:
                raise self._located(data, block, first, k, [], TYPELESS)

    def _located(self, data, block: int, first: int, k: int, inner: list, what: str):
        """Located at the run's item k (or at the message `inner` steps below it)."""
        _, at, i, j = self.spans[k]
        desc = VarDescMsg.DESCRIPTOR if self.key == KEY_VARS else OpDescMsg.DESCRIPTOR
        path = describe(ProgramDesc.DESCRIPTOR, [("blocks", block), (self.field, first + k)])
        if inner:
            path += "." + describe(desc, inner)
            at = offset_of(data, desc, inner, i, j)
        return Located("not a valid ProgramDesc: %s: %s, at byte %d of %d"
                       % (path, what, at, len(data)))


def parse(cls, data: bytes):
    try:
        return cls.FromString(data)
    except (DecodeError, RuntimeError, ValueError):
        raise NotPlain() from None
