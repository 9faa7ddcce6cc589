"""Running part of a job in a forked child process, on a machine with a core to spare.

The child is a copy of the parent at the fork (the programs already read and planned are shared
copy-on-write, nothing is pickled on the way in); it runs one function and sends back its
result, or the error it raised, through a pipe. The parent goes on with its own share of the
work and collects the child's at the end. The child dies with its parent: the kernel kills it
when the parent is gone (Linux: PR_SET_PDEATHSIG; elsewhere it stops at its next piece of
work), and a parent that fails or is interrupted kills it, so that no child goes on writing
into a folder nobody will publish. Used for the independent pieces of a split (split.py)
and of a check (check/stream.py): the output is the same bytes however the work is shared.
"""
from __future__ import annotations

import os
import pickle
import signal
import sys
import traceback
from typing import Any, Callable, Optional

from .errors import UserError
from .signals import default_in_child

# PSTRANSPILE_WORKERS=1 turns the sharing off (the work is then done as one process)
WORKERS_ENV = "PSTRANSPILE_WORKERS"


def workers_available() -> int:
    """How many processes a job may use: the cores this process may run on (at most 2: the
    parent and one child), or PSTRANSPILE_WORKERS."""
    env = os.environ.get(WORKERS_ENV)
    if env is not None:
        try:
            return max(1, int(env))
        except ValueError:
            raise UserError("%s=%r: expected a number of processes" % (WORKERS_ENV, env)) \
                from None
    if not hasattr(os, "fork"):
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(2, cores)


class ChildFailed(RuntimeError):
    """The child raised something other than a UserError (named with its traceback)."""


_PRCTL: list = []         # [libc's prctl, or None], looked up once before the first fork
_PR_SET_PDEATHSIG = 1
_FORKED_FROM = 0          # in a forked child: its parent's pid


def _prctl():
    if not _PRCTL:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes
                fn = ctypes.CDLL(None, use_errno=True).prctl
            except (ImportError, OSError, AttributeError):     # pragma: no cover
                fn = None
        _PRCTL.append(fn)
    return _PRCTL[0]


def _die_with(parent: int, prctl) -> None:
    """In a forked child: be killed when the parent `parent` is gone (or exit now if it is
    already gone); SIGTERM / SIGHUP kill it outright (the parent cleans up)."""
    global _FORKED_FROM
    _FORKED_FROM = parent
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)
    default_in_child()


class Forked:
    """A function running in a child process; result() waits for it."""

    def __init__(self, fn: Callable[[], Any]):
        prctl = _prctl()
        parent = os.getpid()
        read_fd, write_fd = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:                       # the child: run, report, never return
            os.close(read_fd)
            code = 0
            try:
                _die_with(parent, prctl)
                payload = ("ok", fn())
            except UserError as e:
                payload = ("user", e.message)
            except BaseException as e:          # noqa: BLE001 - reported to the parent
                payload = ("bug", "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()))
                code = 1
            try:
                try:
                    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException as e:      # noqa: BLE001 - a result pickle refuses
                    code = 1
                    data = pickle.dumps(("bug", "cannot send the result back: %s: %s"
                                         % (type(e).__name__, e)))
                with os.fdopen(write_fd, "wb") as f:
                    f.write(data)
            finally:
                os._exit(code)
        os.close(write_fd)
        self._read_fd: Optional[int] = read_fd

    def result(self) -> Any:
        """The function's return value; its UserError raised again here, anything else as
        ChildFailed."""
        with os.fdopen(self._read_fd, "rb") as f:
            try:        # read as it is unpickled: the whole payload is never held as bytes
                kind, value = pickle.load(f)
            except (EOFError, pickle.UnpicklingError):      # cut short: the child died
                kind = None
            f.read()                        # to the end: the child has written all it will
        self._read_fd = None
        os.waitpid(self.pid, 0)
        if kind is None:
            raise ChildFailed("the child process died without a result")
        if kind == "ok":
            return value
        if kind == "user":
            raise UserError(value)
        raise ChildFailed(value)

    def abandon(self) -> None:
        """The parent failed first: kill the child and reap it (its result is not wanted, and
        nothing it would still write is)."""
        if self._read_fd is None:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        os.close(self._read_fd)
        self._read_fd = None
        os.waitpid(self.pid, 0)


# work on a main program this small, to fewer pservers than MIN_FORKED_PSERVERS, is done by one
# process: a fork costs more than sharing the work saves
MIN_FORKED_OPS = 2000
MIN_FORKED_PSERVERS = 4


def worth_forking(workers: int, pieces: int, pservers: int, ops: int) -> bool:
    """Whether `pieces` pieces of work on a main program of `ops` ops to `pservers` pservers
    are shared with a forked child (share_pieces), `workers` processes being allowed."""
    return workers > 1 and 1 < pieces <= WorkQueue.MOST and \
        (pservers >= MIN_FORKED_PSERVERS or ops >= MIN_FORKED_OPS)


class WorkQueue:
    """The pieces of work still to do (by index), shared by the parent and a forked child: each
    takes the next index when it is free, so that neither waits for the other. A pipe filled
    before the fork: a read of one index (4 bytes) is atomic, and reads end at the end of the
    pipe."""

    _ITEM = 4
    MOST = 8192                             # indices a pipe holds (64 KiB) with room to spare

    def __init__(self, n: int, order: Optional[list] = None):
        """Indices 0..n-1, taken in `order` (a permutation of them) when it is given."""
        self._read, write = os.pipe()
        data = b"".join(i.to_bytes(self._ITEM, "little")
                        for i in (range(n) if order is None else order))
        try:
            while data:
                data = data[os.write(write, data):]
        finally:
            os.close(write)

    def __iter__(self):
        while True:
            raw = os.read(self._read, self._ITEM)
            if not raw:
                return
            yield int.from_bytes(raw, "little")

    def drain(self) -> None:
        """Take every index left, so that the other process finds none."""
        for _ in self:
            pass

    def close(self) -> None:
        os.close(self._read)


def take_pieces(queue: WorkQueue, do: Callable[[int], Any]) -> dict:
    """{index: do(index)} for each index this process takes from `queue`; when `do` fails,
    the indices left are taken off the queue first (the other process stops after its
    current piece)."""
    made = {}
    try:
        for i in queue:
            if _FORKED_FROM and os.getppid() != _FORKED_FROM:
                os._exit(1)                 # the parent is gone (where no kernel killed us)
            made[i] = do(i)
    except BaseException:
        queue.drain()
        raise
    return made


def share_pieces(n: int, do: Callable[[int], Any], child: Callable[[WorkQueue], Any],
                 done: Optional[Callable[[int], None]] = None,
                 order: Optional[list] = None,
                 first: Optional[Callable[[], None]] = None) -> tuple:
    """Pieces 0..n-1 shared by this process, which runs do(i) on those it takes, and a forked
    child, which runs child(queue) (take_pieces with what the child is to send back):
    ({index: do(index)} of this process's pieces, what child() returned). `done(count)`
    after each piece of this process. `order`: the order the pieces are taken in (the
    longest first, so that neither process is left with a long one at the end); by index
    when None. `first()`: work of this process's own, done after the fork and before it
    takes a piece (the child takes more of them meanwhile). A failure of the child stops
    this process after its current piece; a failure here (or Ctrl-C, SIGTERM) kills the
    child at once; the first failure seen here is raised."""
    queue = WorkQueue(n, order)
    forked: Optional[Forked] = Forked(lambda: child(queue))
    made: dict = {}
    try:
        if first is not None:
            first()
        for i in queue:
            made[i] = do(i)
            if done is not None:
                done(len(made))
        theirs = forked.result()
        forked = None
    finally:
        if forked is not None:
            queue.drain()                   # this process failed: nothing more to do
            forked.abandon()
        queue.close()
    return made, theirs
