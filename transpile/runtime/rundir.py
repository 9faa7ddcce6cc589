"""What `run` reads of a split folder, and the run folder it trains from.

A split folder as `split` writes it (trainer_<id>/ with main.pb, startup.pb, worker_desc.txt;
pserver_<host>_<port>/ with server_desc.txt; plan.json, whose `config` is the cluster config it
was made for) or Paddle's own (then `--cluster` says the config). The run folder holds a copy
of its programs and descriptors with every sparse table's `initial_range` set to 0 (Paddle's
pservers draw a new row's embedx from a generator seeded by the clock: with 0 every new row
starts at zero, in the runtime as in the prediction), setup.json (role.py's), the feeds and
initial values, the roles' logs and results.
"""
from __future__ import annotations

import json
import os
import re
import shutil

from ..core.config import from_dict, load_config
from ..core.errors import UserError
from ..output.result import endpoint_dir

INITIAL_RANGE = re.compile(r"initial_range: [-+0-9.eE]+")


def load_run_config(split_dir: str, cluster: str | None):
    """The cluster config of a split: --cluster, else plan.json's `config`; refused unless
    its style runs on Paddle 2.6.2's runtime."""
    if not os.path.isdir(split_dir):
        raise UserError("%s: no such folder" % split_dir)
    if cluster:
        cfg = load_config(cluster)
    else:
        plan = os.path.join(split_dir, "plan.json")
        if not os.path.isfile(plan):
            raise UserError("%s has no plan.json (a split `split` did not write?): give "
                            "--cluster CONFIG, the config it was made for" % split_dir)
        try:
            with open(plan, encoding="utf-8") as f:
                data = json.load(f).get("config")
        except (OSError, ValueError, AttributeError) as e:
            raise UserError("%s: cannot read (%s)" % (plan, e)) from None
        if not isinstance(data, dict):
            raise UserError("%s: no `config` object (give --cluster CONFIG)" % plan)
        cfg = from_dict(data, plan + ": config")
    if not cfg.traits.runnable:
        raise UserError("run trains style-%s splits on Paddle 2.6.2's runtime only; a %s-style "
                        "split runs on %s" % (_runnable_style(), cfg.style, cfg.traits.runs_on))
    return cfg


def _runnable_style() -> str:
    from ..core.styles import STYLES
    return "/".join(s.name for s in STYLES.values() if s.runnable)


def role_dirs(split_dir: str, config) -> tuple:
    """(trainer folders by trainer id, pserver folders by pserver index, notes): trainers the
    split lacks run trainer_0/'s programs (a split made for one trainer id)."""
    notes = []
    pservers = []
    for ep in config.pservers:
        d = os.path.join(split_dir, endpoint_dir(ep))
        if not os.path.isfile(os.path.join(d, "server_desc.txt")):
            raise UserError("%s: no such file (pserver %s of the config; a style-ps split "
                            "holds one per pserver)" % (os.path.join(d, "server_desc.txt"), ep))
        pservers.append(d)
    trainers = []
    for t in range(config.trainers):
        d = os.path.join(split_dir, "trainer_%d" % t)
        if not os.path.isdir(d):
            d = os.path.join(split_dir, "trainer_0")
            notes.append("trainer %d runs trainer_0/'s programs (the split has no "
                         "trainer_%d/)" % (t, t))
        for f in ("main.pb", "startup.pb", "worker_desc.txt"):
            if not os.path.isfile(os.path.join(d, f)):
                raise UserError("%s: no such file (each trainer runs its main.pb and "
                                "startup.pb with its worker_desc.txt)" % os.path.join(d, f))
        trainers.append(d)
    return trainers, pservers, notes


def copy_split(trainers: list, pservers: list, dst: str, zero_init: bool) -> tuple:
    """The roles' folders copied into `dst` (trainer_<t>/, pserver_<i>/), every descriptor's
    initial_range set to 0 when `zero_init`; (trainer folders, pserver folders)."""
    out_t, out_p = [], []
    for kind, dirs, out in (("trainer", trainers, out_t), ("pserver", pservers, out_p)):
        for i, src in enumerate(dirs):
            d = os.path.join(dst, "%s_%d" % (kind, i))
            os.makedirs(d, exist_ok=True)
            for f in sorted(os.listdir(src)):
                p = os.path.join(src, f)
                if not os.path.isfile(p) or not f.endswith((".pb", ".txt")):
                    continue
                if f.endswith("_desc.txt") and zero_init:
                    with open(p, encoding="utf-8") as fh:
                        text = INITIAL_RANGE.sub("initial_range: 0.0", fh.read())
                    with open(os.path.join(d, f), "w", encoding="utf-8") as fh:
                        fh.write(text)
                else:
                    shutil.copyfile(p, os.path.join(d, f))
            out.append(d)
    return out_t, out_p


def read_texts(trainers: list, pservers: list, config) -> dict:
    """The descriptors of the copied roles, keyed as simulate's loading.load_descs keys them."""
    out = {}
    for t, d in enumerate(trainers):
        out["trainer_%d/worker_desc.txt" % t] = _read(os.path.join(d, "worker_desc.txt"))
    for ep, d in zip(config.pservers, pservers):
        out["%s/server_desc.txt" % endpoint_dir(ep)] = _read(os.path.join(d, "server_desc.txt"))
    return out


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError("%s: cannot read (%s)" % (path, e)) from None


def barrier_table_id(text: str):
    """The id of a descriptor's BarrierTable, or None."""
    m = re.search(r'table_id: (\d+)\s*\n\s*table_class: "BarrierTable"', text)
    return int(m.group(1)) if m else None


def write_json(path: str, data) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
