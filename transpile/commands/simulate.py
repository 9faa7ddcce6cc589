"""`pstranspile simulate`: train the original and its split side by side, compare parameters.

Wired into the root group (root.py) with `register(main, handle_errors)`.
"""
from __future__ import annotations

import os

import click

from ..core.errors import UserError

@click.command("simulate")
@click.argument("main_program", metavar="MAIN", type=click.Path(dir_okay=False))
@click.argument("split_dir", metavar="[SPLIT_DIR]", required=False,
                type=click.Path(file_okay=False))
@click.option("--startup", type=click.Path(dir_okay=False), default=None,
              help="The original startup program (initializers).")
@click.option("--cluster", type=click.Path(dir_okay=False), required=True,
              help="The cluster config (YAML).")
@click.option("--steps", type=int, default=5, show_default=True, help="Training steps.")
@click.option("--batch", type=int, default=8, show_default=True,
              help="Global batch size (divided among the trainers).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for feeds and inits.")
@click.option("--rtol", type=float, default=None,
              help="Largest accepted difference, relative to how far the original run "
                   "moved the parameter [default: 1e-6, 1e-3 with --float32].")
@click.option("--expect-equal", is_flag=True,
              help="Fail on differences in async / half-async mode too.")
@click.option("--float32", is_flag=True, help="Compute in float32 (default float64).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: the result as one JSON object on stdout.")
def simulate(main_program, split_dir, startup, cluster, steps, batch, seed, rtol,
             expect_equal, float32, fmt):
    """Train MAIN and its split with numpy for a few steps; compare the parameters.

    \b
    (a) the original: startup once, then --steps steps of MAIN on random feeds (ids and
        labels as their uses allow), trained data-parallel: forward and backward on each
        trainer's shard of the batch, gradients averaged, the optimizer ops once;
    (b) the split in SPLIT_DIR (trainer_<id>/ and pserver_<host>_<port>/ folders, as
        `split --out` writes; without SPLIT_DIR the split is made here): every pserver's
        startup and listen_and_serv optimize blocks and every trainer's startup and main,
        with send / recv / barriers run in process, each trainer on its share of the
        same global batch. Trainers the folder lacks are derived from trainer_0.
    Example:
      pstranspile simulate main.pb split/ --startup startup.pb --cluster cluster.yaml
    Not for style ps (Paddle 2.1+'s brpc tables are not simulated): exits 2.
    A trainable parameter the original run did not move is reported (its equality proves
    nothing). Exit codes: 0 all parameters equal within --rtol; 1 a parameter differs or the
    split fails to execute (async / half-async report differences without failing unless
    --expect-equal); 2 bad input or an op with no kernel.
    """
    # small matrices: BLAS threads only contend (a no-op once numpy is loaded)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from ..core import config as config_mod
    from ..format import programio
    from ..simulate import SimError, simulate as run

    ctx = click.get_current_context()
    quiet = bool(getattr(ctx.find_root().obj, "quiet", False))
    for opt, v in (("--steps", steps), ("--batch", batch)):
        if v < 1:
            raise UserError("%s must be at least 1, got %d" % (opt, v))
    if rtol is not None and not rtol >= 0:
        raise UserError("--rtol must be >= 0, got %g" % rtol)
    cfg = config_mod.load_config(cluster)
    if cfg.style == "ps":
        raise UserError("simulate does not support the ps style (its tables live in Paddle's "
                        "brpc servers, which the simulator does not model); check the split "
                        "with `pstranspile check`")
    main = programio.load(main_program)
    start = programio.load(startup) if startup else None
    if split_dir:
        from ..simulate.loading import load_split_dir
        programs, runtime = load_split_dir(split_dir)
    else:
        from ..split import split as do_split
        result = do_split(main, start, cfg, trainer_ids=list(range(cfg.trainers)))
        programs, runtime = result.programs, result.runtime
    from .progress import progress_bar
    try:
        with progress_bar("simulate", quiet=quiet) as update:
            res = run(main, start, cfg, programs, runtime, steps=steps, batch=batch, seed=seed,
                      rtol=rtol, float32=float32, expect_equal=True if expect_equal else None,
                      progress=update)
    except SimError as e:   # pragma: no cover - simulate() reports these in the result
        raise UserError(str(e)) from None
    if not res.equal:
        res.faults = _reproduced_faults(main, start, cfg, split_dir,
                                        None if split_dir else result)
    if fmt == "json":
        import json
        from ..simulate.render import to_json
        click.echo(json.dumps(to_json(res, cfg), indent=1))
        ctx.exit(res.exit_code)
    click.echo("simulate: %s mode, %d trainer%s, %d pserver%s, %d steps, global batch %d, "
               "seed %d, %s" % (cfg.mode, cfg.trainers, "s" if cfg.trainers != 1 else "",
                                len(cfg.pservers), "s" if len(cfg.pservers) != 1 else "",
                                res.steps, batch, seed, "float32" if float32 else "float64"))
    if not quiet:
        for n in res.notes:
            click.echo("note: %s" % n, err=True)
    if res.error:
        click.echo("pstranspile: simulate: the split fails to execute: %s" % res.error, err=True)
    from ..simulate.render import render
    render(res, cfg, click.echo)
    ctx.exit(res.exit_code)


def _reproduced_faults(main, start, cfg, split_dir, result) -> list:
    """The ids of the Paddle faults the simulated split reproduces: those `split` reported as
    not fixed, or, for a split folder, those `check` warns of."""
    if result is not None:
        return sorted({f.id for f in result.faults if not f.fixed})
    from ..check import check_dir
    report = check_dir(main, start, cfg, split_dir)
    return sorted({f.fault for f in report.findings + report.warnings if f.fault})


def register(main_group, handle_errors) -> None:
    """Add `simulate` to the root group, its errors handled like every other command's."""
    cmd = simulate
    if handle_errors is not None and not getattr(cmd.callback, "_errors_handled", False):
        cmd.callback = handle_errors(cmd.callback)
        cmd.callback._errors_handled = True
    main_group.add_command(cmd)
