"""`pstranspile plan MAIN --cluster C.yaml`: the placement every split method gives, side by
side, without writing anything."""
from __future__ import annotations

import json
import os
import sys
from typing import Optional

import click

from .plan.compare import Placement, compare
from .show import emit, human_bytes, load_bar

BAR = 12


def comparison(main, startup, config) -> dict:
    """The JSON-able comparison: per split method, bytes per endpoint and imbalance."""
    placements = compare(main, startup, config)
    best = placements[0]
    return {"style": config.style, "mode": config.mode, "pservers": list(config.pservers),
            "split_method": config.split_method,
            "best_imbalance": best.best_imbalance, "best_exact": best.best_exact,
            "methods": [p.to_dict() for p in placements]}


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


def register(main_group, handle_errors):
    @main_group.command("plan")
    @click.argument("main_program", metavar="MAIN", type=click.Path(dir_okay=False))
    @click.option("--startup", type=click.Path(dir_okay=False), default=None,
                  help="The startup program (initializers).")
    @click.option("--cluster", type=click.Path(dir_okay=False), required=True,
                  help="The cluster config (YAML); its split_method is marked (config).")
    @click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                  show_default=True, help="text: a table; json: the figures.")
    @click.pass_obj
    @handle_errors
    def plan(obj, main_program, startup, cluster, fmt):
        """Show where every split method would place MAIN's blocks; write nothing.

        \b
        For each split_method (round_robin, hash_name, balanced), with the config's other
        settings: the bytes each pserver would hold (parameter blocks and their optimizer
        accumulators), with a load bar, and the imbalance (max / mean bytes; 1.00 is even).
        The last line is the best imbalance any placement of these blocks can reach.
        Fleet style ignores hash_name and round-robins, as Paddle does (marked *).
        Example:
          pstranspile plan main.pb --startup startup.pb --cluster cluster.yaml
        """
        from .format import programio
        from .core.config import load_config
        from .ir.validate import validate_for_split
        cfg = load_config(cluster)
        main = programio.load(main_program)
        validate_for_split(main, main_program)
        start = None
        if startup:
            start = programio.load(startup)
            validate_for_split(start, startup)
        if fmt == "json":
            click.echo(json.dumps(comparison(main, start, cfg), indent=1, sort_keys=True))
            return
        color = obj.color if obj is not None and obj.color is not None else (
            sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
        emit(comparison_lines(compare(main, start, cfg), cfg, main_program), color)
    return plan
