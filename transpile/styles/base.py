"""What a style is to the split pipeline: a plan, named pipelines of passes, and the files each
trainer and pserver gets. One subclass per style (classic.py, fleet.py, ps.py), registered in
registry.py; transpile/split.py runs any of them the same way."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional

from ..core.config import ClusterConfig
from ..core.styles import StyleTraits
from ..ir.program import Program
from ..output.result import SplitResult, endpoint_dir
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


# a trainer's pieces of work (Style.units): its two programs are built apart, each with its own
# PassEnv: no "trainer startup" pass reads what a "trainer main" pass leaves in env.state
TRAINER_PARTS = ("main", "startup", "files")


@dataclass(frozen=True)
class Unit:
    """One piece of a split's work: `role` "trainer" (`who` its id, `part` one of
    TRAINER_PARTS) or "pserver" (`who` its endpoint, the whole pserver)."""
    role: str
    who: Any
    part: str = ""


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

    def units(self, trainer_ids: list, endpoints: list) -> list["Unit"]:
        """The pieces of a split's work, none reading what another makes, in the order one
        process builds them: each trainer's main program, its startup program and its other
        files, then each pserver's programs and files (a pserver's startup passes read what
        its main passes leave, so they are one piece)."""
        return [Unit("trainer", tid, part) for tid in trainer_ids for part in TRAINER_PARTS] + \
            [Unit("pserver", ep) for ep in endpoints]

    def build(self, prep: Prepared, unit: "Unit", result: SplitResult, run: Runner) -> None:
        """Add a piece of the split (`units`) to `result`: a trainer's program (its "trainer
        main" or "trainer startup" pipeline) or files (trainer_files), or a pserver's programs
        and files."""
        pipes = self.pipelines(prep.plan.mode)
        if unit.role == "pserver":
            key = endpoint_dir(unit.who)
            # the startup's passes read what the main's leave (its `given` slots)
            env = replace(self.pserver_env(prep, unit.who),
                          state=pipes["pserver main"].new_state())
            for kind, prog in (("main", prep.main), ("startup", prep.startup)):
                result.add("%s/%s" % (key, kind), run(pipes["pserver " + kind], prog, env,
                                                      "%s/%s" % (key, kind)))
            self.pserver_files(prep, unit.who, result)
        elif unit.part == "files":
            self.trainer_files(prep, unit.who, result)
        else:
            key = "trainer_%d/%s" % (unit.who, unit.part)
            prog = prep.main if unit.part == "main" else prep.startup
            result.add(key, run(pipes["trainer " + unit.part], prog,
                                prep.env(trainer_id=unit.who), key))

    def pserver_env(self, prep: Prepared, endpoint: str) -> PassEnv:
        """What the passes of one pserver's programs read."""
        return prep.env(endpoint=endpoint)

    def trainer_files(self, prep: Prepared, trainer_id: int, result: SplitResult) -> None:
        """The files a trainer gets besides its programs (runtime.json, worker_desc.txt)."""

    def pserver_files(self, prep: Prepared, endpoint: str, result: SplitResult) -> None:
        """The files a pserver gets besides its programs (server_desc.txt)."""

    def plan_json(self, prep: Prepared, result: SplitResult, trainer_ids: list) -> dict:
        """The plan.json dict of a split (plan_parts, finished)."""
        return self.plan_parts(prep, trainer_ids).finish(result)

    def plan_parts(self, prep: Prepared, trainer_ids: list):
        """plan.json in two steps (planjson.PlanParts): `early`, the entries the plan alone
        decides, made before the programs are built or while they are; finish(result), the
        dict."""
        raise NotImplementedError

    def faults(self, main: Program, startup: Program, config: ClusterConfig,
               plan=None) -> list:
        """The Paddle faults (plan/faults.py) a split of `main` for `config` meets."""
        return []

    def pipeline_variants(self) -> list:
        """[(kind, modes, Pipeline)]: each program kind's distinct pipelines, with the modes
        that run each (`split --list-passes`)."""
        out: list = []
        for mode in self.traits.modes:
            for kind, pipe in self.pipelines(mode).items():
                for k, modes, other in out:
                    if k == kind and other.names() == pipe.names():
                        modes.append(mode)
                        break
                else:
                    out.append((kind, [mode], pipe))
        return [(k, tuple(m), p) for k, m, p in out]


def plan_knowing_the_scheduler(make_plan, main: Program, startup: Program,
                               config: ClusterConfig):
    """make_plan(main, startup, config, lr_scheduler=...), told whether a Python LR scheduler
    feeds the learning rate (the config's `lr_scheduler`, or read off the program)."""
    from ..ir.lr_schedule import resolve
    return make_plan(main, startup, config,
                     lr_scheduler=resolve(config.lr_scheduler, main, startup))
