"""The reader's compiled fast path (transpile/format/wirescan_c.c) against its pure-Python path:
the same program read from every corpus program, from programs whose bytes are edited the ways
protobuf would not write them, and the same split written by both.

The scanner may take a block only when every var and op in it is protobuf's own serialization
(the bytes the pure-Python reader keeps as the item's wire): the edits below are checked
against protobuf itself (parse, serialize again, compare).
"""
import glob
import os
import random
import shutil
import subprocess
import sys

import pytest
from google.protobuf import unknown_fields
from hypothesis import HealthCheck, given, settings, strategies as st

from transpile.core.errors import ProgramFormatError
from transpile.format import protoread, wirescan
from transpile.format.proto import (OpDescMsg, ProgramDesc, VarDescMsg, EncodeError,
                                    text_is_utf8)
from transpile.format.wire import varint_bytes

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FAST = wirescan.FAST
needs_fast = pytest.mark.skipif(FAST is None, reason="the C fast path is not built here")

PROGRAMS = sorted(glob.glob(os.path.join(HERE, "corpus", "*", "*", "*.pb"))
                  + glob.glob(os.path.join(ROOT, "samples", "*", "*.pb")))


# the reader's fast path and the writer's (tests/test_wirewrite.py): module, its C source
FAST_PATHS = [("wirescan", "wirescan_c.c"), ("protowrite", "wirewrite_c.c"),
              ("varwrite", "wirewrite_c.c")]


@pytest.mark.parametrize("module,source", FAST_PATHS)
def test_the_fast_path_is_built_where_there_is_a_c_compiler(module, source):
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler: the pure-Python reader and writer run alone")
    if os.environ.get(wirescan.PURE_ENV, "") not in ("", "0"):
        pytest.skip("%s is set" % wirescan.PURE_ENV)
    fast = getattr(__import__("transpile.format." + module, fromlist=["FAST"]), "FAST")
    assert fast is not None, "transpile/format/%s was not built by the install, or was " \
        "built from an older source (make install builds it again)" % source


def test_a_compiled_module_built_from_an_older_source_is_not_used(monkeypatch):
    """A module whose INTERFACE is not its source's (an editable install whose C source
    changed since it was built) is left alone: the pure-Python path runs (the same bytes)."""
    import importlib
    import types
    stale = types.ModuleType("wirescan_c")
    stale.INTERFACE = wirescan.INTERFACES["wirescan_c"] - 1
    monkeypatch.setattr(importlib, "import_module", lambda name, package=None: stale)
    assert wirescan.compiled("wirescan_c") is None
    stale.INTERFACE += 1
    assert wirescan.compiled("wirescan_c") is stale


@pytest.mark.parametrize("module,source", FAST_PATHS)
def test_the_environment_variable_turns_the_fast_path_off(module, source):
    code = "from transpile.format import %s; print(%s.FAST is None)" % (module, module)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ, **{wirescan.PURE_ENV: "1"}), check=True).stdout
    assert out.strip() == "True"


# ----------------------------------------------------------------------------------------------
# what the reader made of a program, as one comparable value

def _snapshot(prog) -> list:
    out = [(prog.version, prog.has_version, prog.op_version_map)]
    for b in prog.blocks:
        out.append(("block", b.idx, b.parent_idx, b.forward_block_idx))
        for name, v in b.vars.items():
            src = v.source
            out.append((name, repr(v.type), v.persistable, v.need_check_feed, v.is_parameter,
                        v.stop_gradient, v.attrs, type(src).__name__,
                        None if src is None else (src.wire, src.key)))
        for o in b.ops:
            s = o.source
            read = None if s is None else (type(s).__name__, s.wire, s.names, s._positions,
                                           s.block_attrs, repr(s._role), repr(s._decoded),
                                           s.inputs, s.outputs, s.inputs is o.inputs)
            out.append((o.type, o.inputs, o.outputs, o.is_target, o.dup_attrs, read,
                        repr(o.attrs)))
    return out


def _read(data: bytes, fast, read_only=False) -> tuple:
    """(snapshot or the error, how many blocks the scanner took); `read_only`: decode's"""
    taken = [0]
    real = fast

    class Counting:
        @staticmethod
        def block(*args):
            got = real.block(*args)
            taken[0] += got is not None
            return got

        forget = real.forget if real is not None else None
        vars_of = getattr(real, "vars_of", None)        # the Vars made in C as well

    saved = wirescan.FAST
    wirescan.FAST = Counting if fast is not None else None
    try:
        try:
            return _snapshot(protoread.decode(data, read_only)), taken[0]
        except ProgramFormatError as e:
            return ("error", str(e)), taken[0]
    finally:
        wirescan.FAST = saved


@needs_fast
@pytest.mark.slow
def test_every_corpus_program_reads_the_same_both_ways():
    taken = 0
    for path in PROGRAMS:
        with open(path, "rb") as f:
            data = f.read()
        fast, n = _read(data, FAST)
        assert fast == _read(data, None)[0], path
        assert _read(data, FAST, True)[0] == _read(data, None, True)[0], path
        taken += n
    assert len(PROGRAMS) > 300 and taken > len(PROGRAMS)   # the scanner did read them


DROP = protoread.UNREAD_ATTR


@pytest.mark.parametrize("fast", [pytest.param(True, marks=needs_fast), False],
                         ids=["fast", "python"])
def test_a_program_read_only_reads_the_same_but_what_it_leaves_out(fast):
    """decode(data, read_only=True): every op read as if it had no op_callstack (its names,
    its bytes: protobuf's serialization of the op without it), each of its other attrs and
    its slots as ever, the slots its OpSource's own; no var keeps a source."""
    saved = wirescan.FAST
    wirescan.FAST = FAST if fast else None
    dropped = 0
    try:
        for path in PROGRAMS[::9]:
            with open(path, "rb") as f:
                data = f.read()
            whole, lean = protoread.decode(data), protoread.decode(data, read_only=True)
            assert all(v.source is None for b in lean.blocks for v in b.vars.values())
            assert [list(b.vars.items()) for b in lean.blocks] == \
                [list(b.vars.items()) for b in whole.blocks]
            ops = [(a, b) for x, y in zip(whole.blocks, lean.blocks) for a, b in zip(x.ops, y.ops)]
            for a, b in ops:
                names = [n for n in a.attr_names() if n != DROP]
                dropped += len(names) < len(a.attr_names())
                assert b.attr_names() == names and not b.has_attr(DROP)
                assert all(a.attr(n) == b.attr(n) for n in names)
                assert (a.inputs, a.outputs) == (b.inputs, b.outputs)
                if a.source is None:                    # an attr name twice: read eagerly
                    assert b.source is None
                    continue
                assert a.source.inputs is not a.inputs and a.source.inputs == a.inputs
                assert b.source.inputs is b.inputs and b.source.outputs is b.outputs
                msg = OpDescMsg.FromString(a.source.wire)
                keep = [x for x in msg.attrs if x.name != DROP]
                del msg.attrs[:]
                msg.attrs.extend(keep)
                assert b.source.wire == msg.SerializeToString(deterministic=True)
            assert [len(x.ops) for x in whole.blocks] == [len(y.ops) for y in lean.blocks]
    finally:
        wirescan.FAST = saved
    assert dropped > 100


# ----------------------------------------------------------------------------------------------
# bytes protobuf would not write: edited at the wire level

def _fields(data: bytes) -> list:
    """[(number, wire type, value bytes)] of a message (value: the varint's bytes, the fixed
    bytes, or a length-delimited payload)."""
    out, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        wt = key & 7
        if wt == 0:
            j = i
            _, i = _varint(data, i)
            out.append((key >> 3, wt, data[j:i]))
        elif wt in (1, 5):
            n = 8 if wt == 1 else 4
            out.append((key >> 3, wt, data[i:i + n]))
            i += n
        elif wt == 2:
            n, i = _varint(data, i)
            if i + n > len(data):
                raise ValueError("past the end")
            out.append((key >> 3, wt, data[i:i + n]))
            i += n
        else:
            raise ValueError("wire type %d" % wt)
    if i > len(data):
        raise ValueError("past the end")
    return out


def _varint(data: bytes, i: int) -> tuple:
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _encode(fields: list) -> bytes:
    out = []
    for number, wt, value in fields:
        out.append(varint_bytes(number << 3 | wt))
        out.append(varint_bytes(len(value)) + value if wt == 2 else value)
    return b"".join(out)


def _padded(n: int, extra: int = 1) -> bytes:
    """varint `n` in more bytes than it needs"""
    raw = bytearray(varint_bytes(n))
    raw[-1] |= 0x80
    raw += b"\x80" * (extra - 1) + b"\x00"
    return bytes(raw)


_VALUES = [b"\x02", b"\x40", b"\x63", _padded(0), varint_bytes(1 << 31), varint_bytes(2**32 - 1),
           varint_bytes(2**63), varint_bytes(-1), b"\xff\xff\xff\xff\x0f", varint_bytes(-2**31),
           varint_bytes(-2**31 - 1), b"\x01", b"\x00"]
_TEXTS = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"a\xe2\x82", b"\xe2\x82\xac",
          b"", "é".encode()]


def _mutate(msg: bytes, rnd: random.Random, depth: int = 0) -> bytes:
    """`msg` with one edit, in itself or (recursively) in one of its submessages (a byte
    replaced, where it does not read as fields)."""
    if not _parses(msg):
        at = rnd.randrange(len(msg) + 1)
        return msg[:at] + bytes([rnd.randrange(256)]) + msg[at + 1:]
    fields = _fields(msg)
    nested = [k for k, (_, wt, v) in enumerate(fields) if wt == 2 and v and _parses(v)]
    if nested and depth < 3 and rnd.random() < 0.5:
        k = rnd.choice(nested)
        number, wt, value = fields[k]
        fields[k] = (number, wt, _mutate(value, rnd, depth + 1))
        return _encode(fields)
    kind = rnd.choice(["swap", "dup", "drop", "value", "text", "unknown", "packed", "wiretype",
                       "long_key", "long_len", "raw"])
    if not fields:
        kind = "unknown"
    k = rnd.randrange(len(fields)) if fields else 0
    if kind == "swap" and len(fields) > 1:
        k = min(k, len(fields) - 2)
        fields[k], fields[k + 1] = fields[k + 1], fields[k]
    elif kind == "dup":
        fields.insert(k, fields[k])
    elif kind == "drop":
        del fields[k]
    elif kind == "value":
        ints = [j for j, f in enumerate(fields) if f[1] == 0] or [k]
        j = rnd.choice(ints)
        fields[j] = (fields[j][0], 0, rnd.choice(_VALUES))
    elif kind == "text":
        texts = [j for j, f in enumerate(fields) if f[1] == 2] or [k]
        j = rnd.choice(texts)
        fields[j] = (fields[j][0], 2, rnd.choice(_TEXTS))
    elif kind == "unknown":
        fields.insert(k, (rnd.choice([9, 30, 63, 64, 1000]), 0, b"\x01"))
    elif kind == "packed":
        ints = [f for f in fields if f[1] == 0]
        if ints:
            number = ints[0][0]
            run = b"".join(f[2] for f in fields if f[0] == number)
            fields = [f for f in fields if f[0] != number]
            fields.insert(min(k, len(fields)), (number, 2, run))
    elif kind == "wiretype":
        number, wt, value = fields[k]
        fields[k] = (number, 5 if wt != 5 else 0, value[:4].ljust(4, b"\x00") if wt != 5
                     else b"\x01")
    elif kind in ("long_key", "long_len", "raw"):
        out = []
        for j, (number, wt, value) in enumerate(fields):
            key = varint_bytes(number << 3 | wt)
            if j == k and kind == "long_key":
                key = _padded(number << 3 | wt)
            if wt == 2:
                n = varint_bytes(len(value))
                if j == k and kind == "long_len":
                    n = _padded(len(value))
                value = n + value
            out.append(key + value)
        data = b"".join(out)
        if kind == "raw":
            at = rnd.randrange(len(data) + 1)
            data = data[:at] + bytes([rnd.randrange(256)]) + data[at + 1:]
        return data
    return _encode(fields)


def _parses(data: bytes) -> bool:
    try:
        _fields(data)
    except (IndexError, ValueError):
        return False
    return True


def _protobuf_writes_it(cls, payload: bytes, wrapped: bytes) -> bool:
    """Whether protobuf reads `payload` as a `cls`, finds no field the schema lacks (or one of
    the wrong wire type, or an enum value it does not define: protobuf keeps those as unknown
    fields) and writes exactly it back, all its text UTF-8 (`wrapped`: the item in a one-block
    program, for the text check), and, an op, it has a type (the reader refuses an op without
    one: the scanner leaves it to the Python reader, which says where)."""
    try:
        msg = cls.FromString(payload)
        return msg.SerializeToString(deterministic=True) == payload and text_is_utf8(wrapped) \
            and not _unknown_fields(msg) and (cls is not OpDescMsg or msg.type != "")
    except (Exception, EncodeError):
        return False


def _unknown_fields(msg) -> bool:
    if len(unknown_fields.UnknownFieldSet(msg)):
        return True
    for fd, value in msg.ListFields():
        if fd.message_type is not None:
            values = value if wirescan.label_of(fd)[0] else [value]
            if any(_unknown_fields(v) for v in values):
                return True
    return False


def _one_block(items: list) -> bytes:
    """A ProgramDesc with one block holding `items` ([(BlockDesc field number, bytes)])."""
    block = _encode([(1, 0, b"\x00"), (2, 0, varint_bytes(-1))]
                    + [(number, 2, value) for number, value in items])
    return _encode([(1, 2, block)])


def _sample_items() -> list:
    """The vars and ops of two bundled samples' main programs (a few of each kind)."""
    items = []
    for name in ("mlp_sgd", "ctr_sparse_adam"):
        with open(os.path.join(ROOT, "samples", name, "main.pb"), "rb") as f:
            prog = ProgramDesc.FromString(f.read())
        block = prog.blocks[0]
        items += [(3, v.SerializeToString(deterministic=True)) for v in block.vars[:12]]
        items += [(4, o.SerializeToString(deterministic=True)) for o in block.ops[:40]]
    return items


_ITEMS = _sample_items()


@needs_fast
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), edits=st.integers(1, 3))
def test_the_scanner_takes_exactly_what_protobuf_writes_and_reads_it_the_same(seed, edits):
    rnd = random.Random(seed)
    picked = rnd.sample(range(len(_ITEMS)), 3)
    items = [_ITEMS[i] for i in sorted(picked)]
    number, payload = items[0]
    for _ in range(edits):
        payload = _mutate(payload, rnd)
    items[0] = (number, payload)
    data = _one_block(items)
    cls = OpDescMsg if number == 4 else VarDescMsg
    start = 2 if data[1] < 0x80 else 3 if data[2] < 0x80 else 4
    taken = FAST.block(data, start, len(data)) is not None
    assert taken == _protobuf_writes_it(cls, payload, _one_block([(number, payload)]))
    assert _read(data, FAST)[0] == _read(data, None)[0]
    assert _read(data, FAST, True)[0] == _read(data, None, True)[0]


@needs_fast
def test_the_edits_make_both_kinds_of_bytes():
    """The property above sees both outcomes: bytes the scanner takes and bytes it leaves."""
    rnd = random.Random(7)
    seen = set()
    for _ in range(200):
        number, payload = rnd.choice(_ITEMS)
        payload = _mutate(payload, rnd)
        data = _one_block([(number, payload)])
        seen.add(FAST.block(data, 2 if data[1] < 0x80 else 3, len(data)) is not None)
    assert seen == {True, False}


@needs_fast
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), edits=st.integers(0, 3))
def test_an_ops_attr_spans_are_the_walks_either_way(seed, edits):
    """The compiled spans() of an op's attrs: the Python walk's, on the samples' ops and on
    edited bytes; where it answers None (bytes protobuf would not write) the walk is what
    opsource uses, raising as it always did."""
    from transpile.format import opsource
    from transpile.format.wire import KEY_ATTRS, NotPlain
    rnd = random.Random(seed)
    _, payload = rnd.choice([item for item in _ITEMS if item[0] == 4])
    for _ in range(edits):
        payload = _mutate(payload, rnd)
    try:
        walked = opsource._walked_attr_spans(payload)
    except NotPlain:
        walked = NotPlain
    found = FAST.spans(payload, KEY_ATTRS)
    if found is not None:
        assert found == walked
    if walked is NotPlain:
        assert found is None
        with pytest.raises(NotPlain):
            opsource._attr_spans(payload)
    else:
        assert opsource._attr_spans(payload) == walked
    if edits == 0:
        assert found is not None and len(found) > 0


# ----------------------------------------------------------------------------------------------
# a whole split, both ways

@needs_fast
@pytest.mark.parametrize("case", ["classic/basic", "paddlerec-fleet/" + "dnn_async"])
def test_a_split_is_byte_identical_both_ways(case, tmp_path):
    d = os.path.join(HERE, "corpus", case)
    if not os.path.isdir(d):
        d = sorted(glob.glob(os.path.join(HERE, "corpus", case.split("/")[0], "*")))[0]
    outs = []
    for pure in ("0", "1"):
        out = tmp_path / ("out" + pure)
        args = [sys.executable, os.path.join(ROOT, "cli.py"), "split", os.path.join(d, "main.pb"),
                "--cluster", os.path.join(d, "cluster.yaml"), "--trainer-id", "all",
                "--out", str(out)]
        if os.path.exists(os.path.join(d, "startup.pb")):
            args[4:4] = ["--startup", os.path.join(d, "startup.pb")]
        subprocess.run(args, check=True, capture_output=True,
                       env=dict(os.environ, **{wirescan.PURE_ENV: pure}))
        outs.append({p.relative_to(out).as_posix(): p.read_bytes()
                     for p in sorted(out.rglob("*")) if p.is_file()})
    assert outs[0] == outs[1] and len(outs[0]) > 3


@needs_fast
def test_a_var_declared_twice_is_refused_both_ways():
    """Two VarDescs of one name in a block: the scanner's path says what protobuf's does
    (the block, the var), whether the second is a plain var or one with attrs."""
    for attrs in (False, True):
        prog = ProgramDesc()
        block = prog.blocks.add(idx=0, parent_idx=-1)
        for _ in range(2):
            v = block.vars.add(name="x")
            v.type.type = 7                     # LOD_TENSOR
            v.type.lod_tensor.tensor.data_type = 5
            v.type.lod_tensor.tensor.dims.append(3)
            if attrs:
                a = v.attrs.add(name="k", type=0)
                a.i = 1
        data = prog.SerializeToString(deterministic=True)
        fast, taken = _read(data, FAST)
        assert taken == 1 and fast == _read(data, None)[0] == \
            ("error", "block 0 declares var 'x' twice")
