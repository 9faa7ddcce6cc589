"""Embedding tables: the lookup ops that read them and how Paddle classifies those lookups.

A table (the lookup's W) looked up with `is_sparse` gets a SELECTED_ROWS grad; with
`remote_prefetch` the trainer fetches the rows it needs from the pservers instead of holding
the table; with `is_distributed` it is a large table split over every pserver by rows.
"""
from __future__ import annotations

from typing import Optional

from .program import Op

# Op types that read an embedding table (W) by ids, and their grads.
LOOKUP_TABLE_TYPES = ("lookup_table", "lookup_table_v2")
LOOKUP_GRAD_TYPES = ("lookup_table_grad", "lookup_table_v2_grad")

# The classic DistributeTranspiler's wider nets (Fleet looks at lookup_table[_v2] only):
# `_get_sparse_table_names` looks only at these types (lookup_table_v2 is not among them), and
# their tables get a `fake_init` instead of a real initializer on the trainer ...
CLASSIC_FAKE_INIT_TYPES = ("lookup_table", "nce")
# ... and with remote_prefetch these fetch the rows they need from the pservers.
CLASSIC_REMOTE_PREFETCH_TYPES = ("lookup_table", "nce", "lookup_table_v2")


def table_of(op: Op) -> Optional[str]:
    """The table (first W input) an op reads, or None."""
    w = op.input("W")
    return w[0] if w else None


def is_remote_prefetch(op: Op, types=LOOKUP_TABLE_TYPES) -> bool:
    """A lookup that fetches its rows from the pservers (remote_prefetch set)."""
    return op.type in types and op.attr("remote_prefetch") is True


def is_sparse_lookup(op: Op) -> bool:
    """A lookup of a plain sparse table: is_sparse, not is_distributed."""
    if op.type in LOOKUP_TABLE_TYPES:
        return op.attr("is_sparse") is True and op.attr("is_distributed") is False
    return op.type == "distributed_lookup_table" and op.attr("is_distributed") is False


def is_distributed_lookup(op: Op) -> bool:
    """A lookup of a large-scale table (is_distributed)."""
    return op.type in LOOKUP_TABLE_TYPES + ("distributed_lookup_table",) and \
        op.attr("is_distributed") is True
