"""Passes as named units, and the pipeline that runs them in order.

A pass is a function `(program, env) -> program` with a name: it reads its input and returns
a new program, never editing a program it was handed from outside its pipeline (the pserver
builders, whose first pass makes a new program from the original, let the passes after it add
to that program: nothing else holds it). `env` (PassEnv) is what the passes of one program
share: the plan, the style's original programs, the trainer id or endpoint, what the style
indexed once per split (`shared`), and what a pass leaves for the passes after it on the same
trainer or endpoint (`scratch`). A Pipeline runs its passes in order; when one fails, the
error names the pass, the program it was building and, where the pass said, the op; `after`
sees the program after every pass (`split --dump-after`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional

from ..core.errors import UserError
from ..ir.program import Program


@dataclass(frozen=True)
class PassEnv:
    """What the passes building one trainer's or endpoint's programs read; only `scratch` is
    written (by the pass that leaves something for a later one)."""
    plan: Any
    main: Program                   # the style's original main (after its input fixes)
    startup: Program
    trainer_id: int = 0
    endpoint: str = ""
    shared: Mapping = field(default_factory=lambda: MappingProxyType({}))   # per-split indexes
    scratch: dict = field(default_factory=dict)     # per trainer / endpoint, between passes


@dataclass(frozen=True)
class Pass:
    """A named rewrite: `fn(program, env) -> program`."""
    name: str
    fn: Callable[[Program, PassEnv], Program]

    @property
    def doc(self) -> str:
        """The first sentence of the pass function's docstring."""
        text = " ".join((self.fn.__doc__ or "").strip().split("\n\n")[0].split())
        end = text.find(". ")
        return text if end < 0 else text[:end + 1]

    def __call__(self, prog: Program, env: PassEnv) -> Program:
        return self.fn(prog, env)


def named(fn: Callable[[Program, PassEnv], Program]) -> Pass:
    """A Pass named after its function."""
    return Pass(fn.__name__, fn)


class PassFailed(RuntimeError):
    """A pass failed on something other than bad input: a bug, named by pass and program."""


# after(pass name, program key, program): called after each pass
AfterHook = Callable[[str, str, Program], None]


@dataclass(frozen=True)
class Pipeline:
    """The passes that make one kind of program ("trainer main", "pserver startup", ...)."""
    name: str
    passes: tuple

    def run(self, prog: Program, env: PassEnv, key: str = "",
            after: Optional[AfterHook] = None) -> Program:
        for p in self.passes:
            before = prog
            try:
                prog = p(prog, env)
            except UserError as e:
                e.message = "%s (pass %s, %s%s)" % (e.message, p.name, key or self.name,
                                                    _at(before, getattr(e, "op", None)))
                raise
            except Exception as e:  # noqa: BLE001 - named and re-raised: exit 3 with the pass
                raise PassFailed("pass %s failed on %s%s: %s: %s" % (
                    p.name, key or self.name, _at(before, getattr(e, "op", None)),
                    type(e).__name__, e)) from e
            if after is not None:
                after(p.name, key, prog)
        return prog

    def names(self) -> list[str]:
        return [p.name for p in self.passes]


def _at(prog: Program, op) -> str:
    """", at op <block>:<index> <type>" for an op of `prog`, or "" when there is none."""
    if op is None:
        return ""
    for b in prog.blocks:
        for i, o in enumerate(b.ops):
            if o is op or (getattr(o, "uid", None) is not None and o.uid == op.uid):
                return ", at op %d:%d %s" % (b.idx, i, op.type)
    return ", at a %s op" % op.type
