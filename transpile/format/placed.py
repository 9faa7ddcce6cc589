"""Where the ops of a program read from a file are in it (protoread.py's `file`): an op then
keeps where its bytes are (opsource.InputFile) instead of the bytes."""
from __future__ import annotations

from .wire import read_varint, varint_bytes


class Placed:
    """Where each op of a block is in the file (its bytes found in order in the program's
    bytes, after their field key and length): (file, start, end), or None for an op not found
    just so (it keeps its bytes)."""
    __slots__ = ("file", "data", "cursor")

    def __init__(self, file, data: bytes, start: int):
        self.file, self.data, self.cursor = file, data, start

    def at(self, wire: bytes):
        start = self.data.find(wire, self.cursor)
        n = len(wire)
        head = b"\x22" + varint_bytes(n)            # BlockDesc.ops = 4, length-delimited
        if start < 0 or self.data[start - len(head):start] != head:
            return None
        self.cursor = start + n
        return (self.file, start, start + n)


class PlacedCut(Placed):
    """Placed for a program only read (decode's read_only), whose ops' bytes lack an attr the
    file's have (`drop`, protoread.UNREAD_ATTR): each op is looked for where the one before
    it ended (the first of a block by its first bytes), and found when the file's bytes are
    its bytes, or its bytes with that attr's entry in them: then ((file, start, end), (a, b)
    the entry's span from start)."""
    __slots__ = ("name",)

    def __init__(self, file, data: bytes, start: int, drop: str):
        super().__init__(file, data, start)
        # the start of the dropped attr's entry: its name field
        self.name = b"\x0a" + varint_bytes(len(drop.encode())) + drop.encode()

    def at(self, wire: bytes):
        data = self.data
        field = self._field(self.cursor)
        if field is None or field[1] - field[0] < len(wire):
            field = self._search(wire)
            if field is None:
                return None
        start, end = field
        n = len(wire)
        if end - start == n:
            if not data.startswith(wire, start):
                return None
            self.cursor = end
            return (self.file, start, end)
        m = data.find(self.name, start, end)
        cut = None
        for h in (2, 3, 4):         # the entry's key (OpDesc.attrs) and length before it
            if m - h >= start and data[m - h] == 0x22:
                size, i = read_varint(data, m - h + 1, end)
                if i == m and size is not None:
                    cut = (m - h, m + size)
                    break
        if cut is None:
            return None
        a, b = cut
        if b - a != end - start - n or not data.startswith(wire[:a - start], start) \
                or not data.startswith(wire[a - start:], b):
            return None
        self.cursor = end
        return ((self.file, start, end), (a - start, b - start))

    def _field(self, at: int):
        """(start, end) of the payload of the BlockDesc.ops field at `at`, or None."""
        data = self.data
        if data[at:at + 1] != b"\x22":
            return None
        size, i = read_varint(data, at + 1, len(data))
        if size is None or i + size > len(data):
            return None
        return (i, i + size)

    def _search(self, wire: bytes):
        """The op field whose payload starts with `wire`'s first bytes, after the cursor."""
        head = wire[:16]
        if len(head) < 16:
            return None
        data = self.data
        pos = data.find(head, self.cursor)
        while pos >= 0:
            for h in (2, 3, 4, 5):
                field = self._field(pos - h) if pos - h >= self.cursor else None
                if field is not None and field[0] == pos:
                    return field
            pos = data.find(head, pos + 1)
        return None
