"""What a run of `simulate` found: the comparison of every parameter, its notes, its exit code."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class SimResult:
    """A run's outcome: its mode, steps (as the original took them), global batch and
    tolerance; each parameter's comparison (compare.ParamDiff), the notes, the split's failure
    (`error`); what `--expect-equal` and `--accept-unchanged` asked; the Paddle faults the
    split reproduces (commands/simulate.py fills them)."""
    mode: str
    steps: int
    batch: int
    rtol: float
    params: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    error: Optional[str] = None          # the split failed to execute
    expect_equal: bool = False           # fail a comparison that proves nothing (unchanged)
    faults: list = field(default_factory=list)   # Paddle fault ids the split reproduces
    fix_tried: bool = False     # the split was made with `paddle_faults: fix`
    accepted: tuple = ()                 # names (fnmatch patterns) accepted unchanged
    schedule: str = ""                   # schedule.py: what the reference is

    @property
    def unchanged(self) -> list:
        """The trainable parameters the original run left as they started: comparing them
        proves nothing about the split."""
        return [p.name for p in self.params if p.trainable and p.changed is False]

    @property
    def partly_unchanged(self) -> list:
        """"name (rows a:b)" of the pserver blocks of moved parameters that did not move:
        the comparison proves nothing about the pserver that holds them."""
        return ["%s (%s)" % (p.name, b) for p in self.params for b in p.still_blocks]

    @property
    def vacuous(self) -> list:
        """The unchanged parameters and blocks not accepted by name."""
        import fnmatch
        names = self.unchanged + self.partly_unchanged
        return [n for n in names
                if not any(fnmatch.fnmatchcase(n.split(" ")[0], pat) for pat in self.accepted)]

    @property
    def equal(self) -> bool:
        return self.error is None and all(p.ok for p in self.params)

    @property
    def exit_code(self) -> int:
        if not self.equal:
            return 1
        if self.expect_equal and self.vacuous:
            return 1
        return 0
