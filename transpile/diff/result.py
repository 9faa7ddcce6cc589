"""What a diff finds (programs.py): per block the op and var changes, per program and per split
folder the lot; as_plain / to_dict give their JSON form."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..core.jsonfmt import as_plain


@dataclass
class OpChange:
    """One difference in a block's op list. `kind` is insert, delete or change."""
    kind: str
    type: str
    a_index: Optional[int]          # position in A (None for an insert)
    b_index: Optional[int]          # position in B (None for a delete)
    op: str = ""                    # the op, rendered on one line
    details: list = field(default_factory=list)   # "attr scale: 0.5 -> 1.0", ...


@dataclass(slots=True)
class VarChange:
    """One var's difference. Slots: a split's trainer main adds a var per gradient block
    (~67k at 5k ops and 64 pservers), report.md's diff holds them all at once."""
    kind: str                       # added, removed, changed
    name: str
    details: list = field(default_factory=list)   # () for added / removed without details


@dataclass(slots=True)
class VarNames:
    """A block's var changes without details (report.md's diff): the names added and removed,
    each list in name order, and the changed vars as VarChanges; what a VarChange per var
    would say of the added and removed ones, without an object each (a split's trainer main at
    5k ops and 64 pservers adds 41k vars: 2.6 MB of VarChanges at the peak of its process)."""
    added: list = field(default_factory=list)
    removed: list = field(default_factory=list)
    changed: list = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


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
