"""`pstranspile show PROGRAM`: a readable listing of a program (or its JSON text form)."""
from __future__ import annotations

import click

from ..core.errors import UserError
from .common import load_program, options


def register(main_group, handle_errors):
    """Add `show` to the root click group."""
    @main_group.command()
    @click.argument("program", type=click.Path(dir_okay=False))
    @click.option("--block", "block", type=int, default=None, help="Show only this block.")
    @click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                  show_default=True, help="text: a readable listing; json: the lossless text form.")
    @click.pass_obj
    @handle_errors
    def show(obj, program, block, fmt):
        """Print a program: its vars and ops, block by block, then a summary.

        \b
        Example:
          pstranspile show samples/mlp_sgd/main.pb --block 0
        Each op prints as  type(Slot=arg, ...) -> (Slot=arg, ...)  role=...
        """
        from ..render import show as show_mod
        prog = load_program(program)
        if block is not None and not 0 <= block < len(prog.blocks):
            raise UserError("%s: --block %d: the program has blocks 0..%d"
                            % (program, block, len(prog.blocks) - 1))
        if fmt == "json":
            from ..format import textform
            if block is not None:
                d = textform.to_json(prog)
                d["blocks"] = [d["blocks"][block]]
                import json
                click.echo(json.dumps(d, indent=1, ensure_ascii=False))
            else:
                click.echo(textform.dumps(prog), nl=False)
            return
        show_mod.print_program(prog, block=block, color=options().use_color())
    return show
