"""pstranspile: split a Paddle training program for a parameter-server cluster.

Exit codes: 0 success, 1 differences or findings (diff/check), 2 bad input or a refused split,
3 internal error.
"""
from __future__ import annotations

import functools
import os
import sys

import click

from transpile.core.errors import UserError

EXIT_USAGE = 2
EXIT_INTERNAL = 3


class Ctx:
    def __init__(self, debug: bool, quiet: bool, color):
        self.debug = debug
        self.quiet = quiet
        self.color = color


def _err(msg: str) -> None:
    click.echo("pstranspile: error: %s" % msg, err=True)


def handle_errors(fn):
    """Turn UserError into one line + exit 2, anything unexpected into exit 3."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        ctx = click.get_current_context()
        debug = bool(ctx.find_object(Ctx) and ctx.find_object(Ctx).debug)
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
    usually its startup program, and a YAML cluster config.
    \b
    Typical use:
      pstranspile show main.pb
      pstranspile config check cluster.yaml
      pstranspile split main.pb --startup startup.pb --cluster cluster.yaml --out split/
    \b
    Exit codes: 0 ok, 1 differences/findings, 2 bad input or refused split, 3 internal error.
    """
    ctx.obj = Ctx(debug, quiet, color)


def _load(path: str):
    from transpile.format import programio
    return programio.load(path)


def _use_color(ctx_obj) -> bool:
    if ctx_obj is not None and ctx_obj.color is not None:
        return ctx_obj.color
    if os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


# ---------------------------------------------------------------------------------------------
@main.command()
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
      pstranspile show samples/fit_a_line/main.pb --block 0
    Each op prints as  type(Slot=arg, ...) -> (Slot=arg, ...)  role=...
    """
    from transpile.render import show as show_mod
    prog = _load(program)
    if block is not None and not 0 <= block < len(prog.blocks):
        raise UserError("%s: --block %d: the program has blocks 0..%d"
                        % (program, block, len(prog.blocks) - 1))
    if fmt == "json":
        from transpile.format import textform
        if block is not None:
            d = textform.to_json(prog)
            d["blocks"] = [d["blocks"][block]]
            import json
            click.echo(json.dumps(d, indent=1, ensure_ascii=False))
        else:
            click.echo(textform.dumps(prog), nl=False)
        return
    show_mod.print_program(prog, block=block, color=_use_color(obj))


@main.command()
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
    from transpile.format import programio
    programio.program_format(dst)
    prog = _load(src)
    try:
        programio.save(prog, dst)
    except OSError as e:
        raise UserError("%s: cannot write (%s)" % (dst, e.strerror or e)) from None
    if not obj.quiet:
        click.echo("wrote %s (%d blocks, %d ops)" % (dst, len(prog.blocks),
                                                     sum(len(b.ops) for b in prog.blocks)),
                   err=True)


# ---------------------------------------------------------------------------------------------
@main.group()
def config():
    """Cluster config files."""


@config.command("check")
@click.argument("file", type=click.Path(dir_okay=False))
@click.pass_obj
@handle_errors
def config_check(obj, file):
    """Validate a cluster config and print it with every default filled in.

    \b
    Keys (defaults in brackets):
      pservers        list of host:port, in order, no duplicates      (required)
      trainers        number of trainers, >= 1                          [1]
      trainer_id      0..trainers-1, or "all"                           [0]
      mode            sync | async | half_async | geo                   [sync]
      style           fleet | classic                                   [fleet]
      slice_var_up    slice large parameters into blocks                [true]
      min_block_size  smallest block, in elements                       [8192]
      split_method    round_robin | hash_name | balanced                [round_robin]
      geo_push_nums   geo mode: steps between pushes                    [100]
    """
    import yaml
    from transpile.core.config import load_config
    cfg = load_config(file)
    click.echo(yaml.safe_dump(cfg.to_dict(), sort_keys=False, default_flow_style=None), nl=False)


# ---------------------------------------------------------------------------------------------
def _parse_trainer_id(value):
    if value is None or value == "all":
        return value
    try:
        return int(value)
    except ValueError:
        raise UserError("--trainer-id: expected a number or 'all', got %r" % value) from None


@main.command()
@click.argument("main_program", metavar="MAIN", type=click.Path(dir_okay=False))
@click.option("--startup", type=click.Path(dir_okay=False), default=None,
              help="The startup program (initializers). Without it the split starts from an "
                   "empty startup program.")
@click.option("--cluster", type=click.Path(dir_okay=False), required=True,
              help="The cluster config (YAML).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Output folder (created; must be empty unless --force).")
@click.option("--trainer-id", default=None, metavar="N|all",
              help="Which trainer program(s) to write (default: the config's trainer_id).")
@click.option("--force", is_flag=True,
              help="Write into a non-empty folder, replacing the split in it (other files kept).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="text: a summary of what went where; json: the plan (plan.json) on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors.")
@click.option("--expect", type=click.Path(file_okay=False), default=None,
              help="A golden split folder: after writing, compare the split with it and exit 1 "
                   "on any difference (\"did this change move anything?\").")
@click.pass_obj
@handle_errors
def split(obj, main_program, startup, cluster, out_dir, trainer_id, force, fmt, quiet, expect):
    """Split MAIN into trainer and pserver programs.

    \b
    Writes, under --out:
      trainer_<id>/main.pb, startup.pb (+ runtime.json in fleet style)
      pserver_<host>_<port>/main.pb, startup.pb     one pair per endpoint
      plan.json     what went where (docs/plan-json.md)
      report.md     the same for a person: `pstranspile report DIR` prints it
    and prints a summary: per endpoint its blocks, bytes held and load, the imbalance, and
    per program the ops removed and inserted.
    \b
    Example:
      pstranspile split samples/mlp_sgd/main.pb --startup samples/mlp_sgd/startup.pb \\
          --cluster configs/two_pservers.yaml --out /tmp/split
    A program Paddle would refuse (geo mode without sparse parameters, ...) exits 2 and writes
    nothing.
    """
    from transpile.core import config as config_mod
    from transpile.output import outdir
    from transpile.format import programio
    from transpile.split import split as do_split

    cfg = config_mod.load_config(cluster)
    tid = _parse_trainer_id(trainer_id)
    if tid is not None:
        cfg = config_mod.with_trainer_id(cfg, tid)
    outdir.check_target(out_dir, force)
    from transpile.ir.validate import validate_for_split
    main_prog = _load(main_program)
    validate_for_split(main_prog, main_program)
    startup_prog = None
    if startup:
        startup_prog = _load(startup)
        validate_for_split(startup_prog, startup)
    from transpile.core.gcpause import keep_until_exit, paused_gc
    from transpile.progress import progress_bar
    from transpile.render.report import program_section, report_chunks
    keep_until_exit(main_prog, startup_prog)
    sections = {}

    def emit(key, prog):
        # each program is written as soon as it is built and then let go: a split to many
        # pservers is many times larger than its input
        stage.write(key + ".pb", programio.to_chunks(prog))
        lines = program_section(key, main_prog, prog)
        sections[key] = ["\n".join(lines)] if lines else []     # one string: less to hold

    try:
        with outdir.staged(out_dir, force) as stage, paused_gc():
            with progress_bar("split", quiet=obj.quiet or quiet) as update:
                result = do_split(main_prog, startup_prog, cfg, progress=update, emit=emit)
            for key, rt in result.runtime.items():
                stage.write(key + "/runtime.json", outdir.json_bytes(rt))
            if result.plan:
                stage.write("plan.json", outdir.json_chunks(result.plan))
            stage.write("report.md", (piece.encode("utf-8") for piece in report_chunks(
                main_prog, {}, result.plan, title=main_program, config=cfg, sections=sections)))
    except OSError as e:
        raise UserError("%s: cannot write (%s)" % (out_dir, e.strerror or e)) from None
    if not (obj.quiet or quiet):
        if fmt == "json":
            click.echo(outdir.json_bytes(result.plan).decode("utf-8"), nl=False)
        else:
            from transpile.render import show as show_mod
            show_mod.print_split_summary(result.plan, out_dir, color=_use_color(obj))
    if expect:
        from transpile.check.golden import golden_findings
        from transpile.render.diff import builtin_op_defaults
        findings = golden_findings(out_dir, expect, builtin_op_defaults())
        for f in findings:
            click.echo(f.line(), err=True)
        if findings:
            click.echo("pstranspile: %d difference(s) from the golden split %s"
                       % (len(findings), expect), err=True)
            click.get_current_context().exit(1)


from transpile import check_cli, diff_cli, plan_cli, report_cli, simulate_cli  # noqa: E402

diff_cli.register(main, handle_errors)
check_cli.register(main, handle_errors)
simulate_cli.register(main, handle_errors)
report_cli.register(main, handle_errors)
plan_cli.register(main, handle_errors)

def run() -> None:
    """The `pstranspile` console script: the CLI with the cyclic garbage collector off (a run
    is short, and the program model it builds holds no cycles worth collecting; collections
    walking millions of live objects cost more than the rest of a large split) and with no
    teardown of the model at exit."""
    import gc
    gc.disable()
    from transpile.core.gcpause import keep_objects_until_exit
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


if __name__ == "__main__":  # pragma: no cover
    run()
