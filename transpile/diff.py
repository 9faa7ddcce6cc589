"""Structural diff of two programs (and of two split folders), plus its renderers.

Blocks are compared by index. Within a block, ops are aligned by a longest common subsequence
on (type, inputs, outputs): the common prefix and suffix are matched first, then difflib's
SequenceMatcher runs on interned op keys (ints), so memory stays linear on large programs.
Inside a replaced run, a deleted and an inserted op of the same type are paired up and reported
as one changed op. Vars are compared by name.

Debug attrs (op_callstack, op_namescope, op_device, with_quant_attr), empty slots, unset-vs-
default fields and the vars' graph-building flags (is_parameter, stop_gradient,
need_check_feed) are ignored unless `strict`; so is the order of the listen_and_serv maps Paddle
fills from a set (grad_to_block_id, ...) and of runs of fake_init ops.
`__control_var@<random>` names are compared by where they are used, not by their random
suffix (see control_var_names), so two runs of the same transpilation compare equal.
"""
from __future__ import annotations

import bisect
import difflib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Optional

from .program import Block, Op, Program, Var

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
                "blocks": [asdict(b) for b in self.blocks if b.changed]}

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
        for op in b.ops:
            for args in op.outputs.values():
                for n in args:
                    if n.startswith(_CONTROL) and n not in names:
                        others = [x for x in op.input_names() if not x.startswith(_CONTROL)]
                        names[n] = claim("%s%s(%s)" % (_CONTROL, op.type, ",".join(others)))
    k = 0
    for b in prog.blocks:
        refs = [n for op in b.ops for n in op.input_names()] + list(b.vars)
        for n in refs:
            if n.startswith(_CONTROL) and n not in names:
                names[n] = claim("%s%d" % (_CONTROL, k))
                k += 1
    return names


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

    def name(self, n: str) -> str:
        return self.rename.get(n, n)

    def slots(self, slots: dict) -> tuple:
        items = ((k, tuple(self.name(a) for a in v)) for k, v in slots.items()
                 if v or self.strict)
        return tuple(sorted(items))

    def op_key(self, op: Op) -> tuple:
        return (op.type, self.slots(op.inputs), self.slots(op.outputs))

    def op_ids(self, block) -> list:
        out = []
        for op in block.ops:
            k = self.op_key(op)
            out.append(self.keys.setdefault(k, len(self.keys)))
        return out

    def attrs(self, op: Op) -> dict:
        return {k: a for k, a in op.attrs.items() if self.strict or k not in DEBUG_ATTRS}


# attrs Paddle fills from a set or dict: their order changes from run to run
ORDERLESS_ATTRS = frozenset({"grad_to_block_id", "sparse_grad_to_param",
                             "prefetch_var_name_to_block_id"})


def _attr_value(side: _Side, a, name: str = "") -> object:
    v = a.value
    if name in ORDERLESS_ATTRS and not side.strict and isinstance(v, list):
        return sorted(v)
    if a.type in ("VAR",) and isinstance(v, str):
        return side.name(v)
    if a.type in ("VARS",):
        return [side.name(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return v


def _fmt_slots(slots: tuple) -> str:
    return ", ".join("%s=%s" % (k, v[0] if len(v) == 1 else "[" + ", ".join(v) + "]")
                     for k, v in slots)


def _fmt_op(side: _Side, op: Op) -> str:
    return "%s(%s) -> (%s)" % (op.type, _fmt_slots(side.slots(op.inputs)),
                               _fmt_slots(side.slots(op.outputs)))


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


def _attr_changes(sa: _Side, sb: _Side, oa: Op, ob: Op) -> list:
    aa, ab = sa.attrs(oa), sb.attrs(ob)
    out = []
    for k in list(aa) + [k for k in ab if k not in aa]:
        if (k not in ab and _is_default(sa, oa.type, k, _attr_value(sa, aa[k]))) or \
                (k not in aa and _is_default(sb, ob.type, k, _attr_value(sb, ab[k]))):
            continue        # absent means the registered default
        if k not in ab:
            out.append("attr %s: %s -> (absent)" % (k, _fmt_value(_attr_value(sa, aa[k]))))
        elif k not in aa:
            out.append("attr %s: (absent) -> %s" % (k, _fmt_value(_attr_value(sb, ab[k]))))
        else:
            va, vb = _attr_value(sa, aa[k], k), _attr_value(sb, ab[k], k)
            if va != vb:
                out.append("attr %s: %s -> %s" % (k, _fmt_value(va), _fmt_value(vb)))
            elif sa.strict and aa[k].type != ab[k].type:
                out.append("attr %s: type %s -> %s" % (k, aa[k].type, ab[k].type))
    if sa.strict and oa.is_target != ob.is_target:
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


def _op_changes(sa: _Side, sb: _Side, oa: Op, ob: Op) -> list:
    out = _slot_changes("input", sa.slots(oa.inputs), sb.slots(ob.inputs))
    out += _slot_changes("output", sa.slots(oa.outputs), sb.slots(ob.outputs))
    return out + _attr_changes(sa, sb, oa, ob)


def _opcodes(ka: list, kb: list) -> list:
    """difflib-style opcodes, with the common prefix and suffix matched before LCS."""
    n, m = len(ka), len(kb)
    pre = 0
    while pre < n and pre < m and ka[pre] == kb[pre]:
        pre += 1
    suf = 0
    while suf < n - pre and suf < m - pre and ka[n - 1 - suf] == kb[m - 1 - suf]:
        suf += 1
    codes = []
    if pre:
        codes.append(("equal", 0, pre, 0, pre))
    mid_a, mid_b = ka[pre:n - suf], kb[pre:m - suf]
    if mid_a or mid_b:
        if not mid_a:
            codes.append(("insert", pre, pre, pre, m - suf))
        elif not mid_b:
            codes.append(("delete", pre, n - suf, pre, pre))
        else:
            sm = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False)
            for tag, i1, i2, j1, j2 in sm.get_opcodes():
                codes.append((tag, i1 + pre, i2 + pre, j1 + pre, j2 + pre))
    if suf:
        codes.append(("equal", n - suf, n, m - suf, m))
    return codes


# ops Paddle emits in runs whose order comes from a set (one fake_init per table in startup)
ORDERLESS_RUNS = frozenset({"fake_init"})


def _canonical_order(side: _Side, block: Block) -> list:
    """Op indices, with each run of ORDERLESS_RUNS ops sorted by key (not under strict)."""
    order = list(range(len(block.ops)))
    if side.strict:
        return order
    i = 0
    ops = block.ops
    while i < len(ops):
        j = i
        while j < len(ops) and ops[j].type in ORDERLESS_RUNS and ops[j].type == ops[i].type:
            j += 1
        if j - i > 1:
            order[i:j] = sorted(range(i, j), key=lambda k: repr(side.op_key(ops[k])))
        i = max(j, i + 1)
    return order


class _View:
    """A block seen through a permutation of its ops (positions still report real indices)."""

    def __init__(self, block: Block, order: list):
        self.ops = [block.ops[k] for k in order]
        self.order = order


def _diff_ops(sa: _Side, sb: _Side, ba: Block, bb: Block) -> list:
    va, vb = _View(ba, _canonical_order(sa, ba)), _View(bb, _canonical_order(sb, bb))
    out = _diff_op_lists(sa, sb, va, vb)
    for o in out:
        if o.a_index is not None:
            o.a_index = va.order[o.a_index]
        if o.b_index is not None:
            o.b_index = vb.order[o.b_index]
    return out


def _diff_op_lists(sa: _Side, sb: _Side, ba, bb) -> list:
    ka, kb = sa.op_ids(ba), sb.op_ids(bb)
    out = []
    for tag, i1, i2, j1, j2 in _opcodes(ka, kb):
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                ch = _attr_changes(sa, sb, ba.ops[i], bb.ops[j])
                if ch:
                    out.append(OpChange("change", ba.ops[i].type, i, j,
                                        _fmt_op(sa, ba.ops[i]), ch))
            continue
        dels = list(range(i1, i2))
        inss = list(range(j1, j2))
        # pair a deleted op with the next inserted op of the same type: one "changed" op
        paired: dict = {}
        used = set()
        by_type: dict = {}
        for j in inss:
            by_type.setdefault(bb.ops[j].type, []).append(j)
        last = -1
        for i in dels:
            cands = by_type.get(ba.ops[i].type)
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
                events.append((j, 1, OpChange("change", ba.ops[i].type, i, j,
                                              _fmt_op(sa, ba.ops[i]),
                                              _op_changes(sa, sb, ba.ops[i], bb.ops[j]))))
            else:
                events.append((j1, 0, OpChange("delete", ba.ops[i].type, i, None,
                                               _fmt_op(sa, ba.ops[i]))))
        for j in inss:
            if j not in used:
                events.append((j, 2, OpChange("insert", bb.ops[j].type, None, j,
                                              _fmt_op(sb, bb.ops[j]))))
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


def _diff_vars(sa: _Side, sb: _Side, ba: Block, bb: Block) -> list:
    va = {sa.name(n): v for n, v in ba.vars.items()}
    vb = {sb.name(n): v for n, v in bb.vars.items()}
    out = []
    for n in sorted(set(va) | set(vb)):
        if n not in vb:
            out.append(VarChange("removed", n, [_fmt_var(va[n])]))
        elif n not in va:
            out.append(VarChange("added", n, [_fmt_var(vb[n])]))
        else:
            fa, fb = _var_fields(va[n], sa.strict), _var_fields(vb[n], sb.strict)
            ch = ["%s: %s -> %s" % (k, _fmt_value(fa[k]), _fmt_value(fb[k]))
                  for k in fa if fa[k] != fb[k]]
            if ch:
                out.append(VarChange("changed", n, ch))
    return out


def _fmt_var(v: Var) -> str:
    s = v.kind
    if v.dtype:
        s += " %s%s" % (v.dtype, list(v.shape or ()))
    if v.persistable:
        s += " persistable"
    return s


def diff_programs(a: Program, b: Program, strict: bool = False,
                  a_name: str = "A", b_name: str = "B", op_defaults=None) -> ProgramDiff:
    """Compare two programs block by block; see the module docstring for the rules.

    `op_defaults` ({op type: {attr: value}}, Paddle's registered defaults): an attr one side
    lacks is no difference when the other side has its default value (not under strict).
    """
    keys: dict = {}
    defaults = None if strict else op_defaults
    sa, sb = _Side(a, strict, keys, defaults), _Side(b, strict, keys, defaults)
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
        bd.vars = _diff_vars(sa, sb, ba, bb)
        if bd.changed:
            bd.status = "changed"
        result.blocks.append(bd)
    return result


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
    from .errors import UserError
    d = _load_json(path)
    if isinstance(d, dict) and isinstance(d.get("defaults"), dict):
        d = d["defaults"]
    if not isinstance(d, dict) or not all(isinstance(v, dict) for v in d.values()):
        raise UserError("%s: expected {op type: {attr: default value}}" % path)
    return d


def diff_trees(a_dir: str, b_dir: str, strict: bool = False, load=None,
               op_defaults=None) -> TreeDiff:
    """Compare two split folders file by file (programs structurally, runtime.json as JSON)."""
    from . import programio
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
    from .errors import UserError
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        raise UserError("%s: cannot read JSON (%s)" % (path, e)) from None


# ---------------------------------------------------------------------------------------------
# renderers (formatting only)

_MARK = {"insert": "+", "delete": "-", "change": "~"}


def _op_where(o: OpChange) -> str:
    if o.kind == "insert":
        return "op %d" % o.b_index
    if o.kind == "delete":
        return "op %d" % o.a_index
    return "op %d" % o.a_index if o.a_index == o.b_index else "op %d->%d" % (o.a_index,
                                                                          o.b_index)


def render_text(d: ProgramDiff) -> str:
    lines = ["--- %s" % d.a, "+++ %s" % d.b]
    lines += ["  %s" % x for x in d.details]
    for b in d.blocks:
        if not b.changed:
            continue
        head = "block %d" % b.idx
        if b.status in ("added", "removed"):
            head += " (%s)" % ("only in B" if b.status == "added" else "only in A")
        lines.append(head + ":")
        lines += ["  %s" % x for x in b.details]
        for o in b.ops:
            lines.append("  %s %s %s" % (_MARK[o.kind], _op_where(o), o.op))
            lines += ["      %s" % x for x in o.details]
        for v in b.vars:
            mark = {"added": "+", "removed": "-", "changed": "~"}[v.kind]
            lines.append("  %s var %s: %s" % (mark, v.name, "; ".join(v.details)))
    lines.append("summary: " + ("no differences" if not d.changed else d.summary()))
    return "\n".join(lines) + "\n"


def _md(s: str) -> str:
    return s.replace("|", "\\|")


def render_markdown(d: ProgramDiff, heading: str = "##") -> str:
    lines = ["%s `%s` vs `%s`" % (heading, d.a, d.b), ""]
    if not d.changed:
        return "\n".join(lines + ["No differences.", ""])
    lines += ["- %s" % x for x in d.details]
    for b in d.blocks:
        if not b.changed:
            continue
        lines += ["", "%s# Block %d%s" % (heading, b.idx,
                                          "" if b.status in ("same", "changed")
                                          else " (%s)" % b.status), ""]
        lines += ["- %s" % x for x in b.details]
        if b.ops:
            lines += ["| | op | change |", "|---|---|---|"]
            for o in b.ops:
                what = "<br>".join(_md(x) for x in o.details) or o.kind
                lines.append("| %s | %s `%s` | %s |" % (_MARK[o.kind], _op_where(o),
                                                       _md(o.op), what))
        if b.vars:
            lines += ["", "| | var | change |", "|---|---|---|"]
            for v in b.vars:
                mark = {"added": "+", "removed": "-", "changed": "~"}[v.kind]
                lines.append("| %s | `%s` | %s |" % (mark, _md(v.name),
                                                    "<br>".join(_md(x) for x in v.details)))
    lines += ["", "**Summary:** " + d.summary(), ""]
    return "\n".join(lines)


def render_json(d) -> str:
    return json.dumps(d.to_dict(), indent=1, ensure_ascii=False) + "\n"


def render_tree_text(t: TreeDiff) -> str:
    if not t.changed:
        return "no differences between %s and %s\n" % (t.a, t.b)
    out = []
    for f in t.files:
        if f.program is not None:
            out.append("== %s\n" % f.path + render_text(f.program))
        else:
            out.append("== %s: %s\n" % (f.path, f.status) +
                       "".join("  %s\n" % x for x in f.details))
    return "".join(out)


def render_tree_markdown(t: TreeDiff) -> str:
    if not t.changed:
        return "No differences between `%s` and `%s`.\n" % (t.a, t.b)
    out = ["# `%s` vs `%s`\n" % (t.a, t.b)]
    for f in t.files:
        if f.program is not None:
            out.append("## `%s`\n\n" % f.path + render_markdown(f.program, heading="###"))
        else:
            out.append("## `%s`: %s\n\n" % (f.path, f.status) +
                       "".join("- %s\n" % _md(x) for x in f.details))
    return "\n".join(out)


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}
TREE_RENDERERS = {"text": render_tree_text, "markdown": render_tree_markdown,
                  "json": render_json}
