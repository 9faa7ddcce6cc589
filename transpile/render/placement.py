"""The placement every split method gives a program, side by side (`pstranspile plan`): a
table per endpoint with load bars, or the figures as JSON."""
from __future__ import annotations

from typing import Optional

from ..plan.compare import Placement
from ..plan.faults import KIND, summary
from .show import human_bytes, load_bar

BAR = 12


def _ratio(x: Optional[float]) -> str:
    # three decimals: the methods often differ by less than 0.01
    return "-" if x is None else "%.3f" % x


def comparison_lines(placements: list[Placement], config, source: str = ""):
    """(style, text) lines: one column per split method, one row per endpoint."""
    eps = list(config.pservers)
    yield "bold", "plan (%s style, %s mode, %d trainers, %d pservers)%s" % (
        config.style, config.mode, config.trainers, len(eps), (": " + source) if source else "")
    yield "", "  bytes each endpoint holds: its parameter blocks and their optimizer accumulators"
    top = max([b for p in placements for b in p.bytes.values()] or [0])
    width = 10 + 1 + BAR
    heads = []
    for p in placements:
        h = p.split_method + ("*" if p.effective != p.split_method else "")
        heads.append(h + (" (config)" if p.split_method == config.split_method else ""))
    yield "bold", ("  %-22s " % "endpoint" + "  ".join("%-*s" % (width, h)
                                                       for h in heads)).rstrip()
    for ep in eps:
        cells = ["%10s %s" % (human_bytes(p.bytes[ep]), load_bar(p.bytes[ep], top, BAR))
                 for p in placements]
        yield "", "  %-22s " % ep + "  ".join(cells)
    cells = ["%-*s" % (width, _ratio(p.imbalance)) for p in placements]
    yield "bold", ("  %-22s " % "imbalance (max/mean)" + "  ".join(cells)).rstrip()
    best = placements[0]
    yield "", "  best possible with these blocks: %s%s" % (
        "" if best.best_exact else "at least ", _ratio(best.best_imbalance))
    if any(p.effective != p.split_method for p in placements):
        yield "", "  * %s style uses %s instead (as Paddle's Fleet does)" % (
            config.style, ", ".join(sorted({p.effective for p in placements
                                            if p.effective != p.split_method})))


def fault_lines(faults: list):
    """(style, text) lines on the Paddle faults a split for this config meets (`faults`: dicts
    of plan/faults.py Fault.to_dict)."""
    line = summary(faults)
    if not line:
        return
    yield "bold", "  " + line
    for f in faults:
        kind = KIND[f["id"]]
        state = "fixed" if f["fixed"] else ("not fixable: " + f["note"] if f.get("note")
                                            else "reproduced")
        state = "written; Paddle's pipeline raises" if kind.crash else state
        yield "", "    %s (%s): %s [%s]" % (f["id"], f["where"], kind.paddle, state)
