"""What the checks share while they run: the inputs, the split, what the pserver checks learnt
(parameter blocks, grad_to_block_id keys, reachable blocks) and the findings so far."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..config import ClusterConfig
from ..program import Op, Program, Var
from .findings import Finding
from .loading import Split


@dataclass
class ParamBlock:
    """A pserver optimize block that updates one parameter (or one slice of it)."""
    endpoint: str
    prog: str
    block: int
    grad: str                    # the grad_to_block_id name
    param: Optional[str] = None  # the pserver-side name: fc_w, fc_w.block1
    var: Optional[Var] = None
    op_idx: Optional[int] = None
    op: Optional[Op] = None
    sparse: bool = False         # a sparse table / distributed lookup table shard


class Ctx:
    """What the checks share: the inputs, the split, and the findings so far.

    The checks run in order (structure, listen, optimize, coverage, trainers) because the later
    ones read what the earlier ones filled in: `reach` from structure, `param_blocks` and
    `grad_keys` from listen."""

    def __init__(self, main: Program, startup: Optional[Program], config: ClusterConfig,
                 split: Split):
        self.main = main
        self.startup = startup
        self.config = config
        self.split = split
        self.findings: list = []
        self.warnings: list = []
        self.reach: dict = {}                 # part name -> reachable block set
        self.param_blocks: dict = {}          # endpoint -> [ParamBlock]
        self.grad_keys: dict = {}             # endpoint -> {grad name: block idx}

    def add(self, check, part, block, op, message, expected=""):
        """Record a finding; `part` is a Part or a name ("split", "trainer_0/runtime.json")."""
        self.findings.append(_finding(check, part, block, op, message, expected))

    def warn(self, check, part, block, op, message, expected=""):
        """Record a warning: worth saying, not a reason to fail the check."""
        self.warnings.append(_finding(check, part, block, op, message, expected))

    @property
    def geo(self) -> bool:
        return self.config.mode == "geo"

    def parts(self):
        """Every program of the split: trainers by id, then pservers in cluster order."""
        for tid in sorted(self.split.trainers):
            t = self.split.trainers[tid]
            yield t["main"]
            if t["startup"] is not None:
                yield t["startup"]
        for ep in self.config.pservers:
            p = self.split.pservers.get(ep)
            if p:
                yield p["main"]
                if p["startup"] is not None:
                    yield p["startup"]


def _finding(check, part, block, op, message, expected) -> Finding:
    return Finding(check, part if isinstance(part, str) else part.name, block, op, message,
                   expected)
