"""The program as readable JSON, lossless in both directions.

    {"format": "pstranspile.program/1", "version": 0, "op_version_map": [[op, version], ...],
     "blocks": [{"idx": 0, "parent_idx": -1,
                 "vars": [{"name", "type": "LOD_TENSOR", "dtype": "FP32", "shape": [..],
                           "lod_level": 0, "persistable": true, ...}],
                 "ops": [{"type", "inputs": {slot: [args]}, "outputs": {...},
                          "attrs": {name: {"type": "INT", "value": 1}}}]}]}

Keys that are absent in the JSON are absent in the ProgramDesc, so a JSON file read back gives
the same bytes. Values are checked on the way in: a missing field or a wrong type is a
ProgramFormatError naming where it is.
"""
from __future__ import annotations

import json
import math

from ..core.errors import ProgramFormatError
from ..ir.program import ATTR_FIELD, Attr, Block, Op, Program, TensorDesc, Var, VarAttr, VarType

FORMAT = "pstranspile.program/1"
_FLAGS = ("persistable", "need_check_feed", "is_parameter", "stop_gradient")


def _num(x):
    """JSON has no inf/nan: they travel as strings."""
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    return x


def _tensor(t: TensorDesc, lod):
    d = {"dtype": t.dtype, "shape": list(t.dims)}
    if lod is not None:
        d["lod_level"] = lod
    return d


def _var_to_json(v: Var) -> dict:
    d: dict = {"name": v.name, "type": v.type.type}
    vt = v.type
    main_slot = None
    from ..ir.program import KIND_SLOT
    slot = KIND_SLOT.get(vt.type)
    if slot in vt.descs and len(vt.descs) == 1:
        main_slot = slot
        d.update(_tensor(*vt.descs[slot]))
    elif vt.descs:
        d["descs"] = {k: _tensor(t, lod) for k, (t, lod) in vt.descs.items()}
    if vt.reader is not None:
        d["reader"] = [_tensor(t, lod) for t, lod in vt.reader]
    if vt.tuple_types is not None:
        d["tuple"] = list(vt.tuple_types)
    del main_slot
    for f in _FLAGS:
        val = getattr(v, f)
        if val is not None:
            d[f] = val
    if v.attrs:
        d["attrs"] = [{k: val for k, val in (("name", a.name), ("type", a.type), ("i", a.i),
                                              ("s", a.s), ("ints", list(a.ints) or None))
                       if val is not None} for a in v.attrs]
    return d


def _attr_value_to_json(t, v):
    if t in ("FLOAT", "FLOAT64"):
        return _num(v)
    if t in ("FLOATS", "FLOAT64S"):
        return [_num(x) for x in v]
    if t == "SCALAR":
        return _scalar_to_json(v)
    if t == "SCALARS":
        return [_scalar_to_json(x) for x in v]
    return v


def _scalar_to_json(d):
    return {k: (_num(x) if k == "r" else [_num(y) for y in x] if k == "c" else x)
            for k, x in d.items()}


def _attr_to_json(a: Attr) -> dict:
    d = {"type": a.type, "value": _attr_value_to_json(a.type, a.value)}
    if a.extra:
        d["extra"] = [[k, v] for k, v in a.extra]
    return d


def _op_to_json(op: Op) -> dict:
    d = {"type": op.type, "inputs": op.inputs, "outputs": op.outputs,
         "attrs": {k: _attr_to_json(a) for k, a in op.attrs.items()}}
    if op.dup_attrs:
        d["dup_attrs"] = [[pos, name, _attr_to_json(a)] for pos, name, a in op.dup_attrs]
    if op.is_target is not None:
        d["is_target"] = op.is_target
    return d


def to_json(program: Program) -> dict:
    d: dict = {"format": FORMAT}
    if program.has_version:
        d["version"] = program.version
    if program.op_version_map is not None:
        d["op_version_map"] = [[n, v] for n, v in program.op_version_map]
    blocks = []
    for b in program.blocks:
        bd = {"idx": b.idx, "parent_idx": b.parent_idx}
        if b.forward_block_idx is not None:
            bd["forward_block_idx"] = b.forward_block_idx
        bd["vars"] = [_var_to_json(v) for v in b.vars.values()]
        bd["ops"] = [_op_to_json(o) for o in b.ops]
        blocks.append(bd)
    d["blocks"] = blocks
    return d


def dumps(program: Program) -> str:
    return json.dumps(to_json(program), indent=1, ensure_ascii=False) + "\n"


# ----------------------------------------------------------------------------------------------
# reading, with type checks that say where a value is wrong

class _At:
    def __init__(self, path):
        self.path = path

    def fail(self, msg):
        raise ProgramFormatError("%s: %s" % (self.path, msg))

    def get(self, d, key, types, required=True, default=None):
        if not isinstance(d, dict):
            self.fail("expected an object")
        if key not in d:
            if required:
                raise ProgramFormatError("%s: missing field %r" % (self.path, key))
            return default
        v = d[key]
        if not _is(v, types):
            raise ProgramFormatError("%s.%s: expected %s, got %s"
                                     % (self.path, key, _tname(types), json.dumps(v)[:40]))
        return v

    def sub(self, part):
        return _At("%s%s" % (self.path, part))


def _is(v, types):
    if not isinstance(types, tuple):
        types = (types,)
    for t in types:
        if t is int and isinstance(v, int) and not isinstance(v, bool):
            return True
        if t is float and isinstance(v, (int, float)) and not isinstance(v, bool):
            return True
        if t is bool and isinstance(v, bool):
            return True
        if t not in (int, float, bool) and isinstance(v, t):
            return True
    return False


def _tname(types):
    if not isinstance(types, tuple):
        types = (types,)
    names = {int: "an integer", float: "a number", bool: "true/false", str: "a string",
             list: "a list", dict: "an object"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def _list_of(at, v, types):
    if not isinstance(v, list):
        at.fail("expected a list, got %s" % json.dumps(v)[:40])
    for i, x in enumerate(v):
        if not _is(x, types):
            at.fail("item %d: expected %s, got %s" % (i, _tname(types), json.dumps(x)[:40]))
    return v


def _float(at, x):
    if isinstance(x, str):
        try:
            f = float(x)
        except ValueError:
            at.fail("expected a number, got %r" % x)
        if math.isfinite(f):
            at.fail("expected a number, got %r" % x)
        return f
    if not _is(x, float):
        at.fail("expected a number, got %s" % json.dumps(x)[:40])
    return float(x)


_ATTR_ITEM = {"INTS": int, "LONGS": int, "STRINGS": str, "BOOLEANS": bool, "BLOCKS": int,
              "VARS": str}
_ATTR_SCALAR = {"INT": int, "LONG": int, "STRING": str, "BOOLEAN": bool, "BLOCK": int, "VAR": str}


def _scalar_from_json(at, d):
    if not isinstance(d, dict) or not _is(d.get("type"), int):
        at.fail("expected a scalar object with an integer 'type'")
    out = {}
    for k, x in d.items():
        if k == "r":
            out[k] = _float(at, x)
        elif k == "c":
            out[k] = [_float(at, y) for y in _list_of(at, x, (float, str))]
        elif k in ("type", "i") and _is(x, int) or k == "b" and _is(x, bool):
            out[k] = x
        else:
            at.fail("scalar field %r has a wrong value" % k)
    return out


def _attr_value_from_json(at, t, v):
    if t in _ATTR_SCALAR:
        if not _is(v, _ATTR_SCALAR[t]):
            at.fail("expected %s for a %s attr" % (_tname(_ATTR_SCALAR[t]), t))
        return v
    if t in _ATTR_ITEM:
        return list(_list_of(at, v, _ATTR_ITEM[t]))
    if t in ("FLOAT", "FLOAT64"):
        return _float(at, v)
    if t in ("FLOATS", "FLOAT64S"):
        return [_float(at, x) for x in _list_of(at, v, (float, str))]
    if t == "SCALAR":
        return _scalar_from_json(at, v)
    if t == "SCALARS":
        return [_scalar_from_json(at, x) for x in _list_of(at, v, dict)]
    at.fail("unknown attr type %r" % t)


def _attr_from_json(at, d) -> Attr:
    t = at.get(d, "type", str)
    if t not in ATTR_FIELD:
        at.fail("unknown attr type %r" % t)
    raw_extra = d.get("extra", []) if isinstance(d, dict) else []
    absent = isinstance(raw_extra, list) and any(
        isinstance(e, list) and e[:1] == ["__absent__"] for e in raw_extra)
    raw_value = at.get(d, "value", object)
    value = None if absent and raw_value is None else \
        _attr_value_from_json(at.sub(".value"), t, raw_value)
    extra = []
    for i, e in enumerate(at.get(d, "extra", list, required=False, default=[])):
        if not (isinstance(e, list) and len(e) == 2 and isinstance(e[0], str)):
            at.fail("extra[%d]: expected [field, value]" % i)
        k, x = e
        if k == "__absent__":
            extra.append((k, x))
            continue
        ft = {f: name for name, f in ATTR_FIELD.items()}.get(k)
        if ft is None:
            at.fail("extra[%d]: unknown attr field %r" % (i, k))
        extra.append((k, _attr_value_from_json(at.sub(".extra[%d]" % i), ft, x)))
    return Attr(t, value, tuple(extra))


def _tensor_from_json(at, d):
    from .proto import VAR_TYPE_NUM
    dtype = at.get(d, "dtype", str)
    if dtype not in VAR_TYPE_NUM:
        at.fail("unknown dtype %r" % dtype)
    shape = _list_of(at.sub(".shape"), at.get(d, "shape", list), int)
    lod = at.get(d, "lod_level", int, required=False)
    return TensorDesc(dtype, tuple(shape)), lod


def _var_from_json(at, d) -> Var:
    from ..ir.program import KIND_SLOT
    from .proto import VAR_TYPE_NUM
    name = at.get(d, "name", str)
    at = at.sub("(%s)" % name)
    kind = at.get(d, "type", str)
    if kind not in VAR_TYPE_NUM:
        at.fail("unknown var type %r" % kind)
    vt = VarType(kind)
    if "dtype" in d:
        slot = KIND_SLOT.get(kind)
        if slot is None:
            at.fail("a %s var has no dtype/shape; use 'descs'" % kind)
        vt.descs[slot] = _tensor_from_json(at, d)
    for slot, td in at.get(d, "descs", dict, required=False, default={}).items():
        if slot not in ("selected_rows", "lod_tensor", "tensor_array", "string", "strings",
                        "vocab", "sparse_coo", "sparse_csr"):
            at.fail("unknown tensor slot %r" % slot)
        vt.descs[slot] = _tensor_from_json(at.sub(".descs." + slot), td)
    if "reader" in d:
        vt.reader = tuple(_tensor_from_json(at.sub(".reader"), x)
                          for x in _list_of(at.sub(".reader"), d["reader"], dict))
    if "tuple" in d:
        vt.tuple_types = tuple(_list_of(at.sub(".tuple"), d["tuple"], str))
        for x in vt.tuple_types:
            if x not in VAR_TYPE_NUM:
                at.fail("unknown tuple element type %r" % x)
    flags = {f: at.get(d, f, bool, required=False) for f in _FLAGS}
    attrs = []
    for i, a in enumerate(at.get(d, "attrs", list, required=False, default=[])):
        aat = at.sub(".attrs[%d]" % i)
        t = aat.get(a, "type", str)
        if t not in ATTR_FIELD:
            aat.fail("unknown attr type %r" % t)
        attrs.append(VarAttr(aat.get(a, "name", str), t, aat.get(a, "i", int, required=False),
                             aat.get(a, "s", str, required=False),
                             tuple(_list_of(aat, a.get("ints", []), int))))
    return Var(name, vt, attrs=tuple(attrs), **flags)


def _slots(at, d):
    if not isinstance(d, dict):
        at.fail("expected an object of slot -> [argument names]")
    for k, v in d.items():
        _list_of(at.sub("." + k), v, str)
    return {k: list(v) for k, v in d.items()}


def _op_from_json(at, d) -> Op:
    t = at.get(d, "type", str)
    at = at.sub("(%s)" % t)
    attrs = {}
    for k, a in at.get(d, "attrs", dict, required=False, default={}).items():
        attrs[k] = _attr_from_json(at.sub(".attrs." + k), a)
    dups = []
    for i, e in enumerate(at.get(d, "dup_attrs", list, required=False, default=[])):
        if not (isinstance(e, list) and len(e) == 3 and _is(e[0], int) and isinstance(e[1], str)):
            at.fail("dup_attrs[%d]: expected [position, name, attr]" % i)
        dups.append((e[0], e[1], _attr_from_json(at.sub(".dup_attrs[%d]" % i), e[2])))
    return Op(t, _slots(at.sub(".inputs"), at.get(d, "inputs", dict, required=False, default={})),
              _slots(at.sub(".outputs"), at.get(d, "outputs", dict, required=False, default={})),
              attrs, is_target=at.get(d, "is_target", bool, required=False),
              dup_attrs=tuple(dups))


def from_json(d) -> Program:
    at = _At("program")
    if not isinstance(d, dict):
        at.fail("expected a JSON object with 'blocks'")
    fmt = d.get("format", FORMAT)
    if fmt != FORMAT:
        at.fail("unknown format %r (expected %r)" % (fmt, FORMAT))
    blocks = []
    for i, bd in enumerate(at.get(d, "blocks", list)):
        bat = at.sub(".blocks[%d]" % i)
        vars_ = {}
        for j, vd in enumerate(bat.get(bd, "vars", list, required=False, default=[])):
            v = _var_from_json(bat.sub(".vars[%d]" % j), vd)
            if v.name in vars_:
                bat.fail("var %r declared twice" % v.name)
            vars_[v.name] = v
        ops = [_op_from_json(bat.sub(".ops[%d]" % j), od)
               for j, od in enumerate(bat.get(bd, "ops", list, required=False, default=[]))]
        blocks.append(Block(bat.get(bd, "idx", int), bat.get(bd, "parent_idx", int), vars_, ops,
                            bat.get(bd, "forward_block_idx", int, required=False)))
    if not blocks:
        at.fail("it has no blocks")
    has_version = "version" in d
    version = at.get(d, "version", (int, type(None)), required=False)
    ovm = None
    if "op_version_map" in d:
        ovm = []
        for i, p in enumerate(at.get(d, "op_version_map", list)):
            if not (isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                    and _is(p[1], int)):
                at.fail("op_version_map[%d]: expected [op name, version]" % i)
            ovm.append((p[0], p[1]))
    return Program(blocks, version=version, has_version=has_version, op_version_map=ovm)


def loads(data) -> Program:
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProgramFormatError("not UTF-8 text (byte %d)" % e.start) from None
    if not data.strip():
        raise ProgramFormatError("empty file: no JSON program")
    try:
        d = json.loads(data)
    except json.JSONDecodeError as e:
        raise ProgramFormatError("invalid JSON at line %d, column %d: %s"
                                 % (e.lineno, e.colno, e.msg)) from None
    except RecursionError:
        raise ProgramFormatError("JSON nested too deeply") from None
    return from_json(d)
