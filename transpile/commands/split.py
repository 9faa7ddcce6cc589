"""`pstranspile split MAIN --cluster C.yaml --out DIR`: write the trainer and pserver programs,
plan.json and report.md, and print what went where."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import click

from ..core.errors import UserError
from .common import gathered, load_program, no_startup, options, startup_tables


@dataclass(frozen=True)
class SplitArgs:
    """`split`'s arguments and options, as click parses them."""
    main_program: str
    startup: Optional[str]
    cluster: str
    out_dir: str
    trainer_id: Optional[str]
    force: bool
    fmt: str
    quiet: bool
    expect: Optional[str]
    dump_after: Optional[str]
    verify_each_pass: bool


def _parse_trainer_id(value):
    if value is None or value == "all":
        return value
    try:
        return int(value)
    except ValueError:
        raise UserError("--trainer-id: expected a number or 'all', got %r" % value) from None


def _list_passes(ctx, _param, value) -> None:
    """--list-passes: print every style's pipelines and exit."""
    if not value or ctx.resilient_parsing:
        return
    from ..split import pass_listing
    for style, modes, kind, passes in pass_listing():
        click.echo("%s style, %s (%s):" % (style, kind, ", ".join(modes)))
        for name, doc in passes or [("(none)", "the program as given")]:
            click.echo("  %-28s %s" % (name, doc))
    ctx.exit(0)


@click.command("split")
@click.argument("main_program", metavar="MAIN", type=click.Path(dir_okay=False))
@click.option("--startup", type=click.Path(dir_okay=False), default=None,
              help="The startup program saved with MAIN (its initializers): needed for a "
                   "split Paddle can run. Without it a program with embedding tables is "
                   "refused, and the startup programs written initialize no parameter (a "
                   "warning says so).")
@click.option("--cluster", type=click.Path(dir_okay=False), required=True,
              help="The cluster config (YAML).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Output folder, made with any missing parents; must be empty unless "
                   "--force. A symbolic link is written through (its target gets the split, "
                   "the link stays); the current folder, or one holding it, is refused.")
@click.option("--trainer-id", default=None, metavar="N|all",
              help="Which trainer program(s) to write (default: the config's trainer_id).")
@click.option("--force", is_flag=True,
              help="Replace the split in --out (a folder holding a split's plan.json): the "
                   "earlier split's trainer_*/ and pserver_*/ folders, with everything in "
                   "them, plan.json, report.md and dump/ are removed, other files kept; the "
                   "summary says what was replaced. A folder holding no split is refused.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="text: a summary of what went where; json: the plan (plan.json) on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors.")
@click.option("--expect", type=click.Path(file_okay=False), default=None,
              help="A golden split folder: after writing, compare the split with it and exit 1 "
                   "on any difference (\"did this change move anything?\").")
@click.option("--dump-after", metavar="PASS", default=None,
              help="Also write each program as it is right after pass PASS, as JSON text, to "
                   "DIR/dump/<program>.<PASS>.json (--list-passes names the passes).")
@click.option("--verify-each-pass", is_flag=True,
              help="Check every program's structure (blocks, op inputs naming declared "
                   "vars, parameters' dtypes and dims) after every pass; a pass that leaves "
                   "one broken is named (exit 3). For developing passes: slower.")
@click.option("--list-passes", is_flag=True, is_eager=True, expose_value=False,
              callback=_list_passes,
              help="Print the passes each style runs to make each program, and exit.")
@gathered(SplitArgs)
def split(a: SplitArgs):
    """Split MAIN into trainer and pserver programs.

    \b
    Writes, under --out:
      trainer_<id>/main.pb, startup.pb (+ runtime.json in fleet style,
                                        worker_desc.txt in ps style)
      pserver_<host>_<port>/main.pb, startup.pb     one pair per endpoint
                                        (+ server_desc.txt in ps style)
      plan.json     what went where (docs/plan-json.md)
      report.md     the same for a person: `pstranspile report DIR` prints it
    and prints a summary: per endpoint its blocks, bytes held and load, the imbalance, per
    program the ops removed and inserted, and the Paddle faults the split reproduces (the
    output equals Paddle's) or fixes (`paddle_faults: fix` in the cluster config: a split
    that trains like the original; docs/faults.md lists the faults).
    \b
    Example:
      pstranspile split samples/mlp_sgd/main.pb --startup samples/mlp_sgd/startup.pb \\
          --cluster configs/two_pservers.yaml --out /tmp/split
    Each program is made by a pipeline of named passes (--list-passes); an error names the
    pass that failed. A program Paddle would refuse (geo mode without sparse parameters,
    ...) exits 2 and writes nothing.
    """
    from ..core import config as config_mod
    from ..core.gcpause import keep_until_exit
    from ..output.target import check_target
    from ..split import TooLarge, WriteOptions, split_to_folder
    from .progress import progress_bar

    opts = options()
    check_target(a.out_dir, a.force)        # before the programs are read (checked again)
    cfg = config_mod.load_config(a.cluster)
    tid = _parse_trainer_id(a.trainer_id)
    if tid is not None:
        cfg = config_mod.with_trainer_id(cfg, tid)
    # (the ops' bytes left in the files: split_to_folder checks they were not written over)
    main_prog = load_program(a.main_program, in_file=True)
    startup_prog = load_program(a.startup, in_file=True) if a.startup else None
    if startup_prog is None and startup_tables(main_prog):
        raise UserError(no_startup(startup_tables(main_prog)))
    keep_until_exit(main_prog, startup_prog)
    how = WriteOptions(force=a.force, title=a.main_program, dump_after=a.dump_after,
                       verify_each_pass=a.verify_each_pass,
                       names=(a.main_program, a.startup or "startup program"))
    with progress_bar("split", quiet=opts.is_quiet(a.quiet)) as update:
        try:
            result = split_to_folder(main_prog, startup_prog, cfg, a.out_dir, how,
                                     progress=update)
        except TooLarge as e:
            raise config_mod.ConfigError("%s: %s" % (a.cluster, e.message)) from None
    if not opts.is_quiet(a.quiet):
        _print_summary(result, cfg, a.out_dir, a.fmt, opts.use_color())
        if startup_prog is None:
            click.echo("warning: " + no_startup(
                "the startup programs written initialize no parameter, so Paddle cannot "
                "train the split"), err=True)
        if result.replaced:
            click.echo(replaced_line(result.replaced, result.kept), err=a.fmt == "json")
    if a.expect:
        _compare_with_golden(a.out_dir, a.expect)


def _print_summary(result, cfg, out_dir: str, fmt: str, color: bool) -> None:
    if fmt == "json":
        from ..output.outdir import json_bytes
        click.echo(json_bytes(result.plan).decode("utf-8"), nl=False)
    else:
        from ..core.stylehooks import SUMMARY
        from ..render import styled  # noqa: F401 (registers SUMMARY's behaviours)
        SUMMARY.of(cfg.style)(result.plan, out_dir, color=color)


def replaced_line(replaced: list, kept: list, most: int = 6) -> str:
    """What --force replaced in the folder and what it kept, for the summary."""
    def names(items):
        more = len(items) - most
        return ", ".join(items[:most]) + (", ... (%d in all)" % len(items) if more > 0 else "")
    return "  replaced: %s (the earlier split's, with everything in them)%s" % (
        names(replaced), "; kept: " + names(kept) if kept else "")


def _compare_with_golden(out_dir: str, expect: str) -> None:
    from ..check.golden import golden_findings
    from ..diff.programs import builtin_op_defaults
    findings = golden_findings(out_dir, expect, builtin_op_defaults())
    for f in findings:
        click.echo(f.line(), err=True)
    if findings:
        click.echo("pstranspile: %d difference(s) from the golden split %s"
                   % (len(findings), expect), err=True)
        click.get_current_context().exit(1)


def register(main_group, handle_errors) -> None:
    """Add `split` to the root group, its errors handled like every other command's."""
    cmd = split
    if not getattr(cmd.callback, "_errors_handled", False):
        cmd.callback = handle_errors(cmd.callback)
        cmd.callback._errors_handled = True
    main_group.add_command(cmd)
