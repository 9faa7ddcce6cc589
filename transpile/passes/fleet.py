"""The fleet style: Paddle 2.x Fleet's parameter-server passes (style: fleet, the default).

    plan = make_plan(main, startup, config)            # once, read-only
    trainer_<id>: trainer_main / trainer_startup       (fleet_trainer.py)
                  runtime.json                         (transpile/runtime.py)
    pserver_<ep>: pserver_programs                     (fleet_pserver.py)

Refusals (RefusedError) come from make_plan, before any program is built.
"""
from __future__ import annotations

from ..core.config import ClusterConfig
from ..ir.program import Program
from ..plan.fleet import make_plan
from ..planjson import plan_json
from ..result import SplitResult, endpoint_dir
from ..runtime import runtime_json
from .fleet_pserver import OriginIndex, pserver_programs
from .fleet_trainer import trainer_main, trainer_startup


def transpile_fleet(main: Program, startup: Program, config: ClusterConfig,
                    trainer_ids: list[int], *, progress=None, emit=None) -> SplitResult:
    """Split `main` / `startup` for a Fleet parameter-server cluster; inputs are not modified.
    `progress(done, total)`: called after each trainer and each pserver; `emit`: see
    SplitResult."""
    plan = make_plan(main, startup, config)
    result = SplitResult(emit=emit)
    total = len(trainer_ids) + len(plan.endpoints)
    progress = progress or (lambda done, total: None)
    for done, tid in enumerate(trainer_ids, 1):
        key = "trainer_%d" % tid
        result.add(key + "/main", trainer_main(main, plan, tid))
        result.add(key + "/startup", trainer_startup(startup, main, plan, tid))
        result.runtime[key] = runtime_json(plan, main, startup, tid, config.geo_push_nums)
        progress(done, total)
    index = OriginIndex(main, startup, plan)
    for done, ep in enumerate(plan.endpoints, len(trainer_ids) + 1):
        ps_main, ps_startup = pserver_programs(main, startup, plan, ep, index)
        result.add(endpoint_dir(ep) + "/main", ps_main)
        result.add(endpoint_dir(ep) + "/startup", ps_startup)
        del ps_main, ps_startup              # with emit set, nothing holds them now
        progress(done, total)
    result.plan = plan_json(plan, main, startup, config, result, trainer_ids)
    return result
