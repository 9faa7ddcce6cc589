"""Structural diff of two programs (and of two split folders); transpile/diff_render.py renders
it.

Blocks are compared by index. Within a block, ops are aligned by a longest common subsequence
on (type, inputs, outputs): the common prefix and suffix are matched first, then difflib's
SequenceMatcher alignment of the interned op keys (ints) is taken, so memory stays linear on
large programs (computed in O(n log n) when no key repeats, see _unique_matching_blocks).
Inside a replaced run, a deleted and an inserted op of the same type are paired up and reported
as one changed op. Vars are compared by name.

Attrs are compared without decoding them where that is enough to tell: the same op on both
sides (a split keeps the ops it does not change), or attrs still as read whose messages are
equal. Everything else goes through the decoded values.

Debug attrs (op_callstack, op_namescope, op_device, with_quant_attr), empty slots, unset-vs-
default fields and the vars' graph-building flags (is_parameter, stop_gradient,
need_check_feed) are ignored unless `strict`; so is the order of the listen_and_serv maps Paddle
fills from a set (grad_to_block_id, ...) and of runs of fake_init ops.
`__control_var@<random>` names are compared by where they are used, not by their random
suffix (see control_var_names), so two runs of the same transpilation compare equal.
"""
from __future__ import annotations

import bisect
import json
import math
import os
from dataclasses import asdict, dataclass, field
from itertools import chain
from operator import attrgetter, eq as _eq, methodcaller
from typing import Optional

from .core.gcpause import paused_gc
from .jsonfmt import as_plain
from .ir.program import Block, Op, Program, Var
from .seqmatch import opcodes as _opcodes

# where an op came from, not what it does (with_quant_attr: framework bookkeeping, always False)
DEBUG_ATTRS = frozenset({"op_callstack", "op_namescope", "op_device", "with_quant_attr"})
_CONTROL = "__control_var@"


# ---------------------------------------------------------------------------------------------
# result data

@dataclass
class OpChange:
    """One difference in a block's op list. `kind` is insert, delete or change."""
    kind: str
    type: str
    a_index: Optional[int]          # position in A (None for an insert)
    b_index: Optional[int]          # position in B (None for a delete)
    op: str = ""                    # the op, rendered on one line
    details: list = field(default_factory=list)   # "attr scale: 0.5 -> 1.0", ...


@dataclass
class VarChange:
    kind: str                       # added, removed, changed
    name: str
    details: list = field(default_factory=list)


@dataclass
class BlockDiff:
    idx: int
    status: str = "same"            # same, changed, added (only in B), removed (only in A)
    details: list = field(default_factory=list)   # parent/forward block changes
    ops: list = field(default_factory=list)
    vars: list = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.status != "same" or bool(self.details or self.ops or self.vars)


@dataclass
class ProgramDiff:
    a: str
    b: str
    blocks: list = field(default_factory=list)
    details: list = field(default_factory=list)    # program-level: version, ...

    @property
    def changed(self) -> bool:
        return bool(self.details) or any(b.changed for b in self.blocks)

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "same": not self.changed, "details": self.details,
                "blocks": [as_plain(b) for b in self.blocks if b.changed]}

    def summary(self) -> str:
        ins = sum(1 for b in self.blocks for o in b.ops if o.kind == "insert")
        dele = sum(1 for b in self.blocks for o in b.ops if o.kind == "delete")
        chg = sum(1 for b in self.blocks for o in b.ops if o.kind == "change")
        nv = sum(len(b.vars) for b in self.blocks)
        nb = sum(1 for b in self.blocks if b.status in ("added", "removed"))
        parts = ["%d op(s) inserted" % ins, "%d deleted" % dele, "%d changed" % chg,
                 "%d var change(s)" % nv]
        if nb:
            parts.append("%d block(s) added/removed" % nb)
        return ", ".join(parts)


@dataclass
class FileDiff:
    """A difference between two split folders at one relative path."""
    path: str
    status: str                     # changed, missing (only in A), extra (only in B)
    program: Optional[ProgramDiff] = None
    details: list = field(default_factory=list)   # runtime.json key paths, ...

    def to_dict(self) -> dict:
        d = {"path": self.path, "status": self.status, "details": self.details}
        if self.program is not None:
            d["program"] = self.program.to_dict()
        return d


@dataclass
class TreeDiff:
    a: str
    b: str
    files: list = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.files)

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "same": not self.changed,
                "files": [f.to_dict() for f in self.files]}


# ---------------------------------------------------------------------------------------------
# normalisation

def control_var_names(prog: Program) -> dict:
    """`__control_var@<random>` -> a name that does not depend on the random part.

    A control var is named after the op that writes it: `__control_var@send(fc_b@GRAD)`, from
    the writer's type and its other inputs (`#2`, `#3`... for repeats). That keeps a deleted
    send from renaming every later control var. Control vars nothing writes are numbered by
    first appearance.
    """
    names: dict = {}
    taken: set = set()

    def claim(base):
        n, k = base, 1
        while n in taken:
            k += 1
            n = "%s#%d" % (base, k)
        taken.add(n)
        return n
    for b in prog.blocks:
        if not any(filter(_is_control, _arg_names(b.ops, "outputs"))):
            continue
        for op in b.ops:
            for args in op.outputs.values():
                for n in args:
                    if n.startswith(_CONTROL) and n not in names:
                        others = [x for x in op.input_names() if not x.startswith(_CONTROL)]
                        names[n] = claim("%s%s(%s)" % (_CONTROL, op.type, ",".join(others)))
    k = 0
    for b in prog.blocks:
        for n in filter(_is_control, chain(_arg_names(b.ops, "inputs"), b.vars)):
            if n not in names:
                names[n] = claim("%s%d" % (_CONTROL, k))
                k += 1
    return names


_is_control = methodcaller("startswith", _CONTROL)


def _arg_names(ops, slots: str):
    """Every argument name of the ops' inputs or outputs, in order (iterated in C)."""
    return chain.from_iterable(chain.from_iterable(map(dict.values, map(attrgetter(slots), ops))))


def _fmt_value(v) -> str:
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt_value(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    return str(v)


class _Side:
    """One program prepared for comparison: renamed control vars, op keys interned."""

    def __init__(self, prog: Program, strict: bool, keys: dict, defaults=None):
        self.prog = prog
        self.strict = strict
        self.defaults = defaults or {}
        self.rename = control_var_names(prog)
        self.keys = keys
        # the names this side and the other rename differently (set by diff_programs_and_names)
        self.differ: frozenset = frozenset()

    def name(self, n: str) -> str:
        return self.rename.get(n, n)

    def op_keys(self, ops, known: Optional[dict] = None) -> list:
        """Each op's key: (type, inputs, outputs), the slots as sorted (slot, renamed args)
        pairs, empty slots left out (unless strict). A hot loop, written out.

        `known`: {id(op): key} of the other side's ops, whose keys hold here too unless an
        argument is a name the two sides rename differently (`differ`)."""
        strict = self.strict
        rename = self.rename
        get = rename.get
        differ = self.differ
        out = []
        append = out.append
        for op in ops:
            if known:
                key = known.get(id(op))
                if key is not None and (not differ or (
                        differ.isdisjoint(chain.from_iterable(op.inputs.values())) and
                        differ.isdisjoint(chain.from_iterable(op.outputs.values())))):
                    append(key)
                    continue
            key = [op.type]
            for slots in (op.inputs, op.outputs):
                if rename:
                    items = [(k, tuple(map(get, v, v))) for k, v in slots.items() if v or strict]
                else:
                    items = [(k, tuple(v)) for k, v in slots.items() if v or strict]
                if len(items) > 1:
                    items.sort()        # slot names are unique: sorted by name
                key.append(tuple(items))
            append(tuple(key))
        return out

    def intern(self, keys: list) -> list:
        """Op keys as small ints, the same int for equal keys on either side."""
        table = self.keys
        out = []
        for k in keys:
            i = table.get(k)
            if i is None:
                i = table[k] = len(table)
            out.append(i)
        return out


# attrs Paddle fills from a set or dict: their order changes from run to run
ORDERLESS_ATTRS = frozenset({"grad_to_block_id", "sparse_grad_to_param",
                             "prefetch_var_name_to_block_id"})
# the AttrTypes whose values are var names (renamed like slot arguments), and their numbers
_VAR_ATTR_TYPES = ("VAR", "VARS")
_VAR_ATTR_CODE_SET = frozenset((13, 14))
_type_of = attrgetter("type")


def _attr_value(side: _Side, a, name: str = "") -> object:
    v = a.value
    if name in ORDERLESS_ATTRS and not side.strict and isinstance(v, list):
        return sorted(v)
    if a.type in ("VAR",) and isinstance(v, str):
        return side.name(v)
    if a.type in ("VARS",):
        return [side.name(x) for x in v]
    return _nan_as_text(v)


def _nan_as_text(v):
    """The value with every float NaN as "nan", so that a NaN compares equal to itself."""
    if isinstance(v, float):
        return "nan" if v != v else v
    if isinstance(v, list) and any(isinstance(x, (float, dict)) for x in v):
        return [_nan_as_text(x) for x in v]
    if isinstance(v, dict):
        return {k: _nan_as_text(x) for k, x in v.items()}
    return v


def _fmt_slots(slots: tuple) -> str:
    return ", ".join("%s=%s" % (k, v[0] if len(v) == 1 else "[" + ", ".join(v) + "]")
                     for k, v in slots)


def _fmt_key(key: tuple) -> str:
    """An op, from its key (type, inputs, outputs), on one line."""
    return "%s(%s) -> (%s)" % (key[0], _fmt_slots(key[1]), _fmt_slots(key[2]))


# ---------------------------------------------------------------------------------------------
# comparison

def _same_value(x, y) -> bool:
    """Equal, floats to 6 significant digits (defaults are stored as doubles, attrs as floats)."""
    if isinstance(x, bool) or isinstance(y, bool):
        return x == y
    if isinstance(x, float) or isinstance(y, float):
        try:
            return float("%.6g" % x) == float("%.6g" % y)
        except TypeError:
            return False
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same_value(a, b) for a, b in zip(x, y))
    return x == y


def _is_default(side: _Side, op_type: str, name: str, value) -> bool:
    d = side.defaults.get(op_type)
    return d is not None and name in d and _same_value(value, d[name])


def _names_renamed_differently(op: Op, name: str, differ: frozenset) -> bool:
    """Whether the value of the op's VAR / VARS attr `name` names a var in `differ`."""
    v = op.find_attr(name).value
    return not differ.isdisjoint([v] if isinstance(v, str) else v if isinstance(v, list) else ())


def _has_var_attrs(op: Op, differ: frozenset) -> bool:
    """Whether a VAR / VARS attr of the op (its value is renamed like a slot argument) names
    a var the two sides rename differently (in `differ`)."""
    raw = op.attrs_as_read()
    if raw is not None:
        types = list(map(_type_of, raw.values()))
        if _VAR_ATTR_CODE_SET.isdisjoint(types):
            return False
        names = [n for n, t in zip(raw, types) if t in _VAR_ATTR_CODE_SET]
    else:
        names = [n for n in op.attr_names() if op.find_attr(n).type in _VAR_ATTR_TYPES]
    return any(_names_renamed_differently(op, n, differ) for n in names)


def _same_attrs(sa: _Side, sb: _Side, oa: Op, ob: Op) -> bool:
    """True when the two ops' attrs certainly compare equal, told without decoding them all:
    the same op, two ops holding their attrs as read from the same message, or from equal
    messages."""
    differ = sa.differ
    if oa is ob:
        return not differ or not _has_var_attrs(oa, differ)
    ra = oa.attrs_as_read()
    if ra is None:
        return False
    rb = ob.attrs_as_read()
    if rb is None:
        return False
    if oa.source is ob.source:
        return not differ or not _has_var_attrs(oa, differ)
    # equal messages, every one of them (debug attrs too: one C loop, no names looked at),
    # unless a var name in them is one the two sides rename differently
    if ra.keys() != rb.keys() or not all(map(_eq, ra.values(), map(rb.__getitem__, ra))):
        return False
    return not differ or not _has_var_attrs(oa, differ)


def _attr_changes(sa: _Side, sb: _Side, oa: Op, ob: Op) -> list:
    strict = sa.strict
    out = []
    if not _same_attrs(sa, sb, oa, ob):
        na, nb = oa.attr_names(), ob.attr_names()
        if not strict:
            na = [k for k in na if k not in DEBUG_ATTRS]
            nb = [k for k in nb if k not in DEBUG_ATTRS]
        in_a, in_b = set(na), set(nb)
        # attrs still as read: equal messages are equal attrs (unless a var name the two sides
        # rename differently)
        ra, rb = oa.attrs_as_read(), ob.attrs_as_read()
        for k in na + [k for k in nb if k not in in_a]:
            if ra is not None and rb is not None and k in in_a and k in in_b:
                ma, mb = ra[k], rb[k]
                if (ma is mb or ma == mb) and \
                        not (sa.differ and ma.type in _VAR_ATTR_CODE_SET):
                    continue
            a = oa.find_attr(k) if k in in_a else None
            b = ob.find_attr(k) if k in in_b else None
            if (b is None and _is_default(sa, oa.type, k, _attr_value(sa, a))) or \
                    (a is None and _is_default(sb, ob.type, k, _attr_value(sb, b))):
                continue        # absent means the registered default
            if b is None:
                out.append("attr %s: %s -> (absent)" % (k, _fmt_value(_attr_value(sa, a))))
            elif a is None:
                out.append("attr %s: (absent) -> %s" % (k, _fmt_value(_attr_value(sb, b))))
            else:
                va, vb = _attr_value(sa, a, k), _attr_value(sb, b, k)
                if va != vb:
                    out.append("attr %s: %s -> %s" % (k, _fmt_value(va), _fmt_value(vb)))
                elif strict and a.type != b.type:
                    out.append("attr %s: type %s -> %s" % (k, a.type, b.type))
    if strict and oa.is_target != ob.is_target:
        out.append("is_target: %s -> %s" % (oa.is_target, ob.is_target))
    return out


def _slot_changes(what: str, a: tuple, b: tuple) -> list:
    da, db = dict(a), dict(b)
    out = []
    for k in [k for k, _ in a] + [k for k, _ in b if k not in da]:
        if da.get(k) != db.get(k):
            fa = "(absent)" if k not in da else _fmt_value(list(da[k]))
            fb = "(absent)" if k not in db else _fmt_value(list(db[k]))
            out.append("%s %s: %s -> %s" % (what, k, fa, fb))
    return out


def _op_changes(sa: _Side, sb: _Side, oa: Op, ob: Op, key_a: tuple, key_b: tuple) -> list:
    out = _slot_changes("input", key_a[1], key_b[1])
    out += _slot_changes("output", key_a[2], key_b[2])
    return out + _attr_changes(sa, sb, oa, ob)


# ops Paddle emits in runs whose order comes from a set (one fake_init per table in startup)
ORDERLESS_RUNS = frozenset({"fake_init"})


def _canonical_order(side: _Side, block: Block, keys: list) -> list:
    """Op indices, with each run of ORDERLESS_RUNS ops sorted by key (not under strict)."""
    order = list(range(len(block.ops)))
    if side.strict:
        return order
    i = 0
    ops = block.ops
    while i < len(ops):
        if ops[i].type not in ORDERLESS_RUNS:
            i += 1
            continue
        j = i
        while j < len(ops) and ops[j].type == ops[i].type:
            j += 1
        if j - i > 1:
            order[i:j] = sorted(range(i, j), key=lambda k: repr(keys[k]))
        i = j
    return order


class _View:
    """A block seen through a permutation of its ops (positions still report real indices),
    with the ops' keys in that order."""

    def __init__(self, block: Block, order: list, keys: list):
        self.ops = [block.ops[k] for k in order]
        self.keys = [keys[k] for k in order]
        self.order = order


def _view(side: _Side, block: Block, known: Optional[dict] = None) -> _View:
    keys = side.op_keys(block.ops, known)
    return _View(block, _canonical_order(side, block, keys), keys)


def _diff_ops(sa: _Side, sb: _Side, ba: Block, bb: Block) -> list:
    va = _view(sa, ba)
    # ops B shares with A (a split keeps the ops it does not change): their keys, computed once
    vb = _view(sb, bb, {id(op): k for op, k in zip(va.ops, va.keys)})
    out = _diff_op_lists(sa, sb, va, vb)
    for o in out:
        if o.a_index is not None:
            o.a_index = va.order[o.a_index]
        if o.b_index is not None:
            o.b_index = vb.order[o.b_index]
    return out


def _diff_op_lists(sa: _Side, sb: _Side, va: _View, vb: _View) -> list:
    keys_a, keys_b = va.keys, vb.keys
    ops_a, ops_b = va.ops, vb.ops
    # the same op on both sides has the same attrs, unless a VAR attr is renamed differently
    same_if_shared = not sa.differ
    out = []
    for tag, i1, i2, j1, j2 in _opcodes(sa.intern(keys_a), sb.intern(keys_b)):
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                oa, ob = ops_a[i], ops_b[j]
                if oa is ob and (same_if_shared or not _has_var_attrs(oa, sa.differ)):
                    continue
                ch = _attr_changes(sa, sb, oa, ob)
                if ch:
                    out.append(OpChange("change", oa.type, i, j, _fmt_key(keys_a[i]), ch))
            continue
        dels = list(range(i1, i2))
        inss = list(range(j1, j2))
        # pair a deleted op with the next inserted op of the same type: one "changed" op
        paired: dict = {}
        used = set()
        by_type: dict = {}
        for j in inss:
            by_type.setdefault(ops_b[j].type, []).append(j)
        last = -1
        for i in dels:
            cands = by_type.get(ops_a[i].type)
            if not cands:
                continue
            k = bisect.bisect_right(cands, last)
            if k < len(cands):
                paired[i] = last = cands[k]
                used.add(last)
        events = []
        for i in dels:
            if i in paired:
                j = paired[i]
                events.append((j, 1, OpChange("change", ops_a[i].type, i, j,
                                              _fmt_key(keys_a[i]),
                                              _op_changes(sa, sb, ops_a[i], ops_b[j],
                                                          keys_a[i], keys_b[j]))))
            else:
                events.append((j1, 0, OpChange("delete", ops_a[i].type, i, None,
                                               _fmt_key(keys_a[i]))))
        for j in inss:
            if j not in used:
                events.append((j, 2, OpChange("insert", ops_b[j].type, None, j,
                                              _fmt_key(keys_b[j]))))
        events.sort(key=lambda e: (e[0], e[1]))
        out.extend(e[2] for e in events)
    return out


def _var_fields(v: Var, strict: bool) -> dict:
    lod = v.lod_level
    if lod is None and not strict and v.kind in ("LOD_TENSOR", "LOD_TENSOR_ARRAY"):
        lod = 0             # unset reads as 0
    d = {"kind": v.kind, "dtype": v.dtype, "shape": list(v.shape) if v.shape is not None
         else None, "lod_level": lod}
    d["persistable"] = v.persistable if strict else bool(v.persistable)
    if strict:
        # graph-building flags: they do not change what the program does once it is split
        for f in ("is_parameter", "stop_gradient", "need_check_feed"):
            d[f] = getattr(v, f)
        d["descs"] = sorted(v.type.descs)
        d["attrs"] = [asdict(a) for a in v.attrs]
    return d


def _same_var(x: Var, y: Var, strict: bool, same_types: dict) -> bool:
    """True when _var_fields certainly agree (told cheaply: the same var, or equal types).
    `same_types` remembers VarType comparisons (vars of one type often share the object)."""
    if x is y:
        return True
    if strict:
        if (x.persistable, x.need_check_feed, x.is_parameter, x.stop_gradient, x.attrs) != \
                (y.persistable, y.need_check_feed, y.is_parameter, y.stop_gradient, y.attrs):
            return False
    elif bool(x.persistable) != bool(y.persistable):
        return False
    tx, ty = x.type, y.type
    if tx is ty:
        return True
    pair = (id(tx), id(ty))
    same = same_types.get(pair)
    if same is None:
        same = same_types[pair] = tx == ty
    return same


def _renamed_vars(side: _Side, block: Block) -> dict:
    if not side.rename:
        return block.vars
    get = side.rename.get
    return {get(n, n): v for n, v in block.vars.items()}


def _diff_vars(sa: _Side, sb: _Side, ba: Block, bb: Block, details: bool = True) -> list:
    va = _renamed_vars(sa, ba)
    vb = _renamed_vars(sb, bb)
    strict = sa.strict
    out = []
    same_types: dict = {}
    texts: dict = {}
    for n in sorted(va.keys() | vb.keys()):
        x, y = va.get(n), vb.get(n)
        if y is None:
            out.append(VarChange("removed", n, [_fmt_var(x, texts)] if details else []))
        elif x is None:
            out.append(VarChange("added", n, [_fmt_var(y, texts)] if details else []))
        elif not _same_var(x, y, strict, same_types):
            fa, fb = _var_fields(x, strict), _var_fields(y, strict)
            ch = ["%s: %s -> %s" % (k, _fmt_value(fa[k]), _fmt_value(fb[k]))
                  for k in fa if fa[k] != fb[k]]
            if ch:
                out.append(VarChange("changed", n, ch))
    return out


def _fmt_var(v: Var, texts: Optional[dict] = None) -> str:
    """`LOD_TENSOR FP32[256, 1024] persistable`; `texts` remembers the part a VarType says."""
    vt = v.type
    s = texts.get(id(vt)) if texts is not None else None
    if s is None:
        s = v.kind
        dtype = v.dtype
        if dtype:
            s += " %s%s" % (dtype, list(v.shape or ()))
        if texts is not None:
            texts[id(vt)] = s
    if v.persistable:
        s += " persistable"
    return s


def diff_programs(a: Program, b: Program, strict: bool = False,
                  a_name: str = "A", b_name: str = "B", op_defaults=None) -> ProgramDiff:
    """Compare two programs block by block; see the module docstring for the rules.

    `op_defaults` ({op type: {attr: value}}, Paddle's registered defaults): an attr one side
    lacks is no difference when the other side has its default value (not under strict).
    """
    with paused_gc():       # many small objects made, none freed: see gcpause
        return diff_programs_and_names(a, b, strict, a_name, b_name, op_defaults)[0]


def diff_programs_and_names(a: Program, b: Program, strict: bool = False, a_name: str = "A",
                   b_name: str = "B", op_defaults=None, var_details: bool = True) -> tuple:
    """diff_programs, and the control var names of each side: (diff, names in a, names in b).
    Without `var_details`, added and removed vars come without their details."""
    keys: dict = {}
    defaults = None if strict else op_defaults
    sa, sb = _Side(a, strict, keys, defaults), _Side(b, strict, keys, defaults)
    ra, rb = sa.rename, sb.rename
    sa.differ = sb.differ = frozenset(n for n in ra.keys() | rb.keys()
                                      if ra.get(n, n) != rb.get(n, n))
    result = ProgramDiff(a_name, b_name)
    if strict:
        for f in ("version", "op_version_map"):
            if getattr(a, f) != getattr(b, f):
                result.details.append("%s: %s -> %s" % (f, getattr(a, f), getattr(b, f)))
    for idx in range(max(len(a.blocks), len(b.blocks))):
        ba = a.blocks[idx] if idx < len(a.blocks) else None
        bb = b.blocks[idx] if idx < len(b.blocks) else None
        bd = BlockDiff(idx)
        if ba is None or bb is None:
            only = ba or bb
            bd.status = "removed" if bb is None else "added"
            bd.details.append("%d vars, %d ops" % (len(only.vars), len(only.ops)))
            result.blocks.append(bd)
            continue
        if ba.parent_idx != bb.parent_idx:
            bd.details.append("parent_idx: %d -> %d" % (ba.parent_idx, bb.parent_idx))
        if ba.forward_block_idx != bb.forward_block_idx:
            bd.details.append("forward_block_idx: %s -> %s"
                              % (ba.forward_block_idx, bb.forward_block_idx))
        bd.ops = _diff_ops(sa, sb, ba, bb)
        bd.vars = _diff_vars(sa, sb, ba, bb, var_details)
        if bd.changed:
            bd.status = "changed"
        result.blocks.append(bd)
    return result, sa.rename, sb.rename


# ---------------------------------------------------------------------------------------------
# folders (splits)

_PROGRAM_EXTS = (".pb", ".pdmodel", ".json")


def _tree_files(root: str) -> dict:
    """{relative path: absolute path} of the program files and runtime.json under root."""
    out = {}
    for d, subdirs, files in os.walk(root):
        subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
        for f in files:
            if f.startswith("."):
                continue
            rel = os.path.relpath(os.path.join(d, f), root)
            if f == "runtime.json" or (f.endswith((".pb", ".pdmodel")) and
                                       not f.startswith("plan")):
                out[rel] = os.path.join(d, f)
    # a folder of .json program views next to the .pb files: the .pb is the program
    return out


def _json_changes(a, b, path="") -> list:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            p = "%s.%s" % (path, k) if path else str(k)
            if k not in b:
                out.append("%s: removed" % p)
            elif k not in a:
                out.append("%s: added %s" % (p, _short_json(b[k])))
            else:
                out.extend(_json_changes(a[k], b[k], p))
        return out
    if a != b:
        return ["%s: %s -> %s" % (path or "(root)", _short_json(a), _short_json(b))]
    return []


def _short_json(v, limit=120) -> str:
    s = json.dumps(v, ensure_ascii=False, sort_keys=True)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def builtin_op_defaults() -> dict:
    """Paddle 2.6.2's registered attr defaults, shipped in transpile/data/op_defaults.json."""
    import json
    from importlib import resources
    text = resources.files("transpile").joinpath("data/op_defaults.json").read_text("utf-8")
    return json.loads(text)["defaults"]


def load_op_defaults(path: str) -> dict:
    """{op type: {attr: default}} from a JSON file (either that mapping or {"defaults": it})."""
    from .core.errors import UserError
    d = _load_json(path)
    if isinstance(d, dict) and isinstance(d.get("defaults"), dict):
        d = d["defaults"]
    if not isinstance(d, dict) or not all(isinstance(v, dict) for v in d.values()):
        raise UserError("%s: expected {op type: {attr: default value}}" % path)
    return d


def diff_trees(a_dir: str, b_dir: str, strict: bool = False, load=None,
               op_defaults=None) -> TreeDiff:
    """Compare two split folders file by file (programs structurally, runtime.json as JSON)."""
    from .format import programio
    load = load or programio.load
    fa, fb = _tree_files(a_dir), _tree_files(b_dir)
    result = TreeDiff(a_dir, b_dir)
    for rel in sorted(set(fa) | set(fb)):
        if rel not in fb:
            result.files.append(FileDiff(rel, "missing", details=["only in %s" % a_dir]))
            continue
        if rel not in fa:
            result.files.append(FileDiff(rel, "extra", details=["only in %s" % b_dir]))
            continue
        if rel.endswith("runtime.json"):
            ja, jb = _load_json(fa[rel]), _load_json(fb[rel])
            ch = _json_changes(ja, jb)
            if ch:
                result.files.append(FileDiff(rel, "changed", details=ch))
            continue
        pd = diff_programs(load(fa[rel]), load(fb[rel]), strict, fa[rel], fb[rel],
                           op_defaults)
        if pd.changed:
            result.files.append(FileDiff(rel, "changed", program=pd))
    return result


def _load_json(path: str):
    from .core.errors import UserError
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        raise UserError("%s: cannot read JSON (%s)" % (path, e)) from None
