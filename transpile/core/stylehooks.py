"""What the floors above styles/ do differently per style, asked of the style: its hooks.

A floor whose work differs by style does not test a trait that stands for a style: it asks a
slot here for the style's behaviour (`CHECK.of(config.style)`), which that floor registered
for each style when it was imported (`CHECK.register(PS.name, ...)`, naming the style by its
traits constant). The slots live on the lowest floor so that every floor can fill and ask
them without importing a higher one; each is filled on one floor only:

  CHECK      check/__init__.py     the checks of a split and how its pservers are read
  SIMULATE   simulate/__init__.py  the run of the split against the original's
  REPORT     render/styled.py      report.md's head: the tables, or the placement
  SUMMARY    render/styled.py      what `split` prints of a split folder
  PLAN       commands/plan.py      what `plan` prints

A style with no behaviour in a slot is not served there (`has`: `simulate` refuses it). A new
style registers its behaviour in each slot, its own or an existing style's under its name
(tests/test_style_hooks.py registers a toy style so, touching no floor's module).
"""
from __future__ import annotations

from typing import Any


class Slot:
    """One floor's behaviours, by style name."""

    def __init__(self, name: str, floor: str):
        self.name = name
        self.floor = floor
        self._by: dict = {}

    def register(self, style: str, behaviour: Any) -> Any:
        """Make `behaviour` style `style`'s in this slot (replacing any before)."""
        self._by[style] = behaviour
        return behaviour

    def unregister(self, style: str) -> None:
        self._by.pop(style, None)

    def has(self, style: str) -> bool:
        return style in self._by

    def of(self, style: str) -> Any:
        """Style `style`'s behaviour here (LookupError, an internal error, when it has none:
        every style the config accepts registers one, or is refused before it is asked)."""
        try:
            return self._by[style]
        except KeyError:
            raise LookupError("style %s has no %s behaviour (%s registers them)"
                              % (style, self.name, self.floor)) from None

    def styles(self) -> list:
        return sorted(self._by)


CHECK = Slot("check", "transpile/check/__init__.py")
SIMULATE = Slot("simulate", "transpile/simulate/__init__.py")
REPORT = Slot("report", "transpile/render/styled.py")
SUMMARY = Slot("summary", "transpile/render/styled.py")
PLAN = Slot("plan", "transpile/commands/plan.py")
SLOTS = (CHECK, SIMULATE, REPORT, SUMMARY, PLAN)
