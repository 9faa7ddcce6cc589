"""Pausing Python's cyclic garbage collector around bulk work on a program.

Reading, splitting and writing a large program allocates millions of small objects (ops, slot
lists, attrs) and frees almost none of them until the end; every automatic collection then walks
all of them again, which made a split of a 5k-op program spend more than half of its time in
the collector. The model holds no reference cycles that need collecting during that work, so it
runs with the collector paused; the previous state is restored afterwards (a collection then
runs as usual when the next allocations call for it).
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
        if was_enabled:
            gc.enable()
