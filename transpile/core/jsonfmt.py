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


class MadeItems:
    """A read-only list of JSON items, each made when it is read and not kept: what plan.json
    lists per block of a split to many pservers (a hundred thousand small dicts) then costs no
    memory between its uses. Subclasses say how many items there are (`n`) and make item i
    (item). It reads as the list it stands for (len, [i], slices, iteration, ==), and plain()
    and the plan.json writer (output/outdir.py) write it as that list."""

    __slots__ = ("n",)

    def __init__(self, n: int):
        self.n = n

    def item(self, i: int):
        raise NotImplementedError

    def item_json(self, i: int, encode) -> str:
        """Item i as `encode` (the plan.json writer's compact encoder: sorted keys, ", " and
        ": ") writes it. Subclasses whose items are many write the text directly, falling
        back to `encode` for values they do not expect."""
        return encode(self.item(i))

    def items_json(self, encode) -> list:
        """Every item as item_json writes it, in order (subclasses with many items make them
        in one loop)."""
        return [self.item_json(i, encode) for i in range(self.n)]

    def column(self, key: str) -> list:
        """[item.get(key) for each item]; subclasses read the fields they can without making
        the items."""
        return [self.item(i).get(key) for i in range(self.n)]

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.item(k) for k in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError("item %d of %d" % (i, self.n))
        return self.item(i)

    def __iter__(self):
        return map(self.item, range(self.n))

    def __eq__(self, other) -> bool:
        if isinstance(other, (MadeItems, list)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, list(self))


def plain(obj):
    """`obj` with every MadeItems in it (in dicts and lists, at any depth) made into the list
    it stands for, in place (a MadeItems given alone: a new list): what json.dumps and ==
    take as they take any JSON value. Returns `obj`."""
    if isinstance(obj, MadeItems):
        return [plain(x) for x in obj]
    if type(obj) is dict:
        for k, v in obj.items():
            if isinstance(v, (dict, list, MadeItems)):
                obj[k] = plain(v)
    elif type(obj) is list:
        for i, v in enumerate(obj):
            if isinstance(v, (dict, list, MadeItems)):
                obj[i] = plain(v)
    return obj


def column(items, key: str) -> list:
    """[item.get(key) for item in items], `items` a list of dicts or a MadeItems (which reads
    the field without making each item where it can)."""
    if isinstance(items, MadeItems):
        return items.column(key)
    return [x.get(key) for x in items]


def made_default(obj):
    """json.JSONEncoder's `default` that writes a MadeItems as its list."""
    if isinstance(obj, MadeItems):
        return list(obj)
    raise TypeError("Object of type %s is not JSON serializable" % type(obj).__name__)
