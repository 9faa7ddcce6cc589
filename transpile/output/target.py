"""Where a split's folder goes (`--out`): the checks made before anything is written, the
parents made for it, and the lock that lets one split at a time write it.

- An empty name, the current folder and any folder holding it are refused (an unset shell
  variable must not replace the folder the shell is in).
- A symbolic link is followed: the folder written is its target (the link stays as it is,
  pointing at the new split); a link to nothing is refused.
- Missing parent folders are made (and removed again when the split fails); a parent that is
  a file is named.
- An existing folder is written only when it is empty, or, with --force, when it holds a
  split (a plan.json that a split wrote): its entries are replaced (outdir.py), other files
  kept. Anything else is refused.
- While a split writes the folder it holds a lock (`.NAME.lock` beside it, flock): a second
  split to the same folder is refused at once, saying which process writes it.
"""
from __future__ import annotations

import mmap
import os
from typing import Optional

from ..core.errors import UserError

# what plan.json holds in every split (planjson.py), as its line of the file
PLAN_MARK = b'\n "schema": "pstranspile-plan",\n'


class Target:
    """The folder a split writes: `path` (absolute, links followed), its `parent` and `base`
    name, `given` (as the user wrote it) and the parent folders still to be made
    (`missing`, outermost first)."""

    def __init__(self, given: str, path: str, missing: list):
        self.given, self.path, self.missing = given, path, missing
        self.parent, self.base = os.path.split(path)


def resolve(out_dir: str) -> Target:
    """The Target of --out `out_dir`, or a UserError saying why it cannot be written."""
    if not out_dir.strip():
        raise UserError("--out %r: an empty folder name (an unset shell variable?): name the "
                        "folder to write" % out_dir)
    given = os.path.abspath(out_dir)
    if os.path.islink(given):
        path = os.path.realpath(given)
        if not os.path.exists(path):
            raise UserError("%s: a symbolic link to %s, which does not exist" % (out_dir, path))
    else:
        path = os.path.realpath(given)
    here = os.path.realpath(os.getcwd())
    if path == here or here.startswith(path.rstrip(os.sep) + os.sep):
        raise UserError("%s: %s: a split writes a folder of its own (--out %s)" % (
            out_dir, "the current folder" if path == here else "holds the current folder",
            os.path.join(out_dir, "split")))
    missing = []
    folder = os.path.dirname(given)
    while not os.path.isdir(folder):
        if os.path.lexists(folder):
            shown = folder if os.path.isabs(out_dir) else os.path.relpath(folder)
            raise UserError("%s: %s is a file, not a folder" % (out_dir, shown))
        missing.append(folder)
        folder = os.path.dirname(folder)
    return Target(out_dir, path, missing[::-1])


def holds_a_split(folder: str) -> bool:
    """Whether `folder` holds a plan.json that a split wrote."""
    plan = os.path.join(folder, "plan.json")
    try:
        with open(plan, "rb") as f:
            if not os.path.isfile(plan) or os.path.islink(plan) or \
                    os.fstat(f.fileno()).st_size < len(PLAN_MARK):
                return False
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return m.find(PLAN_MARK) >= 0
    except (OSError, ValueError):
        return False


def check_contents(target: Target, force: bool) -> None:
    """Refuse what is at the target's path unless it may be written (see the module doc)."""
    path, given = target.path, target.given
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UserError("%s: exists and is not a folder" % given)
    if not os.path.isdir(path):
        return
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        raise UserError("%s: cannot read the folder (%s)" % (given, e.strerror or e)) from None
    if not names:
        return
    if not holds_a_split(path):
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        raise UserError("%s: folder exists and is not empty: it holds no split (no plan.json "
                        "of one; it holds %s): give another --out" % (given, shown))
    if not force:
        raise UserError("%s: folder exists and is not empty: it holds a split (use --force to "
                        "replace it)" % given)


def check_target(out_dir: str, force: bool) -> Target:
    """The Target of --out, checked as a split will find it (nothing is changed): raises a
    UserError for what a split would refuse."""
    target = resolve(out_dir)
    check_contents(target, force)
    return target


def make_parents(target: Target) -> list:
    """Make the target's missing parent folders (the umask's mode); returns those made."""
    made = []
    for folder in target.missing:
        try:
            os.mkdir(folder)
        except FileExistsError:
            if not os.path.isdir(folder):
                remove_made(made)
                raise UserError("%s: %s is a file, not a folder" % (target.given, folder)) \
                    from None
            continue                            # made meanwhile by someone else
        except OSError:
            remove_made(made)
            raise
        made.append(folder)
    return made


def remove_made(made: list) -> None:
    """Remove the folders make_parents made, innermost first, where they are still empty."""
    for folder in reversed(made):
        try:
            os.rmdir(folder)
        except OSError:
            return


class FolderLock:
    """The lock a split holds while it writes a folder: flock on `.NAME.lock` beside it. The
    lock goes with the process (and the workers it forked), even when it is killed; the file
    is removed on release, or by the next split's release after a SIGKILL."""

    def __init__(self, target: Target):
        self.target = target
        self.path = os.path.join(target.parent, ".%s.lock" % target.base)
        self.fd: Optional[int] = None

    def acquire(self) -> None:
        try:
            import fcntl
        except ImportError:                     # pragma: no cover - not POSIX
            return
        for _ in range(100):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = _holder(fd)
                os.close(fd)
                raise UserError("%s: another split%s is writing this folder: wait for it to "
                                "end, or write another" % (self.target.given, holder)) from None
            if _same_file(fd, self.path):
                os.ftruncate(fd, 0)
                os.write(fd, b"%d\n" % os.getpid())
                self.fd = fd
                return
            os.close(fd)                        # removed by its holder meanwhile: again
        raise UserError("%s: cannot lock the folder (%s keeps changing)"
                        % (self.target.given, self.path))

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None


def _holder(fd: int) -> str:
    try:
        pid = int(os.pread(fd, 32, 0).split()[0])
    except (OSError, ValueError, IndexError):
        return ""
    return " (process %d)" % pid


def _same_file(fd: int, path: str) -> bool:
    try:
        now = os.stat(path)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)
