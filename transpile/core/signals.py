"""Signals while a split writes its folder (output/outdir.py): SIGTERM and SIGHUP clean up as
Ctrl-C does (what `timeout`, a CI cancellation or a closed terminal sends), and nothing
interrupts the renames that publish the folder. Only SIGKILL (and a lost machine) leaves
anything behind: the staging folder, which the next split to the folder removes.
"""
from __future__ import annotations

import contextlib
import signal
import threading

from .errors import Terminated

# the signals that raise Terminated while a folder is written
CLEANED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
# the signals held back while a folder is renamed into place
HELD = (signal.SIGINT,) + CLEANED


def _raise(signum, _frame):
    raise Terminated(signum)


@contextlib.contextmanager
def terminate_as_interrupt():
    """Within: SIGTERM and SIGHUP raise Terminated where they would kill the process (a
    handler of someone else's, or the signal ignored as under nohup, is left alone). Only
    the main thread sets handlers: elsewhere, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}
    for sig in CLEANED:
        if signal.getsignal(sig) == signal.SIG_DFL:
            old[sig] = signal.signal(sig, _raise)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_held():
    """Within: SIGINT, SIGTERM and SIGHUP wait until the end (blocked), then arrive."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:                            # pragma: no cover - not POSIX
        yield
        return
    old = mask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        mask(signal.SIG_SETMASK, old)


def default_in_child() -> None:
    """In a forked child: SIGTERM and SIGHUP kill it outright (the parent, which cleans up,
    keeps its handlers)."""
    for sig in CLEANED:
        if signal.getsignal(sig) is _raise:
            signal.signal(sig, signal.SIG_DFL)
