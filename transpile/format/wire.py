"""Protobuf wire-format primitives the reader and the writer share: varints, field ends,
length-delimited fields (where a message's bytes go wrong: wirecheck.py).

Plain Python over bytes (no protobuf): a key is `field number << 3 | wire type`.
"""
from __future__ import annotations

# OpDesc.attrs = 4, length-delimited
KEY_ATTRS = 0x22


def read_varint(data, i, end):
    """(value, index after it) of the varint at data[i]; (None, index) when it runs past
    `end` or over 64 bits."""
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


def varint_bytes(n: int) -> bytes:
    """The varint encoding of `n` (a negative int32 / int64: ten bytes of two's complement)."""
    if 0 <= n < 0x80:
        return _SMALL_VARINTS[n]
    if n < 0:
        n += 1 << 64            # int32 / int64 fields: ten bytes of two's complement
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_VARINTS = [bytes([i]) for i in range(0x80)]


def length_delimited(key: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its key, the payload's length, the payload."""
    return key + varint_bytes(len(payload)) + payload


class NotPlain(Exception):
    """The bytes are not as Paddle writes them (malformed, groups, unknown fields, text that
    is not UTF-8...): left to protoread's reading as one message tree."""


def field_end(data: bytes, key, i: int, end: int) -> int:
    """Where the field with `key` whose payload starts at i ends; NotPlain on malformed
    bytes and on groups (which Paddle never writes)."""
    wtype = key & 7 if key is not None else -1
    if wtype == 0:
        value, i = read_varint(data, i, end)
        if value is None:
            raise NotPlain()
        return i
    if wtype == 2:
        n, i = read_varint(data, i, end)
        if n is None or i + n > end:
            raise NotPlain()
        return i + n
    if wtype in (1, 5):
        i += 8 if wtype == 1 else 4
        if i > end:
            raise NotPlain()
        return i
    raise NotPlain()
