"""Writing a split's output folder atomically.

Everything is written to a temporary sibling folder first; only when all of it succeeded is it
moved into place (with Ctrl-C, SIGTERM and SIGHUP held back while it is). A failure, Ctrl-C,
SIGTERM or SIGHUP leaves the previous folder as it was. What may be written, and the lock one
split at a time holds, are target.py's. The folder gets the mode any folder the user makes
gets (the umask's), or keeps the mode of the folder it replaces. A staging folder left by a
process that was killed (SIGKILL, power loss) is named after its process and host
(`.NAME.tmp-<pid>@<host>.<random>`), so the next split to NAME on that host removes it once
that process is gone.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import tempfile
from typing import Callable, Optional

from ..core.jsonfmt import MadeItems, made_default
from ..core.signals import signals_held, terminate_as_interrupt
from . import target

# Entries of an output folder that a split owns (and replaces under --force).
_OWNED = re.compile(r"^(trainer_\d+|pserver_.+|plan\.json|report\.md|dump)$")


def is_owned(name: str) -> bool:
    return bool(_OWNED.match(name))


def check_target(out_dir: str, force: bool) -> None:
    """Refuse what a split may not write (target.py): an empty name, the current folder, a
    file, a non-empty folder without --force, a folder holding no split with it."""
    target.check_target(out_dir, force)


def current_umask() -> int:
    """The process's umask (Linux reads it without changing it; elsewhere it is set back)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _host() -> str:
    # the host name gethostname() gives (os.uname's: importing socket for it costs more)
    if hasattr(os, "uname"):
        name = os.uname().nodename
    else:                                       # pragma: no cover - not POSIX
        import socket
        name = socket.gethostname()
    return re.sub(r"[^A-Za-z0-9.-]", "_", name or "localhost")


def staging_prefix(base: str) -> str:
    """The name a staging folder of the output folder `base` starts with (mkdtemp adds a
    random tail): the process and host that own it are part of it."""
    return ".%s.tmp-%d@%s." % (base, os.getpid(), _host())


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:          # another user's process: it exists
        return True
    return True


def remove_stale_staging(parent: str, base: str) -> list:
    """Remove the staging folders of `base` in `parent` whose process (on this host) is gone;
    returns their names. Folders of live processes, of other hosts and of other names are
    left alone."""
    pattern = re.compile(r"^\.%s\.tmp-(\d+)@(.+)\.[a-z0-9_]+$" % re.escape(base))
    host = _host()
    removed = []
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return removed
    for name in names:
        m = pattern.match(name)
        if not m or m.group(2) != host or _alive(int(m.group(1))):
            continue
        path = os.path.join(parent, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
    return removed


class Staging:
    """An output folder being written (see staged): files go to a temporary sibling folder.
    Once it is in place, `replaced` names the entries of an earlier split it replaced and
    `kept` the other entries of the folder, kept as they were."""

    def __init__(self, tmp: str):
        self.root = tmp
        self.replaced: list = []
        self.kept: list = []

    def write(self, rel: str, data) -> None:
        """Write the file `rel`: `data` is bytes or an iterable of byte strings, written one
        after the other (see protowrite.encode_chunks)."""
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            if isinstance(data, (bytes, bytearray, memoryview)):
                f.write(data)
            else:
                f.writelines(data)


@contextlib.contextmanager
def staged(out_dir: str, force: bool, before_commit: Callable[[], None] | None = None):
    """Write the folder `out_dir` atomically: yields a Staging to write files into; when the
    body ends without an exception, the staged folder replaces `out_dir` (with force, entries
    of an existing split's folder that a split owns are replaced and other entries kept).
    Any error, Ctrl-C, SIGTERM or SIGHUP removes what was staged (and the parent folders
    made for it) and leaves `out_dir` as it was. The folder is checked and locked first
    (target.py: a second split to it is refused); a symbolic link is written through.
    Nothing outside `out_dir` is touched except the temporary siblings and the lock,
    which are removed."""
    where = target.resolve(out_dir)
    with terminate_as_interrupt():
        made = target.make_parents(where)
        lock = target.FolderLock(where)
        try:
            lock.acquire()
            target.check_contents(where, force)
            stage = _stage(where)
            try:
                yield stage
                if before_commit:
                    before_commit()
                with signals_held():
                    stage.replaced, stage.kept = _commit(stage.root, where.path)
                    made = []
                    lock.release()
            except BaseException:
                shutil.rmtree(stage.root, ignore_errors=True)
                raise
        finally:
            lock.release()
            target.remove_made(made)


def _stage(where) -> Staging:
    """A new staging folder beside the target (stale ones of dead processes removed first),
    with the mode the folder is to have."""
    remove_stale_staging(where.parent, where.base)
    tmp = tempfile.mkdtemp(prefix=staging_prefix(where.base), dir=where.parent)
    try:
        # mkdtemp makes 0700; the folder is the user's output: mode as mkdir would give it
        # (or the replaced folder's)
        if os.path.isdir(where.path):
            os.chmod(tmp, stat.S_IMODE(os.stat(where.path).st_mode))
        else:
            os.chmod(tmp, 0o777 & ~current_umask())
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Staging(tmp)


def write_tree(out_dir: str, files: dict, force: bool,
               before_commit: Callable[[], None] | None = None) -> Staging:
    """Write {relative path: bytes} as the folder `out_dir`, atomically (see staged)."""
    with staged(out_dir, force, before_commit) as stage:
        for rel in sorted(files):
            stage.write(rel, files[rel])
    return stage


def _commit(tmp: str, out_abs: str) -> tuple:
    """Put the staged folder in place: ([entries of the earlier split replaced], [other
    entries kept]), a folder's name ending with "/"."""
    if not os.path.isdir(out_abs):
        os.rename(tmp, out_abs)
        return [], []
    if not os.listdir(out_abs):
        os.rmdir(out_abs)
        os.rename(tmp, out_abs)
        return [], []
    parent = os.path.dirname(out_abs)
    old = tempfile.mkdtemp(prefix=".%s.old-" % os.path.basename(out_abs), dir=parent)
    os.rmdir(old)
    os.rename(out_abs, old)
    try:
        os.rename(tmp, out_abs)
    except BaseException:
        os.rename(old, out_abs)
        raise
    # keep what the user had in the folder that is not part of a split
    replaced, kept = [], []
    for name in sorted(os.listdir(old)):
        path = os.path.join(old, name)
        shown = name + "/" if os.path.isdir(path) and not os.path.islink(path) else name
        if is_owned(name):
            replaced.append(shown)
        elif not os.path.lexists(os.path.join(out_abs, name)):
            os.rename(path, os.path.join(out_abs, name))
            kept.append(shown)
    shutil.rmtree(old, ignore_errors=True)
    return replaced, kept


# One encoder for every compact item: json.dumps would build a new one per call, which costs
# more than encoding one small item. A MadeItems (core/jsonfmt.py) is written as its list.
_compact = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(", ", ": "),
                            default=made_default).encode


def _compact_all(items) -> list:
    return list(map(_compact, items))


_text = json.encoder.encode_basestring       # a str's JSON text (ensure_ascii=False), in C


def _value(v) -> str:
    """_compact(v), the values a context's or a parameter's fields mostly hold (a str, an
    int, a bool, a list of str or of int) written without the encoder's per-call set-up
    (runtime.json and plan.json write tens of thousands of them: a third of their time)."""
    c = v.__class__
    if c is str:
        return _text(v)
    if c is bool:
        return "true" if v else "false"
    if c is int:
        return int.__repr__(v)
    if isinstance(v, MadeItems):       # (a list of blocks: tens of thousands at 64 pservers)
        return "[" + ", ".join(v.items_json(_compact)) + "]"
    if c is list:
        if not v:
            return "[]"
        first = v[0].__class__
        if first is str or first is int:
            for x in v:
                if x.__class__ is not first:
                    return _compact(v)
            return "[" + ", ".join(map(_text if first is str else int.__repr__, v)) + "]"
    return _compact(v)


# items of a one-line-per-item list written in one piece (bounded pieces, few of them)
_BATCH = 512

# a key's text with its ": " (runtime.json's contexts repeat the same fourteen keys thousands of
# times); emptied when it grows large
_KEY_TEXTS: dict = {}


def _key_text(k) -> str:
    out = _KEY_TEXTS.get(k)
    if out is None:
        out = _text(str(k)) + ": "
        if k.__class__ is str:
            if len(_KEY_TEXTS) >= 4096:
                _KEY_TEXTS.clear()
            _KEY_TEXTS[k] = out
    return out


def _pretty(obj, depth: int, indent: str, keep: frozenset = frozenset(), as_is: bool = False,
            ready: Optional[dict] = None):
    """The pieces of obj's JSON text: indented down to `depth` levels, one compact line per
    item below that.

    json.dumps(indent=...) runs Python's slow pure-Python encoder; on a plan of thousands of
    parameters it cost more than the split. Items below `depth` (a parameter, a send context)
    are written by the C encoder on one line each, which also keeps them grep-able. The text
    comes in pieces (an item, or a batch of one-line items) so that a large plan is never held
    as one string. The keys of a dict are sorted, except in the dicts that are the values of
    the keys in `keep` (`as_is`), which keep their order. `ready`: {key: text} of entries of
    the dict `obj` already made (json_entry, or a Spilled: spill_entries), given as they are."""
    if isinstance(obj, MadeItems):
        obj = list(obj)
    if depth == 0 or not isinstance(obj, (dict, list)) or not obj:
        yield _compact(obj)
        return
    inner = indent + " "
    sep = ",\n" + inner
    if isinstance(obj, dict):
        keys = list(obj) if as_is else sorted(obj)
        if depth == 1:          # one line per item, made in batches (a context's fields)
            yield "{\n" + inner
            for start in range(0, len(keys), _BATCH):
                yield (sep if start else "") + sep.join([
                    _key_text(k) + _value(obj[k]) for k in keys[start:start + _BATCH]])
            yield "\n" + indent + "}"
            return
        yield "{\n" + inner
        for n, k in enumerate(keys):
            if n:
                yield sep
            yield _key_text(k)
            done = ready.get(k) if ready else None
            if isinstance(done, Spilled):
                yield from done.pieces()
            elif done is not None:
                yield done
            else:
                yield from _pretty(obj[k], depth - 1, inner, keep, k in keep)
        yield "\n" + indent + "}"
        return
    yield "[\n" + inner
    if depth == 1:
        for start in range(0, len(obj), _BATCH):
            yield (sep if start else "") + sep.join(_compact_all(obj[start:start + _BATCH]))
    else:
        for n, x in enumerate(obj):
            if n:
                yield sep
            yield from _pretty(x, depth - 1, inner, keep)
    yield "\n" + indent + "]"


def json_chunks(obj, depth: int = 3, keep: frozenset = frozenset(), ready=None):
    """json_bytes's bytes in pieces, made as they are written (see _pretty). `ready`: {key:
    text} of entries of the dict `obj` already made (json_entry), written as they are."""
    if ready and (depth < 2 or not isinstance(obj, dict)):
        raise ValueError("json_chunks: entries made ahead need a dict shown 2 levels deep or more")
    for piece in _pretty(obj, depth, "", frozenset(keep), ready=ready):
        yield piece if type(piece) is bytes else piece.encode("utf-8")
    yield b"\n"


def json_entry(obj: dict, key, depth: int = 3, keep: frozenset = frozenset()) -> str:
    """The JSON text of obj[key] as json_chunks(obj, depth, keep) writes it (for its
    `ready`)."""
    keep = frozenset(keep)
    return "".join(_pretty(obj[key], depth - 1, " ", keep, key in keep))


class Spilled:
    """Text made ahead and written to a scratch file (bytes `start` to `end` of `path`), read
    back in pieces when it is written (json_chunks' `ready`): on a split to many pservers,
    plan.json's entries made while the programs are built are megabytes not to hold."""

    __slots__ = ("path", "start", "end")

    def __init__(self, path: str, start: int, end: int):
        self.path, self.start, self.end = path, start, end

    def pieces(self):
        with open(self.path, "rb") as f:
            f.seek(self.start)
            left = self.end - self.start
            while left > 0:
                piece = f.read(min(left, 1 << 20))
                if not piece:
                    raise OSError("%s: cut short" % self.path)
                left -= len(piece)
                yield piece


def spill_entries(obj: dict, path: str, depth: int = 3, keep: frozenset = frozenset()) -> dict:
    """{key: Spilled} of json_entry(obj, key, depth, keep) for every key of `obj`, the texts
    written one after the other to the file `path` (made or emptied)."""
    keep = frozenset(keep)
    out = {}
    with open(path, "wb") as f:
        for k in obj:
            start = f.tell()
            for piece in _pretty(obj[k], depth - 1, " ", keep, k in keep):
                f.write(piece.encode("utf-8"))
            out[k] = Spilled(path, start, f.tell())
    return out


def json_bytes(obj, depth: int = 3, keep: frozenset = frozenset()) -> bytes:
    """Deterministic JSON: sorted keys (but the dicts under the keys in `keep` in their own
    order), the first `depth` levels indented, trailing newline."""
    return b"".join(json_chunks(obj, depth, keep))
