"""What the checks share while they run: the inputs, the split, what the pserver checks learnt
(parameter blocks, grad_to_block_id keys, reachable blocks) and the findings so far."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core.config import ClusterConfig
from ..ir.program import Op, Program, Var
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


class CheckContext:
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
        self._by_grad: dict = {}              # endpoint -> {grad name: first ParamBlock}
        self._trainer_progs: Optional[dict] = None    # part name -> trainer Program
        self._grad_eps: Optional[dict] = None         # grad name -> [endpoint]
        self._key_lists: dict = {}                    # endpoint -> "g1, g2, ..." or "none"

    def param_block(self, endpoint: str, grad: str) -> Optional[ParamBlock]:
        """The first parameter block of `endpoint` that optimizes `grad`, or None. Indexed on
        first use: call it once param_blocks is complete (after check_listen)."""
        idx = self._by_grad.get(endpoint)
        if idx is None:
            idx = self._by_grad[endpoint] = {}
            for pb in self.param_blocks.get(endpoint, ()):
                idx.setdefault(pb.grad, pb)
        return idx.get(grad)

    def add(self, check, part, block, op, message, expected=""):
        """Record a finding; `part` is a Part or a name ("split", "trainer_0/runtime.json")."""
        self.findings.append(_finding(check, part, block, op, message, expected))

    def warn(self, check, part, block, op, message, expected="", fault=""):
        """Record a warning: worth saying, not a reason to fail the check. `fault`: the id of
        the Paddle fault it names."""
        self.warnings.append(_finding(check, part, block, op, message, expected, fault))

    def grad_endpoints(self) -> dict:
        """{grad name: [endpoints whose grad_to_block_id knows it, in cluster order]}. Built on
        first use, like param_block."""
        if self._grad_eps is None:
            self._grad_eps = {}
            for ep in self.config.pservers:
                for g in self.grad_keys.get(ep, {}):
                    self._grad_eps.setdefault(g, []).append(ep)
        return self._grad_eps

    def grad_key_list(self, endpoint: str) -> str:
        """The grads `endpoint`'s grad_to_block_id knows, sorted and comma-joined ("none")."""
        s = self._key_lists.get(endpoint)
        if s is None:
            s = self._key_lists[endpoint] = \
                ", ".join(sorted(self.grad_keys.get(endpoint, {}))) or "none"
        return s

    def trainer_prog(self, part_name: str) -> Optional[Program]:
        """The program of a trainer part ("trainer_0/main", "trainer_0/startup"), or None."""
        if self._trainer_progs is None:
            self._trainer_progs = {}
            for t in self.split.trainers.values():
                for k in ("main", "startup"):
                    if t.get(k) is not None:
                        self._trainer_progs.setdefault(t[k].name, t[k].prog)
        return self._trainer_progs.get(part_name)

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


def _finding(check, part, block, op, message, expected, fault="") -> Finding:
    return Finding(check, part if isinstance(part, str) else part.name, block, op, message,
                   expected, fault)
