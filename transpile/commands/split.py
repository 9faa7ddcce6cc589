"""`pstranspile split MAIN --cluster C.yaml --out DIR`: write the trainer and pserver programs,
plan.json and report.md, and print what went where."""
from __future__ import annotations

import click

from ..core.errors import UserError
from .common import load_program, use_color


def _parse_trainer_id(value):
    if value is None or value == "all":
        return value
    try:
        return int(value)
    except ValueError:
        raise UserError("--trainer-id: expected a number or 'all', got %r" % value) from None


def register(main_group, handle_errors):
    """Add `split` to the root click group."""
    @main_group.command()
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
                  help="Write into a non-empty folder, replacing the split in it (other files "
                       "kept).")
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
          trainer_<id>/main.pb, startup.pb (+ runtime.json in fleet style,
                                            worker_desc.txt in ps style)
          pserver_<host>_<port>/main.pb, startup.pb     one pair per endpoint
                                            (+ server_desc.txt in ps style)
          plan.json     what went where (docs/plan-json.md)
          report.md     the same for a person: `pstranspile report DIR` prints it
        and prints a summary: per endpoint its blocks, bytes held and load, the imbalance, per
        program the ops removed and inserted, and the Paddle faults the split reproduces (the
        output equals Paddle's) or fixes (`paddle_faults: fix` in the cluster config: a split
        that trains like the original; the README lists the faults).
        \b
        Example:
          pstranspile split samples/mlp_sgd/main.pb --startup samples/mlp_sgd/startup.pb \\
              --cluster configs/two_pservers.yaml --out /tmp/split
        A program Paddle would refuse (geo mode without sparse parameters, ...) exits 2 and writes
        nothing.
        """
        from ..core import config as config_mod
        from ..output import outdir
        from ..format import programio
        from ..split import split as do_split

        cfg = config_mod.load_config(cluster)
        tid = _parse_trainer_id(trainer_id)
        if tid is not None:
            cfg = config_mod.with_trainer_id(cfg, tid)
        outdir.check_target(out_dir, force)
        from ..ir.validate import validate_for_split
        main_prog = load_program(main_program)
        validate_for_split(main_prog, main_program)
        startup_prog = None
        if startup:
            startup_prog = load_program(startup)
            validate_for_split(startup_prog, startup)
        from ..core.gcpause import keep_until_exit, paused_gc
        from .progress import progress_bar
        from ..render.report import program_section, report_chunks
        keep_until_exit(main_prog, startup_prog)
        sections = {}

        def emit(key, prog):
            # each program is written as soon as it is built and then let go: a split to many
            # pservers is many times larger than its input
            if isinstance(prog, str):           # a text file (the ps descriptors)
                stage.write(key, prog.encode("utf-8"))
                return
            stage.write(key + ".pb", programio.to_chunks(prog))
            lines = program_section(key, main_prog, prog)
            sections[key] = ["\n".join(lines)] if lines else []     # one string: less to hold

        try:
            with outdir.staged(out_dir, force) as stage, paused_gc():
                with progress_bar("split", quiet=obj.quiet or quiet) as update:
                    result = do_split(main_prog, startup_prog, cfg, progress=update, emit=emit)
                for key, rt in result.runtime.items():
                    stage.write(key + "/runtime.json", outdir.json_bytes(rt))
                for rel, text in result.texts.items():
                    stage.write(rel, text.encode("utf-8"))
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
                from ..render import show as show_mod
                if result.plan.get("style") == "ps":
                    from ..render.psreport import print_summary
                    print_summary(result.plan, out_dir, color=use_color(obj))
                else:
                    show_mod.print_split_summary(result.plan, out_dir, color=use_color(obj))
        if expect:
            from ..check.golden import golden_findings
            from ..diff.programs import builtin_op_defaults
            findings = golden_findings(out_dir, expect, builtin_op_defaults())
            for f in findings:
                click.echo(f.line(), err=True)
            if findings:
                click.echo("pstranspile: %d difference(s) from the golden split %s"
                           % (len(findings), expect), err=True)
                click.get_current_context().exit(1)
    return split
