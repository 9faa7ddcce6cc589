"""The vars of a block of a program only read (transpile/format/protoread.py's read_only, what
`check` reads): name -> Var as a Block's dict of vars, held small.

A trainer program of a split to many pservers declares tens of thousands of slice vars (its
main and startup the same ones), which differ only by name and shape: a Var object for each
was most of what `check` held of it. A VarTable keeps, for each name, a small number: which
of the program's kinds of var (VarType, flags, attrs) it is; the Var is made when asked for.
Each look-up makes a new Var, equal to the one a dict would hold (same fields, the VarType
shared): a program only read is never changed, so none is the worse for it (a VarTable
refuses to be changed).
"""
from __future__ import annotations

from collections.abc import ItemsView, Mapping, ValuesView

from .program import Var


class VarTable(Mapping):
    """name -> Var, in declaration order. `codes`: name -> index in `kinds`; `kinds`:
    [(VarType, persistable, need_check_feed, is_parameter, stop_gradient, attrs)], which
    the blocks of one program share."""
    __slots__ = ("_codes", "_kinds")

    def __init__(self, codes: dict, kinds: list):
        self._codes = codes
        self._kinds = kinds

    @classmethod
    def of(cls, vars_: dict, kinds: list, by_key: dict) -> "VarTable":
        """The table of a dict of Vars (each kind added to `kinds` once: `by_key` maps a
        kind's hashable key to its index there)."""
        codes = {}
        for name, v in vars_.items():
            codes[name] = kind_code((v.type, v.persistable, v.need_check_feed,
                                     v.is_parameter, v.stop_gradient, v.attrs), kinds, by_key)
        return cls(codes, kinds)

    def __getitem__(self, name: str) -> Var:
        return Var(name, *self._kinds[self._codes[name]])

    def get(self, name: str, default=None):
        code = self._codes.get(name)
        if code is None:
            return default
        return Var(name, *self._kinds[code])

    def __contains__(self, name) -> bool:
        return name in self._codes

    def __iter__(self):
        return iter(self._codes)

    def __len__(self) -> int:
        return len(self._codes)

    def keys(self):
        return self._codes.keys()

    def values(self) -> "_Values":
        return _Values(self)

    def items(self) -> "_Items":
        return _Items(self)

    def __setitem__(self, name, var):
        raise TypeError("the vars of a program only read do not change")

    __delitem__ = __setitem__

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def __reduce__(self):
        return (VarTable, (self._codes, self._kinds))


class _Values(ValuesView):
    __slots__ = ()

    def __iter__(self):
        kinds = self._mapping._kinds
        for name, code in self._mapping._codes.items():
            yield Var(name, *kinds[code])


class _Items(ItemsView):
    __slots__ = ()

    def __iter__(self):
        kinds = self._mapping._kinds
        for name, code in self._mapping._codes.items():
            yield name, Var(name, *kinds[code])


def names_of(vars_):
    """The names of a block's vars as a dict (a VarTable's own; a dict as it is): what
    set.difference and set.intersection look names up in directly (with another mapping
    they first make a set of its keys)."""
    return vars_._codes if vars_.__class__ is VarTable else vars_


def type_of(vars_, name: str):
    """The VarType of var `name` of a block's vars (a VarTable's without making its Var), or
    None."""
    if vars_.__class__ is VarTable:
        code = vars_._codes.get(name)
        return None if code is None else vars_._kinds[code][0]
    v = vars_.get(name)
    return None if v is None else v.type


def name_types(vars_):
    """(name, VarType) of each of a block's vars, in order (a VarTable's without making its
    Vars)."""
    if vars_.__class__ is VarTable:
        kinds = vars_._kinds
        return ((name, kinds[code][0]) for name, code in vars_._codes.items())
    return ((name, v.type) for name, v in vars_.items())


def persistable_names(vars_) -> list:
    """The names of a block's persistable vars, in order (a VarTable's without making its
    Vars: a trainer's tens of thousands of slices at 64 pservers)."""
    if vars_.__class__ is VarTable:
        kinds = vars_._kinds
        return [name for name, code in vars_._codes.items() if kinds[code][1]]
    return [name for name, v in vars_.items() if v.persistable]


def kind_code(kind: tuple, kinds: list, by_key: dict) -> int:
    """The index of `kind` (VarType, the four flags, attrs) in `kinds`, added when new. Equal
    kinds share an index when they are the same VarType object with hashable attrs (a VarType
    is shared by the vars of a program that have equal bytes for it)."""
    try:
        key = (id(kind[0]),) + kind[1:]
        code = by_key.get(key)
    except TypeError:           # attrs that do not hash (VarAttr): a kind of its own
        key, code = None, None
    if code is None:
        code = len(kinds)
        kinds.append(kind)
        if key is not None:
            by_key[key] = code
    return code
