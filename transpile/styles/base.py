"""What a style is to the split pipeline: a plan, named pipelines of passes, and the files each
trainer and pserver gets. One subclass per style (classic.py, fleet.py, ps.py), registered in
registry.py; transpile/split.py runs any of them the same way."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..core.config import ClusterConfig
from ..core.styles import StyleTraits
from ..ir.program import Program
from ..output.result import SplitResult
from ..passes.pipeline import AfterHook, PassEnv, Pipeline


@dataclass
class Prepared:
    """A split under way: the programs the passes read, the plan, the faults found, and what
    the style indexed once for every program it builds (`shared`)."""
    config: ClusterConfig
    origin_main: Program            # as given
    origin_startup: Program
    main: Program                   # after the style's input fixes (what the passes read)
    startup: Program
    plan: Any
    faults: list = field(default_factory=list)
    shared: dict = field(default_factory=dict)

    def env(self, **kw) -> PassEnv:
        return PassEnv(self.plan, self.main, self.startup, shared=self.shared, **kw)


class Runner:
    """Runs a pipeline for one program of the split, handing each pass's output to `after`."""

    def __init__(self, after: Optional[AfterHook] = None):
        self.after = after

    def __call__(self, pipeline: Pipeline, prog: Program, env: PassEnv, key: str) -> Program:
        return pipeline.run(prog, env, key, self.after)


class Style:
    """One style's behaviour. Subclasses set `traits` and implement the methods below."""
    traits: StyleTraits

    def make_plan(self, main: Program, startup: Program, config: ClusterConfig):
        """The style's plan of `main` for `config` (RefusedError where Paddle refuses)."""
        raise NotImplementedError

    def prepare(self, main: Program, startup: Program, config: ClusterConfig,
                trainer_ids=(0,)) -> Prepared:
        """Plan the split: the input fixes `paddle_faults: fix` asks for, the plan, the faults,
        and what the passes of every program share (`trainer_ids`: the trainers asked for)."""
        raise NotImplementedError

    def pipelines(self, mode: str) -> dict:
        """{program kind: Pipeline} of the programs a split in `mode` builds ("trainer main",
        "trainer startup", "pserver main", "pserver startup")."""
        raise NotImplementedError

    def build_trainer(self, prep: Prepared, trainer_id: int, result: SplitResult,
                      run: Runner) -> None:
        """Add trainer `trainer_id`'s programs and files to `result`."""
        raise NotImplementedError

    def build_pserver(self, prep: Prepared, endpoint: str, result: SplitResult,
                      run: Runner) -> None:
        """Add the pserver at `endpoint`'s programs and files to `result`."""
        raise NotImplementedError

    def plan_json(self, prep: Prepared, result: SplitResult, trainer_ids: list) -> dict:
        raise NotImplementedError

    def faults(self, main: Program, startup: Program, config: ClusterConfig,
               plan=None) -> list:
        """The Paddle faults (plan/faults.py) a split of `main` for `config` meets."""
        return []

    def pipeline_variants(self) -> list:
        """[(modes, {kind: Pipeline})]: each distinct set of pipelines and the modes using it
        (`split --list-passes`)."""
        out: list = []
        for mode in self.traits.modes:
            pipes = self.pipelines(mode)
            names = {k: tuple(p.names()) for k, p in pipes.items()}
            for modes, other in out:
                if {k: tuple(p.names()) for k, p in other.items()} == names:
                    modes.append(mode)
                    break
            else:
                out.append(([mode], pipes))
        return [(tuple(m), p) for m, p in out]
