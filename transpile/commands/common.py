"""What every command shares: turning errors into one line and an exit code, the root group's
context object, colour, loading a program."""
from __future__ import annotations

import functools
import os
import sys

import click

from ..core.errors import Terminated, UserError

EXIT_USAGE = 2
EXIT_INTERNAL = 3


class CliOptions:
    """The root group's options, and the one place that decides colour and quiet."""

    def __init__(self, debug: bool = False, quiet: bool = False, color=None):
        self.debug = debug
        self.quiet = quiet
        self.color = color

    def use_color(self) -> bool:
        """--color / --no-color, else NO_COLOR, else whether stdout is a terminal."""
        if self.color is not None:
            return self.color
        if os.environ.get("NO_COLOR"):
            return False
        return sys.stdout.isatty()

    def is_quiet(self, local: bool = False) -> bool:
        """The root's -q, or the command's own (`local`)."""
        return bool(self.quiet or local)


def gathered(cls):
    """Decorate a click callback to take its command's parameters as one `cls` (a dataclass
    whose fields are the parameters' names) after the positional ones click gives it
    (`pass_obj`'s obj): `fn(obj, args)` rather than a parameter per option."""
    def decorate(fn):
        @functools.wraps(fn)
        def callback(*given, **params):
            return fn(*given, cls(**params))
        return callback
    return decorate


def options() -> CliOptions:
    """The root group's options (defaults when a command runs on its own)."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    return obj if isinstance(obj, CliOptions) else CliOptions()


def no_startup(why: str) -> str:
    """The one message of a command that needs MAIN's startup program and was given none."""
    return "no --startup: %s; give the startup program saved with MAIN (--startup FILE)" % why


def startup_tables(main_prog) -> str:
    """Why a split (or plan) of `main_prog` needs its startup program: its embedding tables,
    which every style's pipeline takes from the startup program; "" if it has none."""
    from ..ir.tables import tables_of
    tables = tables_of(main_prog)
    if not tables:
        return ""
    more = " and %d more" % (len(tables) - 3) if len(tables) > 3 else ""
    return "MAIN's startup program declares and initializes its embedding table%s (%s%s)" % (
        "s" * (len(tables) > 1), ", ".join(tables[:3]), more)


def _err(msg: str) -> None:
    click.echo("pstranspile: error: %s" % msg, err=True)


def handle_errors(fn):
    """Turn UserError into one line + exit 2, anything unexpected into exit 3."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        ctx = click.get_current_context()
        debug = bool(ctx.find_object(CliOptions) and ctx.find_object(CliOptions).debug)
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            if debug:
                import traceback
                traceback.print_exc()
            _err(str(e).replace("\n", " "))
            ctx.exit(EXIT_USAGE)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Terminated as e:
            import signal
            click.echo("pstranspile: terminated (%s)" % signal.Signals(e.signum).name, err=True)
            ctx.exit(128 + e.signum)
        except KeyboardInterrupt:
            click.echo("pstranspile: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            ctx.exit(0)
        except Exception as e:  # noqa: BLE001 - the last line of defence
            if debug:
                import traceback
                traceback.print_exc()
            first = (str(e).splitlines() or [""])[0][:300]
            click.echo("pstranspile: internal error: %s: %s; rerun with --debug and report it"
                       % (type(e).__name__, first), err=True)
            ctx.exit(EXIT_INTERNAL)
    return wrapper


def load_program(path: str, in_file: bool = False):
    """The program at `path` (.pb, .pdmodel or .json); errors name the file. `in_file`:
    programio.load's (its ops' bytes left in the file)."""
    from ..format import programio
    return programio.load(path, in_file=in_file)
