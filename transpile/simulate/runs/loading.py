"""Reading a split folder for `simulate`: its programs and runtime.json files, by folder."""
from __future__ import annotations

import json
import os

from ...core.errors import UserError
from ...core.styles import STYLES
from ...format import programio, psdesc


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


def made_for(path: str, runtime: dict, descs: dict):
    """(style, modes, where it says so) the split in folder `path` was made for, or None when
    nothing in it says: its plan.json (ours); else fleet's runtime.json `mode`; else the ps
    descriptors (_desc_modes; they do not tell async from half_async)."""
    plan = os.path.join(path, "plan.json")
    if os.path.isfile(plan):
        try:
            with open(plan, encoding="utf-8") as fh:
                d = json.load(fh)
        except (OSError, ValueError):
            d = {}
        if isinstance(d, dict) and isinstance(d.get("mode"), str) \
                and isinstance(d.get("style"), str):
            return d["style"], (d["mode"],), "its plan.json"
    modes = {str(rt.get("mode", "")).lower() for rt in runtime.values() if isinstance(rt, dict)}
    if len(modes) == 1 and "" not in modes:
        return _style_with("runtime_json"), tuple(modes), "its runtime.json"
    worker = [k for k in sorted(descs) if k.endswith("worker_desc.txt")]
    if worker:
        return (_style_with("descriptors"), _desc_modes(psdesc.parse_text(descs[worker[0]], worker[0])),
                "its worker_desc.txt")
    return None


def _style_with(trait: str) -> str:
    """The style whose splits carry the files `trait` names (runtime.json, descriptors)."""
    return next(s.name for s in STYLES.values() if getattr(s, trait))


def _desc_modes(desc) -> tuple:
    """The modes a PSParameter's tables say: geo gives sparse tables MemorySparseGeoTable and
    every table the `sum` rule; sync marks them `sync`."""
    tables = [t for t in desc.worker_param.downpour_worker_param.downpour_table_param
              if t.table_class != "BarrierTable"]
    if tables and (any(t.table_class == "MemorySparseGeoTable" for t in tables)
                   or all(t.common.name == "sum" for t in tables)):
        return ("geo",)
    if any(t.common.sync for t in tables):
        return ("sync",)
    return ("async", "half_async")


def check_made_for(path: str, runtime: dict, descs: dict, config) -> None:
    """Refuse a split folder made for another style or mode than `config`'s (the run would
    fail on ops the config's mode does not expect), naming both."""
    made = made_for(path, runtime, descs)
    if made is None:
        return
    style, modes, where = made
    if style == config.style and config.mode in modes:
        return
    raise UserError("%s was split for %s style, %s mode (%s), the config for %s style, %s "
                    "mode: simulate a split with the config it was made with"
                    % (path, style, " or ".join(modes), where, config.style, config.mode))
