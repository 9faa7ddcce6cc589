"""The output folder: refuse non-empty without --force, replace only the split's entries with it,
and never leave a half-written folder."""
import os

import pytest

from transpile.core.errors import UserError
from transpile.output import outdir

FILES = {"trainer_0/main.pb": b"t0", "pserver_127.0.0.1_6174/main.pb": b"p0",
         "plan.json": b'{\n "schema": "pstranspile-plan",\n "version": 1\n}\n'}
# a plan.json a split wrote (what --force replaces), and another file of that name
PLAN = FILES["plan.json"]


def listing(d):
    out = {}
    for dirpath, _, files in os.walk(d):
        for f in files:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, d)] = open(p, "rb").read()
    return out


def test_writes_a_new_folder(tmp_path):
    d = str(tmp_path / "out")
    outdir.write_tree(d, FILES, force=False)
    assert listing(d) == FILES
    assert os.listdir(tmp_path) == ["out"]            # no temporary siblings left


def test_refuses_non_empty_folder_without_force(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty: it holds no split .*give another --out"):
        outdir.write_tree(str(d), FILES, force=False)
    assert listing(str(d)) == {"notes.txt": b"mine"}
    (d / "plan.json").write_bytes(PLAN)
    with pytest.raises(UserError, match="not empty: it holds a split .*--force"):
        outdir.write_tree(str(d), FILES, force=False)


def test_force_replaces_only_the_split(tmp_path):
    d = tmp_path / "out"
    (d / "trainer_0").mkdir(parents=True)
    (d / "trainer_0" / "main.pb").write_bytes(b"old")
    (d / "trainer_0" / "stale.pb").write_bytes(b"old")
    (d / "pserver_10.0.0.9_1").mkdir()
    (d / "notes.txt").write_text("mine")
    (d / "plan.json").write_bytes(PLAN)
    stage = outdir.write_tree(str(d), FILES, force=True)
    got = listing(str(d))
    assert got == dict(FILES, **{"notes.txt": b"mine"})
    assert sorted(os.listdir(tmp_path)) == ["out"]
    assert stage.replaced == ["plan.json", "pserver_10.0.0.9_1/", "trainer_0/"]
    assert stage.kept == ["notes.txt"]


def test_failure_before_commit_leaves_previous_folder(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    (d / "plan.json").write_bytes(PLAN + b"previous")

    def boom():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        outdir.write_tree(str(d), FILES, force=True, before_commit=boom)
    assert listing(str(d)) == {"plan.json": PLAN + b"previous"}
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_failure_on_new_folder_leaves_nothing(tmp_path):
    d = tmp_path / "out"

    def boom():
        raise OSError("disk full")

    with pytest.raises(OSError):
        outdir.write_tree(str(d), FILES, force=False, before_commit=boom)
    assert os.listdir(tmp_path) == []


def test_a_file_in_the_way_is_an_error(tmp_path):
    f = tmp_path / "out"
    f.write_text("x")
    with pytest.raises(UserError, match="not a folder"):
        outdir.write_tree(str(f), FILES, force=True)
    assert f.read_text() == "x"


# --- what a user finds on disk: modes, and what a killed split leaves behind ------------------

def _mode(path):
    return os.stat(path).st_mode & 0o7777


@pytest.mark.parametrize("umask, expected", [(0o022, 0o755), (0o027, 0o750), (0o002, 0o775)])
def test_a_new_folder_follows_the_umask(tmp_path, umask, expected):
    old = os.umask(umask)
    try:
        d = str(tmp_path / "out")
        outdir.write_tree(d, FILES, force=False)
        assert outdir.current_umask() == umask
    finally:
        os.umask(old)
    assert _mode(d) == expected                      # mkdtemp's 0700 does not survive the rename
    assert _mode(os.path.join(d, "trainer_0")) == expected
    assert _mode(os.path.join(d, "plan.json")) == expected & 0o666


def test_a_replaced_folder_keeps_its_mode(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    (d / "plan.json").write_bytes(PLAN)
    os.chmod(d, 0o711)
    outdir.write_tree(str(d), FILES, force=True)
    assert _mode(d) == 0o711


def _gone_pid():
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_staging_of_a_dead_process_is_removed(tmp_path):
    import subprocess
    import sys
    dead = _gone_pid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        host = outdir.staging_prefix("out").split("@", 1)[1].rstrip(".")
        stale = tmp_path / (".out.tmp-%d@%s.abc_1234" % (dead, host))
        busy = tmp_path / (".out.tmp-%d@%s.xyz_9876" % (live.pid, host))
        elsewhere = tmp_path / (".out.tmp-%d@%s.other.qqqqqqqq" % (dead, host + "x"))
        other_name = tmp_path / (".outx.tmp-%d@%s.abcdefgh" % (dead, host))
        for d in (stale, busy, elsewhere, other_name):
            (d / "trainer_0").mkdir(parents=True)
            (d / "trainer_0" / "main.pb").write_bytes(b"partial")
        outdir.write_tree(str(tmp_path / "out"), FILES, force=False)
        left = sorted(os.listdir(tmp_path))
        assert stale.name not in left                     # its process is gone: removed
        assert busy.name in left                          # a live split's staging is kept
        assert elsewhere.name in left                     # another host's: cannot tell
        assert other_name.name in left                    # another folder's
        assert listing(str(tmp_path / "out")) == FILES
    finally:
        live.kill()
        live.wait()


def test_a_split_killed_with_sigkill_publishes_nothing_and_is_cleaned_up(tmp_path):
    """A real split process killed while staging: the target folder never appears, its staging
    folder stays, and the next split to the same folder removes it."""
    import signal
    import subprocess
    import sys
    import time
    ready = tmp_path / "ready"
    code = ("import sys, time, os\n"
            "from transpile.output import outdir\n"
            "def hang():\n"
            "    open(sys.argv[2], 'w').close()\n"
            "    time.sleep(60)\n"
            "outdir.write_tree(sys.argv[1], {'trainer_0/main.pb': b'x', 'plan.json': b'{}'},"
            " force=False, before_commit=hang)\n")
    target = tmp_path / "split"
    p = subprocess.Popen([sys.executable, "-c", code, str(target), str(ready)],
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        for _ in range(300):
            if ready.exists():
                break
            time.sleep(0.05)
        assert ready.exists()
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    staging = [n for n in os.listdir(tmp_path) if n.startswith(".split.tmp-%d@" % p.pid)]
    assert len(staging) == 1 and not target.exists()
    outdir.write_tree(str(target), FILES, force=False)
    assert sorted(os.listdir(tmp_path)) == ["ready", "split"]
    assert listing(str(target)) == FILES


def test_staging_names_carry_the_host_name_gethostname_gives():
    """(read off os.uname: staging folders named by an earlier version still match)"""
    import re
    import socket
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname() or "localhost")
    assert outdir.staging_prefix("out").split("@", 1)[1].rstrip(".") == host


def test_key_texts_written_from_their_cache_are_the_same():
    """A dict's keys written one line per item take their text (and ": ") from a cache of
    str keys: the same bytes with the cache empty and full, json's reading of them the
    value written; keys of other types (ints, here) are written each time."""
    import json as _json
    from transpile.output import outdir as od
    obj = {"ctx": {"b\u00e9": [1, 2], "a": "x", 'c"q': True}, "n": {2: "two", 1: "one"}}
    od._KEY_TEXTS.clear()
    cold = od.json_bytes(obj, depth=2)
    assert od._KEY_TEXTS["a"] == '"a": ' and od._KEY_TEXTS['c"q'] == '"c\\"q": '
    assert 1 not in od._KEY_TEXTS
    assert od.json_bytes(obj, depth=2) == cold
    assert _json.loads(cold) == _json.loads(_json.dumps(obj))
