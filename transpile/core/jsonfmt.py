"""JSON text of plain result objects: dataclasses to dicts without asdict's deep copy, then
json.dumps."""
from __future__ import annotations

import copy
import json
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
    """json.dumps(obj, indent=1) with text as it is (not \\u-escaped)."""
    return json.dumps(obj, indent=1, ensure_ascii=False)
