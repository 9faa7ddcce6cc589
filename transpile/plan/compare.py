"""How the split methods compare on one program: the figures of the placement each gives
(`pstranspile plan`), from the style's plan read through placed.py and placement.py."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional, Sequence

from ..core.config import SPLIT_METHODS
from ..ir.program import Program
from .classic import make_plan as classic_make_plan
from .faults import classic_faults, classic_table_fault, fleet_faults, fleet_table_fault
from .fleet import make_plan as fleet_make_plan
from .placed import effective_split_method, holdings, placed_params
from .placement import best_placement, imbalance


@dataclass(frozen=True)
class Placement:
    """One split method's placement of a program, as figures."""
    split_method: str           # the one asked for
    effective: str              # the one the style used (fleet: round_robin unless balanced)
    bytes: dict                 # endpoint -> bytes held (blocks and accumulators)
    blocks: dict                # endpoint -> number of parameter blocks
    imbalance: Optional[float]
    best_imbalance: Optional[float]     # the best these blocks allow (see best_placement)
    best_exact: bool                    # False: best_imbalance is only a lower bound

    def to_dict(self) -> dict:
        return {"split_method": self.split_method, "effective": self.effective,
                "endpoints": {ep: {"bytes": self.bytes[ep], "param_blocks": self.blocks[ep]}
                              for ep in self.bytes},
                "total_bytes": sum(self.bytes.values()), "imbalance": self.imbalance,
                "best_imbalance": self.best_imbalance, "best_exact": self.best_exact}


def style_plan(main: Program, startup: Optional[Program], config):
    """The style's plan of `main` for `config` (classic DistributionPlan or FleetPlan)."""
    if config.style == "classic":
        return classic_make_plan(main, config)
    return fleet_make_plan(main, startup if startup is not None else Program.empty(), config)


def placement(main: Program, startup: Optional[Program], config, plan=None) -> Placement:
    """The figures of the placement `config` gives `main` (`plan`: the style plan, when it is
    already made)."""
    if plan is None:
        plan = style_plan(main, startup, config)
    params = placed_params(plan, main, config.style)
    eps = list(plan.endpoints)
    held = holdings(params, eps)
    best, exact = best_placement(params, eps)
    return Placement(config.split_method, effective_split_method(plan, config.style),
                     {ep: held[ep]["bytes"] for ep in eps},
                     {ep: held[ep]["param_blocks"] for ep in eps},
                     imbalance([held[ep]["bytes"] for ep in eps]), best, exact)


def compare(main: Program, startup: Optional[Program], config,
            methods: Optional[Sequence[str]] = None) -> list[Placement]:
    """The placement of every split method (the config's others unchanged), in `methods` order
    (default: every method the config accepts)."""
    return [placement(main, startup, replace(config, split_method=m))
            for m in (methods or SPLIT_METHODS)]


def faults_of(main: Program, startup: Optional[Program], config, plan=None) -> list:
    """The Paddle faults (plan/faults.py) a split of `main` for `config` meets, each marked
    fixed or not as `config.paddle_faults` says (`plan`: the style plan, when made)."""
    if plan is None:
        plan = style_plan(main, startup, config)
    if config.style == "classic":
        table = classic_table_fault(main, config)
        return ([table] if table else []) + classic_faults(main, config, plan)
    table = fleet_table_fault(main, config)
    return ([table] if table else []) + fleet_faults(main, config, plan)
