"""Reading a split folder for `simulate`: its programs and runtime.json files, by folder."""
from __future__ import annotations

import json
import os

from ..core.errors import UserError
from ..format import programio


def load_split_dir(path: str):
    """Programs ("trainer_0/main" -> Program) and runtimes ("trainer_0" -> dict) of a split
    folder."""
    if not os.path.isdir(path):
        raise UserError("%s: no such folder" % path)
    programs, runtime = {}, {}
    for sub in sorted(os.listdir(path)):
        folder = os.path.join(path, sub)
        if not os.path.isdir(folder) or not (sub.startswith("trainer_")
                                             or sub.startswith("pserver_")):
            continue
        for kind in ("main", "startup"):
            for ext in (".pb", ".json"):
                f = os.path.join(folder, kind + ext)
                if os.path.isfile(f):
                    programs["%s/%s" % (sub, kind)] = programio.load(f)
                    break
        rt = os.path.join(folder, "runtime.json")
        if os.path.isfile(rt):
            try:
                with open(rt, encoding="utf-8") as fh:
                    runtime[sub] = json.load(fh)
            except (OSError, ValueError) as e:
                raise UserError("%s: cannot read (%s)" % (rt, e)) from None
    if not programs:
        raise UserError("%s: no trainer_<id>/ or pserver_<host>_<port>/ program folders" % path)
    return programs, runtime


def load_descs(path: str) -> dict:
    """The descriptors of a style-ps split folder: "trainer_0/worker_desc.txt" -> text."""
    out = {}
    for sub in sorted(os.listdir(path)):
        for name in ("worker_desc.txt", "server_desc.txt"):
            f = os.path.join(path, sub, name)
            if os.path.isfile(f):
                try:
                    with open(f, encoding="utf-8") as fh:
                        out["%s/%s" % (sub, name)] = fh.read()
                except (OSError, UnicodeDecodeError) as e:
                    raise UserError("%s: cannot read (%s)" % (f, e)) from None
    return out
