"""How the checks read ops and vars: update ops, "name:value" attr maps, shapes, arg names."""
from __future__ import annotations

import re
from itertools import chain
from sys import intern as _intern
from typing import Optional

from ..ir.program import Op, Program, Var
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


def var_in(prog: Program, name: str, bi: int) -> Optional[Var]:
    """prog.find_var(name, bi), looked up in block `bi` and then block 0 first (where an
    optimize block's vars are, or its parent's: thousands of blocks at 64 pservers)."""
    blocks = prog.blocks
    if 0 <= bi < len(blocks):
        b = blocks[bi]
        v = b.vars.get(name)
        if v is not None:
            return v
        if b.parent_idx == 0 and bi != 0:
            v = blocks[0].vars.get(name)
            if v is not None:
                return v
    return prog.find_var(name, bi)


def colon_pairs(values) -> list:
    """"name:value" strings (grad_to_block_id and friends) -> [(name, value)] or None if bad."""
    out = []
    for s in values or ():
        name, sep, val = str(s).rpartition(":")
        if not sep or not name:
            return None
        out.append((_intern(name), val))   # (a grad's name: the trainer's string)
    return out


def fmt_shape(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape or ()) + "]"


def is_dense(v: Optional[Var]) -> bool:
    """A LOD_TENSOR with a shape."""
    return v is not None and is_dense_type(v.type)


def is_dense_type(t) -> bool:
    """is_dense of a var of VarType `t` (None: no var). (VarType.shape inlined: the checks
    of a large split ask this of hundreds of thousands of vars.)"""
    if t is None or t.type != "LOD_TENSOR":
        return False
    d = t.main_desc
    if d is False:
        d = t._main()
    return bool(d) and d[0].dims is not None


def is_static(shape) -> bool:
    return shape is not None and all(d >= 0 for d in shape)


def is_update_op(op: Op) -> bool:
    """An op that writes a parameter with an optimizer rule."""
    if op.inputs.get("Param") and op.outputs.get("ParamOut"):
        return True
    return op.type.startswith(TABLE_OPTIMIZERS_PREFIX)


def is_geo_update(op: Op) -> bool:
    """Geo mode's `sum(param, param.delta) -> param`."""
    if op.type != "sum":
        return False
    xs = op.input("X")
    out = op.output("Out")
    return len(out) == 1 and out[0] in xs and any(x.endswith(".delta") for x in xs)


# an attr's OpDesc.attrs entry (its bytes) -> its Attr, for shared_attr (emptied when full)
_SHARED_ATTRS: dict = {}
_SHARED_ATTRS_KEPT = 1024


def shared_attr(op: Op, name: str):
    """op.attr(name), for an attr that the ops of tens of thousands of blocks hold with the
    same bytes (a pserver's scale ops' `scale`): decoded once per distinct bytes of its
    OpDesc.attrs entry, nothing kept on the op."""
    src = op.source
    if src is None or op.attrs_decoded or op.attr_patch or op.dup_attrs or not src.has(name):
        return op.attr(name)
    spans = src.attr_spans()            # (each attr's entry, in the order of its names)
    if len(spans) != len(src.names):
        return op.attr(name)
    a, b = spans[src.names.index(name)]
    entry = src.raw()[a:b]
    a = _SHARED_ATTRS.get(entry)
    if a is None:
        if len(_SHARED_ATTRS) >= _SHARED_ATTRS_KEPT:
            _SHARED_ATTRS.clear()
        a = _SHARED_ATTRS[entry] = src.peek(name)
    return a.value
