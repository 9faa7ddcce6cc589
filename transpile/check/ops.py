"""How the checks read ops and vars: update ops, "name:value" attr maps, shapes, arg names."""
from __future__ import annotations

import re
from itertools import chain
from typing import Optional

from ..ir.program import Op, Var
from ..ir.validate import arg_names

# A pserver-side slice of a parameter: fc_w.block1 -> ("fc_w", "1").
BLOCK_SUFFIX = re.compile(r"^(.*)\.block(\d+)$")
# ops that update a parameter without a `Param` input: the large-scale sparse tables
TABLE_OPTIMIZERS_PREFIX = "lookup_sparse_table_fuse_"


def input_names(op: Op) -> list:
    """The op's input args, skipping empty names (a hand-edited program may carry them)."""
    return list(filter(None, chain.from_iterable(op.inputs.values())))


def output_names(op: Op) -> list:
    """The op's output args, skipping empty names."""
    return list(filter(None, chain.from_iterable(op.outputs.values())))


def all_names(ops, *slots: str) -> set:
    """Every argument of the ops' "inputs" and/or "outputs" (`slots`) but empty names, as a
    set (read in C: input_names op by op costs more than the set on a pserver's thousands of
    ops)."""
    names = set()
    for kind in slots:
        names.update(arg_names(ops, kind))
    names.discard("")
    return names


def colon_pairs(values) -> list:
    """"name:value" strings (grad_to_block_id and friends) -> [(name, value)] or None if bad."""
    out = []
    for s in values or ():
        name, sep, val = str(s).rpartition(":")
        if not sep or not name:
            return None
        out.append((name, val))
    return out


def fmt_shape(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape or ()) + "]"


def is_dense(v: Optional[Var]) -> bool:
    if v is None:
        return False
    t = v.type
    return t.type == "LOD_TENSOR" and t.shape is not None


def is_static(shape) -> bool:
    return shape is not None and all(d >= 0 for d in shape)


def is_update_op(op: Op) -> bool:
    """An op that writes a parameter with an optimizer rule."""
    if op.input("Param") and op.output("ParamOut"):
        return True
    return op.type.startswith(TABLE_OPTIMIZERS_PREFIX)


def is_geo_update(op: Op) -> bool:
    """Geo mode's `sum(param, param.delta) -> param`."""
    if op.type != "sum":
        return False
    xs = op.input("X")
    out = op.output("Out")
    return len(out) == 1 and out[0] in xs and any(x.endswith(".delta") for x in xs)
