"""`pstranspile plan MAIN --cluster C.yaml`: the placement every split method gives, side by
side, without writing anything."""
from __future__ import annotations

import json

import click

from ..core.errors import UserError
from ..core.styles import CLASSIC, FLEET, PS
from ..core.stylehooks import PLAN
from .common import no_startup, options, startup_tables


def register(main_group, handle_errors):
    @main_group.command("plan")
    @click.argument("main_program", metavar="MAIN", type=click.Path(dir_okay=False))
    @click.option("--startup", type=click.Path(dir_okay=False), default=None,
                  help="The startup program saved with MAIN (its initializers); needed by "
                       "a program with embedding tables.")
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
        Style ps has no split methods (the dense table is sharded by Paddle's fixed rule):
        it shows the tables, each server's dense shard and what each trainer sends, pulls
        and pushes (--format json: plan.json without the programs).
        Classic and fleet: then the Paddle faults a split of MAIN meets (`paddle_faults` in
        docs/faults.md), reproduced or fixed as the config's paddle_faults says.
        Example:
          pstranspile plan main.pb --startup startup.pb --cluster cluster.yaml
        """
        from ..format import programio
        from ..core.config import load_config
        from ..ir.validate import validate_for_split
        cfg = load_config(cluster)
        main = programio.load(main_program)
        validate_for_split(main, main_program)
        start = None
        if startup:
            start = programio.load(startup)
            validate_for_split(start, startup)
        elif startup_tables(main):
            raise UserError(no_startup(startup_tables(main)))
        PLAN.of(cfg.style)(main, start, cfg, main_program, fmt, options().use_color())
    return plan


def _split_methods(main, start, cfg, source: str, fmt: str, color: bool) -> None:
    """`plan` of a style with split methods (classic, fleet): each method's placement side by
    side, then the Paddle faults a split meets."""
    from ..render.placement import comparison_lines, fault_lines
    from ..render.show import emit
    from ..styles.compare import compare, comparison, faults_of
    if fmt == "json":
        click.echo(json.dumps(comparison(main, start, cfg), indent=1, sort_keys=True))
        return
    emit(comparison_lines(compare(main, start, cfg), cfg, source), color)
    emit(fault_lines([f.to_dict() for f in faults_of(main, start, cfg)]), color)


def _tables(main, start, cfg, source: str, fmt: str, color: bool) -> None:
    """`plan` of style ps: the tables, the dense shards, what each trainer exchanges
    (plan.json without the programs)."""
    from ..output.planjson_ps import ps_plan_json
    from ..render.psreport import plan_lines
    from ..render.show import emit
    d = ps_plan_json(main, start, cfg)
    if fmt == "json":
        click.echo(json.dumps(d, indent=1, sort_keys=True))
    else:
        emit(plan_lines(d, source), color)


# `plan`'s behaviour per style (its PLAN hook, core/stylehooks.py)
for _traits in (CLASSIC, FLEET):
    PLAN.register(_traits.name, _split_methods)
PLAN.register(PS.name, _tables)
