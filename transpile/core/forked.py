"""Running part of a job in a forked child process, on a machine with a core to spare.

The child is a copy of the parent at the fork (the programs already read and planned are shared
copy-on-write, nothing is pickled on the way in); it runs one function and sends back its
result, or the error it raised, through a pipe. The parent goes on with its own share of the
work and collects the child's at the end. Used for the independent programs of a split
(split.py): the output is the same bytes however the work is shared.
"""
from __future__ import annotations

import os
import pickle
import traceback
from typing import Any, Callable, Optional

from .errors import UserError

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


class Forked:
    """A function running in a child process; result() waits for it."""

    def __init__(self, fn: Callable[[], Any]):
        read_fd, write_fd = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:                       # the child: run, report, never return
            os.close(read_fd)
            code = 0
            try:
                payload = ("ok", fn())
            except UserError as e:
                payload = ("user", e.message)
            except BaseException as e:          # noqa: BLE001 - reported to the parent
                payload = ("bug", "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()))
                code = 1
            try:
                with os.fdopen(write_fd, "wb") as f:
                    pickle.dump(payload, f, protocol=pickle.HIGHEST_PROTOCOL)
            finally:
                os._exit(code)
        os.close(write_fd)
        self._read_fd: Optional[int] = read_fd

    def result(self) -> Any:
        """The function's return value; its UserError raised again here, anything else as
        ChildFailed."""
        with os.fdopen(self._read_fd, "rb") as f:
            data = f.read()
        self._read_fd = None
        os.waitpid(self.pid, 0)
        if not data:
            raise ChildFailed("the child process died without a result")
        kind, value = pickle.loads(data)
        if kind == "ok":
            return value
        if kind == "user":
            raise UserError(value)
        raise ChildFailed(value)

    def abandon(self) -> None:
        """The parent failed first: reap the child (its result is not wanted)."""
        if self._read_fd is not None:
            try:
                self.result()
            except Exception:  # noqa: BLE001 - the parent's error is the one reported
                pass
