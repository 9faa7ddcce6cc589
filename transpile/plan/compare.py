"""The figures of the placement a style's plan gives a program (`pstranspile plan` compares
them across the split methods: styles/compare.py), read through placed.py and placement.py."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir.program import Program
from .placed import holdings, placed_params
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


def placement(main: Program, plan, split_method: str) -> Placement:
    """The figures of the placement a style's `plan` of `main` gives (`split_method`: the one
    the config asked for; plan.split_method is the one the style used)."""
    params = placed_params(plan, main)
    eps = list(plan.endpoints)
    held = holdings(params, eps)
    best, exact = best_placement(params, eps)
    return Placement(split_method, plan.split_method,
                     {ep: held[ep]["bytes"] for ep in eps},
                     {ep: held[ep]["param_blocks"] for ep in eps},
                     imbalance([held[ep]["bytes"] for ep in eps]), best, exact)
