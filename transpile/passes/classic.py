"""The classic style: Paddle's fluid DistributeTranspiler, re-done as plan + passes.

    plan = make_plan(main, config)                      # what goes where, once
    trainer_<id>/main     = build_trainer_main(main, plan, id)
    trainer_<id>/startup  = build_trainer_startup(startup, main, plan, id)
    pserver_<ep>/main     = build_pserver_main(main, plan, ep)
    pserver_<ep>/startup  = build_pserver_startup(startup, pserver main, aliases)

Every pass reads its inputs and returns new programs; the inputs are never modified, so
splitting twice gives the same result (Paddle's in-place transpiler did not).
"""
from __future__ import annotations

from ..core.config import ClusterConfig
from ..ir import roles
from ..ir.program import Program
from ..plan.classic import DistributionPlan, make_plan
from ..planjson import plan_json
from ..result import SplitResult, endpoint_dir
from .build import DTYPE_CODES, make_op, tensor_like
from .classic_pserver import (OriginIndex, build_pserver_main, build_pserver_startup,
                              startup_writers)
from .classic_trainer import build_trainer_main, build_trainer_startup


def merge_lr_counter(main: Program, startup: Program, plan: DistributionPlan):
    """Async LR decay: the counter's increment becomes a sum of per-trainer counters.

    Each trainer sends `<counter>.trainer_<id>` (starting at 1, merged by addition on the
    pservers) and the pservers' counter, now started at -trainers, is their sum, as Paddle's
    DistributeTranspiler does. Returns new (main, startup); the plan's op indices still hold.
    """
    if plan.lr_counter is None:
        return main, startup
    index, counter = plan.lr_counter
    main, startup = main.copy(), startup.copy()
    block, sblock = main.global_block, startup.global_block
    cvar = block.var(counter)
    names = [plan.counter_name(t) for t in range(plan.trainers)]
    for name in names:
        block.add_var(tensor_like(cvar, name, cvar.shape, cvar.persistable, lod_level=0))
    block.ops[index] = make_op("sum", {"X": names}, {"Out": [counter]},
                               {roles.ROLE_ATTR: roles.LRSCHED})
    for op in sblock.ops:
        if op.type == "fill_constant" and op.output("Out") == [counter]:
            op.set_attr("value", float(0 - plan.trainers))
    for name in names:
        sblock.add_var(tensor_like(cvar, name, cvar.shape, cvar.persistable, lod_level=0))
        sblock.ops.append(make_op("fill_constant", {}, {"Out": [name]}, {
            "shape": list(cvar.shape), "dtype": DTYPE_CODES[cvar.dtype], "value": 1.0,
            "str_value": "1.0", "force_cpu": False, roles.ROLE_ATTR: roles.FORWARD}))
    return main, startup


def transpile_classic(main: Program, startup: Program, config: ClusterConfig,
                      trainer_ids: list[int], *, progress=None, emit=None) -> SplitResult:
    """Split `main` / `startup` the way Paddle's DistributeTranspiler does (see the module doc).
    `progress(done, total)`: called after each trainer and each pserver; `emit`: see
    SplitResult."""
    plan = make_plan(main, config)
    origin_main, origin_startup = main, startup
    main, startup = merge_lr_counter(main, startup, plan)
    result = SplitResult(emit=emit)
    total = len(trainer_ids) + len(plan.endpoints)
    progress = progress or (lambda done, total: None)
    for done, tid in enumerate(trainer_ids, 1):
        result.add("trainer_%d/main" % tid, build_trainer_main(main, plan, tid))
        result.add("trainer_%d/startup" % tid, build_trainer_startup(startup, main, plan, tid))
        progress(done, total)
    writers = startup_writers(startup)
    index = OriginIndex(main, plan, trainer_ids[0] if trainer_ids else 0)
    for done, ep in enumerate(plan.endpoints, len(trainer_ids) + 1):
        pmain, aliases = build_pserver_main(main, plan, ep, index.trainer_id, index)
        pstartup = build_pserver_startup(startup, pmain, aliases, writers)
        result.add(endpoint_dir(ep) + "/main", pmain)
        result.add(endpoint_dir(ep) + "/startup", pstartup)
        del pmain, pstartup, aliases         # with emit set, nothing holds them now
        progress(done, total)
    result.plan = plan_json(plan, origin_main, origin_startup, config, result, trainer_ids)
    return result
