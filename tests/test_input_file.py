"""A program read from a .pb file keeps where its ops' bytes are in the file, not the bytes
(format/opsource.py InputFile): what is written is the same, the file is read again only where
it must be, and a file written over while it is split is an error, not a wrong split."""
import os
import shutil

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from transpile.check.edges import _peeked
from transpile.check.loading import load_program_raw
from transpile.format import opsource, programio, protoread, protowrite
from transpile.split import split

from golden import case_dirs, load_case

CLASSIC = case_dirs("classic")[0]


def _copy(tmp_path, case=CLASSIC):
    for name in ("main.pb", "startup.pb", "cluster.yaml"):
        shutil.copy(os.path.join(case, name), tmp_path / name)
    return str(tmp_path / "main.pb"), str(tmp_path / "startup.pb"), str(tmp_path / "cluster.yaml")


def _sources(prog):
    return [op.source for b in prog.blocks for op in b.ops if op.source is not None]


def test_ops_read_from_a_file_keep_where_their_bytes_are_and_write_the_same(tmp_path):
    path, _, _ = _copy(tmp_path)
    with open(path, "rb") as f:
        data = f.read()
    prog = programio.load(path, in_file=True)
    sources = _sources(prog)
    assert sources and all(s._wire is None and s._at for s in sources)
    assert protowrite.encode(prog) == protowrite.encode(protoread.decode(data)) == data
    # read again for each ask, kept from the second on (up to a bound)
    opsource.forget_kept()
    s = sources[0]
    s._reads = 0
    first = s.wire
    assert s._wire is None and s.wire == first and s._wire == first
    opsource.forget_kept()
    assert s._wire is None and s.wire == first
    s.wire
    assert s._wire is not None and opsource.KEPT.holders
    protowrite.release_caches()             # (split's, once every program is written)
    assert s._wire is None and not opsource.KEPT.holders and s.wire == first


def test_bytes_in_memory_and_a_program_only_read_keep_their_bytes(tmp_path):
    """Only split's inputs are left in their files (in_file): a program loaded through the
    library API may be written back over its own file."""
    path, _, _ = _copy(tmp_path)
    with open(path, "rb") as f:
        data = f.read()
    for prog in (protoread.decode(data), programio.load(path, read_only=True),
                 programio.load(path)):
        assert all(s._wire is not None for s in _sources(prog))
    prog = programio.load(path)
    with open(path, "wb") as f:                 # truncated before the program is encoded
        f.write(programio.to_bytes(prog))
    with open(path, "rb") as f:
        assert f.read() == data


def test_a_program_only_read_keeps_where_its_ops_are_less_the_attr_it_leaves_out(tmp_path):
    """check's programs (read_only, in_file): each op keeps where its bytes are in the file,
    the call stack (protoread.UNREAD_ATTR) cut out whenever they are read: the program reads
    as decode(read_only) reads it (bytes, names, attrs, slots)."""
    path, _, _ = _copy(tmp_path)
    with open(path, "rb") as f:
        data = f.read()
    lean = protoread.decode(data, read_only=True)
    prog = programio.load(path, read_only=True, in_file=True)
    sources = _sources(prog)
    assert sources and all(s._wire is None and s._at for s in sources)
    assert any(isinstance(s, opsource.CutOpSource) for s in sources)
    for op, want in zip(prog.global_block.ops, lean.global_block.ops):
        assert op.source.size() == len(want.source.wire)        # (not read: its length)
        assert op.source.wire == want.source.wire and op.attr_names() == want.attr_names()
        assert not op.has_attr(protoread.UNREAD_ATTR)
        assert op.attrs == want.attrs and op.inputs == want.inputs
        for t in (b"op_callstack", b"@GRAD", b"op_role"):
            assert op.lacks_text(t) == want.lacks_text(t)
    # the checks' loader: a large one in its file, a small one keeps its bytes
    small = load_program_raw(path, in_file=True)
    assert all(s._wire is not None for s in _sources(small))
    programio._IN_FILE_MIN, was = 1, programio._IN_FILE_MIN
    try:
        assert all(s._wire is None for s in _sources(load_program_raw(path, in_file=True)))
        assert all(s._wire is not None for s in _sources(load_program_raw(path)))
    finally:
        programio._IN_FILE_MIN = was


def test_a_program_only_read_in_windows_reads_as_from_its_bytes(tmp_path):
    """check's large programs are read a window at a time, each op keeping where it is in
    the file (protoread._decode_windows): the program is the one its bytes make; and an attr
    peeked at (check/edges.py _peeked) is the attr, the op keeping nothing of it."""
    path, _, _ = _copy(tmp_path)
    with open(path, "rb") as f:
        data = f.read()
    want = protoread.decode(data, read_only=True)
    was = programio._IN_FILE_MIN, protoread.WINDOW
    programio._IN_FILE_MIN, protoread.WINDOW = 1, 4096
    try:
        prog = load_program_raw(path, in_file=True)
    finally:
        programio._IN_FILE_MIN, protoread.WINDOW = was
    assert protowrite.encode(prog) == protowrite.encode(want)
    for op, other in zip(prog.global_block.ops, want.global_block.ops):
        kept = set(op.source._decoded or ())
        for name in op.attr_names():
            assert _peeked(op, name) == other.attr(name)
        assert set(op.source._decoded or ()) == kept
        assert _peeked(op, "no such attr") is None


@pytest.mark.parametrize("piece", [1 << 20, 97])
def test_lacks_is_what_the_bytes_say_the_file_read_once_per_text(tmp_path, monkeypatch, piece):
    """An op that keeps where its bytes are tells whether they lack a text by where the text
    is in the file, found once per text by reading the file a piece at a time (`piece`
    bytes: texts across the pieces' edges found too), not by reading the op."""
    path, _, _ = _copy(tmp_path)
    monkeypatch.setattr(opsource, "_PIECE", piece)
    prog = programio.load(path, in_file=True)
    ops = [op for op in prog.global_block.ops if op.source is not None]
    texts = (b"op_role", b"@@no@@", b"fc_0", b"\x08\x01")
    want = {(id(op), t): t not in op.source.wire for op in ops for t in texts}
    assert any(want.values()) and not all(want.values())
    for op in ops:
        op.source._wire = None          # (the reads above kept some)
    reads = []
    real = opsource.InputFile.read
    monkeypatch.setattr(opsource.InputFile, "read",
                        lambda self, a, b: reads.append(a) or real(self, a, b))
    for _ in range(3):
        for op in ops:
            for t in texts:
                assert op.lacks_text(t) == want[id(op), t]
    pieces = -(-os.path.getsize(path) // piece)
    assert len(reads) == len(texts) * pieces        # the file once per text


def test_a_cut_op_lacks_a_text_only_its_cut_attr_holds(tmp_path):
    """An op of a program only read lacks what only its call stack (the attr it leaves out)
    holds, though its file's bytes have it."""
    path, _, _ = _copy(tmp_path)
    prog = programio.load(path, read_only=True, in_file=True)
    ops = [op for op in prog.global_block.ops if op.source is not None]
    assert ops and all(isinstance(op.source, opsource.CutOpSource) for op in ops)
    with open(path, "rb") as f:
        data = f.read()
    assert b"op_callstack" in data
    assert all(op.lacks_text(b"op_callstack") for op in ops)
    assert not all(op.lacks_text(b"op_role") for op in ops)


def test_the_kept_bytes_are_bounded(tmp_path, monkeypatch):
    path, _, _ = _copy(tmp_path)
    prog = programio.load(path, in_file=True)
    sources = _sources(prog)
    monkeypatch.setattr(opsource.KEPT, "limit", 2 * max(len(s.wire) for s in sources))
    opsource.forget_kept()
    for s in sources:
        s.wire, s.wire
        assert opsource.KEPT.held <= opsource.KEPT.limit
    assert sum(s._wire is not None for s in sources) <= 2


def test_a_split_of_a_file_equals_the_split_of_its_bytes(tmp_path):
    path, spath, _ = _copy(tmp_path)
    _, _, config = load_case("classic", os.path.basename(CLASSIC))
    lazy = split(programio.load(path, in_file=True), programio.load(spath, in_file=True),
                 config).programs
    with open(path, "rb") as f, open(spath, "rb") as g:
        eager = split(protoread.decode(f.read()), protoread.decode(g.read()), config).programs
    assert lazy.keys() == eager.keys()
    assert all(protowrite.encode(lazy[k]) == protowrite.encode(eager[k]) for k in lazy)


def test_an_input_written_over_while_it_is_split_writes_nothing(tmp_path, monkeypatch):
    path, spath, cluster = _copy(tmp_path)
    out = tmp_path / "out"
    real = protowrite.release_caches

    def written_over():             # once every program is written: the input changes
        real()
        with open(path, "r+b") as f:
            f.seek(0, 2)
            f.write(b"\x00")
    monkeypatch.setattr(protowrite, "release_caches", written_over)
    monkeypatch.setenv("PSTRANSPILE_WORKERS", "1")
    r = CliRunner().invoke(cli_main, ["split", path, "--startup", spath, "--cluster", cluster,
                                      "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert "main.pb: written while it was being split" in r.output
    assert not out.exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_program_from_a_pipe_is_read_as_bytes(tmp_path):
    path, _, _ = _copy(tmp_path)
    with open(path, "rb") as f:
        data = f.read()
    fifo = str(tmp_path / "pipe.pb")
    os.mkfifo(fifo)
    pid = os.fork()
    if pid == 0:                    # the writer end
        try:
            with open(fifo, "wb") as f:
                f.write(data)
        finally:
            os._exit(0)
    try:
        prog = programio.load(fifo, in_file=True)
    finally:
        os.waitpid(pid, 0)
    assert all(s._wire is not None for s in _sources(prog))
    assert protowrite.encode(prog) == data


def _large(tmp_path, monkeypatch):
    """A program of more ops than protowrite writes in one piece, read from its file."""
    main_prog, _, _ = load_case("fleet", "ctr_sparse_adam_sync")
    path = str(tmp_path / "large.pb")
    data = programio.to_bytes(main_prog)
    with open(path, "wb") as f:
        f.write(data)
    monkeypatch.setattr(protowrite, "_OPS_PER_PIECE", 3)
    prog = programio.load(path, in_file=True)
    assert len(prog.global_block.ops) > 3
    return prog, data


def test_a_large_block_is_sized_without_reading_its_ops_as_read(tmp_path, monkeypatch):
    """A block written in pieces (a trainer's global block) is sized before any of its ops
    still as read is read from the file (by their lengths there): they are read as their
    piece is written, so never all held at once. The same bytes."""
    prog, data = _large(tmp_path, monkeypatch)
    reads = []
    real = opsource.InputFile.read
    monkeypatch.setattr(opsource.InputFile, "read",
                        lambda self, a, b: reads.append((a, b)) or real(self, a, b))
    opsource.forget_kept()
    chunks = protowrite.encode_chunks(prog)
    head = next(chunks)                         # the block's key and size
    assert reads == []
    rest = list(chunks)
    in_file = [op for op in prog.global_block.ops if op.source and op.source._at]
    assert len(in_file) > 3 and 0 < len(reads) < len(in_file)       # (in runs: below)
    assert head + b"".join(rest) == data


def test_a_large_blocks_ops_as_read_are_copied_in_runs_of_the_files_bytes(tmp_path, monkeypatch):
    """Ops still as read that lie one after the other in their file are copied as one read of
    the file's bytes (at most _RUN_BYTES at a time); a changed op ends a run. Every op as read
    is read exactly once, and the bytes are those of the block written op by op."""
    prog, _ = _large(tmp_path, monkeypatch)
    ops = prog.global_block.ops
    ops[len(ops) // 2].attrs["pst_test"] = protowrite.Attr("INT", 7)
    whole = protowrite._block_bytes(prog.global_block)
    monkeypatch.setattr(protowrite, "_RUN_BYTES", 4000)
    reads = []
    real = opsource.InputFile.read
    monkeypatch.setattr(opsource.InputFile, "read",
                        lambda self, a, b: reads.append((a, b)) or real(self, a, b))
    opsource.forget_kept()
    data = b"".join(protowrite.encode_chunks(prog))
    assert whole in data
    as_read = [op.source.place() for op in ops if op.source and op.source.place()
               and op.source.unchanged(op)]
    covered = [p for p in as_read if any(a <= p[1] and p[2] <= b for a, b in reads)]
    assert covered == as_read                               # each op as read was read...
    assert sum(b - a for a, b in reads) < sum(p[2] - p[1] for p in as_read) * 1.1  # ...once
    runs = [(a, b) for a, b in reads if sum(1 for p in as_read if a <= p[1] and p[2] <= b) > 1]
    assert runs and len(reads) < len(as_read)
    assert all(b - a < 4000 + max(p[2] - p[1] for p in as_read) for a, b in runs)


def test_a_large_blocks_changed_ops_are_made_to_size_it_and_again_to_write_it(
        tmp_path, monkeypatch):
    """The changed ops of a block written in pieces are made to size the block, let go, and
    made again as their piece is written (never all held; the new ops among them, without
    input bytes, small, kept from the one to the other within a budget: made once); the
    others are made once, when written: the same bytes as a block written whole."""
    prog, _ = _large(tmp_path, monkeypatch)
    for op in prog.global_block.ops[::2]:
        op.attrs["pst_test"] = protowrite.Attr("INT", 7)
    whole = [protowrite._block_bytes(b) for b in prog.blocks]       # each written whole
    ops = prog.global_block.ops
    changed = sum(1 for op in ops if not (op.source and op.source.unchanged(op)))
    assert changed >= len(ops) // 2
    made = []
    ours = set(map(id, ops))
    real = protowrite.op_bytes
    monkeypatch.setattr(protowrite, "op_bytes",
                        lambda op: (id(op) in ours and made.append(op)) or real(op))
    data = b"".join(protowrite.encode_chunks(prog))
    new = sum(1 for op in ops if op.source is None)
    assert len(made) == len(ops) + changed - new
    monkeypatch.setattr(protowrite, "op_bytes", real)
    assert data == programio.to_bytes(prog) and all(w in data for w in whole)


def test_a_program_alive_when_the_interpreter_exits_closes_its_file_quietly(tmp_path):
    """A program still held at exit (a module's cache of programs) closes its file without a
    word on stderr (the os module is torn down before it)."""
    import subprocess
    import sys
    path, _, _ = _copy(tmp_path)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from transpile.format import programio\n"
            "os = __import__('os')\n"             # (held by a module torn down before it)
            "os.HELD = [programio.load(%r, in_file=True)]\n") % (root, path)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert r.returncode == 0 and r.stderr == ""
