"""The output folder whatever --out is, and a split that is stopped: nothing of the user's is
moved, replaced or left half-written, and no process goes on writing after its parent is gone
(issue #46; #44's items 5, 7, 8)."""
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from cli import main
from transpile.core import forked
from transpile.output import outdir

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MAIN = os.path.join(ROOT, "samples", "mlp_sgd", "main.pb")
CLUSTER = os.path.join(ROOT, "configs", "two_pservers.yaml")
FOUR = "pservers: [127.0.0.1:6174, 127.0.0.1:6175, 127.0.0.1:6176, 127.0.0.1:6177]\n"


def split(out, *extra):
    return CliRunner().invoke(main, ["split", MAIN, "--cluster", CLUSTER, "--out", out] +
                              list(extra))


def tree(d):
    """{relative path: bytes, or '->target' for a link, or '/' for a folder} under d."""
    out = {}
    for dirpath, dirs, files in os.walk(d):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, d)
            if os.path.islink(p):
                out[rel] = "->" + os.readlink(p)
            elif os.path.isdir(p):
                out[rel] = "/"
            else:
                out[rel] = open(p, "rb").read()
    return out


def users_folder(tmp_path):
    """A folder as a user has it: a report of theirs, a folder of theirs."""
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (home / "report.md").write_text("my report")
    (home / "notes" / "a.txt").write_text("mine")
    return home


# --- --out: the name ----------------------------------------------------------------------------
@pytest.mark.parametrize("out, why", [
    ("", "an empty folder name (an unset shell variable?)"),
    (".", "the current folder"), ("./", "the current folder"),
    ("notes/..", "the current folder"), ("..", "holds the current folder"),
    ("/", "holds the current folder"), ("HOME", "the current folder")])
def test_an_empty_or_current_folder_is_refused(tmp_path, monkeypatch, out, why):
    """`--out ""` (an unset variable) replaced the current folder without --force: the user's
    report.md overwritten, their folders deleted, the shell left in a deleted folder."""
    home = users_folder(tmp_path)
    monkeypatch.chdir(home)
    before = tree(str(tmp_path))
    for force in ([], ["--force"]):
        r = split(str(home) if out == "HOME" else out, *force)
        assert r.exit_code == 2 and why in r.output, r.output
        assert tree(str(tmp_path)) == before
        assert os.getcwd() == str(home)


# --- --out: a symbolic link -------------------------------------------------------------------
def test_force_through_a_symbolic_link_writes_the_target_and_moves_nothing(tmp_path):
    """`--out L --force`, L a link to a split's folder: the split is written into the link's
    target, the user's file there stays, the link stays a link (it had been replaced by a new
    folder holding the target's files, and `.L.old-*` left beside it)."""
    target = tmp_path / "target"
    assert split(str(target), "-q").exit_code == 0
    (target / "precious.txt").write_text("mine")
    old_plan = (target / "plan.json").read_bytes()
    (tmp_path / "L").symlink_to("target")
    r = split(str(tmp_path / "L"), "--force", "--trainer-id", "1")
    assert r.exit_code == 0, r.output
    assert sorted(os.listdir(tmp_path)) == ["L", "target"]
    assert os.readlink(tmp_path / "L") == "target"
    assert (target / "precious.txt").read_text() == "mine"
    assert (target / "plan.json").read_bytes() != old_plan
    assert sorted(os.listdir(target)) == ["plan.json", "precious.txt", "pserver_127.0.0.1_6174",
                                          "pserver_127.0.0.1_6175", "report.md", "trainer_1"]


def test_a_link_to_a_folder_of_the_users_or_to_nothing_is_refused(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "precious.txt").write_text("mine")
    (tmp_path / "L").symlink_to("target")
    (tmp_path / "D").symlink_to("nowhere")
    before = tree(str(tmp_path))
    r = split(str(tmp_path / "L"), "--force")
    assert r.exit_code == 2 and "it holds no split" in r.output
    r = split(str(tmp_path / "D"))
    assert r.exit_code == 2 and "a symbolic link to %s, which does not exist" \
        % (tmp_path / "nowhere") in r.output
    assert tree(str(tmp_path)) == before


# --- --force ----------------------------------------------------------------------------------
def test_force_replaces_only_a_split(tmp_path):
    """--force over a folder that holds no split (no plan.json a split wrote) is refused: its
    trainer_* / pserver_* folders would have been deleted."""
    d = tmp_path / "mine"
    (d / "trainer_0").mkdir(parents=True)
    (d / "trainer_0" / "log.txt").write_text("mine")
    (d / "plan.json").write_text('{"my": "plan"}')
    before = tree(str(tmp_path))
    r = split(str(d), "--force")
    assert r.exit_code == 2 and "it holds no split" in r.output and "give another --out" \
        in r.output
    assert tree(str(tmp_path)) == before


def test_force_says_what_it_replaced_and_kept(tmp_path):
    """#44 item 8: the summary names what --force replaced (with everything in it) and what
    it kept; --help says so."""
    out = str(tmp_path / "out")
    assert CliRunner().invoke(main, ["split", MAIN, "--cluster", CLUSTER, "--out", out,
                                     "--trainer-id", "all", "-q"]).exit_code == 0
    (tmp_path / "out" / "notes.txt").write_text("mine")
    (tmp_path / "out" / "trainer_1" / "log.txt").write_text("mine")
    r = split(out, "--force")
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[-1] == (
        "  replaced: plan.json, pserver_127.0.0.1_6174/, pserver_127.0.0.1_6175/, report.md, "
        "trainer_0/, trainer_1/ (the earlier split's, with everything in them); kept: "
        "notes.txt")
    assert sorted(os.listdir(out))[:2] == ["notes.txt", "plan.json"]
    assert not os.path.exists(os.path.join(out, "trainer_1"))
    assert "replaced: " not in split(str(tmp_path / "new")).output
    r = CliRunner().invoke(main, ["split", "--help"])
    assert "with everything in them" in r.output and "other files kept" in r.output


# --- --out: its parents -----------------------------------------------------------------------
def test_missing_parents_are_made_and_a_file_among_them_is_named(tmp_path, monkeypatch):
    """#44 item 5: `--out out/afile/sub` with out/afile a file said "parent ... does not
    exist"; a missing parent was refused although --help says the folder is created."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "afile").write_text("x")
    r = split("out/afile/sub")
    assert r.exit_code == 2 and "out/afile/sub: out/afile is a file, not a folder" in r.output
    r = split("out/afile/x/y")
    assert r.exit_code == 2 and "out/afile is a file, not a folder" in r.output
    r = split("a/b/c", "-q")
    assert r.exit_code == 0, r.output
    assert "plan.json" in os.listdir(tmp_path / "a" / "b" / "c")


def test_parents_made_for_a_split_that_fails_are_removed(tmp_path):
    r = split(str(tmp_path / "x" / "y" / "out"), "--dump-after", "no_such_pass")
    assert r.exit_code == 2 and "no_such_pass" in r.output
    assert os.listdir(tmp_path) == []


# --- two splits, one folder -------------------------------------------------------------------
_HOLD = ("import sys, time\n"
         "from transpile.output import outdir\n"
         "def hold():\n"
         "    open(sys.argv[2], 'w').close()\n"
         "    time.sleep(60)\n"
         "outdir.write_tree(sys.argv[1], {'trainer_0/main.pb': b'x'}, force=False,"
         " before_commit=hold)\n")


def _wait_for(path, seconds=30):
    for _ in range(int(seconds / 0.05)):
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def test_of_two_splits_into_one_folder_one_wins_and_the_other_says_so(tmp_path):
    """Two splits started at once into one new folder both exited 0, the later silently
    replacing the earlier."""
    out, ready = tmp_path / "out", tmp_path / "ready"
    p = subprocess.Popen([sys.executable, "-c", _HOLD, str(out), str(ready)], cwd=ROOT)
    try:
        assert _wait_for(ready)
        for force in ([], ["--force"]):
            r = split(str(out), *force)
            assert r.exit_code == 2
            assert "another split (process %d) is writing this folder" % p.pid in r.output
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    # killed outright: its staging folder and lock are left, and the next split removes them
    assert sorted(n.split("-")[0] for n in os.listdir(tmp_path)) == \
        [".out.lock", ".out.tmp", "ready"]
    r = split(str(out), "-q")
    assert r.exit_code == 0, r.output
    assert sorted(os.listdir(tmp_path)) == ["out", "ready"]


# --- SIGTERM, SIGHUP, SIGKILL ----------------------------------------------------------------
# a CLI split that stops at its first file (its pieces shared with a forked child when
# PSTRANSPILE_WORKERS=2): argv = ready-file, then the command line
_STOPPED_SPLIT = ("import os, sys, time\n"
                  "from transpile.output import outdir\n"
                  "write = outdir.Staging.write\n"
                  "def stopped(self, rel, data):\n"
                  "    write(self, rel, data)\n"
                  "    open(sys.argv[1] + '.%d' % os.getpid(), 'w').close()\n"
                  "    time.sleep(60)\n"
                  "outdir.Staging.write = stopped\n"
                  "from cli import main\n"
                  "main(sys.argv[2:])\n")


def _stopped_split(tmp_path, workers):
    cfg = tmp_path / "four.yaml"
    cfg.write_text(FOUR)
    ready = str(tmp_path / "ready")
    p = subprocess.Popen(
        [sys.executable, "-c", _STOPPED_SPLIT, ready, "split", MAIN, "--cluster", str(cfg),
         "--out", str(tmp_path / "made" / "out"), "-q"], cwd=ROOT, stderr=subprocess.PIPE,
        text=True, env=dict(os.environ, PSTRANSPILE_WORKERS=str(workers)))
    for _ in range(600):
        if len([n for n in os.listdir(tmp_path) if n.startswith("ready.")]) == workers:
            break
        time.sleep(0.05)
    pids = sorted(int(n.split(".")[1]) for n in os.listdir(tmp_path) if n.startswith("ready."))
    assert len(pids) == workers, p.stderr.read() if p.poll() is not None else pids
    return p, [pid for pid in pids if pid != p.pid]


def _gone(pid, seconds=5.0):
    """Whether process `pid` has ended (a zombie nobody reaped has)."""
    for _ in range(int(seconds / 0.05)):
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_and_sighup_clean_up_as_ctrl_c_does(tmp_path, sig, workers):
    """#44 item 7: SIGTERM exited 143 silently and left the staging folder; its forked child
    went on writing. Now: the staging folder, the lock and the parents made are removed, the
    child is killed, one line says why, and the exit status is 128 + the signal's."""
    p, children = _stopped_split(tmp_path, workers)
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + sig, err
    assert err.strip() == "pstranspile: terminated (%s)" % sig.name
    assert all(_gone(c) for c in children)
    assert sorted(n for n in os.listdir(tmp_path) if not n.startswith("ready.")) == \
        ["four.yaml"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_split_killed_outright_takes_its_child_with_it(tmp_path):
    """SIGKILL to a split: its forked child went on writing (280 MB -> 1.1 GB in 15 s) and a
    new split to the folder removed its staging folder under it. Now the child dies with its
    parent; the staging folder is left, and the next split removes it."""
    p, children = _stopped_split(tmp_path, 2)
    assert len(children) == 1
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert _gone(children[0])
    made = tmp_path / "made"
    assert sorted(n.split("-")[0] for n in os.listdir(made)) == [".out.lock", ".out.tmp"]
    assert split(str(made / "out"), "-q").exit_code == 0
    assert os.listdir(made) == ["out"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_forked_child_dies_with_its_parent(tmp_path):
    code = ("import os, sys, time\n"
            "from transpile.core.forked import Forked\n"
            "def work():\n"
            "    open(sys.argv[1], 'w').write(str(os.getpid()))\n"
            "    while True:\n"
            "        with open(sys.argv[2], 'a') as f:\n"
            "            f.write('x' * 100)\n"
            "        time.sleep(0.01)\n"
            "Forked(work)\n"
            "time.sleep(60)\n")
    pid_file, data = tmp_path / "pid", tmp_path / "data"
    p = subprocess.Popen([sys.executable, "-c", code, str(pid_file), str(data)], cwd=ROOT)
    try:
        assert _wait_for(data)
        time.sleep(0.1)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert _gone(int(pid_file.read_text()))
    size = data.stat().st_size
    time.sleep(0.3)
    assert data.stat().st_size == size


def test_a_parent_that_fails_kills_its_child_at_once():
    child = forked.Forked(lambda: time.sleep(60))
    start = time.monotonic()
    child.abandon()
    assert time.monotonic() - start < 5
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)


def test_the_lock_is_released_and_its_file_removed(tmp_path):
    out = str(tmp_path / "out")
    with outdir.staged(out, False) as stage:
        stage.write("plan.json", b"{}")
        assert sorted(n.split("-")[0] for n in os.listdir(tmp_path)) == [".out.lock", ".out.tmp"]
        with pytest.raises(Exception, match="another split \\(process %d\\)" % os.getpid()):
            with outdir.staged(out, True):
                pass
    assert os.listdir(tmp_path) == ["out"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_program_written_by_convert_is_not_left_half_written_on_sigterm(tmp_path, sig):
    code = ("import os, sys, time\n"
            "from transpile.format import programio\n"
            "def stopped(a, b):\n"
            "    open(sys.argv[2], 'w').close()\n"
            "    time.sleep(60)\n"
            "os.replace = stopped\n"
            "programio.write_atomic(sys.argv[1], b'x' * 1000)\n")
    ready = tmp_path / "ready"
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "out.pb"), str(ready)],
                         cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        assert _wait_for(ready)
        assert [n for n in os.listdir(tmp_path) if n.startswith(".out.pb.tmp")]
        p.send_signal(sig)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert os.listdir(tmp_path) == ["ready"]
