"""Bytes kept for reuse by many objects, bounded in all (ByteBound).

A split reads some of its input's ops again and again (an update op copied into every pserver)
and patches the same attrs again and again (an init op's shape per block): their bytes are kept
on the objects that make them, and a ByteBound counts them, so that a split of any size keeps
at most about its limit: past it, every holder lets go and the count starts again. What was let
go is made again when next asked for: a bound on memory, never a change in what is written.
"""
from __future__ import annotations

from typing import Callable


class ByteBound:
    """Holders of kept bytes, at most about `limit` bytes in all; `drop(holder)` makes a holder
    let go of what it keeps."""
    __slots__ = ("limit", "drop", "holders", "held")

    def __init__(self, limit: int, drop: Callable[[object], None]):
        self.limit, self.drop = limit, drop
        self.holders: list = []
        self.held = 0

    def keep(self, holder, n: int, listed: bool = False) -> bool:
        """Whether `holder` may keep `n` more bytes (False: more than the limit alone). Past
        the limit every holder lets go first (`holder` too). `listed`: `holder` already keeps
        bytes counted here (else it is listed now)."""
        if n > self.limit:
            return False
        if self.held + n > self.limit:
            self.forget()
            listed = False
        if not listed:
            self.holders.append(holder)
        self.held += n
        return True

    def forget(self) -> None:
        """Every holder lets go of what it keeps; nothing is counted."""
        for holder in self.holders:
            self.drop(holder)
        self.holders.clear()
        self.held = 0
