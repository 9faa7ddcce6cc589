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


def tables_of(program) -> list:
    """The embedding tables of `program`, sorted: the W of every lookup that is sparse,
    distributed or remote-prefetched (every style fake_inits or serves them from the startup
    program's declaration and initializer)."""
    out = set()
    for _, _, op in program.ops():
        if is_sparse_lookup(op) or is_distributed_lookup(op) or \
                is_remote_prefetch(op, CLASSIC_REMOTE_PREFETCH_TYPES):
            w = table_of(op)
            if w:
                out.add(w)
    return sorted(out)


# Paddle's distributed_lookup_table (pscore/distributed_lookup_table_op.cc) checks in its
# InferShape, run as the op is inserted, that every Ids var is 2-D: the fused lookup of a table
# whose ids are a slice of one feed ([-1]) or a 3-D tensor can not be built.
IDS_NOT_2D = "(InvalidArgument) The dimension of the 'Ids' tensor must be 2."


def ids_not_2d(block, ops) -> list:
    """[(op, ids name, shape)] of the lookups among `ops` whose Ids var (as `block` declares
    it) is not 2-D; a var the block does not declare is left out."""
    out = []
    for op in ops:
        ids = op.input("Ids")[:1]
        var = block.var(ids[0]) if ids else None
        if var is not None and var.shape is not None and len(var.shape) != 2:
            out.append((op, ids[0], list(var.shape)))
    return out


def ids_blocker(op_type: str, shape: list):
    """Why a lookup of `op_type` by ids of `shape` can not be made 2-D (passes/idsfix.py's
    table of what it reshapes), or None."""
    rest = [int(d) for d in shape[1:]]
    if op_type == "lookup_table_v2":
        return None if sum(1 for d in rest if d < 0) <= 1 else \
            "ids of shape %s: more than one unknown dim" % list(shape)
    if op_type == "lookup_table":
        if not rest or rest[-1] != 1:
            return "lookup_table ids of shape %s: the last dim is not 1" % list(shape)
        return None if sum(1 for d in rest[:-1] if d < 0) <= 1 else \
            "ids of shape %s: more than one unknown dim" % list(shape)
    return "%s: only lookup_table / lookup_table_v2 ids can be reshaped" % op_type


# what passes/idsfix.py appends to the name of a lookup's ids it makes 2-D: the fused lookup's
# ids, and the ids its grads and push name
FIXED_IDS_SUFFIXES = ("@2D", "@ROWS")


def ids_origin(name: str) -> str:
    """The program's own ids var a fixed lookup's ids var was made of (or the name itself)."""
    for s in FIXED_IDS_SUFFIXES:
        if name.endswith(s):
            return name[:-len(s)]
    return name


def ids_refusal(table: str, bad: list, where: str) -> str:
    """The one line of Paddle's refusal of the fused lookup of `table` (`bad`: ids_not_2d's)."""
    _, name, shape = bad[0]
    return "%s (%s, the distributed_lookup_table of %s: Ids %s has shape %s%s)" % (
        IDS_NOT_2D, where, table, name, shape,
        "" if len(bad) == 1 else ", and %d more" % (len(bad) - 1))


def remote_lookup_groups(ops: list):
    """Lookups of remote_prefetch tables grouped by table ({table: [op]}, in first-appearance
    order), and the grad ops of those same lookups (the same W and ids): what the fleet and ps
    passes fuse into one pull and one push per table."""
    pulls: dict = {}
    ids: dict = {}
    for op in ops:
        if is_remote_prefetch(op) and op.input("W"):
            w = op.input("W")[0]
            pulls.setdefault(w, []).append(op)
            ids.setdefault(w, set()).add(ids_origin(op.input("Ids")[0]))
    pushes: dict = {}
    for op in ops:
        if op.type in LOOKUP_GRAD_TYPES and op.input("W"):
            w = op.input("W")[0]
            if w in ids and op.input("Ids")[:1] and ids_origin(op.input("Ids")[0]) in ids[w]:
                pushes.setdefault(w, []).append(op)
    return pulls, pushes


def lookup_groups(ops: list):
    """remote_lookup_groups and whether the program has a `cvm` op (style ps: its tables' pulls
    then carry show / click)."""
    pulls, pushes = remote_lookup_groups(ops)
    return pulls, pushes, any(op.type == "cvm" for op in ops)
