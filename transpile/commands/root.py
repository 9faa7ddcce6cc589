"""The root command group of pstranspile, every command registered on it from its own module
of this package, and the console script (`pstranspile = "transpile.commands.root:run"`; the
checkout's cli.py re-exports both).

Exit codes: 0 success, 1 differences or findings (diff/check), 2 bad input or a refused split,
3 internal error.
"""
from __future__ import annotations

import os
import sys

import click

from .common import CliOptions, handle_errors
from . import check, config, convert, diff, plan, report, run, show, simulate, split


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors.")
@click.option("--color/--no-color", default=None,
              help="Force or disable colour (default: on a terminal, unless NO_COLOR is set).")
@click.version_option(package_name="pstranspile", prog_name="pstranspile")
@click.pass_context
def main(ctx, debug, quiet, color):
    """Split a PaddlePaddle training program for parameter-server training.

    \b
    Input: the training program as saved by Paddle (the bytes of
    main_program.desc.serialize_to_string(), .pb or .pdmodel; or our .json text form),
    usually its startup program, and a YAML cluster config. Its `style:` picks the
    pipeline to reproduce: classic (fluid's DistributeTranspiler), fleet (Paddle 2.0's
    Fleet) or ps (Paddle 2.1+: trainer programs plus server / worker descriptors).
    \b
    Typical use:
      pstranspile show main.pb
      pstranspile config check cluster.yaml
      pstranspile split main.pb --startup startup.pb --cluster cluster.yaml --out split/
      pstranspile report split/
      pstranspile check main.pb --startup startup.pb --cluster cluster.yaml split/
      pstranspile simulate main.pb --startup startup.pb --cluster cluster.yaml split/
    \b
    Exit codes: 0 ok, 1 differences/findings, 2 bad input or refused split, 3 internal error.
    """
    ctx.obj = CliOptions(debug, quiet, color)


for _command in (show, convert, config, split, diff, check, simulate, run, report, plan):
    _command.register(main, handle_errors)


def run() -> None:
    """The `pstranspile` console script: the CLI with the cyclic garbage collector off (a run
    is short, and the program model it builds holds no cycles worth collecting; collections
    walking millions of live objects cost more than the rest of a large split) and with no
    teardown of the model at exit."""
    import gc
    gc.disable()
    from ..core.gcpause import keep_objects_until_exit
    keep_objects_until_exit()
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        pass
    os._exit(code)
