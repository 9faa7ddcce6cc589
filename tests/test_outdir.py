"""The output folder: refuse non-empty without --force, replace only the split's entries with it,
and never leave a half-written folder."""
import os

import pytest

from transpile.core.errors import UserError
from transpile.output import outdir

FILES = {"trainer_0/main.pb": b"t0", "pserver_127.0.0.1_6174/main.pb": b"p0",
         "plan.json": b"{}\n"}


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
    with pytest.raises(UserError, match="not empty .*--force"):
        outdir.write_tree(str(d), FILES, force=False)
    assert listing(str(d)) == {"notes.txt": b"mine"}


def test_force_replaces_only_the_split(tmp_path):
    d = tmp_path / "out"
    (d / "trainer_0").mkdir(parents=True)
    (d / "trainer_0" / "main.pb").write_bytes(b"old")
    (d / "trainer_0" / "stale.pb").write_bytes(b"old")
    (d / "pserver_10.0.0.9_1").mkdir()
    (d / "notes.txt").write_text("mine")
    outdir.write_tree(str(d), FILES, force=True)
    got = listing(str(d))
    assert got == dict(FILES, **{"notes.txt": b"mine"})
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_failure_before_commit_leaves_previous_folder(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    (d / "plan.json").write_text("previous")

    def boom():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        outdir.write_tree(str(d), FILES, force=True, before_commit=boom)
    assert listing(str(d)) == {"plan.json": b"previous"}
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
