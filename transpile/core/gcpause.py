"""Pausing Python's cyclic garbage collector around bulk work on a program, and keeping the
program model alive until a CLI process exits.

Reading, splitting and writing a large program allocates millions of small objects (ops, slot
lists, attrs) and frees almost none of them until the end; every automatic collection then walks
all of them again, which made a split of a 5k-op program spend more than half of its time in
the collector. The model holds no reference cycles that need collecting during that work, so it
runs with the collector paused; the previous state is restored afterwards (a collection then
runs as usual when the next allocations call for it).

In the console script (keep_objects_until_exit), what the paused work made is also moved out
of the collector's sight when it ends (gc.freeze): those objects are held until the process
exits, and every later collection would walk all of them again (after reading a 20k-op
program, the next 100k allocations cost 0.6 s of collections). They are still freed as usual
when nothing refers to them; only a reference cycle among them would be left to the exit.
"""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def paused_gc():
    """Run the body with automatic garbage collection off (nested uses are fine)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _keeping:
            gc.freeze()
        if was_enabled:
            gc.enable()


_KEEP: list = []
_keeping = False


def keep_objects_until_exit() -> None:
    """Called by the console script (commands.root.run), which ends with os._exit: from then on
    keep_until_exit holds what it is given, so it is never freed object by object."""
    global _keeping
    _keeping = True


def keep_until_exit(*objs) -> None:
    """Hold large objects (parsed programs, a loaded split) until the process ends: freeing a
    big model one object at a time takes a noticeable part of a run. A no-op in-process (tests,
    library use), where they are freed as usual."""
    if _keeping:
        _KEEP.extend(objs)
