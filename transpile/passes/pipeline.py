"""Passes as named units, and the pipeline that runs them in order.

A pass is a function `(program, env) -> program` with a name: it reads its input and returns
a new program, never editing a program it was handed from outside its pipeline (the pserver
builders, whose first pass makes a new program from the original, let the passes after it add
to that program: nothing else holds it). `env` (PassEnv) is what the passes of one program
share: the plan, the style's original programs, the trainer id or endpoint, what the style
indexed once per split (`shared`), and what a pass leaves for the passes after it on the same
trainer or endpoint (`state`: a PassState of the pipeline's own kind, its fields the slots).
Each pass declares the slots it reads and writes; a Pipeline checks, when it is built, that
every slot read is one of its state's fields and is written by an earlier pass (or `given`: left
by the pipeline run before it on the same env, the pserver main's for its startup). A Pipeline
runs its passes in order; when one fails, the error names the pass, the program it was building
and, where the pass said, the op; `after` sees the program after every pass (`split
--dump-after`, `--verify-each-pass`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional

from ..core.errors import UserError
from ..ir.program import Program


@dataclass
class PassState:
    """What the passes of one trainer's or endpoint's programs leave for later ones. A style's
    pipelines subclass it with typed fields (the slots, None until a pass writes them)."""


@dataclass(frozen=True)
class PassEnv:
    """What the passes building one trainer's or endpoint's programs read; only `state` is
    written (the slots a pass declares it writes)."""
    plan: Any
    main: Program                   # the style's original main (after its input fixes)
    startup: Program
    trainer_id: int = 0
    endpoint: str = ""
    shared: Mapping = field(default_factory=lambda: MappingProxyType({}))   # per-split indexes
    state: Optional[PassState] = None   # per trainer / endpoint, between passes (Pipeline.run)


@dataclass(frozen=True)
class Pass:
    """A named rewrite: `fn(program, env) -> program`, reading and writing the slots of
    env.state it names."""
    name: str
    fn: Callable[[Program, PassEnv], Program]
    reads: tuple = ()
    writes: tuple = ()

    @property
    def doc(self) -> str:
        """The first sentence of the pass function's docstring."""
        text = " ".join((self.fn.__doc__ or "").strip().split("\n\n")[0].split())
        end = text.find(". ")
        return text if end < 0 else text[:end + 1]

    def __call__(self, prog: Program, env: PassEnv) -> Program:
        return self.fn(prog, env)


def named(fn: Callable[[Program, PassEnv], Program], reads: tuple = (),
          writes: tuple = ()) -> Pass:
    """A Pass named after its function (reading and writing those state slots)."""
    return Pass(fn.__name__, fn, tuple(reads), tuple(writes))


class PassFailed(RuntimeError):
    """A pass failed on something other than bad input: a bug, named by pass and program."""


class PipelineOrderError(TypeError):
    """A pipeline whose passes read a state slot no earlier pass writes, or one its state lacks:
    raised when the pipeline is built (at import), never while splitting."""


# after(pass name, program key, program): called after each pass
AfterHook = Callable[[str, str, Program], None]


@dataclass(frozen=True)
class Pipeline:
    """The passes that make one kind of program ("trainer main", "pserver startup", ...), the
    PassState they share (`state`), and the slots left by the pipeline run before it (`given`)."""
    name: str
    passes: tuple
    state: type = PassState
    given: tuple = ()

    def __post_init__(self):
        slots = {f.name for f in fields(self.state)}
        written = set(self.given)
        for p in self.passes:
            unknown = sorted((set(p.reads) | set(p.writes) | written) - slots)
            if unknown:
                raise PipelineOrderError("pipeline %r: %s has no slot %s" % (
                    self.name, self.state.__name__, ", ".join(unknown)))
            early = [r for r in p.reads if r not in written]
            if early:
                raise PipelineOrderError("pipeline %r: pass %s reads %s, which no pass before "
                                         "it writes" % (self.name, p.name, ", ".join(early)))
            written |= set(p.writes)

    def new_state(self) -> PassState:
        return self.state()

    def run(self, prog: Program, env: PassEnv, key: str = "",
            after: Optional[AfterHook] = None) -> Program:
        if env.state is None:
            if self.given:
                raise PipelineOrderError("pipeline %r reads %s, left by the pipeline run before "
                                         "it: run it on that one's env" % (
                                             self.name, ", ".join(self.given)))
            env = replace(env, state=self.new_state())
        elif not isinstance(env.state, self.state):
            raise PipelineOrderError("pipeline %r runs on a %s, not its %s" % (
                self.name, type(env.state).__name__, self.state.__name__))
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
