"""An op or var as it was read: its bytes, and what the passes read of it without parsing it
again (see transpile/format/protoread.py, which makes them, and protowrite.py, which copies
the bytes of what is unchanged).

No message tree is kept: a program's bytes are its smallest form (protobuf's tree is about three
times as large). An op's other attrs are decoded on demand from its bytes parsed again.
"""
from __future__ import annotations

import array
import bisect
import copy as _copy
import os
from collections.abc import Mapping

from ..core.bytebound import ByteBound
from ..core.errors import ProgramFormatError
from ..ir.program import Attr, Op, Var, VarType
from . import wirescan
from .proto import OpDescMsg, VarDescMsg, decode_attr
from .wire import KEY_ATTRS, field_end, length_delimited, read_varint

# the attrs a split reads on nearly every op, decoded while reading (not later from the op's
# bytes): op_role (roles.role, every op of a main program) and shape (every op of a startup
# program that has one)
ROLE_ATTR = "op_role"
SHAPE_ATTR = "shape"


def var_key(v: Var) -> tuple:
    """Everything the VarDesc of `v` says, as one comparable value (_decode_var builds the
    same tuple from what it read)."""
    return (v.name, v.persistable, v.need_check_feed, v.is_parameter, v.stop_gradient,
            v.attrs, vartype_key(v.type))


def vartype_key(vt: VarType) -> tuple:
    """Everything a VarType says, as one comparable value (descs in their order: the order
    they are written in)."""
    return (vt.type, tuple((k, t.dtype, t.dims, lod) for k, (t, lod) in vt.descs.items()),
            vt.reader, vt.tuple_types)


class VarSource:
    """A var as it was read: its VarDesc bytes (protobuf's deterministic serialization of
    what was read) and what they say (var_key), to tell whether the var is still the same and
    its bytes can be copied. No message is kept: bytes are the smallest form of a var."""
    __slots__ = ("wire", "key")

    def __init__(self, wire: bytes, key: tuple):
        self.wire = wire
        self.key = key

    def raw(self) -> bytes:
        return self.wire


class InputFile:
    """A program file held open while a program read from it lives: its ops keep where their
    bytes are in it (OpSource's `at`) instead of the bytes, read again when asked for (the
    page cache has them). A program as Paddle saves it is mostly its ops' call stacks: bytes
    the split copies, never reads, and held by every process of it (a forked builder too).

    The file is read through its own descriptor, so a file replaced after it was read (a new
    file by that name) changes nothing; one written over in place is found by `changed()`
    (split_to_folder asks before it puts its output in place)."""
    __slots__ = ("fd", "path", "_stamp", "_found")

    def __init__(self, path: str, fd: int):
        self.path, self.fd = path, fd
        self._stamp = _stamp(os.fstat(fd))
        self._found: dict = {}      # text -> where it is in the file (lacks)

    @classmethod
    def open(cls, path: str):
        """The file at `path` open for reading by offset, or None where that cannot be (not a
        regular file, no os.pread): the program then keeps its bytes."""
        import stat
        if not hasattr(os, "pread"):
            return None
        try:            # (looked at before it is opened: opening a named pipe waits)
            if not stat.S_ISREG(os.stat(path).st_mode):
                return None
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                return cls(path, fd)
        except OSError:
            pass
        os.close(fd)
        return None

    def read_all(self) -> bytes:
        """The whole file, as it is now (the bytes the program is decoded from)."""
        size = os.fstat(self.fd).st_size
        return self.read(0, size)

    def read(self, start: int, end: int) -> bytes:
        """The bytes [start, end) of the file."""
        try:
            data = os.pread(self.fd, end - start, start)
        except OSError as e:
            raise ProgramFormatError("%s: cannot read it again: %s" % (self.path, e)) from None
        if len(data) != end - start:
            raise ProgramFormatError("%s: changed while it was being read (now %d bytes)"
                                     % (self.path, os.fstat(self.fd).st_size))
        return data

    def lacks(self, text: bytes, start: int, end: int) -> bool:
        """Whether the bytes [start, end) of the file lack `text`. Where each text asked about
        is in the file is found once (the file read a piece at a time), for up to
        _TEXTS_FOUND texts; others are looked for in those bytes."""
        found = self._found.get(text)
        if found is None:
            if len(self._found) >= _TEXTS_FOUND:
                return text not in self.read(start, end)
            found = self._found[text] = self._occurrences(text)
        i = bisect.bisect_left(found, start)
        return i == len(found) or found[i] > end - len(text)

    def _occurrences(self, text: bytes) -> array.array:
        """The offsets where `text` starts in the file, in order."""
        out = array.array("q")
        size = os.fstat(self.fd).st_size
        n, at = len(text), 0
        while at < size:
            piece = self.read(at, min(size, at + _PIECE + n - 1))
            i = piece.find(text)
            while 0 <= i < _PIECE:
                out.append(at + i)
                i = piece.find(text, i + 1)
            at += _PIECE
        return out

    def changed(self) -> bool:
        """Whether the file was written since it was read (size, mtime, inode)."""
        try:
            return _stamp(os.fstat(self.fd)) != self._stamp
        except OSError:
            return True

    def __reduce__(self):
        raise TypeError("an InputFile is not sent to another process (its descriptor)")

    def __del__(self, _close=os.close):
        # (os.close bound here: one still alive when the interpreter exits is closed after
        # the os module's globals are gone)
        try:
            _close(self.fd)
        except OSError:
            pass


# the texts CutOpSource.lacks has been asked about: text -> its bits' position (the first 16)
_TEXT_BITS: dict = {}

# InputFile.lacks: the texts whose places in a file it finds, and the piece read at a time
_TEXTS_FOUND = 16
_PIECE = 1 << 20

# the ops read from a file more than once whose bytes are kept, at most about 1 MiB of them (all
# let go when there are more: a split to many pservers copies some ops into every pserver, and
# would otherwise keep most of its input)
KEPT = ByteBound(1 << 20, lambda src: setattr(src, "_wire", None))


def forget_kept() -> None:
    """Let go of the bytes kept of ops read from a file (read again when next asked for)."""
    KEPT.forget()


def _stamp(st) -> tuple:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def changed_inputs(*programs) -> list:
    """The paths of the files `programs` keep their ops' bytes in (InputFile) that were
    written since they were read."""
    files = {}
    for prog in programs:
        for b in () if prog is None else prog.blocks:
            for op in b.ops:
                src = op.source
                at = src._at if src is not None else None
                if at is not None:
                    files[id(at[0])] = at[0]
    return sorted(f.path for f in files.values() if f.changed())


def serialized(msg) -> bytes:
    """Protobuf's deterministic serialization of `msg` (the reader has checked its required
    fields)."""
    return msg.SerializePartialToString(deterministic=True)


class OpSource:
    """An op as it was read: its OpDesc bytes, its slots as decoded, and its attrs, decoded
    one by one on demand (see program.Op) from a message parsed again from the bytes.

    The bytes are protobuf's deterministic serialization of what was read (the file's own
    bytes when they are that, as Paddle writes them), so the writer copies them as they are.
    Only what the passes read on nearly every op is decoded while reading: type, slots, the
    attr names (a tuple shared by the ops with the same names, with the name -> position map),
    op_role and shape. No message is kept: other attrs are decoded from the bytes parsed again
    (and kept decoded)."""
    __slots__ = ("_wire", "_at", "_reads", "type", "inputs", "outputs",
                 "is_target", "names", "_positions", "block_attrs", "_role", "_index",
                 "_decoded", "_attrs_raw", "patched")

    def __init__(self, wire: bytes | tuple, op_type: str, slots: tuple, is_target,
                 layout: tuple, block_attrs: tuple, role: Attr | None, decoded: dict | None):
        # the op's bytes, or where they are: (InputFile, start, end) (`_at`), read again when
        # asked for, and kept from the second time on (an op a split writes again and again:
        # a pserver's copies of an update or an init)
        if wire.__class__ is tuple:
            self._wire, self._at = None, wire
        else:
            self._wire, self._at = wire, None
        self._reads = 0
        self.type = op_type             # the Op's own string (msg.type would make another)
        # the slots as read, (inputs, outputs): dicts and lists no Op shares
        self.inputs, self.outputs = slots
        self.is_target = is_target
        # (the attr names in file order (no name twice), attr name -> its position in the
        # OpDesc's attrs): a pair shared by the ops with the same names
        self.names, self._positions = layout
        self.block_attrs = block_attrs  # names of the BLOCK / BLOCKS attrs
        self._role = role               # the op_role Attr (shared), None when absent
        self._index = None
        self._decoded = decoded         # attr name -> Attr, made on first use
        self._attrs_raw = None          # attrs_bytes(): (start, end) in `wire`, or the bytes
        self.patched = None             # protowrite's {patch: the attrs' bytes} of copies

    def _from_file(self) -> bytes:
        """The op's bytes read from its file (an op that keeps where they are)."""
        f, start, end = self._at
        return f.read(start, end)

    @property
    def wire(self) -> bytes:
        """The OpDesc bytes as read (from the file when the op keeps where they are)."""
        w = self._wire
        if w is None:
            w = self._from_file()
            self._reads += 1
            if self._reads > 1 and KEPT.keep(self, len(w)):
                self._wire = w
        return w

    def _slice(self, a: int, b: int) -> bytes:
        """wire[a:b], read alone where the op keeps where its bytes are (the first time)."""
        w = self._wire
        if w is None and not self._reads:
            self._reads = 1
            f, start, _ = self._at
            return f.read(start + a, start + b)
        return self.wire[a:b]

    def lacks(self, text: bytes) -> bool:
        """Whether the op's bytes lack `text` (Op.lacks_text asks it of every op, more than
        once): for an op that keeps where its bytes are, told by where the text is in the file
        (InputFile.lacks), without reading the op."""
        w = self._wire
        if w is not None:
            return text not in w
        f, start, end = self._at
        return f.lacks(text, start, end)

    def _message(self, counted: bool = True):
        """The OpDesc parsed from the op's bytes. The last few parsed are kept, and only
        they: a pass reads the attrs it wants of one op (a diff: of two) one after the
        other. Not `counted`: bytes read from the file for it are not counted as a read of
        the op (`wire`), so the op never keeps them for it (peek)."""
        msg = _PARSED.get(self)
        if msg is None:
            if len(_PARSED) >= _PARSED_KEPT:
                del _PARSED[next(iter(_PARSED))]
            w = self.wire if counted or self._wire is not None else self._from_file()
            msg = _PARSED[self] = OpDescMsg.FromString(w)
        return msg

    @property
    def index(self) -> "_AttrIndex":
        """attr name -> its Attr message, in file order (made on first use, then kept: a view
        that holds no message, see _AttrIndex)."""
        if self._index is None:
            self._index = _AttrIndex(self)
        return self._index

    def attr_spans(self) -> tuple:
        """((start, end), ...) of each OpDesc.attrs entry (key and length included) in the
        op's bytes, in file order. Found again when asked (by the compiled reader, a scan of
        the op's bytes), not kept: what the writer needs of them is kept where it is made
        (attrs_bytes' span, protowrite's patched attrs), and a tuple per op read held to the
        end of a split was megabytes."""
        return _attr_spans(self.wire)

    def attr_chunks(self) -> list:
        """[(name, the attr's OpDesc.attrs entry as bytes)] in file order, cut out of the op's
        bytes (each entry is protobuf's serialization of the attr, as the op's bytes are)."""
        wire = self.wire
        return [(name, wire[a:b]) for name, (a, b) in zip(self.names, self.attr_spans())]

    def attrs_bytes(self) -> bytes:
        """All the OpDesc.attrs entries, as attr_chunks would give them one after the other
        (one slice of the op's bytes: protobuf writes the attrs next to each other)."""
        where = self._attrs_raw
        if where is None:
            spans = self.attr_spans()
            if not spans:
                where = b""
            elif all(b == c for (_, b), (c, _) in zip(spans, spans[1:])):
                where = (spans[0][0], spans[-1][1])
            else:
                where = b"".join(raw for _, raw in self.attr_chunks())
            self._attrs_raw = where
        if where.__class__ is tuple:
            return self._slice(where[0], where[1])
        return where

    def raw(self) -> bytes:
        """The OpDesc bytes as read."""
        return self.wire

    def place(self):
        """(InputFile, start, end): where the op's bytes (raw()) are in its file, or None
        (it holds them)."""
        return self._at

    def size(self) -> int:
        """len(raw()), without reading them from the file where the op keeps where they are."""
        w = self._wire
        if w is None:
            _, start, end = self._at
            return end - start
        return len(w)

    def get(self, name: str):
        """The Attr `name` (shared: callers must not change it), or None."""
        if name == ROLE_ATTR:
            return self._role
        decoded = self._decoded
        if decoded is None:
            decoded = self._decoded = {}
        a = decoded.get(name)
        if a is None:
            pos = self._positions.get(name)
            if pos is None:
                return None
            a = decoded[name] = decode_attr(self._message().attrs[pos])[1]
        return a

    def peek(self, name: str):
        """get(name) without keeping what decoding it makes (an Attr of its own, made for this
        call; the op's bytes read for it neither kept nor counted as a read, see `wire`): for
        an attr read of each of thousands of ops (a trainer's epmaps)."""
        if name == ROLE_ATTR:
            return self._role
        if self._decoded is not None and name in self._decoded:
            return self._decoded[name]
        pos = self._positions.get(name)
        if pos is None:
            return None
        return decode_attr(self._message(counted=False).attrs[pos])[1]

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
        """`op` still is what was read (its bytes can be written as they are)."""
        if op.type != self.type or op.is_target != self.is_target or op.dup_attrs \
                or op.attr_patch or op.inputs != self.inputs or op.outputs != self.outputs:
            return False
        if not op.attrs_decoded:
            return True
        attrs = op.attrs
        return tuple(attrs) == self.names and all(self.get(n) == a for n, a in attrs.items())


class CutOpSource(OpSource):
    """An op of a program only read (protoread.decode's read_only) that keeps where its bytes
    are in its file, where they hold an attr the op leaves out (protoread.UNREAD_ATTR, the
    call stack): `_cut`, (a, b), that attr's entry in the file's bytes of the op (from its
    start), cut out whenever they are read. The op's bytes are what the program read without
    its file has: protobuf's serialization of the op without that attr."""
    __slots__ = ("_cut", "_lacks")

    def __init__(self, at: tuple, cut: tuple, *rest):
        super().__init__(at, *rest)
        self._cut = cut
        self._lacks = 0         # lacks(): two bits per text asked about (asked, lacks it)

    def _from_file(self) -> bytes:
        f, start, end = self._at
        w = f.read(start, end)
        a, b = self._cut
        return w[:a] + w[b:]

    def _slice(self, a: int, b: int) -> bytes:
        return self.wire[a:b]

    def lacks(self, text: bytes) -> bool:
        """Whether the op's bytes lack `text`, remembered per text (the file's bytes are not
        the op's: InputFile.lacks would see the text in the attr cut out, or across the cut)."""
        w = self._wire
        if w is not None:
            return text not in w
        bit = _TEXT_BITS.get(text)
        if bit is None:
            if len(_TEXT_BITS) >= 16:
                return text not in self._from_file()
            bit = _TEXT_BITS[text] = 2 * len(_TEXT_BITS)
        known = self._lacks
        if not known >> bit & 1:
            known |= (1 | (text not in self._from_file()) << 1) << bit
            self._lacks = known
        return bool(known >> (bit + 1) & 1)

    def place(self):
        return None             # (the file's bytes are not the op's: the cut is in them)

    def size(self) -> int:
        w = self._wire
        if w is None:
            _, start, end = self._at
            a, b = self._cut
            return end - start - (b - a)
        return len(w)


# OpSource -> its OpDesc message, for the last _PARSED_KEPT OpSource._message parsed
_PARSED: dict = {}
_PARSED_KEPT = 4


def forget_parsed() -> None:
    """Let go of the messages kept of the last ops parsed (OpSource._message), with the
    program they are of (a streamed check's pservers: a listen_and_serv's is large)."""
    _PARSED.clear()


class _AttrIndex(Mapping):
    """An op's attrs as read (OpSource.index): attr name -> its Attr message, in file order.
    The messages are taken from the op's bytes parsed when they are read (OpSource._message
    keeps the last few), so that a program whose every op was looked at this way (a diff)
    does not hold a message tree for each."""
    __slots__ = ("_src",)

    def __init__(self, src: OpSource):
        self._src = src

    def __getitem__(self, name: str):
        src = self._src
        return src._message().attrs[src._positions[name]]

    def __iter__(self):
        return iter(self._src.names)

    def __len__(self) -> int:
        return len(self._src.names)

    def __contains__(self, name) -> bool:
        return name in self._src._positions

    def values(self) -> list:
        """The Attr messages in file order (a list, made in one call)."""
        return self._src._message().attrs[:]


def _attr_spans(wire: bytes) -> tuple:
    """((start, end), ...) of the OpDesc.attrs fields (key and length included) of OpDesc
    bytes, in order (by the compiled reader where it is built and the bytes are protobuf's
    own serialization; else walked here)."""
    if wirescan.FAST is not None:
        found = wirescan.FAST.spans(wire, KEY_ATTRS)
        if found is not None:
            return found
    return _walked_attr_spans(wire)


def _walked_attr_spans(wire: bytes) -> tuple:
    out = []
    i, end = 0, len(wire)
    while i < end:
        at = i
        key, i = read_varint(wire, i, end)
        j = field_end(wire, key, i, end)
        if key == KEY_ATTRS:
            out.append((at, j))
        i = j
    return tuple(out)
