#!/usr/bin/env python3
"""The floor_out process of bench/run.py: what a split that writes OUT_BYTES must at least do.

    python bench/run_floor.py MAIN.pb STARTUP.pb OUT_BYTES

Parses main.pb and startup.pb once with protobuf's upb backend (the project's schema,
`transpile.format.proto.ProgramDesc`), then serializes them again and again, main then startup,
until it has produced at least OUT_BYTES bytes; prints the bytes produced. It refuses any other
protobuf backend (exit 2): the python backend's floor would be several times slower and flatter
every ratio.

Only the schema module is imported, not the `transpile` package's __init__ (which loads the whole
CLI: yaml, numpy, the passes, ~0.3 s): the floor pays for Python, protobuf and the schema, as a
minimal tool would. OUT_BYTES of a split is `pb_bytes(SPLIT_DIR)`: every *.pb file under the
split folder (not runtime.json, *_desc.txt or any other file).
"""
from __future__ import annotations

import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def pb_bytes(folder) -> int:
    """Bytes of every *.pb file anywhere under `folder` (a split's OUT_BYTES)."""
    total = 0
    for d, _, files in os.walk(folder):
        total += sum(os.path.getsize(os.path.join(d, f)) for f in files if f.endswith(".pb"))
    return total


def floor_cmd(python, main, startup, out_bytes) -> list:
    """The command line of one floor_out process."""
    return [python, os.path.abspath(__file__), main, startup, str(int(out_bytes))]


def _schema():
    """ProgramDesc from transpile/format/proto.py without running transpile/__init__.py."""
    if "transpile" not in sys.modules:
        pkg = types.ModuleType("transpile")
        pkg.__path__ = [os.path.join(ROOT, "transpile")]
        sys.modules["transpile"] = pkg
    from transpile.format.proto import ProgramDesc
    return ProgramDesc


def serialize_until(progs, want) -> int:
    """Serialize `progs` in turn, round after round, until `want` bytes; the bytes produced."""
    if not any(p.ByteSize() for p in progs):
        raise ValueError("both programs are empty")
    out = 0
    while out < want:
        for p in progs:
            out += len(p.SerializeToString())
    return out


def main(argv) -> int:
    if len(argv) != 4 or not argv[3].isdigit():
        print("usage: run_floor.py MAIN.pb STARTUP.pb OUT_BYTES", file=sys.stderr)
        return 2
    from google.protobuf.internal import api_implementation
    if api_implementation.Type() != "upb":
        print("run_floor.py: protobuf backend is %r, not upb (protobuf >= 4.21): the floor "
              "would be wrong" % api_implementation.Type(), file=sys.stderr)
        return 2
    program_desc = _schema()
    progs = []
    for path in argv[1:3]:
        msg = program_desc()
        with open(path, "rb") as f:
            msg.ParseFromString(f.read())
        progs.append(msg)
    try:
        produced = serialize_until(progs, int(argv[3]))
    except ValueError as e:
        print("run_floor.py: %s" % e, file=sys.stderr)
        return 2
    print(produced)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
