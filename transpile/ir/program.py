"""The in-memory program model: Program -> Block -> Op / Var.

Plain dataclasses, with no protobuf in sight (transpile/format/protoread.py and protowrite.py
convert). The model keeps every field of the wire format, including whether an optional field
was set at all, so that a program read and written again is byte-identical.

Passes treat a Program they are given as read-only: they build new blocks and ops (sharing the
unchanged ones) rather than editing in place: `Program.shallow_copy()` gives new blocks
holding the same ops and vars, and an op or var to be edited is replaced by its `copy()` first.
`Program.copy()` gives a deep copy.
"""
from __future__ import annotations

import copy as _copy
import itertools
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

# Which Attr message field holds the value for each AttrType.
ATTR_FIELD = {
    "INT": "i", "FLOAT": "f", "STRING": "s", "INTS": "ints", "FLOATS": "floats",
    "STRINGS": "strings", "BOOLEAN": "b", "BOOLEANS": "bools", "BLOCK": "block_idx",
    "LONG": "l", "BLOCKS": "blocks_idx", "LONGS": "longs", "FLOAT64S": "float64s",
    "VAR": "var_name", "VARS": "vars_name", "FLOAT64": "float64", "SCALAR": "scalar",
    "SCALARS": "scalars"}

# Bytes per element of the tensor dtypes.
DTYPE_BYTES = {"BOOL": 1, "INT16": 2, "INT32": 4, "INT64": 8, "FP16": 2, "FP32": 4, "FP64": 8,
               "SIZE_T": 8, "UINT8": 1, "INT8": 1, "BF16": 2, "COMPLEX64": 8, "COMPLEX128": 16}

# Where the tensor description of each var kind lives in VarType.
KIND_SLOT = {"LOD_TENSOR": "lod_tensor", "SELECTED_ROWS": "selected_rows",
             "LOD_TENSOR_ARRAY": "tensor_array", "STRING": "string", "STRINGS": "strings",
             "VOCAB": "vocab", "SPARSE_COO": "sparse_coo", "SPARSE_CSR": "sparse_csr"}

_INT32 = (-2 ** 31, 2 ** 31 - 1)


def numel(shape) -> int:
    """Elements of a tensor of `shape` (1 for a scalar's empty shape; None counts as empty)."""
    n = 1
    for d in shape or ():
        n *= int(d)
    return n
_BLOCK_TYPES = ("BLOCK", "BLOCKS")


@dataclass(slots=True)
class Attr:
    """An op attribute: its AttrType name and its value.

    BLOCK values are block indices, BLOCKS lists of them. `extra` holds any other Attr message
    fields that were set in the input (rare; kept only so round trips are lossless).
    """
    type: str
    value: Any
    extra: tuple = ()

    @staticmethod
    def infer(value: Any) -> "Attr":
        """An Attr for a plain Python value (bool, int, float, str, or a list of one of those)."""
        if isinstance(value, bool):
            return Attr("BOOLEAN", value)
        if isinstance(value, int):
            return Attr("INT" if _INT32[0] <= value <= _INT32[1] else "LONG", value)
        if isinstance(value, float):
            return Attr("FLOAT", value)
        if isinstance(value, str):
            return Attr("STRING", value)
        if isinstance(value, (list, tuple)):
            items = list(value)
            if items and all(isinstance(x, bool) for x in items):
                return Attr("BOOLEANS", items)
            if items and all(isinstance(x, int) and not isinstance(x, bool) for x in items):
                big = any(not _INT32[0] <= x <= _INT32[1] for x in items)
                return Attr("LONGS" if big else "INTS", items)
            if items and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                             for x in items):
                return Attr("FLOATS", [float(x) for x in items])
            if all(isinstance(x, str) for x in items):
                return Attr("STRINGS", items)
        raise TypeError("cannot infer an attr type for %r" % (value,))


_OP_UIDS = itertools.count(1)


class Op:
    """An operator: type, input and output slots (slot -> argument names, in file order), attrs.

    An op read from a file keeps its `source` (transpile/format/opsource.py's OpSource): its
    attrs are decoded from it one by one when asked for (`attr()` does not decode the others, and
    `set_attr()` only records the new value; the first use of `attrs` decodes them all), and
    the writer reuses its encoded bytes for whatever still equals what was read. Most ops of a
    large program are never looked at beyond their slots and role, so this saves decoding and
    re-encoding their debug attrs (op_callstack...).
    """
    __slots__ = ("type", "inputs", "outputs", "_attrs", "_patch", "is_target", "dup_attrs",
                 "source", "uid")

    def __init__(self, type: str, inputs: Optional[dict] = None, outputs: Optional[dict] = None,
                 attrs: Optional[dict] = None, is_target: Optional[bool] = None,
                 dup_attrs: tuple = (), *, source: Any = None, uid: Optional[int] = None):
        self.type = type
        # the op's identity from the moment it is read or made: its copies keep it, so a plan
        # names an op by uid whatever earlier passes inserted, removed or copied around it
        self.uid = next(_OP_UIDS) if uid is None else uid
        self.inputs: dict[str, list[str]] = {} if inputs is None else inputs
        self.outputs: dict[str, list[str]] = {} if outputs is None else outputs
        # None: not decoded yet, read from `source` (with the attrs set since in `_patch`)
        self._attrs: Optional[dict[str, Attr]] = \
            attrs if attrs is not None or source is not None else {}
        self._patch: Optional[dict[str, Attr]] = None
        self.is_target = is_target
        # earlier occurrences of attr names the file repeats: ((position, name, Attr), ...)
        self.dup_attrs = dup_attrs
        self.source = source

    @property
    def attrs(self) -> dict[str, Attr]:
        if self._attrs is None:
            attrs = self.source.decode_all()
            if self._patch:
                attrs.update(self._patch)     # a set attr keeps its place, a new one goes last
            self._attrs, self._patch = attrs, None
        return self._attrs

    @attrs.setter
    def attrs(self, value: dict[str, Attr]) -> None:
        self._attrs, self._patch = value, None

    @property
    def attrs_decoded(self) -> bool:
        """Whether `attrs` was used (and may have been changed) since the op was read."""
        return self._attrs is not None

    @property
    def attr_patch(self) -> dict:
        """The attrs set (by set_attr / replace_attr) on an op whose attrs were not decoded."""
        return self._patch or {}

    def __eq__(self, other) -> bool:
        if other.__class__ is not Op:
            return NotImplemented
        return (self.type, self.inputs, self.outputs, self.attrs, self.is_target,
                self.dup_attrs) == (other.type, other.inputs, other.outputs, other.attrs,
                                    other.is_target, other.dup_attrs)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "Op(type=%r, inputs=%r, outputs=%r, attrs=%r, is_target=%r, dup_attrs=%r)" % (
            self.type, self.inputs, self.outputs, self.attrs, self.is_target, self.dup_attrs)

    def attr_names(self) -> list[str]:
        """The attr names in file order (set ones last), without decoding the attrs."""
        if self._attrs is not None:
            return list(self._attrs)
        names = list(self.source.names)
        if self._patch:
            names += [n for n in self._patch if not self.source.has(n)]
        return names

    def find_attr(self, name: str) -> Optional[Attr]:
        """The Attr `name` or None, without decoding the others; read it, do not change it."""
        if self._attrs is not None:
            return self._attrs.get(name)
        if self._patch and name in self._patch:
            return self._patch[name]
        return self.source.get(name)

    def lacks_text(self, text: bytes) -> bool:
        """True when no attr can hold `text` (UTF-8), told without decoding: the op is as read
        and its bytes lack it. False says nothing (look at the attrs)."""
        return self._attrs is None and not self._patch and self.source.lacks(text)

    def attr(self, name: str, default: Any = None) -> Any:
        a = self.find_attr(name)
        return default if a is None else a.value

    def has_attr(self, name: str) -> bool:
        if self._attrs is not None:
            return name in self._attrs
        return bool(self._patch and name in self._patch) or self.source.has(name)

    def replace_attr(self, name: str, attr: Attr) -> None:
        """Set attr `name` to `attr` (in its place when it exists, else last)."""
        self._store(name, attr, self.find_attr(name) if self._attrs is None else None)

    def set_attr(self, name: str, value: Any, type: Optional[str] = None) -> None:
        """Set an attr; the AttrType is kept when the attr exists, else given or inferred."""
        old = self.find_attr(name)
        if type is None and old is not None:
            type = old.type
        self._store(name, Attr(type, value) if type else Attr.infer(value), old)

    def _store(self, name: str, attr: Attr, old: Optional[Attr]) -> None:
        """Set attr `name` (`old`: what the op says now, when its attrs are not decoded)."""
        if self._attrs is not None:
            self._attrs[name] = attr
        elif old != attr:                       # setting what the op says changes nothing
            if self._patch is None:
                self._patch = {}
            self._patch[name] = attr

    def input(self, slot: str) -> list[str]:
        return self.inputs.get(slot, [])

    def output(self, slot: str) -> list[str]:
        return self.outputs.get(slot, [])

    def input_names(self) -> list[str]:
        return [a for args in self.inputs.values() for a in args]

    def output_names(self) -> list[str]:
        return [a for args in self.outputs.values() for a in args]

    def attrs_as_read(self) -> Optional[dict]:
        """{attr name: the attr as it was read} while the attrs are neither decoded nor set
        since (else None): opaque values, equal exactly when the attrs are equal, compared
        without decoding them."""
        if self._attrs is not None or self._patch or self.source is None:
            return None
        return self.source.index

    def block_attr_names(self) -> list[str]:
        """The names of the BLOCK / BLOCKS attrs, without decoding the others."""
        if self._attrs is not None:
            return [n for n, a in self._attrs.items() if a.type in _BLOCK_TYPES]
        if not self._patch:
            return list(self.source.block_attrs)
        return [n for n in self.attr_names() if self.find_attr(n).type in _BLOCK_TYPES]

    def block_refs(self) -> list[int]:
        """Indices of the blocks this op's BLOCK / BLOCKS attrs point at."""
        if self._attrs is None and not self._patch and not self.source.block_attrs:
            return []       # (an op as read without such attrs: most)
        refs = []
        for name in self.block_attr_names():
            v = self.find_attr(name).value
            refs.extend(v) if isinstance(v, list) else refs.append(v)
        return refs

    def copy(self, inputs: Optional[dict] = None, outputs: Optional[dict] = None) -> "Op":
        """A copy that can be edited. `inputs` / `outputs`, when given, are the copy's slots
        as they are (the copy owns them): a pass that replaces an op's slots saves copying
        the old ones."""
        attrs = None if self._attrs is None else \
            {k: Attr(a.type, _copy.copy(a.value), a.extra) for k, a in self._attrs.items()}
        if inputs is None:
            inputs = {k: list(v) for k, v in self.inputs.items()}
        if outputs is None:
            outputs = {k: list(v) for k, v in self.outputs.items()}
        op = Op(self.type, inputs, outputs, attrs, self.is_target, self.dup_attrs,
                source=self.source, uid=self.uid)
        if self._patch:
            op._patch = {k: Attr(a.type, _copy.copy(a.value), a.extra)
                         for k, a in self._patch.items()}
        return op


def uids(ops) -> tuple:
    """The uids of `ops`, in their order: how a plan names ops (ir.program.Op.uid)."""
    return tuple(op.uid for op in ops)


def select(ops, wanted) -> list:
    """The ops of `ops` whose uid is in `wanted`, in their order."""
    wanted = wanted if isinstance(wanted, (set, frozenset)) else set(wanted)
    return [op for op in ops if op.uid in wanted]


def indexed(ops, wanted) -> list:
    """(position, op) of the ops of `ops` whose uid is in `wanted`, in their order."""
    wanted = wanted if isinstance(wanted, (set, frozenset)) else set(wanted)
    return [(i, op) for i, op in enumerate(ops) if op.uid in wanted]


def uid_index(ops) -> dict:
    """{uid: position} of `ops`: where an op a plan names stands in a block."""
    return {op.uid: i for i, op in enumerate(ops)}


@dataclass(slots=True)
class TensorDesc:
    dtype: str          # a VarType.Type name such as "FP32"
    dims: tuple = ()


@dataclass(slots=True)
class VarType:
    """VarType: the kind (LOD_TENSOR, SELECTED_ROWS, ...) and its tensor description(s).

    `descs` maps the VarType field that was set ("lod_tensor", "selected_rows", ...) to
    (TensorDesc, lod_level or None when unset). Usually one entry, none for kinds such as
    FEED_MINIBATCH.

    A VarType is never changed once a var has it (Var.copy shares it, with_shape makes a new
    one), so the writer keeps its encoded bytes in `encoded`.
    """
    type: str
    descs: dict = field(default_factory=dict)
    reader: Optional[tuple] = None          # READER: ((TensorDesc, lod_level), ...)
    tuple_types: Optional[tuple] = None     # TUPLE: element type names
    encoded: Optional[bytes] = field(default=None, init=False, compare=False, repr=False)
    # what _main found, looked up once (False until then; the descs are filled before use)
    main_desc: Any = field(default=False, init=False, compare=False, repr=False)

    def _main(self):
        if self.main_desc is False:
            slot = KIND_SLOT.get(self.type)
            self.main_desc = self.descs.get(slot) or next(iter(self.descs.values()), None)
        return self.main_desc

    @property
    def dtype(self) -> Optional[str]:
        d = self._main()
        return d[0].dtype if d else None

    @property
    def shape(self) -> Optional[tuple]:
        d = self._main()
        return d[0].dims if d else None

    @property
    def lod_level(self) -> Optional[int]:
        d = self._main()
        return d[1] if d else None


# Kinds whose tensor description has no lod_level.
_NO_LOD_SLOTS = ("selected_rows", "string", "strings", "vocab", "sparse_coo", "sparse_csr")

# tensor_type's shared VarTypes by (kind, dtype, shape, lod_level); emptied when it grows
# large, so memory stays bounded on any program.
_TENSOR_TYPES: dict = {}
_TENSOR_TYPES_LIMIT = 1 << 16


def tensor_type(kind: str, dtype: Optional[str], shape, lod_level: Optional[int]) -> VarType:
    """The VarType of a `kind` tensor (LOD_TENSOR, SELECTED_ROWS, ...) of that dtype and shape.

    VarTypes are never changed in place (Var.copy shares them, with_shape makes a new one), so
    equal ones are one shared object: building a new VarType and TensorDesc for each var was
    a large part of building the pserver programs of a big cluster (a million vars).
    """
    key = (kind, dtype, shape if type(shape) is tuple else tuple(shape), lod_level)
    vt = _TENSOR_TYPES.get(key)
    if vt is None:
        slot = KIND_SLOT[kind]
        lod = None if slot in _NO_LOD_SLOTS else lod_level
        vt = VarType(kind, {slot: (TensorDesc(dtype, tuple(int(d) for d in key[2])), lod)})
        if len(_TENSOR_TYPES) >= _TENSOR_TYPES_LIMIT:
            _TENSOR_TYPES.clear()
        _TENSOR_TYPES[key] = vt
    return vt


@dataclass(slots=True)
class VarAttr:
    name: str
    type: str
    i: Optional[int] = None
    s: Optional[str] = None
    ints: tuple = ()


@dataclass(slots=True)
class Var:
    """A variable. The bool flags are None when the file did not set them (read as False).

    A var read from a file keeps its `source` (transpile/format/opsource.py's VarSource): the
    writer reuses its encoded bytes while the var still equals what was read (it checks)."""
    name: str
    type: VarType
    persistable: Optional[bool] = None
    need_check_feed: Optional[bool] = None
    is_parameter: Optional[bool] = None
    stop_gradient: Optional[bool] = None
    attrs: tuple = ()
    source: Any = field(default=None, compare=False, repr=False)

    @staticmethod
    def tensor(name: str, dtype: str, shape, *, kind: str = "LOD_TENSOR",
               lod_level: Optional[int] = 0, persistable: Optional[bool] = None,
               **flags) -> "Var":
        """A new tensor var (LOD_TENSOR, SELECTED_ROWS, LOD_TENSOR_ARRAY ...)."""
        return Var(name, tensor_type(kind, dtype, shape, lod_level), persistable, **flags)

    @property
    def kind(self) -> str:
        return self.type.type

    @property
    def dtype(self) -> Optional[str]:
        return self.type.dtype

    @property
    def shape(self) -> Optional[tuple]:
        return self.type.shape

    @property
    def lod_level(self) -> Optional[int]:
        return self.type.lod_level

    @property
    def is_persistable(self) -> bool:
        return bool(self.persistable)

    def numel(self) -> int:
        return numel(self.shape)

    def nbytes(self) -> int:
        """Bytes the tensor holds (0 when it has no dtype or a dynamic dim)."""
        shape = self.shape
        if not shape or any(d < 0 for d in shape):
            return 0
        return self.numel() * DTYPE_BYTES.get(self.dtype, 0)

    def with_shape(self, shape, name: Optional[str] = None) -> "Var":
        """A copy with a new shape (and name), the dtype and kind kept."""
        v = self.copy()
        if name is not None:
            v.name = name
        vt = v.type
        slot = KIND_SLOT.get(vt.type)
        if slot not in vt.descs:
            slot = next(iter(vt.descs))
        t, lod = vt.descs[slot]
        descs = dict(vt.descs)
        descs[slot] = (TensorDesc(t.dtype, tuple(int(d) for d in shape)), lod)
        v.type = VarType(vt.type, descs, vt.reader, vt.tuple_types)
        return v

    def copy(self) -> "Var":
        """A copy whose fields can be set. The VarType is shared: a VarType is never changed
        in place (with_shape makes a new one), so vars of one type can share it."""
        return Var(self.name, self.type, self.persistable, self.need_check_feed,
                   self.is_parameter, self.stop_gradient, self.attrs, self.source)


@dataclass
class Block:
    idx: int
    parent_idx: int
    vars: dict[str, Var] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    forward_block_idx: Optional[int] = None

    def var(self, name: str) -> Optional[Var]:
        return self.vars.get(name)

    def add_var(self, var: Var) -> Var:
        self.vars[var.name] = var
        return var

    def copy(self) -> "Block":
        return Block(self.idx, self.parent_idx, {k: v.copy() for k, v in self.vars.items()},
                     [o.copy() for o in self.ops], self.forward_block_idx)

    def shallow_copy(self) -> "Block":
        """New op list and var dict holding the same Op and Var objects (see
        Program.shallow_copy)."""
        return Block(self.idx, self.parent_idx, dict(self.vars), list(self.ops),
                     self.forward_block_idx)


@dataclass
class Program:
    blocks: list[Block]
    version: Optional[int] = None
    has_version: bool = False
    op_version_map: Optional[list] = None     # [(op_name, version)] or None when absent

    @property
    def global_block(self) -> Block:
        return self.blocks[0]

    def block(self, idx: int) -> Block:
        return self.blocks[idx]

    def find_var(self, name: str, block_idx: int = 0) -> Optional[Var]:
        """The var `name` as seen from block `block_idx` (searching parent blocks)."""
        seen = set()
        idx = block_idx
        while 0 <= idx < len(self.blocks) and idx not in seen:
            seen.add(idx)
            b = self.blocks[idx]
            v = b.vars.get(name)
            if v is not None:
                return v
            idx = b.parent_idx
        return None

    def ops(self) -> Iterator[tuple[int, int, Op]]:
        """(block idx, op idx, op) for every op."""
        for b in self.blocks:
            for i, op in enumerate(b.ops):
                yield b.idx, i, op

    def parameters(self) -> list[Var]:
        """The parameters of the global block, in declaration order."""
        return [v for v in self.global_block.vars.values() if v.is_parameter]

    def copy(self) -> "Program":
        return Program([b.copy() for b in self.blocks], self.version, self.has_version,
                       None if self.op_version_map is None else list(self.op_version_map))

    def shallow_copy(self) -> "Program":
        """A program sharing this one's Op and Var objects in new blocks, op lists and var
        dicts: what a pass that adds, drops or replaces ops and vars starts from (a copy()
        of every op of a large program costs more than the rest of the pass). An op or var
        to be changed in place must be replaced by its copy() first."""
        return Program([b.shallow_copy() for b in self.blocks], self.version,
                       self.has_version,
                       None if self.op_version_map is None else list(self.op_version_map))

    @staticmethod
    def empty() -> "Program":
        return Program([Block(0, -1)])
