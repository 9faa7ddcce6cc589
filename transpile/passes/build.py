"""Builders every style's passes share: new ops, vars, blocks and control vars; small edits.

Attr types follow what Paddle's op makers declare for the RPC ops (send's sections is LONGS,
split_byref's INTS, ...), so a Paddle runtime reads the programs as it reads its own.
"""
from __future__ import annotations

import itertools
from typing import Callable, Optional

from ..ir.program import Attr, Block, Op, Program, Var, VarType, tensor_type
from ..core.errors import RefusedError
from ..ir import roles

CONTROL_VAR_PREFIX = "__control_var@"

# VarType.Type numbers, for the dtype attr of ops such as fill_constant.
DTYPE_CODES = {"BOOL": 0, "INT16": 1, "INT32": 2, "INT64": 3, "FP16": 4, "FP32": 5, "FP64": 6,
               "UINT8": 20, "INT8": 21, "BF16": 22, "COMPLEX64": 23, "COMPLEX128": 24}

# Paddle's listen_and_serv RPC thread counts (its FLAGS_rpc_*_thread_num defaults).
RPC_THREADS = 12

# What the trainer passes append to a startup program; never run on a pserver.
TRAINER_STARTUP_OPS = ("recv", "fetch_barrier", "concat")

# AttrTypes that Attr.infer cannot guess (empty lists, LONGS for small ints).
_TYPED = {
    ("send", "sections"): "LONGS", ("split_byref", "sections"): "INTS",
    ("split_selected_rows", "height_sections"): "LONGS",
    ("distributed_lookup_table", "height_sections"): "LONGS",
    ("lookup_sparse_table", "padding_idx"): "LONG",
}


# --- ops -------------------------------------------------------------------------------------
def make_op(type_: str, inputs: dict, outputs: dict, attrs: dict) -> Op:
    """A new op. Attr values are kept as given; plain values get the type Paddle's op maker
    declares (op_role and trainer_id INT, empty lists STRINGS, _TYPED) or else an inferred one."""
    op = Op(type_, {k: list(v) for k, v in inputs.items()},
            {k: list(v) for k, v in outputs.items()}, {})
    for name, value in attrs.items():
        if isinstance(value, Attr):
            op.attrs[name] = value
            continue
        t = _TYPED.get((type_, name))
        if t is None and name in (roles.ROLE_ATTR, "trainer_id"):
            t = "INT"
        if t is None and isinstance(value, (list, tuple)) and not value:
            t = "STRINGS"
        if t is None and value.__class__ is list and value[0].__class__ is str and \
                all(x.__class__ is str for x in value):
            op.attrs[name] = Attr("STRINGS", list(value))   # (names: what Attr.infer says)
            continue
        op.attrs[name] = Attr(t, list(value) if isinstance(value, tuple) else value) \
            if t else Attr.infer(value)
    return op


class OpTemplate:
    """Ops of one type and one set of attrs, made many times with different slots (the sum and
    scale merging each grad block: a pair per block on every pserver). make_op's typing of
    the attrs is done once. Each op gets its own attrs dict and its own copy of each list
    value (an op's attrs may be edited once it is made); the Attrs of other values are shared
    by the ops of one template, as an Attr is never changed in place (set_attr and
    replace_attr store a new one)."""

    def __init__(self, type_: str, attrs: dict):
        self.type = type_
        made = make_op(type_, {}, {}, attrs).attrs
        self._shared = {name: Attr(a.type, list(a.value) if type(a.value) is list else a.value,
                                   a.extra) for name, a in made.items()}
        self._lists = tuple((name, a.type, a.value, a.extra) for name, a in made.items()
                            if type(a.value) is list)

    def make(self, inputs: dict, outputs: dict) -> Op:
        """The op with these slots, taken as they are (the op owns them)."""
        attrs = self._shared.copy()
        for name, t, v, extra in self._lists:
            attrs[name] = Attr(t, list(v), extra)
        return Op(self.type, inputs, outputs, attrs)


def role_attrs(role: int) -> dict:
    """op_role with an empty op_role_var, as Paddle's op maker appends them."""
    return {roles.ROLE_ATTR: Attr("INT", role), roles.ROLE_VAR_ATTR: Attr("STRINGS", [])}


# --- vars ------------------------------------------------------------------------------------
def new_control_var(block: Block, **flags) -> str:
    """Declare a fresh dependency-only var `__control_var@<n>`, n the first unused number.

    Paddle names these with a random float; counting makes the same input always give the same
    program. `flags` are the Var flags (the styles' passes set different ones, as Paddle does).
    """
    # Where the last search on this block stopped: the numbers below are taken (passes add
    # control vars and never remove them), so a pass adding thousands does not count from 0
    # each time.
    n = getattr(block, "_control_var_hint", 0)
    while "%s%d" % (CONTROL_VAR_PREFIX, n) in block.vars:
        n += 1
    name = "%s%d" % (CONTROL_VAR_PREFIX, n)
    block.add_var(Var(name, VarType("LOD_TENSOR", {}), **flags))
    block._control_var_hint = n + 1
    return name


def new_tensor(name: str, shape, dtype: Optional[str] = None, *, kind: str = "LOD_TENSOR",
               persistable: Optional[bool] = None, lod_level: Optional[int] = None,
               **flags) -> Var:
    """A tensor var as Paddle's block.create_var makes it: FP32 and LOD_TENSOR unless given."""
    return Var.tensor(name, dtype or "FP32", shape, kind=kind, lod_level=lod_level,
                      persistable=persistable, **flags)


def tensor_like(var: Var, name: str, shape, persistable: Optional[bool],
                kind: Optional[str] = None, lod_level=None, **flags) -> Var:
    """A new tensor var with var's dtype (and kind unless given) and another name / shape."""
    return Var.tensor(name, var.dtype, shape, kind=kind or var.kind, lod_level=lod_level,
                      persistable=persistable, **flags)


def clone_var(var: Var, name: Optional[str] = None, shape=None,
              force_persistable: bool = True) -> Var:
    """Paddle's Block._clone_variable: a copy, persistable unless it is a scope or raw var
    (the var itself when that changes nothing: vars are shared until edited)."""
    if shape is None and (name is None or name == var.name) and \
            (var.persistable is True or not force_persistable
             or var.kind in ("STEP_SCOPES", "RAW")):
        return var
    v = var.copy() if shape is None else var.with_shape(shape)
    if var.kind == "SELECTED_ROWS" and len(v.type.descs) > 1:
        # create_var(type=SELECTED_ROWS, shape=...) declares the selected_rows desc alone
        t, _ = v.type.descs["selected_rows"]
        v.type = tensor_type("SELECTED_ROWS", t.dtype, t.dims, None)
    if name is not None:
        v.name = name
    if force_persistable and var.kind not in ("STEP_SCOPES", "RAW"):
        v.persistable = True
    return v


# Ops whose InferShape gives Out the shape of one input (the slot named), or a fixed shape:
# what Paddle's append_op sets on the output var of a clip / regularization op a pserver runs
# (the var is re-declared with that shape even when it existed with another).
OUT_SHAPE_OF = {"clip": "X", "clip_by_norm": "X", "merge_selected_rows": "X",
                "get_tensor_from_selected_rows": "X", "scale": "X", "sqrt": "X", "sum": "XS",
                "sign": "X", "elementwise_add": "XY", "elementwise_sub": "XY",
                "elementwise_mul": "XY", "elementwise_div": "XY", "elementwise_max": "XY",
                "elementwise_min": "XY", "squared_l2_norm": (1,)}


def inferred_out_shape(op: Op, shape_of: Callable) -> Optional[tuple]:
    """The shape Paddle's InferShape gives `op`'s Out (OUT_SHAPE_OF), `shape_of(name)` giving
    an input's declared shape (None when unknown); None for other ops."""
    how = OUT_SHAPE_OF.get(op.type)
    if how is None:
        return None
    if isinstance(how, tuple):
        return how
    if how == "XS":
        shapes = [shape_of(name) for name in op.input("X")]
        return None if not shapes or None in shapes else add_n_shape(shapes)
    x = op.input("X")[:1]
    sx = shape_of(x[0]) if x else None
    if how == "XY" and sx is not None:
        y = op.input("Y")[:1]
        sy = shape_of(y[0]) if y else None
        if sy is not None and len(sy) > len(sx):
            return tuple(sy)
    return None if sx is None else tuple(sx)


def add_n_shape(shapes, kinds=None) -> tuple:
    """The shape Paddle's `sum` (AddN) InferShape gives Out: that of the first input that holds
    elements, passing over 0-D and zero-sized inputs (and rank-1 SELECTED_ROWS, `kinds` given);
    () when none does: Paddle declares a sum of empty row blocks with no dims."""
    for i, shape in enumerate(shapes):
        shape = tuple(shape or ())
        if kinds is not None and kinds[i] == "SELECTED_ROWS" and len(shape) == 1:
            continue
        if shape and 0 not in shape:
            return shape
    return ()


def refuse_unequal_sum(op: Op, shape_of) -> None:
    """Paddle's AddN InferShape, run as get_pserver_program appends a cloned `sum`: inputs
    holding elements must agree in every dim neither declares -1 (a table's clipped gradient,
    declared with the whole table's shape, summed with its block's L2 decay: Paddle raises)."""
    first = None
    for i, name in enumerate(op.input("X")):
        shape = shape_of(name)
        if not shape or 0 in shape:
            continue
        if first is None:
            first = tuple(shape)
        elif len(shape) == len(first) and any(a != b and a != -1 and b != -1
                                               for a, b in zip(first, shape)):
            raise RefusedError(
                "(InvalidArgument) The input tensor X of SumOp must have same shape if not "
                "-1.But received X[0]'s shape = [%s], X[%d]'s shape = [%s]. (Paddle's "
                "get_pserver_program, appending sum to the pserver)"
                % (", ".join(map(str, first)), i, ", ".join(map(str, shape))))


# assign_value's attrs holding the values it assigns, row-major (one is set, by dtype)
ASSIGN_VALUE_ATTRS = ("fp32_values", "fp64_values", "int32_values", "int64_values",
                      "bool_values", "values")


def assign_rows(op: Op, first_row: int, rows: int) -> Op:
    """A copy of assign_value `op` assigning only rows first_row .. first_row + rows - 1 of
    what it assigns (a pserver's block of the parameter), with the block's shape."""
    shape = [int(d) for d in op.attr("shape") or ()]
    width = 1
    for d in shape[1:]:
        width *= d
    new = op.copy()
    for name in ASSIGN_VALUE_ATTRS:
        a = op.find_attr(name)
        if a is not None and a.value:
            new.set_attr(name, list(a.value)[first_row * width:(first_row + rows) * width])
    new.set_attr("shape", [rows] + shape[1:])
    return new


def assigned_block(op: Op, block, svars: dict, fix: bool) -> Op:
    """The pserver startup's assign_value of parameter block `block` (a VarBlock): as Paddle
    writes it, the whole parameter's values, whose InferShape re-declares the block's var in
    `svars` with the whole shape (classic- / fleet-assign-init-whole-param); `fix`: the
    block's own rows."""
    if fix:
        return assign_rows(op, block.row_offset, block.rows)
    var = svars.get(block.name)
    if var is not None and op.has_attr("shape"):
        svars[block.name] = var.with_shape(tuple(int(d) for d in op.attr("shape")))
    return op


def persistable_copy(var: Var) -> Var:
    """`var` made persistable whatever its kind (Fleet's pserver pass clones vars so): the
    var itself when it already is (vars are shared between programs until edited, and an
    edit starts from a copy), else a persistable copy."""
    if var.persistable is True:
        return var
    v = var.copy()
    v.persistable = True
    return v


def rename_var(block: Block, old: str, new: str) -> None:
    """Rename a var of `block` (it moves to the end of the vars, as Paddle's
    BlockDesc::RenameVar does); rename_uses renames what the ops say."""
    var = block.vars.pop(old).copy()
    var.name = new
    block.vars[new] = var


def rename_uses(block: Block, renames: dict) -> None:
    """Rename vars ({old: new}) wherever the block's ops use them, op_role_var included, in
    one walk over the ops. The ops that change are replaced by renamed copies: the block may
    share them with another program."""
    if not renames:
        return
    for i, op in enumerate(block.ops):
        rv = op.attr(roles.ROLE_VAR_ATTR) or []
        if not any(a in renames for a in rv) and \
                not any(a in renames for args in op.inputs.values() for a in args) and \
                not any(a in renames for args in op.outputs.values() for a in args):
            continue
        op = block.ops[i] = op.copy()
        for slots in (op.inputs, op.outputs):
            for slot, args in slots.items():
                slots[slot] = [renames.get(a, a) for a in args]
        if any(a in renames for a in rv):
            a = op.find_attr(roles.ROLE_VAR_ATTR)
            op.replace_attr(roles.ROLE_VAR_ATTR, Attr(a.type, [renames.get(x, x) for x in rv],
                                                      a.extra))


class OpOrder:
    """A block's ops with sortable position keys, and who writes / reads each var: for passes
    that move, drop and insert ops by what they read and write, at a cost per op touched
    rather than a walk over the program for each.

    Op i starts with key (i,); an op placed right after the op of key k gets `after(k)`: k
    plus a decreasing counter, so that it goes before the ops placed after k earlier, as a list
    insert would put it. `after(BEFORE_ALL)` is the front. `ops()` lists the ops in key order.
    """
    BEFORE_ALL = (-1,)

    def __init__(self, ops: list):
        self.key = {id(op): (i,) for i, op in enumerate(ops)}
        self.live = {id(op): op for op in ops}
        self.producers: dict = {}
        self.consumers: dict = {}
        self._counter = itertools.count(1)
        for op in ops:
            self._index(op)

    def after(self, key: tuple) -> tuple:
        return key + (-next(self._counter),)

    def _index(self, op: Op) -> None:
        for name in op.output_names():
            self.producers.setdefault(name, []).append(op)
        for name in op.input_names():
            self.consumers.setdefault(name, []).append(op)

    def remove(self, op: Op) -> None:
        del self.live[id(op)]

    def add(self, op: Op, key: tuple) -> None:
        self.key[id(op)] = key
        self.live[id(op)] = op
        self._index(op)

    def keys(self, index: dict, names: list) -> list:
        """Position keys of the ops still in the program that index names for `names`."""
        return [self.key[id(op)] for name in names for op in index.get(name, ())
                if id(op) in self.live]

    def ops(self) -> list:
        return sorted(self.live.values(), key=lambda op: self.key[id(op)])


# --- blocks ----------------------------------------------------------------------------------
def new_block(program: Program, parent: int) -> Block:
    """Append an empty block with parent `parent` to `program`."""
    b = Block(len(program.blocks), parent)
    program.blocks.append(b)
    return b


def require_held_inputs(op: Op, index: int, held, endpoint: str) -> None:
    """A startup op copied to a pserver reads only vars that pserver holds (by name): Paddle's
    pserver startup pass looks each input up among the pserver's vars and fails on any other
    (a `coalesce_tensor` over weights that were sliced or placed elsewhere, for instance)."""
    for args in op.inputs.values():
        for a in args:
            if a not in held:
                raise RefusedError(
                    "startup op %d (%s) initialises a var of pserver %s from %s, which that "
                    "pserver does not hold: Paddle's pserver startup pass fails here "
                    "(KeyError: %r)" % (index, op.type, endpoint, a, a))
