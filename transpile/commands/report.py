"""`pstranspile report DIR`: print the report.md a split wrote."""
from __future__ import annotations

import os

import click

from ..core.errors import UserError
from .common import options


def register(main_group, handle_errors):
    @main_group.command("report")
    @click.argument("split_dir", type=click.Path(file_okay=False))
    @click.pass_obj
    @handle_errors
    def report(obj, split_dir):
        """Print the report of a split: what moved where.

        \b
        The report (DIR/report.md, written by `split`) holds the placement table, each
        trainer program against the original (ops removed, grouped by why; ops inserted,
        in place with context; vars added / removed / reshaped) and each pserver program
        block by block (style ps: the tables of the descriptors, each server's dense shard and
        what each trainer pulls, pushes and sends instead of the placement table). Rendered
        on a terminal, plain markdown when piped.
        Example:
          pstranspile split main.pb --startup startup.pb --cluster c.yaml --out split/
          pstranspile report split/
        """
        path = os.path.join(split_dir, "report.md")
        if not os.path.isdir(split_dir):
            raise UserError("%s: no such folder" % split_dir)
        if not os.path.isfile(path):
            raise UserError("%s: no report.md (was this folder written by `pstranspile "
                            "split`?)" % split_dir)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if options().use_color():
            from rich.console import Console
            from rich.markdown import Markdown
            Console(force_terminal=True).print(Markdown(text))
        else:
            click.echo(text, nl=False)
    return report
