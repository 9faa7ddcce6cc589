"""Structural diff of two programs (and of two split folders); diff_render.py renders it.
The ops are aligned and compared in ops.py; the result types are in result.py.

Blocks are compared by index. Within a block, ops are aligned by a longest common subsequence
on (type, inputs, outputs): the common prefix and suffix are matched first, then difflib's
SequenceMatcher alignment of the interned op keys (ints) is taken, so memory stays linear on
large programs (computed in O(n log n) when no key repeats, see seqmatch.py).
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
suffix (see ops.control_var_names), so two runs of the same transpilation compare equal.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import Optional

from ..core.gcpause import paused_gc
from ..ir.program import Block, Program, Var
from .ops import Side, diff_ops, fmt_value
from .result import BlockDiff, FileDiff, ProgramDiff, TreeDiff, VarChange, VarNames


# ---------------------------------------------------------------------------------------------
# vars

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


class _Renamed:
    """A block's vars by their renamed names (Side.rename: control vars only), looked up
    without a renamed copy of the block's dict (a split's trainer main declares tens of
    thousands of vars, a handful of them control vars)."""
    __slots__ = ("vars", "rename", "back")

    def __init__(self, side: Side, block: Block):
        self.vars, self.rename = block.vars, side.rename
        self.back = {new: old for old, new in self.rename.items()}

    def get(self, name: str):
        old = self.back.get(name)
        if old is not None:
            return self.vars.get(old)
        return None if name in self.rename else self.vars.get(name)

    def __contains__(self, name: str) -> bool:
        old = self.back.get(name)
        if old is not None:
            return old in self.vars
        return name not in self.rename and name in self.vars

    def items(self):
        """(renamed name, var) in the block's order."""
        get = self.rename.get
        return ((get(n, n), v) for n, v in self.vars.items())


def _diff_vars(sa: Side, sb: Side, ba: Block, bb: Block, details: bool = True):
    """The var changes of a block, in name order: VarChanges, or without `details` a
    VarNames."""
    va = _Renamed(sa, ba)
    vb = _Renamed(sb, bb)
    strict = sa.strict
    out = []
    same_types: dict = {}
    texts: dict = {}
    # the names whose var is not the same object on both sides (a split's program shares most
    # of its vars with the original): only they can differ
    get_b = vb.get
    names = [n for n, x in va.items() if get_b(n) is not x]
    names += [n for n, _ in vb.items() if n not in va]
    names.sort()
    # without details, the added and removed vars by name only (VarNames)
    lean = None if details else VarNames()
    for n in names:
        x, y = va.get(n), vb.get(n)
        if y is None:
            if lean is not None:
                lean.removed.append(n)
            else:
                out.append(VarChange("removed", n, [_fmt_var(x, texts)]))
        elif x is None:
            if lean is not None:
                lean.added.append(n)
            else:
                out.append(VarChange("added", n, [_fmt_var(y, texts)]))
        elif not _same_var(x, y, strict, same_types):
            fa, fb = _var_fields(x, strict), _var_fields(y, strict)
            ch = ["%s: %s -> %s" % (k, fmt_value(fa[k]), fmt_value(fb[k]))
                  for k in fa if fa[k] != fb[k]]
            if ch:
                out.append(VarChange("changed", n, ch))
    if lean is not None:
        lean.changed = out
        return lean
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
                   b_name: str = "B", op_defaults=None, details: bool = True) -> tuple:
    """diff_programs, and the control var names of each side: (diff, names in a, names in b).
    Without `details`, a block's var changes are a VarNames (added and removed vars by name
    only), ops come without their one-line rendering (OpChange.op), and changed ops with at
    most one of their changes (none for an op replaced by one of its type)."""
    keys: dict = {}
    defaults = None if strict else op_defaults
    sa, sb = Side(a, strict, keys, defaults), Side(b, strict, keys, defaults)
    sa.details = sb.details = details
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
        bd.ops = diff_ops(sa, sb, ba, bb)
        # the op keys interned for this block are not needed again (a block's ints are only
        # compared with each other's): let them go before the vars are compared (a split's
        # trainer main at 5k ops and 64 pservers: ~6 MiB)
        keys.clear()
        bd.vars = _diff_vars(sa, sb, ba, bb, details)
        if bd.changed:
            bd.status = "changed"
        result.blocks.append(bd)
    return result, sa.rename, sb.rename


# ---------------------------------------------------------------------------------------------
# folders (splits)

def _tree_files(root: str) -> dict:
    """{relative path: absolute path} of the program files, runtime.json and the ps
    descriptors (*_desc.txt) under root."""
    out = {}
    for d, subdirs, files in os.walk(root):
        subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
        for f in files:
            if f.startswith("."):
                continue
            rel = os.path.relpath(os.path.join(d, f), root)
            program = f.endswith((".pb", ".pdmodel")) and not f.startswith("plan")
            if program or f == "runtime.json" or f.endswith("_desc.txt"):
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
    from ..core.errors import UserError
    d = _load_json(path)
    if isinstance(d, dict) and isinstance(d.get("defaults"), dict):
        d = d["defaults"]
    if not isinstance(d, dict) or not all(isinstance(v, dict) for v in d.values()):
        raise UserError("%s: expected {op type: {attr: default value}}" % path)
    return d


def diff_trees(a_dir: str, b_dir: str, strict: bool = False, load=None,
               op_defaults=None) -> TreeDiff:
    """Compare two split folders file by file (programs structurally, runtime.json as JSON,
    ps descriptors field by field)."""
    from ..format import programio
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
        if rel.endswith("_desc.txt"):          # the ps style's descriptors
            from .descriptors import desc_changes
            ch = desc_changes(fa[rel], fb[rel])
            if ch:
                result.files.append(FileDiff(rel, "changed", details=ch))
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
    from ..core.errors import UserError
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        raise UserError("%s: cannot read JSON (%s)" % (path, e)) from None
