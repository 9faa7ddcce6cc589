"""`pstranspile convert A B`: lossless conversion between ProgramDesc bytes and JSON."""
from __future__ import annotations

import click

from ..core.errors import UserError
from .common import load_program, options


def register(main_group, handle_errors):
    """Add `convert` to the root click group."""
    @main_group.command()
    @click.argument("src", type=click.Path(dir_okay=False))
    @click.argument("dst", type=click.Path(dir_okay=False))
    @click.pass_obj
    @handle_errors
    def convert(obj, src, dst):
        """Convert a program between ProgramDesc bytes and the JSON text form.

        \b
        The format comes from the extension: .pb / .pdmodel (bytes) or .json (text).
        The conversion is lossless both ways:
          pstranspile convert main.pb main.json
          pstranspile convert main.json main2.pb     # main2.pb == main.pb, byte for byte
        """
        from ..format import programio
        programio.program_format(dst)
        prog = load_program(src)
        try:
            programio.save(prog, dst)
        except OSError as e:
            raise UserError("%s: cannot write (%s)" % (dst, e.strerror or e)) from None
        if not options().is_quiet():
            click.echo("wrote %s (%d blocks, %d ops)" % (dst, len(prog.blocks),
                                                         sum(len(b.ops) for b in prog.blocks)),
                       err=True)
    return convert
