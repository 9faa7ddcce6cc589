"""Fix *-lookup-ids-not-2d: a remote lookup whose ids are not 2-D (Paddle's fused
`distributed_lookup_table` and `distributed_push_sparse` take 2-D ids only) reads them made 2-D,
and its rows come back in the shape the program expects.

Per lookup, by its type and its ids' shape (`N` the batch, unknown):

| lookup | ids | the fused lookup reads | its rows | made back by |
|---|---|---|---|---|
| `lookup_table_v2` | `[N]` | `unsqueeze2` -> `[N, 1]` | `[N, 1, W]` | `squeeze2` |
| `lookup_table_v2` | `[N, a, b, ...]` | `reshape2 [0, -1]` -> `[N, a*b*...]` | `[N, a*b*..., W]` | `reshape2 [0, a, b, ..., W]` |
| `lookup_table` | `[N, a, ..., 1]` | `reshape2 [-1, 1]` -> `[N*a*..., 1]` | `[N*a*..., W]` | `reshape2 [-1, a, ..., W]` |

The lookup's grad ops (which the push replaces) name ids whose first dim is still `N` (the
v1 lookup's: its ids without the last dim, `[N, a*...]`): the push multiplies the gradient by
its ids' first dim (the batch), as it would the original's, and every push of a table keeps
one first dim (else Paddle's client scales none of them). A reshape back needs the ids' other
dims known but for one.
"""
from __future__ import annotations

from ..ir.program import Attr, Op, Program
from ..ir.roles import FORWARD
from ..ir.tables import LOOKUP_GRAD_TYPES, LOOKUP_TABLE_TYPES, ids_not_2d, is_remote_prefetch
from .build import make_op, new_tensor, role_attrs


def lookups_2d(main: Program, types=LOOKUP_TABLE_TYPES) -> Program:
    """Each remote lookup (of `types`, remote_prefetch) whose ids are not 2-D made to read
    2-D ids, its rows made back into the program's var right before its first reader, its
    grads naming ids of the batch's first dim (the table above). `main` is not modified."""
    prog = main.copy()
    block = prog.global_block
    bad = ids_not_2d(block, [op for op in block.ops if is_remote_prefetch(op, types)])
    made: dict = {}             # (ids name, op type) -> (lookup ids, push ids)
    for op, ids, shape in bad:
        key = (ids, op.type)
        if key not in made:
            made[key] = _ids_2d(block, ids, shape, op.type)
        lookup_ids, push_ids = made[key]
        out = op.output("Out")[0]
        op.outputs["Out"] = [_rows_back(block, out, shape, op.type)]
        op.inputs["Ids"] = [lookup_ids]
        for g in block.ops:
            if g.type in LOOKUP_GRAD_TYPES and g.input("W") == op.input("W") and \
                    g.input("Ids") == [ids] and g.input("Out@GRAD") == [out + "@GRAD"]:
                g.inputs["Ids"] = [push_ids]
    return prog


def _insert(block, op: Op, after=None, before=None) -> None:
    """Insert `op` right after the last op writing `after`, or right before the first op
    reading `before` (the front / the end when there is none)."""
    ops = block.ops
    if after is not None:
        at = max((i + 1 for i, o in enumerate(ops) if after in o.output_names()), default=0)
    else:
        at = next((i for i, o in enumerate(ops) if before in o.input_names()), len(ops))
    ops.insert(at, op)


def _reshaped(block, src: str, name: str, to: list, kind="reshape2", attrs=None) -> str:
    """Declare `name` (of reshape2's `to`: a 0 copies the input's dim, declared -1; `src`'s
    dtype) and insert the op making it from `src` right after `src`'s producer."""
    dtype = block.vars[src].dtype
    block.add_var(new_tensor(name, tuple(d if d != 0 else -1 for d in to), dtype,
                             lod_level=0))
    src_shape = block.vars[src].shape or ()
    block.add_var(new_tensor(name + "@XSHAPE", tuple([0] + list(src_shape)), dtype,
                             lod_level=0))
    attrs = attrs if attrs is not None else {"shape": Attr("INTS", list(to))}
    _insert(block, make_op(kind, {"X": [src]}, {"Out": [name], "XShape": [name + "@XSHAPE"]},
                           {**attrs, **role_attrs(FORWARD)}), after=src)
    return name


def _ids_2d(block, ids: str, shape: list, op_type: str) -> tuple:
    """(the ids the fused lookup reads, the ids its grads and push name), made right after
    the ids' producer."""
    rest = [int(d) for d in shape[1:]]
    if op_type == "lookup_table":
        lookup = _reshaped(block, ids, ids + "@2D", [-1, 1])
        if len(rest) == 2:
            push = _reshaped(block, ids, ids + "@ROWS", [-1, rest[0]],
                             kind="squeeze2", attrs={"axes": Attr("INTS", [len(shape) - 1])})
        else:
            push = _reshaped(block, ids, ids + "@ROWS", [0, -1])
        return lookup, push
    if not rest:
        two = _reshaped(block, ids, ids + "@2D", [-1, 1], kind="unsqueeze2",
                        attrs={"axes": Attr("INTS", [1])})
    else:
        two = _reshaped(block, ids, ids + "@2D", [0, -1])
    return two, two


def _rows_back(block, out: str, shape: list, op_type: str) -> str:
    """The var the fused lookup of `out` writes instead (declared with the shape Paddle's
    kernel gives it), made back into `out` right before the first reader of `out`."""
    var = block.vars[out]
    width = int(var.shape[-1])
    rest = [int(d) for d in shape[1:]]
    name = out + "@2D"
    if op_type == "lookup_table":
        rows = [-1, width]
        back = {"shape": Attr("INTS", [-1] + rest[:-1] + [width])}
        kind = "reshape2"
    elif not rest:
        rows, kind, back = [-1, 1, width], "squeeze2", {"axes": Attr("INTS", [1])}
    else:
        n = 1
        for d in rest:
            n *= d
        rows = [-1, n if n > 0 else -1, width]
        kind, back = "reshape2", {"shape": Attr("INTS", [0] + rest + [width])}
    block.add_var(new_tensor(name, tuple(rows), var.dtype, lod_level=0))
    xshape = name + "@XSHAPE"
    block.add_var(new_tensor(xshape, tuple([0] + rows), var.dtype, lod_level=0))
    _insert(block, make_op(kind, {"X": [name]}, {"Out": [out], "XShape": [xshape]},
                           {**back, **role_attrs(FORWARD)}), before=out)
    return name
