"""`pstranspile plan`: the placement every split method gives a program in the config's style,
side by side, and the Paddle faults a split for the config meets."""
from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence

from ..core.config import SPLIT_METHODS
from ..ir.program import Program
from ..plan.compare import Placement, placement as placement_of
from .registry import style_of


def style_plan(main: Program, startup: Optional[Program], config):
    """The config's style's plan of `main`."""
    return style_of(config).make_plan(main, startup or Program.empty(), config)


def placement(main: Program, startup: Optional[Program], config, plan=None) -> Placement:
    """The figures of the placement `config` gives `main` (`plan`: the style plan, when made)."""
    if plan is None:
        plan = style_plan(main, startup, config)
    return placement_of(main, plan, config.split_method)


def compare(main: Program, startup: Optional[Program], config,
            methods: Optional[Sequence[str]] = None) -> list[Placement]:
    """The placement of every split method (the config's others unchanged), in `methods` order
    (default: every method the config accepts)."""
    return [placement(main, startup, replace(config, split_method=m))
            for m in (methods or SPLIT_METHODS)]


def faults_of(main: Program, startup: Optional[Program], config, plan=None) -> list:
    """The Paddle faults (plan/faults.py) a split of `main` for `config` meets, each marked
    fixed or not as `config.paddle_faults` says (`plan`: the style plan, when made)."""
    startup = startup or Program.empty()
    style = style_of(config)
    return style.faults(main, startup, config, plan)


def comparison(main: Program, startup: Optional[Program], config) -> dict:
    """The JSON-able comparison: per split method, bytes per endpoint and imbalance."""
    placements = compare(main, startup, config)
    best = placements[0]
    return {"style": config.style, "mode": config.mode, "pservers": list(config.pservers),
            "split_method": config.split_method,
            "best_imbalance": best.best_imbalance, "best_exact": best.best_exact,
            "methods": [p.to_dict() for p in placements],
            "faults": [f.to_dict() for f in faults_of(main, startup, config)]}
