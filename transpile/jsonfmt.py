"""JSON text of plain result objects, quickly: dataclasses to dicts without asdict's deep copy,
and json.dumps(indent=1)'s exact text without its pure-Python encoder."""
from __future__ import annotations

import copy
import json
import math
from dataclasses import fields, is_dataclass


def as_plain(obj):
    """dataclasses.asdict(obj) for the result types here, without its generic deep copy (which
    cost more than the diff on a large program): dataclasses become dicts, lists new lists,
    strings and numbers stay as they are."""
    t = type(obj)
    if t is str or t is int or obj is None or t is bool or t is float:
        return obj
    if t is list:
        if all(type(x) is str for x in obj):
            return list(obj)
        return [as_plain(x) for x in obj]
    names = _FIELD_NAMES.get(t)
    if names is None and is_dataclass(obj) and not isinstance(obj, type):
        names = _FIELD_NAMES[t] = tuple(f.name for f in fields(obj))
    if names is not None:
        return {n: as_plain(getattr(obj, n)) for n in names}
    if t is tuple:
        return tuple(as_plain(x) for x in obj)
    if t is dict:
        return {as_plain(k): as_plain(v) for k, v in obj.items()}
    return copy.deepcopy(obj)


_FIELD_NAMES: dict = {}


def dumps_indented(obj) -> str:
    """json.dumps(obj, indent=1, ensure_ascii=False), without the pure-Python encoder's
    generators (json.dumps runs that one, not the C encoder, when it indents)."""
    try:
        return _indented(obj, "\n")
    except _Unusual:
        return json.dumps(obj, indent=1, ensure_ascii=False)


class _Unusual(Exception):
    """A value _indented leaves to json.dumps (a non-string key, a custom type...)."""


_encode_str = json.encoder.encode_basestring       # what json.dumps(ensure_ascii=False) uses


def _indented(o, newline: str) -> str:
    if isinstance(o, str):
        return _encode_str(o)
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    if isinstance(o, int):
        return int.__repr__(o)
    if isinstance(o, float):
        if o != o:
            return "NaN"
        if o in (math.inf, -math.inf):
            return "Infinity" if o > 0 else "-Infinity"
        return float.__repr__(o)
    inner = newline + " "
    if isinstance(o, (list, tuple)):
        if not o:
            return "[]"
        if all(type(x) is str for x in o):
            items = map(_encode_str, o)
        else:
            items = [_indented(x, inner) for x in o]
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    if isinstance(o, dict):
        if not o:
            return "{}"
        if not all(type(k) is str for k in o):
            raise _Unusual()
        return "{" + inner + ("," + inner).join(
            [_encode_str(k) + ": " + _indented(v, inner) for k, v in o.items()]) + newline + "}"
    raise _Unusual()
