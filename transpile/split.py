"""`split`: one entry point over the two styles (classic DistributeTranspiler, Fleet passes)."""
from __future__ import annotations

from typing import Callable, Optional

from .core.config import ClusterConfig
from .core.errors import UserError
from .core.gcpause import paused_gc
from .ir.program import Program
from .result import SplitResult
from .ir.roles import is_optimize_op


def split(main: Program, startup: Optional[Program], config: ClusterConfig,
          trainer_ids: Optional[list[int]] = None, *,
          progress: Optional[Callable[[int, int], None]] = None,
          emit: Optional[Callable[[str, Program], None]] = None) -> SplitResult:
    """Split a training program for a parameter-server cluster.

    `trainer_ids` defaults to the config's trainer_id ("all" = every id). Inputs are not modified.
    `progress(done, total)` is called as the programs are built (transpile/progress.py draws
    it). With `emit`, each program is handed to emit(key, program) when built instead of being
    kept in the result (SplitResult.add). Raises UserError (RefusedError) for programs that
    cannot be split.
    """
    if startup is None:
        startup = Program.empty()
    ids = trainer_ids if trainer_ids is not None else config.trainer_ids()
    if not any(is_optimize_op(op) for _, _, op in main.ops()):
        raise UserError("nothing to split: no optimizer ops found — was minimize() called "
                        "before the program was saved?")
    with paused_gc():
        if config.style == "classic":
            from .passes.classic import transpile_classic
            return transpile_classic(main, startup, config, ids, progress=progress,
                                     emit=emit)
        from .passes.fleet import transpile_fleet
        return transpile_fleet(main, startup, config, ids, progress=progress, emit=emit)
