"""Writing a split's output folder atomically.

Everything is written to a temporary sibling folder first; only when all of it succeeded is it
moved into place. A failure (or Ctrl-C) leaves the previous folder as it was. The folder gets
the mode any folder the user makes gets (the umask's), or keeps the mode of the folder it
replaces. A staging folder left by a process that was killed (SIGKILL, power loss) is named
after its process and host (`.NAME.tmp-<pid>@<host>.<random>`), so the next split to NAME on
that host removes it once that process is gone.
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

from ..core.errors import UserError

# Entries of an output folder that a split owns (and replaces under --force).
_OWNED = re.compile(r"^(trainer_\d+|pserver_.+|plan\.json|report\.md|dump)$")


def is_owned(name: str) -> bool:
    return bool(_OWNED.match(name))


def check_target(out_dir: str, force: bool) -> None:
    """Refuse an existing non-empty folder without --force, and anything that is not a folder."""
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise UserError("%s: exists and is not a folder" % out_dir)
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not force:
        raise UserError("%s: folder exists and is not empty (use --force to replace the split in "
                        "it)" % out_dir)
    parent = os.path.dirname(os.path.abspath(out_dir))
    if not os.path.isdir(parent):
        raise UserError("%s: parent folder %s does not exist" % (out_dir, parent))


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
    """An output folder being written (see staged): files go to a temporary sibling folder."""

    def __init__(self, tmp: str):
        self.root = tmp

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
    of an existing folder that a split owns are replaced and other entries kept). Any error or
    Ctrl-C removes what was staged and leaves `out_dir` as it was. Nothing outside `out_dir` is
    touched except the temporary siblings, which are removed."""
    check_target(out_dir, force)
    out_abs = os.path.abspath(out_dir)
    parent = os.path.dirname(out_abs)
    base = os.path.basename(out_abs)
    remove_stale_staging(parent, base)
    tmp = tempfile.mkdtemp(prefix=staging_prefix(base), dir=parent)
    try:
        # mkdtemp makes 0700; the folder is the user's output: mode as mkdir would give it
        # (or the replaced folder's)
        if os.path.isdir(out_abs):
            os.chmod(tmp, stat.S_IMODE(os.stat(out_abs).st_mode))
        else:
            os.chmod(tmp, 0o777 & ~current_umask())
        yield Staging(tmp)
        if before_commit:
            before_commit()
        _commit(tmp, out_abs)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_tree(out_dir: str, files: dict, force: bool,
               before_commit: Callable[[], None] | None = None) -> None:
    """Write {relative path: bytes} as the folder `out_dir`, atomically (see staged)."""
    with staged(out_dir, force, before_commit) as stage:
        for rel in sorted(files):
            stage.write(rel, files[rel])


def _commit(tmp: str, out_abs: str) -> None:
    if not os.path.isdir(out_abs):
        os.rename(tmp, out_abs)
        return
    if not os.listdir(out_abs):
        os.rmdir(out_abs)
        os.rename(tmp, out_abs)
        return
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
    for name in sorted(os.listdir(old)):
        if not is_owned(name) and not os.path.lexists(os.path.join(out_abs, name)):
            os.rename(os.path.join(old, name), os.path.join(out_abs, name))
    shutil.rmtree(old, ignore_errors=True)


# One encoder for every compact item: json.dumps would build a new one per call, which costs
# more than encoding one small item.
_compact = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(", ", ": ")).encode


def _compact_all(items) -> list:
    return list(map(_compact, items))


# items of a one-line-per-item list written in one piece (bounded pieces, few of them)
_BATCH = 512


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
    the dict `obj` already made (json_entry), given as they are."""
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
                    _compact(str(k)) + ": " + _compact(obj[k]) for k in keys[start:start + _BATCH]])
            yield "\n" + indent + "}"
            return
        yield "{\n" + inner
        for n, k in enumerate(keys):
            if n:
                yield sep
            yield _compact(str(k)) + ": "
            done = ready.get(k) if ready else None
            if done is not None:
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
        yield piece.encode("utf-8")
    yield b"\n"


def json_entry(obj: dict, key, depth: int = 3, keep: frozenset = frozenset()) -> str:
    """The JSON text of obj[key] as json_chunks(obj, depth, keep) writes it (for its
    `ready`)."""
    keep = frozenset(keep)
    return "".join(_pretty(obj[key], depth - 1, " ", keep, key in keep))


def json_bytes(obj, depth: int = 3, keep: frozenset = frozenset()) -> bytes:
    """Deterministic JSON: sorted keys (but the dicts under the keys in `keep` in their own
    order), the first `depth` levels indented, trailing newline."""
    return b"".join(json_chunks(obj, depth, keep))
