"""What Paddle 2.6.2 itself cannot run of an original program (docs/faults.md, "Where Paddle
cannot run the original either"), measured on its single-process executor: a split that
trains like such an original proves less than it seems, and `simulate` says so in a note."""
from __future__ import annotations

from ...ir.tables import LOOKUP_TABLE_TYPES


def original_limits(main) -> list:
    """Notes on what Paddle's own executor fails at in the original program."""
    block = main.global_block
    notes = []
    for op in block.ops:
        x = (op.input("X") or [None])[0]
        v = block.var(x) if x else None
        if op.type == "clip" and v is not None and v.kind == "SELECTED_ROWS":
            notes.append("Paddle 2.6.2 cannot train the original either: its clip of the "
                         "sparse gradient %s (a ClipGradByValue) fails (\"Tensor holds no "
                         "memory\"); the simulated original clips it as the program says" % x)
            break
    tables = sorted({op.input("W")[0] for op in block.ops if op.type in LOOKUP_TABLE_TYPES
                     and op.input("W") and block.var(op.input("W")[0]) is not None
                     and block.var(op.input("W")[0]).kind == "SELECTED_ROWS"})
    if tables:
        notes.append("%s %s a static.nn.sparse_embedding (parameter-server) table: Paddle's "
                     "single-process executor cannot look %s up (\"Input id is not in current "
                     "rows table\"); the original trains only split"
                     % (", ".join(tables), "is" if len(tables) == 1 else "are",
                        "it" if len(tables) == 1 else "them"))
    return notes
