"""A progress bar on stderr for long runs: `split`, `check` and `simulate` on large programs.

Shown only when stderr is a terminal, the user did not ask for quiet, and the run has already
taken longer than a second: short runs, pipes and CI logs get nothing. rich is imported only
when the bar is actually drawn.
"""
from __future__ import annotations

import contextlib
import sys
import time
from typing import Callable, Iterator

# A step callback: (steps done, steps in all).
Update = Callable[[int, int], None]


def _noop(done: int, total: int) -> None:
    pass


@contextlib.contextmanager
def progress_bar(label: str, *, quiet: bool = False, after: float = 1.0,
                 stream=None) -> Iterator[Update]:
    """Yield an update(done, total) callback that draws a bar labelled `label` once `after`
    seconds have passed; a no-op when quiet or when `stream` (stderr) is not a terminal."""
    stream = sys.stderr if stream is None else stream
    if quiet or not getattr(stream, "isatty", lambda: False)():
        yield _noop
        return
    start = time.monotonic()
    state: dict = {}

    def update(done: int, total: int) -> None:
        if "bar" not in state:
            if time.monotonic() - start < after:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
            bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                           console=Console(file=stream), transient=True)
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task(label, total=total)
        state["bar"].update(state["task"], completed=done, total=total)

    try:
        yield update
    finally:
        if "bar" in state:
            state["bar"].stop()
