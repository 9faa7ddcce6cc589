"""Giving the C heap's free memory back to the system (glibc's malloc_trim), where a large
read has just freed much of it.

Reading a program makes its bytes, and per var and op short-lived values (the bytes of each
op, the items the scanner hands over), interleaved with what is kept: once they are freed, the
C heap holds the holes (megabytes for a large trainer program), which count in the process's
resident memory until later allocations fill them. `check` reads a split's programs one after
the other and keeps some of each: it gives the holes back after each read. Elsewhere (no
glibc) nothing is done.
"""
from __future__ import annotations

_TRIM: list = []        # [malloc_trim or None], found on first use


def give_back() -> None:
    """Return the C heap's free pages to the system (a no-op without glibc)."""
    if not _TRIM:
        _TRIM.append(_find())
    trim = _TRIM[0]
    if trim is not None:
        trim(0)


def _find():
    """glibc's malloc_trim among the symbols the interpreter already has, or None."""
    try:
        import ctypes
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (ImportError, OSError, TypeError):
        return None
