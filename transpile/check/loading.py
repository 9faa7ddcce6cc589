"""Reading a split folder: trainer_<id>/ and pserver_<host>_<port>/ programs, runtime.json."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Optional

from ..core.config import ClusterConfig
from ..core.errors import ProgramFormatError, UserError
from ..core.heaptrim import give_back
from ..format import programio
from ..ir.program import Program
from ..output.result import endpoint_dir

_TRAINER_DIR = re.compile(r"^trainer_(\d+)$")


@dataclass
class Part:
    """One program of the split, with where it came from."""
    name: str                    # "trainer_0/main"
    prog: Program


@dataclass
class Split:
    """The programs of a split folder, keyed by trainer id and pserver endpoint."""
    root: str
    trainers: dict = field(default_factory=dict)     # id -> {"main": Part, "startup": Part|None,
    #                                                        "runtime": dict|None}
    pservers: dict = field(default_factory=dict)     # endpoint -> {"main": Part, "startup": ...}
    stray: list = field(default_factory=list)        # folder names that are neither


def load_program_raw(path: str, in_file: bool = False) -> Program:
    """Read a program without the structural validation of programio.load: a dangling block
    attr is a finding here, not a reason to refuse the input. Only read, never written: kept
    small (protoread.decode's read_only: no op call stacks, no var bytes to write; `in_file`:
    a large program's ops' bytes left in its file, programio.large_file: a trainer's, held to
    the end, not a streamed pserver's, read and let go)."""
    prog = programio.load(path, read_only=True, validate=False,
                          in_file=in_file and programio.large_file(path))
    give_back()         # what reading it made and let go (core/heaptrim.py)
    return prog


def load_original(path: str) -> Program:
    """The original main or startup program as a check reads it: validated as every input
    (programio.load); only read, as the split's (load_program_raw)."""
    prog = programio.load(path, read_only=True, in_file=programio.large_file(path))
    give_back()
    return prog


def _find_program(folder: str, stem: str) -> Optional[str]:
    for ext in programio.BINARY_EXTS + programio.TEXT_EXTS:
        p = os.path.join(folder, stem + ext)
        if os.path.isfile(p):
            return p
    return None


def load_split(root: str, config: ClusterConfig, progress=None, lazy: bool = False) -> Split:
    """The programs of a split folder, keyed by trainer id and pserver endpoint.
    `progress(done, total)` is called after each trainer / pserver folder read.
    `lazy`: the pserver programs are only found, not read (Part.prog None, the paths in the
    entry's "paths"): load_pserver() reads one, release_pserver() lets it go. A lazy split
    refuses a folder exactly as an eager one would (lazy_error)."""
    if not os.path.exists(root):
        raise UserError("%s: no such folder" % root)
    if not os.path.isdir(root):
        raise UserError("%s: not a folder (expected a split: trainer_<id>/, pserver_<ep>/)"
                        % root)
    split = Split(root)
    by_dir = {endpoint_dir(ep): ep for ep in config.pservers}
    names = [name for name in sorted(os.listdir(root))
             if os.path.isdir(os.path.join(root, name)) and not name.startswith(".")
             and (_TRAINER_DIR.match(name) or name.startswith("pserver_"))]
    for done, name in enumerate(names, 1):
        folder = os.path.join(root, name)
        m = _TRAINER_DIR.match(name)
        main_path = _find_program(folder, "main")
        if main_path is None:
            if lazy:
                raise lazy_error(root, config, None)
            raise UserError("%s: no main program (main.pb or main.json)" % folder)
        startup_path = _find_program(folder, "startup")
        if lazy and not m:
            entry = {"main": Part(name + "/main", None),
                     "startup": Part(name + "/startup", None) if startup_path else None,
                     "paths": (main_path, startup_path)}
        else:
            held = bool(m)      # (a trainer's programs are held to the end)
            entry = {"main": Part(name + "/main", _load(root, config, main_path, lazy, held)),
                     "startup": Part(name + "/startup",
                                     _load(root, config, startup_path, lazy, held))
                     if startup_path else None}
        if m:
            entry["runtime"] = _runtime(folder, root, config, lazy)
            split.trainers[int(m.group(1))] = entry
        elif name in by_dir:
            split.pservers[by_dir[name]] = entry
        else:
            split.stray.append(name)
            if lazy:        # read and dropped: an unreadable one is refused, as always
                load_pserver(split, entry, config)
        if progress is not None:
            progress(done, len(names))
    if not split.trainers and not split.pservers:
        raise UserError("%s: not a split folder (no trainer_<id>/ or pserver_<host>_<port>/ "
                        "folders)" % root)
    return split


def _runtime(folder: str, root: str, config: ClusterConfig, lazy: bool):
    rt_path = os.path.join(folder, "runtime.json")
    if not os.path.isfile(rt_path):
        return None
    try:
        with open(rt_path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        if lazy:
            raise lazy_error(root, config, None) from None
        raise UserError("%s: cannot read JSON (%s)" % (rt_path, e)) from None


def _load(root: str, config: ClusterConfig, path: str, lazy: bool,
          in_file: bool = False) -> Program:
    if not lazy:
        return load_program_raw(path, in_file)
    try:
        return load_program_raw(path, in_file)
    except (UserError, ProgramFormatError) as e:
        raise lazy_error(root, config, e) from None


def lazy_error(root: str, config: ClusterConfig, error):
    """The error a lazy split meets, as the eager reading of the folder says it: that reads
    the folders in their order and stops at the first it refuses, which may be an earlier
    one than the lazy reading got to."""
    try:
        load_split(root, config)
    except (UserError, ProgramFormatError) as e:
        return e
    return error if error is not None else UserError("%s: unreadable split" % root)


def load_pserver(split: Split, entry: dict, config: ClusterConfig) -> None:
    """Read the programs of a lazy pserver entry (load_split(lazy=True))."""
    main_path, startup_path = entry["paths"]
    entry["main"].prog = _load(split.root, config, main_path, True)
    if startup_path:
        entry["startup"].prog = _load(split.root, config, startup_path, True)


def release_pserver(entry: dict) -> None:
    """Let the programs of a lazy pserver entry go."""
    for k in ("main", "startup"):
        if entry.get(k) is not None:
            entry[k].prog = None
