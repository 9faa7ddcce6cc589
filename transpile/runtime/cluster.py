"""One role of a split on a real cluster: which role, from Paddle's launcher environment (as
`fleetrun` sets it) or the command's flags, and role.py started for it in the foreground.

    TRAINING_ROLE               PSERVER or TRAINER               (--role)
    PADDLE_PSERVERS_IP_PORT_LIST  the pservers, ip:port,...       (--pservers)
    PADDLE_TRAINERS_NUM         the trainers                     (the split's config)
    PADDLE_TRAINER_ID           this trainer's id                (--trainer-id)
    POD_IP, PADDLE_PORT         this pserver's address           (--endpoint)

Pserver i (its place in the list) serves the tables of the split's i-th pserver (the config's
order); trainer t runs trainer_<t>/. Trainers run free (no turns); their start and end meet
at fleet's barrier, as Paddle's own init_worker and stop_worker do (gloo, when the launcher
sets PADDLE_WITH_GLOO=1; without it Paddle's barrier does nothing).
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..core.errors import UserError
from .local import ROLE
from ..output.result import endpoint_dir
from .rundir import barrier_table_id, copy_split, read_texts, role_dirs, write_json


@dataclass
class RoleOptions:
    role: Optional[str] = None
    trainer_id: Optional[int] = None
    pservers: Optional[str] = None
    endpoint: Optional[str] = None
    steps: int = 5
    batch: int = 8
    seed: int = 0
    push_every: Optional[int] = None
    feeds: Optional[str] = None
    save: Optional[str] = None
    work: Optional[str] = None


def which_role(opts: RoleOptions, config, env=None) -> tuple:
    """(kind, index, pserver endpoints) from the flags, else the launcher's environment."""
    env = os.environ if env is None else env
    role = (opts.role or env.get("TRAINING_ROLE") or "").strip().upper()
    if role not in ("PSERVER", "TRAINER"):
        raise UserError("which role? --role pserver|trainer, or TRAINING_ROLE=PSERVER|TRAINER "
                        "as Paddle's launcher sets it (or --local: every role here)")
    eps = [e.strip() for e in (opts.pservers or env.get("PADDLE_PSERVERS_IP_PORT_LIST", ""))
           .split(",") if e.strip()]
    if not eps:
        raise UserError("which pservers? --pservers ip:port,... or "
                        "PADDLE_PSERVERS_IP_PORT_LIST")
    if len(eps) != len(config.pservers):
        raise UserError("%d pservers given (%s), the split was made for %d"
                        % (len(eps), ",".join(eps), len(config.pservers)))
    n = env.get("PADDLE_TRAINERS_NUM")
    if n and n.strip().isdigit() and int(n) != config.trainers:
        raise UserError("PADDLE_TRAINERS_NUM is %s, the split was made for %d trainers"
                        % (n, config.trainers))
    if role == "TRAINER":
        tid = opts.trainer_id if opts.trainer_id is not None else env.get("PADDLE_TRAINER_ID")
        if tid is None or not str(tid).strip().isdigit() or int(tid) >= config.trainers:
            raise UserError("which trainer? --trainer-id or PADDLE_TRAINER_ID, 0 to %d (got %s)"
                            % (config.trainers - 1, tid))
        return "trainer", int(tid), eps
    me = opts.endpoint or "%s:%s" % (env.get("POD_IP", ""), env.get("PADDLE_PORT", ""))
    if me not in eps:
        raise UserError("this pserver's address %s (--endpoint, or POD_IP:PADDLE_PORT) is not "
                        "in the pservers' list %s" % (me, ",".join(eps)))
    return "pserver", eps.index(me), eps


def role_setup(split_dir, config, opts: RoleOptions, kind, index, eps) -> str:
    """The run folder of one role (its copy of the split, setup.json): its path."""
    work = os.path.abspath(opts.work or os.path.join(
        os.getcwd(), "pstranspile-run", "%s%d" % (kind, index)))
    os.makedirs(os.path.join(work, "sync"), exist_ok=True)
    trainers, pservers, _ = role_dirs(split_dir, config)
    t_dirs, p_dirs = copy_split(trainers, pservers, os.path.join(work, "split"), False)
    texts = read_texts(t_dirs, p_dirs, config)
    setup = {"run_dir": work, "mode": config.mode, "trainers": config.trainers,
             "pservers": eps, "steps": opts.steps, "trainer_dirs": t_dirs,
             "pserver_descs": [os.path.join(d, "server_desc.txt") for d in p_dirs],
             "schedule": "free", "keys": None, "init": None, "cwd": os.getcwd(),
             "barrier_table_id": barrier_table_id(texts["trainer_0/worker_desc.txt"]),
             "save": os.path.abspath(opts.save) if opts.save else None, "wait": 3600}
    if kind == "trainer":
        setup["widths"] = sparse_widths(texts["%s/server_desc.txt" % endpoint_dir(
            config.pservers[0])])
        _trainer_setup(setup, t_dirs, texts, config, opts, index, work)
    write_json(os.path.join(work, "setup.json"), setup)
    return work


def sparse_widths(server_text) -> dict:
    """table id (str) -> the width of a row a lookup pulls, of each sparse table."""
    from ..simulate.ps.tables import TableOptions
    from ..simulate.ps.tables.server import build_server
    from .predict import SPARSE
    srv = build_server(server_text, 0, 1, TableOptions(lenient_initializers=True))
    return {str(tid): int(t.accessor.select_dim) for tid, t in sorted(srv.tables.items())
            if getattr(t, "table_class", "") in SPARSE}


def _trainer_setup(setup, t_dirs, texts, config, opts, index, work):
    from . import predict as predict_mod
    from .local import split_programs
    sp = split_programs(t_dirs)
    if opts.feeds:
        if ":" not in opts.feeds:
            raise UserError("--feeds %s: give module:function (a generator of feed dicts)"
                            % opts.feeds)
        setup["feeds_fn"] = opts.feeds
    else:
        feeds = predict_mod.make_feeds(sp.trainers[index]["main"], opts.steps, opts.batch,
                                       opts.seed, config.trainers)
        mine = {k.replace(".t%d." % index, ".", 1): v for k, v in feeds.items()
                if k.split(".")[1] == "t%d" % index}
        np.savez(os.path.join(work, "feeds.npz"), **mine)
        setup["feeds"] = os.path.join(work, "feeds.npz")
    if config.mode == "geo":
        setup["geo"] = predict_mod.geo_contexts(sp, texts, config, opts.push_every)


def run_role(split_dir, config, paddle, opts: RoleOptions) -> int:
    """Start this role's role.py in the foreground; its exit code."""
    kind, index, eps = which_role(opts, config)
    work = role_setup(split_dir, config, opts, kind, index, eps)
    env = paddle.env()
    env.setdefault("TRAINING_ROLE", kind.upper())
    env.setdefault("PADDLE_PSERVERS_IP_PORT_LIST", ",".join(eps))
    env.setdefault("PADDLE_TRAINERS_NUM", str(config.trainers))
    if kind == "trainer":
        env.setdefault("PADDLE_TRAINER_ID", str(index))
    return subprocess.call([paddle.executable, ROLE, os.path.join(work, "setup.json"), kind,
                            str(index)], env=env)
