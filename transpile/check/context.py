"""What the checks share while they run: the inputs, the split, its index (built once, before
any check, and never changed: index.py) and the findings so far."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Optional

from ..core.config import ClusterConfig
from ..ir.program import Program
from ..plan.fault_notes import avoid_text
from .findings import Finding
from .index import ParamBlock, SplitIndex, build_index
from .loading import Split
from .pssummary import PserverSummary, summarize



class CheckContext:
    """The inputs, the split and its index, and the findings and warnings so far. The checks
    only add findings; what they look up is in `index`, complete before the first one runs."""

    def __init__(self, main: Program, startup: Optional[Program], config: ClusterConfig,
                 split: Split, index: Optional[SplitIndex] = None):
        self.main = main
        self.startup = startup
        self.config = config
        self.split = split
        self.findings: list = []
        self.warnings: list = []
        self.index: SplitIndex = index if index is not None else \
            build_index(config, split, list(self.parts()))
        # (check, part or endpoint) -> (findings, warnings) a streamed check made while it
        # had that pserver's programs (see stream.py); replayed in their place in the order
        self.recorded: dict = {}
        self._key_lists: dict = {}                    # endpoint -> "g1, g2, ..." or "none"
        self._memo: dict = {}
        # whether every send's target was checked with its pserver, its findings recorded
        # (("send_target", (trainer id, send index))): a streamed check's (stream.py)
        self.targets_read = False

    @contextmanager
    def collecting(self):
        """The findings and warnings added in the body go to the ([], []) it yields, not to
        the report."""
        saved = self.findings, self.warnings
        self.findings, self.warnings = got = ([], [])
        try:
            yield got
        finally:
            self.findings, self.warnings = saved

    @contextmanager
    def recording(self, check: str, where: str):
        """The findings and warnings added in the body are kept for replay(check, where)."""
        with self.collecting() as got:
            self.recorded[(check, where)] = got
            yield

    def replay(self, check: str, where: str) -> bool:
        """Add what recording(check, where) kept, if it ran: True; else False (the caller
        checks `where` itself)."""
        got = self.recorded.get((check, where))
        if got is None:
            return False
        self.findings.extend(got[0])
        self.warnings.extend(got[1])
        return True

    def pserver_summary(self, endpoint: str) -> PserverSummary:
        """What the trainer checks read of the main program of `endpoint` (pssummary.py):
        made while the program is loaded, kept after it is let go."""
        found = self._memo.get(("pserver_summary", endpoint))
        if found is not None:       # (asked once per send: tens of thousands of times)
            return found

        def make():
            prog = self.split.pservers[endpoint]["main"].prog
            return summarize(prog, self.grad_keys.get(endpoint, {}).values())
        return self.memo(("pserver_summary", endpoint), make)

    def memo(self, key, make):
        """`make()`, computed once per check run: for what a check derives from the inputs
        and the index (which never change while the checks run) and reads again and again."""
        try:
            return self._memo[key]
        except KeyError:
            v = self._memo[key] = make()
            return v

    def forget(self, key) -> None:
        """Let memo(key, ...)'s value go (made again if asked for): what no later check reads."""
        self._memo.pop(key, None)

    def remember(self, key, value) -> None:
        """Keep `value` as memo(key, ...)'s: what another process made (check/stream.py)."""
        self._memo[key] = value

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
    if fault:
        expected += avoid_text(fault)       # the model change that avoids it, when one does
    return Finding(check, part if isinstance(part, str) else part.name, block, op, message,
                   expected, fault)
