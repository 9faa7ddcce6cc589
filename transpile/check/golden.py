"""`check --expect`: every difference between a split and a golden split is a finding.

The comparison itself is transpile/diff/programs.py's; this only turns its tree diff into findings.
"""
from __future__ import annotations

import os
from typing import Optional

from ..core.errors import UserError
from ..diff import programs as diff_mod
from .findings import Finding
from .loading import load_program_raw


def golden_findings(split_dir: str, expect_dir: str, op_defaults: Optional[dict] = None) -> list:
    """One finding per difference between a split and a golden split (through diff)."""
    if not os.path.isdir(expect_dir):
        raise UserError("%s: --expect needs a split folder" % expect_dir)
    tree = diff_mod.diff_trees(expect_dir, split_dir, load=load_program_raw,
                               op_defaults=op_defaults)
    out = []
    for f in tree.files:
        prog = f.path.rsplit(".", 1)[0]
        if f.program is None:
            what = {"missing": "missing (the golden split has it)",
                    "extra": "not in the golden split"}.get(f.status, f.status)
            if f.status == "changed":
                for d in f.details:
                    out.append(Finding("golden", f.path, None, None,
                                       "differs from the golden split: %s" % d,
                                       "the golden value"))
                continue
            out.append(Finding("golden", f.path, None, None, what,
                               "the same files as %s" % expect_dir))
            continue
        for b in f.program.blocks:
            if b.status in ("added", "removed"):
                out.append(Finding("golden", prog, b.idx, None,
                                   "block %s" % ("not in the golden split" if b.status == "added"
                                                 else "missing"), "the golden block"))
                continue
            for d in b.details:
                out.append(Finding("golden", prog, b.idx, None, d, "the golden value"))
            for o in b.ops:
                if o.kind == "insert":
                    out.append(Finding("golden", prog, b.idx, o.b_index,
                                       "extra op %s" % o.op, "no such op (golden split)"))
                elif o.kind == "delete":
                    out.append(Finding("golden", prog, b.idx, o.b_index if o.b_index is not None
                                       else None, "missing op %s (golden op %d)"
                                       % (o.op, o.a_index), "the golden op"))
                else:
                    out.append(Finding("golden", prog, b.idx, o.b_index,
                                       "%s differs from the golden op %d: %s"
                                       % (o.type, o.a_index, "; ".join(o.details)),
                                       "the golden op"))
            for v in b.vars:
                msg = {"added": "extra var %s", "removed": "missing var %s",
                       "changed": "var %s differs"}[v.kind] % v.name
                out.append(Finding("golden", prog, b.idx, None,
                                   "%s: %s" % (msg, "; ".join(v.details)), "the golden var"))
    return out
