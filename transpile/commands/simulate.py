"""`pstranspile simulate`: train the original and its split side by side, compare parameters.

Wired into the root group (root.py) with `register(main, handle_errors)`.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Optional

import click

from ..core.errors import UserError
from .common import gathered, no_startup, options


@dataclass(frozen=True)
class SimulateArgs:
    """`simulate`'s arguments and options, as click parses them."""
    main_program: str
    split_dir: Optional[str]
    startup: Optional[str]
    cluster: str
    steps: int
    batch: Optional[int]
    seed: int
    lod: Optional[str]
    rtol: Optional[float]
    expect_equal: bool
    accept_unchanged: tuple
    push_every: Optional[int]
    float32: bool
    program_init: bool
    no_why: bool
    max_memory: Optional[float]
    fmt: str

@click.command("simulate")
@click.argument("main_program", metavar="MAIN", type=click.Path(dir_okay=False))
@click.argument("split_dir", metavar="[SPLIT_DIR]", required=False,
                type=click.Path(file_okay=False))
@click.option("--startup", type=click.Path(dir_okay=False), default=None,
              help="The original startup program (its initializers): needed, the "
                   "original run starts from it.")
@click.option("--cluster", type=click.Path(dir_okay=False), required=True,
              help="The cluster config (YAML).")
@click.option("--steps", type=int, default=5, show_default=True, help="Training steps.")
@click.option("--batch", type=int, default=None,
              help="Global batch size (divided among the trainers) [default: 8 (a multiple of the "
                   "trainers: 9 for 3), or what the "
                   "program's own ops fix: a trainer's batch times the trainers].")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for feeds and inits.")
@click.option("--lod", "lod", default=None, metavar="N|MIN-MAX",
              help="The lengths of the sequences of a LoD feed (an input declared with "
                   "lod_level > 0): N each, or drawn per sequence in MIN-MAX [default: 1-3].")
@click.option("--rtol", type=float, default=None,
              help="Largest accepted difference, relative to how far the original run "
                   "moved the parameter [default: 1e-6, 1e-3 with --float32].")
@click.option("--expect-equal", is_flag=True,
              help="Also fail (exit 1) when a trainable parameter did not move in the "
                   "original run: its equality would prove nothing.")
@click.option("--accept-unchanged", "accept_unchanged", multiple=True, metavar="NAME",
              help="With --expect-equal: accept this parameter (a glob pattern) not moving "
                   "(repeatable).")
@click.option("--push-every", type=int, default=None,
              help="geo: the trainers push and pull after every N steps [default: 2, at most "
                   "geo_push_nums].")
@click.option("--float32", is_flag=True, help="Compute in float32 (default float64).")
@click.option("--program-init", is_flag=True,
              help="Style ps: new sparse rows start from the program's own initial rows "
                   "instead of the table's rule (see what else differs; not in geo).")
@click.option("--no-why", is_flag=True,
              help="Style ps: skip the reference runs that size each difference from the "
                   "original.")
@click.option("--max-memory", "max_memory", type=float, default=None, metavar="GB",
              help="Stop (exit 2) once the process would use more than GB gigabytes of "
                   "address space, instead of swapping.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: the result as one JSON object on stdout.")
@gathered(SimulateArgs)
def simulate(a: SimulateArgs):
    """Train MAIN and its split with numpy for a few steps; compare the parameters.

    \b
    (a) the reference: MAIN from its startup, --steps steps on random feeds (ids and
        labels as their uses allow; more steps while a trainable parameter has not
        moved), each trainer on its shard of every step's global batch, under the
        mode's schedule:
        sync: the shards' gradients averaged, the update ops once a step;
        async, half_async: turns, trainer 0 first each step: a trainer computes its
          gradients from the parameters it pulled at the end of its previous turn
          (remote tables: as the pservers hold them), the update ops apply them
          unaveraged, then it pulls; one step's gradients a send;
        geo: every trainer trains MAIN locally; after every --push-every steps the
          trainers, trainer 0 first, push (delta = (local - last pulled) / trainers,
          added on the pservers; sparse tables only the rows their gradients touched)
          and pull (local += pservers - last pulled; sparse: rows others pushed);
    (b) the split in SPLIT_DIR (trainer_<id>/ and pserver_<host>_<port>/ folders, as
        `split --out` writes; without SPLIT_DIR the split is made here), run by an
        in-process message layer under the same schedule. Trainers the folder lacks
        are derived from trainer_0.
    A correct split equals the reference: each trainer's parameters and the pservers'.
    Example:
      pstranspile simulate main.pb split/ --startup startup.pb --cluster cluster.yaml
    Style ps: pservers are Paddle 2.6.2's tables from each server_desc.txt; the split is
    compared with the ps reference (the original under the tables our descriptors define;
    geo: every trainer's whole original under Paddle's GeoCommunicator and geo tables), and
    that with the original, each difference named (docs/simulate.md, "Style ps").
    Exit codes: 0 all parameters equal within --rtol (with --expect-equal: and every
    trainable parameter moved, or is accepted); 1 a parameter differs, the split fails
    to execute, or (--expect-equal) a comparison proves nothing; 2 bad input or an op
    with no kernel.
    """
    # small matrices: BLAS threads only contend (a no-op once numpy is loaded)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from ..simulate import SimError, SimOptions, simulate as run
    ctx = click.get_current_context()
    quiet = options().is_quiet()
    lod = _check_options(a.steps, a.batch, a.rtol, a.lod, a.max_memory)
    cfg, main, start, programs, runtime, texts, result = _inputs(a.main_program, a.startup,
                                                                 a.cluster, a.split_dir)
    batch = a.batch
    if batch is not None:
        batch = _whole_shards(batch, cfg.trainers, quiet)
    from .progress import progress_bar
    try:
        with memory_cap(a.max_memory), progress_bar("simulate", quiet=quiet) as update:
            opts = SimOptions(steps=a.steps, batch=batch, seed=a.seed, rtol=a.rtol,
                              float32=a.float32, expect_equal=a.expect_equal,
                              accept_unchanged=a.accept_unchanged, push_every=a.push_every,
                              progress=update, lod=lod,
                              ps_options=dict(texts=texts, program_init=a.program_init,
                                              why=not a.no_why))
            res = run(main, start, cfg, programs, runtime, options=opts)
    except SimError as e:   # pragma: no cover - simulate() reports these in the result
        raise UserError(str(e)) from None
    if not res.equal:
        res.faults = _reproduced_faults(main, start, cfg, a.split_dir, result)
        res.fix_tried = cfg.fix_faults
    if a.fmt == "json":
        import json
        from ..simulate.explain.render import to_json
        click.echo(json.dumps(to_json(res, cfg), indent=1))
        ctx.exit(res.exit_code)
    _print_text(res, cfg, a.seed, a.float32, quiet)
    ctx.exit(res.exit_code)


def _check_options(steps, batch, rtol, lod, max_memory):
    """Refuse a bad option (UserError); `--lod`'s value as (MIN, MAX), or None."""
    for opt, v in (("--steps", steps), ("--batch", batch)):
        if v is not None and v < 1:
            raise UserError("%s must be at least 1, got %d" % (opt, v))
    if rtol is not None and not rtol >= 0:
        raise UserError("--rtol must be >= 0, got %g" % rtol)
    if max_memory is not None and not max_memory > 0:
        raise UserError("--max-memory must be > 0 (gigabytes), got %g" % max_memory)
    if lod is None:
        return None
    from ..simulate.model.feeds import parse_lod
    try:
        return parse_lod(lod)
    except ValueError as e:
        raise UserError("--lod: %s" % e) from None


@contextlib.contextmanager
def memory_cap(gb):
    """While inside, the process's address space is capped at `gb` gigabytes (RLIMIT_AS; None:
    as it was); an allocation beyond it becomes a UserError saying so (exit 2), not swapping.
    The cap is lifted on leaving."""
    if gb is None:
        yield
        return
    import resource

    import numpy.random  # noqa: F401  (its extension modules mapped before the cap)
    old = resource.getrlimit(resource.RLIMIT_AS)
    cap = int(gb * 2 ** 30)
    if old[1] != resource.RLIM_INFINITY:
        cap = min(cap, old[1])
    resource.setrlimit(resource.RLIMIT_AS, (cap, old[1]))
    try:
        yield
    except (MemoryError, ImportError, OSError) as e:
        if not isinstance(e, MemoryError) and "map" not in str(e) and "memory" not in str(e):
            raise       # not the cap (a module that failed to map is)
        raise UserError("simulate stopped: it needs more than --max-memory %g GB of address "
                        "space (try --float32, fewer --steps or a smaller --batch)" % gb) \
            from None
    finally:
        resource.setrlimit(resource.RLIMIT_AS, old)


def _inputs(main_program, startup, cluster, split_dir) -> tuple:
    """(config, main, startup, split programs, runtime.json dicts, descriptor texts, the
    SplitResult when the split is made here)."""
    from ..core import config as config_mod
    from ..format import programio
    from ..core.stylehooks import SIMULATE
    from .. import simulate as _registers_its_styles  # noqa: F401 (SIMULATE's behaviours)
    cfg = config_mod.load_config(cluster)
    if not SIMULATE.has(cfg.style):
        raise UserError("simulate does not support the %s style (its tables live in Paddle's "
                        "brpc servers, which the simulator does not model); check the split "
                        "with `pstranspile check`" % cfg.style)
    main = programio.load(main_program)
    start = programio.load(startup) if startup else None
    if split_dir:
        from ..simulate.runs.loading import check_made_for, load_descs, load_split_dir
        programs, runtime = load_split_dir(split_dir)
        descs = load_descs(split_dir)
        check_made_for(split_dir, runtime, descs, cfg)
        _need_startup(start)
        return cfg, main, start, programs, runtime, descs, None
    _need_startup(start)
    from ..split import BuildOptions, split as do_split
    result = do_split(main, start, cfg, trainer_ids=list(range(cfg.trainers)),
                      how=BuildOptions(names=(main_program, startup or "startup program")))
    return cfg, main, start, result.programs, result.runtime, result.texts, result


def _need_startup(start) -> None:
    if start is None:
        raise UserError(no_startup("the original run starts from MAIN's startup program (its "
                                   "initializers)"))


def _print_text(res, cfg, seed: int, float32: bool, quiet: bool) -> None:
    click.echo("simulate: %s mode, %d trainer%s, %d pserver%s, %d steps, global batch %d, "
               "seed %d, %s" % (cfg.mode, cfg.trainers, "s" if cfg.trainers != 1 else "",
                                len(cfg.pservers), "s" if len(cfg.pservers) != 1 else "",
                                res.steps, res.batch, seed,
                                "float32" if float32 else "float64"))
    click.echo("reference: %s" % res.schedule)
    if not quiet:
        for n in res.notes:
            click.echo("note: %s" % n, err=True)
    if res.error:
        click.echo("pstranspile: simulate: the split fails to execute: %s" % res.error, err=True)
    from ..simulate.explain.render import render
    render(res, cfg, click.echo)


def _whole_shards(batch: int, trainers: int, quiet: bool) -> int:
    """--batch rounded up to a multiple of the trainers (each trains on an equal shard)."""
    if trainers > 1 and batch % trainers:
        wanted, batch = batch, batch + trainers - batch % trainers
        if not quiet:
            click.echo("note: --batch %d rounded up to %d, a multiple of the %d trainers"
                       % (wanted, batch, trainers), err=True)
    return batch


def _reproduced_faults(main, start, cfg, split_dir, result) -> list:
    """The ids of the Paddle faults the simulated split reproduces: those `split` reported as
    not fixed (or fixed as far as a split can: `differs`), or, for a split folder, those
    `check` warns of."""
    if result is not None:
        return sorted({f.id for f in result.faults if not f.fixed or f.differs})
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
