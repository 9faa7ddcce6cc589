"""A large block of a program only read whose ops are in its file (check's trainers) is scanned
a window at a time (protoread._decode_windows, wirescan_c.block's `limit`): what is read is
what the whole block scanned at once gives, whatever the window, the vars a VarTable or a dict
as ever."""
import glob
import os

import pytest

from transpile.format import programio, protoread, wirescan

HERE = os.path.dirname(os.path.abspath(__file__))
FAST = wirescan.FAST
needs_fast = pytest.mark.skipif(FAST is None, reason="the C fast path is not built here")
# the largest programs of the corpus (Paddle-made, call stacks kept)
LARGEST = sorted(glob.glob(os.path.join(HERE, "corpus", "*", "*", "*.pb")),
                 key=os.path.getsize)[-3:]


def _items(scanned) -> list:
    rest, var_items, op_items = scanned[:3]
    return [rest, var_items, [list(o) if isinstance(o, tuple) else o for o in op_items]]


@needs_fast
@pytest.mark.parametrize("limit", [1, 100, 5000])
def test_windows_of_a_block_hold_the_whole_block(limit):
    with open(LARGEST[-1], "rb") as f:
        data = f.read()
    start, end = 0, len(data)
    blocks = protoread.split_fields(data, start, end, (protoread.KEY_BLOCKS,))[0]
    _, _, start, end = blocks[0]
    drop = protoread.UNREAD_ATTR
    whole = _items(FAST.block(data, start, end, drop, True))
    rest, var_items, op_items = b"", [], []
    at, windows = start, 0
    while at < end:
        got = FAST.block(data, at, end, drop, True, limit)
        assert got[3] > at and (got[3] - at >= limit or got[3] == end)
        part = _items(got)
        rest += part[0]
        var_items += part[1]
        op_items += part[2]
        at, windows = got[3], windows + 1
    assert at == end and windows > 1
    assert [rest, var_items, op_items] == whole


def _read(path, window, monkeypatch, table_min=None):
    monkeypatch.setattr(protoread, "WINDOW", window)
    if table_min is not None:
        monkeypatch.setattr(protoread, "TABLE_MIN", table_min)
    used = [0]
    real = protoread._decode_windows

    def counted(*args):
        used[0] += 1
        return real(*args)
    monkeypatch.setattr(protoread, "_decode_windows", counted)
    prog = programio.load(path, read_only=True, in_file=True)
    out = []
    for b in prog.blocks:
        out.append((b.idx, b.parent_idx, type(b.vars).__name__, list(b.vars.items())))
        out += [(o.type, o.inputs, o.outputs, o.is_target, o.source.wire, o.source.names,
                 repr(o.attrs)) for o in b.ops]
    return out, used[0]


@needs_fast
@pytest.mark.parametrize("table_min", [None, 8])
def test_a_large_block_read_window_by_window_is_read_the_same(monkeypatch, table_min):
    for path in LARGEST:
        whole, used = _read(path, 1 << 40, monkeypatch, table_min)
        assert used == 0
        windowed, used = _read(path, 512, monkeypatch, table_min)
        assert used >= 1
        assert windowed == whole, path
