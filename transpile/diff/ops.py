"""Comparing the ops of two blocks, for programs.py (whose docstring gives the rules): each side
normalised (control var names made independent of their random suffix, op keys interned),
the ops aligned, and a changed op's attrs and slots compared."""
from __future__ import annotations

import bisect
import json
import math
from itertools import chain, islice
from operator import attrgetter, eq as _eq, itemgetter, methodcaller
from typing import Optional

from ..ir.program import Block, Op, Program
from ..ir.validate import arg_names
from .result import OpChange
from .seqmatch import opcodes as _opcodes

# where an op came from, not what it does (with_quant_attr: framework bookkeeping, always False)
DEBUG_ATTRS = frozenset({"op_callstack", "op_namescope", "op_device", "with_quant_attr"})
_CONTROL = "__control_var@"


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
        if not any(filter(_is_control, arg_names(b.ops, "outputs"))):
            continue
        for op in b.ops:
            for args in op.outputs.values():
                for n in args:
                    if n.startswith(_CONTROL) and n not in names:
                        others = [x for x in op.input_names() if not x.startswith(_CONTROL)]
                        names[n] = claim("%s%s(%s)" % (_CONTROL, op.type, ",".join(others)))
    k = 0
    for b in prog.blocks:
        for n in filter(_is_control, chain(arg_names(b.ops, "inputs"), b.vars)):
            if n not in names:
                names[n] = claim("%s%d" % (_CONTROL, k))
                k += 1
    return names


_is_control = methodcaller("startswith", _CONTROL)
_CONTROL_BYTES = _CONTROL.encode()


def fmt_value(v) -> str:
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt_value(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    return str(v)


class Side:
    """One program prepared for comparison: renamed control vars, op keys interned."""

    def __init__(self, prog: Program, strict: bool, keys: dict, defaults=None):
        self.prog = prog
        self.strict = strict
        self.defaults = defaults or {}
        self.rename = control_var_names(prog)
        self.keys = keys
        # the names this side and the other rename differently (set by diff_programs_and_names)
        self.differ: frozenset = frozenset()
        # False: the caller reads where ops changed, not how: no op rendered on one line, a
        # changed op's list of changes stops at the first, a paired delete + insert has none
        self.details = True

    def name(self, n: str) -> str:
        return self.rename.get(n, n)

    def op_keys(self, ops, known: Optional[dict] = None, clean: bool = False) -> list:
        """Each op's key: its type, inputs and outputs, the slots sorted by name with their
        renamed args, empty slots left out (unless strict), as one flat tuple (nested_key
        gives the (type, inputs, outputs) it stands for: a tuple per slot made a split's
        trainer main's keys ~5 MiB). A hot loop, written out.

        `known`: {id(op): key} of the other side's ops, whose keys hold here too unless an
        argument is a name the two sides rename differently (`differ`); `clean`: none of
        those ops names one."""
        strict = self.strict
        rename = self.rename
        get = rename.get
        differ = None if clean else self.differ
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
                    items = [(k, list(map(get, v, v))) for k, v in slots.items() if v or strict]
                else:
                    items = [(k, v) for k, v in slots.items() if v or strict]
                if len(items) > 1:
                    items.sort(key=_slot_name)      # slot names are unique
                key.append(len(items))
                for k, v in items:
                    key.append(k)
                    key.append(len(v))
                    key += v
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


def _attr_value(side: Side, a, name: str = "") -> object:
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


_slot_name = itemgetter(0)


def nested_key(key: tuple) -> tuple:
    """(type, inputs, outputs), each slots a tuple of (slot, args tuple) pairs, from the flat
    key Side.op_keys makes: (type, n, slot, m, arg * m, ... [n slots], n, ... [outputs])."""
    out = [key[0]]
    i = 1
    for _ in range(2):
        slots = []
        n = key[i]
        i += 1
        for _ in range(n):
            m = key[i + 1]
            slots.append((key[i], key[i + 2:i + 2 + m]))
            i += 2 + m
        out.append(tuple(slots))
    return tuple(out)


def _no_key(key: tuple) -> str:
    return ""


def _fmt_key(key: tuple) -> str:
    """An op, from its key (Side.op_keys), on one line."""
    key = nested_key(key)
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


def _is_default(side: Side, op_type: str, name: str, value) -> bool:
    d = side.defaults.get(op_type)
    return d is not None and name in d and _same_value(value, d[name])


def _names_renamed_differently(op: Op, name: str, differ: frozenset) -> bool:
    """Whether the value of the op's VAR / VARS attr `name` names a var in `differ`."""
    v = op.find_attr(name).value
    return not differ.isdisjoint([v] if isinstance(v, str) else v if isinstance(v, list) else ())


def _has_var_attrs(op: Op, differ: frozenset) -> bool:
    """Whether a VAR / VARS attr of the op (its value is renamed like a slot argument) names
    a var the two sides rename differently (in `differ`)."""
    if op.lacks_text(_CONTROL_BYTES):
        return False        # only control vars are renamed: `differ` holds nothing else
    raw = op.attrs_as_read()
    if raw is not None:
        types = list(map(_type_of, raw.values()))
        if _VAR_ATTR_CODE_SET.isdisjoint(types):
            return False
        names = [n for n, t in zip(raw, types) if t in _VAR_ATTR_CODE_SET]
    else:
        names = [n for n in op.attr_names() if op.find_attr(n).type in _VAR_ATTR_TYPES]
    return any(_names_renamed_differently(op, n, differ) for n in names)


def _same_attrs(sa: Side, sb: Side, oa: Op, ob: Op) -> bool:
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


def _attr_changes(sa: Side, sb: Side, oa: Op, ob: Op) -> list:
    lines = _attr_change_lines(sa, sb, oa, ob)
    return list(lines) if sa.details else list(islice(lines, 1))


def _attr_change_lines(sa: Side, sb: Side, oa: Op, ob: Op):
    strict = sa.strict
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
                yield "attr %s: %s -> (absent)" % (k, fmt_value(_attr_value(sa, a)))
            elif a is None:
                yield "attr %s: (absent) -> %s" % (k, fmt_value(_attr_value(sb, b)))
            else:
                va, vb = _attr_value(sa, a, k), _attr_value(sb, b, k)
                if va != vb:
                    yield "attr %s: %s -> %s" % (k, fmt_value(va), fmt_value(vb))
                elif strict and a.type != b.type:
                    yield "attr %s: type %s -> %s" % (k, a.type, b.type)
    if strict and oa.is_target != ob.is_target:
        yield "is_target: %s -> %s" % (oa.is_target, ob.is_target)


def _slot_changes(what: str, a: tuple, b: tuple) -> list:
    da, db = dict(a), dict(b)
    out = []
    for k in [k for k, _ in a] + [k for k, _ in b if k not in da]:
        if da.get(k) != db.get(k):
            fa = "(absent)" if k not in da else fmt_value(list(da[k]))
            fb = "(absent)" if k not in db else fmt_value(list(db[k]))
            out.append("%s %s: %s -> %s" % (what, k, fa, fb))
    return out


def _op_changes(sa: Side, sb: Side, oa: Op, ob: Op, key_a: tuple, key_b: tuple) -> list:
    key_a, key_b = nested_key(key_a), nested_key(key_b)
    out = _slot_changes("input", key_a[1], key_b[1])
    out += _slot_changes("output", key_a[2], key_b[2])
    return out + _attr_changes(sa, sb, oa, ob)


# ops Paddle emits in runs whose order comes from a set (one fake_init per table in startup)
ORDERLESS_RUNS = frozenset({"fake_init"})


def _canonical_order(side: Side, block: Block, keys: list) -> list:
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
            order[i:j] = sorted(range(i, j), key=lambda k: repr(nested_key(keys[k])))
        i = j
    return order


class _View:
    """A block seen through a permutation of its ops (positions still report real indices),
    with the ops' keys in that order."""

    def __init__(self, block: Block, order: list, keys: list):
        self.ops = [block.ops[k] for k in order]
        self.keys = [keys[k] for k in order]
        self.order = order


def _view(side: Side, block: Block, known: Optional[dict] = None, clean: bool = False) -> _View:
    keys = side.op_keys(block.ops, known, clean)
    return _View(block, _canonical_order(side, block, keys), keys)


def diff_ops(sa: Side, sb: Side, ba: Block, bb: Block) -> list:
    va = _view(sa, ba)
    # ops B shares with A (a split keeps the ops it does not change): their keys, computed once
    # (unless an op names what the sides rename differently: when no op of A does, none is
    # looked at for it)
    differ = sb.differ
    clean = not differ or (differ.isdisjoint(arg_names(ba.ops, "inputs")) and
                           differ.isdisjoint(arg_names(ba.ops, "outputs")))
    vb = _view(sb, bb, {id(op): k for op, k in zip(va.ops, va.keys)}, clean)
    out = _diff_op_lists(sa, sb, va, vb)
    for o in out:
        if o.a_index is not None:
            o.a_index = va.order[o.a_index]
        if o.b_index is not None:
            o.b_index = vb.order[o.b_index]
    return out


def _diff_op_lists(sa: Side, sb: Side, va: _View, vb: _View) -> list:
    keys_a, keys_b = va.keys, vb.keys
    ops_a, ops_b = va.ops, vb.ops
    # the same op on both sides has the same attrs, unless a VAR attr is renamed differently
    same_if_shared = not sa.differ
    fmt = _fmt_key if sa.details else _no_key
    out = []
    for tag, i1, i2, j1, j2 in _opcodes(sa.intern(keys_a), sb.intern(keys_b)):
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                oa, ob = ops_a[i], ops_b[j]
                if oa is ob and (same_if_shared or not _has_var_attrs(oa, sa.differ)):
                    continue
                ch = _attr_changes(sa, sb, oa, ob)
                if ch:
                    out.append(OpChange("change", oa.type, i, j, fmt(keys_a[i]), ch))
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
                                              fmt(keys_a[i]),
                                              _op_changes(sa, sb, ops_a[i], ops_b[j],
                                                          keys_a[i], keys_b[j])
                                              if sa.details else [])))
            else:
                events.append((j1, 0, OpChange("delete", ops_a[i].type, i, None,
                                               fmt(keys_a[i]))))
        for j in inss:
            if j not in used:
                events.append((j, 2, OpChange("insert", ops_b[j].type, None, j,
                                              fmt(keys_b[j]))))
        events.sort(key=lambda e: (e[0], e[1]))
        out.extend(e[2] for e in events)
    return out
