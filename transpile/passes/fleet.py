"""The fleet style: Paddle 2.x Fleet's parameter-server passes (style: fleet, the default).

    plan = make_plan(main, startup, config)            # once, read-only
    trainer_<id>: trainer_main / trainer_startup       (fleet_trainer.py)
                  runtime.json                         (transpile/runtime.py)
    pserver_<ep>: pserver_programs                     (fleet_pserver.py)

Refusals (RefusedError) come from make_plan, before any program is built.
"""
from __future__ import annotations

from ..config import ClusterConfig
from ..planjson import plan_json
from ..program import Program
from ..result import SplitResult, endpoint_dir
from ..runtime import runtime_json
from .fleet_plan import make_plan
from .fleet_pserver import pserver_programs
from .fleet_trainer import trainer_main, trainer_startup


def transpile_fleet(main: Program, startup: Program, config: ClusterConfig,
                    trainer_ids: list[int]) -> SplitResult:
    """Split `main` / `startup` for a Fleet parameter-server cluster; inputs are not modified."""
    plan = make_plan(main, startup, config)
    result = SplitResult()
    for tid in trainer_ids:
        key = "trainer_%d" % tid
        result.programs[key + "/main"] = trainer_main(main, plan, tid)
        result.programs[key + "/startup"] = trainer_startup(startup, main, plan, tid)
        result.runtime[key] = runtime_json(plan, main, startup, tid, config.geo_push_nums)
    for ep in plan.endpoints:
        ps_main, ps_startup = pserver_programs(main, startup, plan, ep)
        result.programs[endpoint_dir(ep) + "/main"] = ps_main
        result.programs[endpoint_dir(ep) + "/startup"] = ps_startup
    result.plan = plan_json(plan, main, startup, config, result, trainer_ids)
    return result
