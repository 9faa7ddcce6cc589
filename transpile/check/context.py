"""What the checks share while they run: the inputs, the split, its index (built once, before
any check, and never changed: index.py) and the findings so far."""
from __future__ import annotations

from typing import Optional

from ..core.config import ClusterConfig
from ..ir.program import Program
from .findings import Finding
from .index import ParamBlock, SplitIndex, build_index
from .loading import Split



class CheckContext:
    """The inputs, the split and its index, and the findings and warnings so far. The checks
    only add findings; what they look up is in `index`, complete before the first one runs."""

    def __init__(self, main: Program, startup: Optional[Program], config: ClusterConfig,
                 split: Split):
        self.main = main
        self.startup = startup
        self.config = config
        self.split = split
        self.findings: list = []
        self.warnings: list = []
        self.index: SplitIndex = build_index(config, split, list(self.parts()))
        self._key_lists: dict = {}                    # endpoint -> "g1, g2, ..." or "none"
        self._memo: dict = {}

    def memo(self, key: str, make):
        """`make()`, computed once per check run: for what a check derives from the inputs
        and the index (which never change while the checks run) and reads again and again."""
        try:
            return self._memo[key]
        except KeyError:
            v = self._memo[key] = make()
            return v

    @property
    def reach(self):
        """part name -> the blocks of that program that can run."""
        return self.index.reach

    @property
    def param_blocks(self):
        """endpoint -> its ParamBlocks, as its listen_and_serv names them."""
        return self.index.param_blocks

    @property
    def grad_keys(self):
        """endpoint -> {grad name: block idx} of its grad_to_block_id."""
        return self.index.grad_keys

    def param_block(self, endpoint: str, grad: str) -> Optional[ParamBlock]:
        """The first parameter block of `endpoint` that optimizes `grad`, or None."""
        return self.index.by_grad.get(endpoint, {}).get(grad)

    def add(self, check, part, block, op, message, expected="", fault=""):
        """Record a finding; `part` is a Part or a name ("split", "trainer_0/runtime.json");
        `fault`: the id of the Paddle fault that makes the split so, when it is one."""
        self.findings.append(_finding(check, part, block, op, message, expected, fault))

    def warn(self, check, part, block, op, message, expected="", fault=""):
        """Record a warning: worth saying, not a reason to fail the check. `fault`: the id of
        the Paddle fault it names."""
        self.warnings.append(_finding(check, part, block, op, message, expected, fault))

    def grad_endpoints(self) -> dict:
        """{grad name: [endpoints whose grad_to_block_id knows it, in cluster order]}."""
        return self.index.grad_endpoints

    def grad_key_list(self, endpoint: str) -> str:
        """The grads `endpoint`'s grad_to_block_id knows, sorted and comma-joined ("none")."""
        s = self._key_lists.get(endpoint)
        if s is None:
            s = self._key_lists[endpoint] = \
                ", ".join(sorted(self.grad_keys.get(endpoint, {}))) or "none"
        return s

    def trainer_prog(self, part_name: str) -> Optional[Program]:
        """The program of a trainer part ("trainer_0/main", "trainer_0/startup"), or None."""
        return self.index.trainer_progs.get(part_name)

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
