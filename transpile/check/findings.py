"""What `check` finds: one `Finding` per problem, gathered in a `CheckReport`.

Findings are data; transpile/check/render.py formats them and decides nothing.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

# The checks a finding can come from, in the order they run (the JUnit renderer lists a passing
# test for each one that found nothing).
CHECKS = ("structure", "listen", "optimize", "coverage", "send", "recv", "trainer", "tables",
          "fault",
          "golden")


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a split: where (program, block, op index), what, what was expected."""
    check: str
    program: str                 # "trainer_0/main", "pserver_127.0.0.1_6174/startup", "split"
    block: Optional[int]
    op: Optional[int]
    message: str
    expected: str = ""
    fault: str = ""              # the Paddle fault id (plan/faults.py) this finding names

    def where(self) -> str:
        s = self.program
        if self.block is not None:
            s += " block %d" % self.block
        if self.op is not None:
            s += " op %d" % self.op
        return s

    def line(self) -> str:
        s = "%s: %s" % (self.where(), self.message)
        if self.expected:
            s += " (expected: %s)" % self.expected
        return s


@dataclass
class CheckReport:
    split_dir: str
    findings: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    programs: list = field(default_factory=list)     # the programs looked at

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict:
        return {"split": self.split_dir, "ok": self.ok, "programs": self.programs,
                "findings": [asdict(f) for f in self.findings],
                "warnings": [asdict(w) for w in self.warnings]}

