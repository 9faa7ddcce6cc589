"""`pstranspile run`: train a style-ps split on Paddle 2.6.2's own parameter server (every role
here with --local, compared with simulate's prediction; or one role of a cluster).

pstranspile never imports Paddle: the roles are processes of a Python that does
(transpile/runtime/interpreter.py).
"""
from __future__ import annotations

import os
import shutil
import tempfile

import click

from dataclasses import dataclass
from typing import Optional

from ..core.errors import UserError
from .common import gathered, options


@dataclass(frozen=True)
class RunArgs:
    """`run`'s arguments and options, as click parses them."""
    split_dir: str
    local: bool
    cluster: Optional[str]
    steps: int
    batch: Optional[int]
    seed: int
    push_every: Optional[int]
    rtol: float
    expect_equal: bool
    accept_unchanged: tuple
    fmt: str
    paddle_python: Optional[str]
    port_base: Optional[int]
    timeout: float
    work: Optional[str]
    role: Optional[str]
    trainer_id: Optional[int]
    pservers: Optional[str]
    endpoint: Optional[str]
    feeds: Optional[str]
    save: Optional[str]


@click.command("run")
@click.argument("split_dir", metavar="SPLIT_DIR", type=click.Path(file_okay=False))
@click.option("--local", "local", is_flag=True,
              help="Every pserver and trainer here, on 127.0.0.1; compare with simulate's "
                   "prediction.")
@click.option("--cluster", type=click.Path(dir_okay=False), default=None,
              help="The cluster config the split was made for [default: its plan.json's].")
@click.option("--steps", type=int, default=5, show_default=True, help="Training steps.")
@click.option("--batch", type=int, default=None,
              help="Global batch of the synthetic feeds, divided among the trainers "
                   "[default: 8, or the next multiple of the trainers: 9 for 3].")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the synthetic feeds and initial values.")
@click.option("--push-every", type=int, default=None,
              help="geo: the communicator pushes after every N steps (Paddle's k_steps) "
                   "[default: 2].")
@click.option("--rtol", type=float, default=1e-6, show_default=True,
              help="--local: largest accepted difference, times max(1, the largest predicted "
                   "value), on top of the prediction's own spread.")
@click.option("--expect-equal", is_flag=True,
              help="--local: also fail (exit 1) when a compared value did not move from its "
                   "initial value: its equality would prove nothing.")
@click.option("--accept-unchanged", "accept_unchanged", multiple=True, metavar="NAME",
              help="With --expect-equal: accept this parameter (a glob pattern) not moving "
                   "(repeatable).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "junit"]), default="text",
              show_default=True, help="--local: text, json, or JUnit XML for CI.")
@click.option("--paddle-python", type=click.Path(dir_okay=False), default=None,
              help="A Python with paddlepaddle 2.6.2 and protobuf 4.x [default: "
                   "$PSTRANSPILE_PADDLE_PYTHON, else this one].")
@click.option("--port-base", type=int, default=None,
              help="--local: pserver i listens on 127.0.0.1:N+i [default: free ports].")
@click.option("--timeout", type=float, default=300, show_default=True,
              help="--local: seconds for the whole run.")
@click.option("--work", type=click.Path(file_okay=False), default=None,
              help="The run folder (logs, setup, results) [--local: a temporary one, kept "
                   "when the run fails or differs].")
@click.option("--role", type=click.Choice(["pserver", "trainer"]), default=None,
              help="One role of a cluster [default: $TRAINING_ROLE].")
@click.option("--trainer-id", type=int, default=None, help="[default: $PADDLE_TRAINER_ID].")
@click.option("--pservers", default=None, metavar="IP:PORT,...",
              help="[default: $PADDLE_PSERVERS_IP_PORT_LIST].")
@click.option("--endpoint", default=None, metavar="IP:PORT",
              help="This pserver's address [default: $POD_IP:$PADDLE_PORT].")
@click.option("--feeds", default=None, metavar="MODULE:FUNCTION",
              help="A trainer's feeds: FUNCTION(trainer_id, trainers) yields a feed dict per "
                   "step [default: simulate's synthetic feeds].")
@click.option("--save", type=click.Path(file_okay=False), default=None,
              help="A trainer writes what it trained to DIR/trainer_<id>/: NAME.npy per dense "
                   "parameter, table_<id>.npz (keys, rows) per sparse table.")
@gathered(RunArgs)
def run(a: RunArgs):
    """Train SPLIT_DIR (style ps) on Paddle 2.6.2's own brpc parameter server.

    \b
    --local: every pserver and trainer of the split as processes on 127.0.0.1, --steps
    steps from simulate's synthetic feeds and initial values (every sparse table's
    initial_range set to 0 in the descriptors run), trainers in turns (trainer 0 first);
    then every dense parameter each trainer holds and the rows of every sparse key the
    pservers hold are compared with simulate's prediction of the same split.
    sync: the trainers meet at the barrier table after each step (Paddle 2.6.2's own
    send_barrier segfaults: it is removed, docs/running.md); geo: the communicator pushes
    every --push-every steps.
    Without --local: one role of a cluster, from Paddle's launcher environment
    (TRAINING_ROLE, PADDLE_TRAINER_ID, PADDLE_PSERVERS_IP_PORT_LIST, POD_IP, PADDLE_PORT)
    or the flags; a trainer trains on --feeds or synthetic feeds, --save keeps the result.
    Example:
      pstranspile run split/ --local --steps 5
    Exit codes: 0 equal to the prediction within --rtol (a role: it finished); 1 a value
    differs (named) or a trainer failed (its step, op and Paddle's message); 2 bad input,
    a classic or fleet split, or no Paddle 2.6.2.
    """
    from ..runtime.interpreter import find_paddle_python
    from ..runtime.rundir import load_run_config
    for opt, v in (("--steps", a.steps), ("--batch", a.batch)):
        if v is not None and v < 1:
            raise UserError("%s must be at least 1, got %d" % (opt, v))
    config = load_run_config(a.split_dir, a.cluster)
    batch = a.batch
    if batch is None:
        batch = -(-8 // config.trainers) * config.trainers
    if batch % config.trainers:
        raise UserError("--batch %d is no multiple of the %d trainers" % (batch, config.trainers))
    paddle = find_paddle_python(a.paddle_python)
    ctx = click.get_current_context()
    if not a.local:
        from ..runtime.cluster import RoleOptions, run_role
        ctx.exit(run_role(a.split_dir, config, paddle, RoleOptions(
            role=a.role.upper() if a.role else None, trainer_id=a.trainer_id,
            pservers=a.pservers, endpoint=a.endpoint, steps=a.steps, batch=batch, seed=a.seed,
            push_every=a.push_every, feeds=a.feeds, save=a.save, work=a.work)))
    if a.feeds or a.save or a.role:
        raise UserError("--feeds, --save and --role are for one role of a cluster, not --local")
    from ..runtime.local import LocalOptions
    ctx.exit(_run_local(a.split_dir, config, paddle, LocalOptions(
        steps=a.steps, batch=batch, seed=a.seed, push_every=a.push_every,
        base_port=a.port_base, timeout=a.timeout, rtol=a.rtol), a.fmt, a.work,
        dict(rtol=a.rtol, expect_equal=a.expect_equal, accepted=a.accept_unchanged)))


def _run_local(split_dir, config, paddle, opts, fmt, work, judge) -> int:
    from ..runtime.local import run_local
    from ..runtime.verdict import compare, render_junit, render_text, to_json
    quiet = options().is_quiet()
    keep = work is not None
    work = os.path.abspath(work) if work else tempfile.mkdtemp(prefix="pstranspile-run-")
    os.makedirs(work, exist_ok=True)
    say = (lambda msg: None) if quiet or fmt != "text" else \
        (lambda msg: click.echo("run: %s" % msg, err=True))
    try:
        result = run_local(split_dir, config, paddle, opts, work, progress=say)
    except BaseException:
        if not keep:
            _kept_or_removed(work)
        raise
    verdict = compare(result, split_dir, config, **judge)
    if fmt == "json":
        import json
        click.echo(json.dumps(to_json(verdict), indent=1))
    elif fmt == "junit":
        click.echo(render_junit(verdict), nl=False)
    else:
        if not quiet:
            for n in verdict.notes:
                click.echo("note: %s" % n, err=True)
        render_text(verdict, click.echo)
    if verdict.exit_code == 0 and not keep:
        shutil.rmtree(work, ignore_errors=True)
    elif not keep:
        click.echo("run: the run folder (logs, results) is kept: %s" % work, err=True)
    return verdict.exit_code


def _kept_or_removed(work: str) -> None:
    """A run that stopped early (refused, interrupted, failed): its temporary folder goes when
    no role wrote a log in it yet, else it is kept and named (its logs say why)."""
    if any(n.endswith(".log") for n in os.listdir(work)):
        click.echo("run: the run folder (logs) is kept: %s" % work, err=True)
    else:
        shutil.rmtree(work, ignore_errors=True)


def register(main_group, handle_errors) -> None:
    """Add `run` to the root group, its errors handled like every other command's."""
    cmd = run
    if handle_errors is not None and not getattr(cmd.callback, "_errors_handled", False):
        cmd.callback = handle_errors(cmd.callback)
        cmd.callback._errors_handled = True
    main_group.add_command(cmd)
