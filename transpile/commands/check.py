"""`pstranspile check`: validate a split (ours or Paddle's) without running it."""
from __future__ import annotations

import click
from .common import options


def register(main_group, handle_errors) -> None:
    """Add the `check` command to the root click group."""

    @main_group.command("check")
    @click.argument("main_program", metavar="MAIN", type=click.Path(dir_okay=False))
    @click.argument("split_dir", metavar="SPLIT_DIR", type=click.Path())
    @click.option("--startup", type=click.Path(dir_okay=False), default=None,
                  help="The original startup program.")
    @click.option("--cluster", type=click.Path(dir_okay=False), required=True,
                  help="The cluster config (YAML) the split was made for.")
    @click.option("--expect", "expect_dir", type=click.Path(file_okay=False), default=None,
                  help="A golden split folder: every difference from it is a finding too.")
    @click.option("--op-defaults", "defaults_path", type=click.Path(dir_okay=False),
                  default=None, help="With --expect: JSON {op type: {attr: default}}; an attr "
                  "one side lacks is no difference when the other has its default (default: "
                  "Paddle 2.6.2's registry, shipped with pstranspile).")
    @click.option("--format", "fmt", type=click.Choice(["text", "json", "junit"]),
                  default="text", show_default=True,
                  help="text: one line per finding; json; junit: JUnit XML for CI.")
    @click.pass_context
    @handle_errors
    def check_cmd(ctx, main_program, split_dir, startup, cluster, expect_dir, defaults_path,
                  fmt):
        """Check a split of MAIN in SPLIT_DIR (trainer_<id>/, pserver_<host>_<port>/).

        \b
        Works on any split: ours, or Paddle's. Checks, among others, that:
          - every trainable parameter is optimized exactly once: its pserver slices tile it
          - each parameter block has one optimize block and one optimizer op, on the endpoint
            that owns it, with accumulators of the block's shape
          - every grad a trainer sends reaches the endpoint that optimizes it, every received
            parameter block exists where it is received from
          - no optimizer op is left on the trainer (except geo), sync mode has its barriers,
            Fanin = trainers, every var an op uses is declared
        Blocks no op reaches get a warning, not a finding.
        Style ps (worker_desc.txt / server_desc.txt beside the programs): the tables of the
        descriptors are the original's (sparse tables with their embedding's dims, the
        merged dense table whose shards cover it exactly once, the barrier), table ids agree
        between the trainer's lookups, pushes and sends and the descriptors, and the sends
        and barrier are wired as the mode wants.
        \b
        Each finding is one line: program, block, op, what is wrong (expected: ...).
        Example:
          pstranspile check main.pb --startup startup.pb --cluster cluster.yaml split/
        \b
        Exit status: 0 clean, 1 findings, 2 bad input.
        """
        from .. import check as check_mod
        from ..check.loading import load_original
        from ..core.config import load_config
        from ..core.gcpause import keep_until_exit, paused_gc
        from .progress import progress_bar
        cfg = load_config(cluster)
        quiet = options().is_quiet()
        with paused_gc():       # millions of small objects read, none freed until the end
            main = load_original(main_program)
            start = load_original(startup) if startup else None
            keep_until_exit(main, start)
            from ..diff.programs import builtin_op_defaults, load_op_defaults
            if defaults_path:
                defaults = load_op_defaults(defaults_path)
            else:       # only the golden diff (--expect) reads them
                defaults = builtin_op_defaults() if expect_dir is not None else None
            with progress_bar("check", quiet=quiet) as update:
                report = check_mod.check_dir(main, start, cfg, split_dir, expect_dir, defaults,
                                             progress=update)
        if fmt == "text":
            out = check_mod.render_text(report, warnings=False)
            if quiet:
                out = "".join(f.line() + "\n" for f in report.findings)
            click.echo(out, nl=False)
            if report.warnings and not quiet:
                for w in report.warnings:
                    click.echo("warning: " + w.line(), err=True)
        else:
            click.echo(check_mod.RENDERERS[fmt](report), nl=False)
        if report.findings:
            ctx.exit(1)
