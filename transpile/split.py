"""`split`: one entry point over the two styles, each run as plan + passes + result.

Classic (style: classic): Paddle's fluid DistributeTranspiler, re-done as plan + passes.

    plan = make_plan(main, config)                      # what goes where, once (plan/classic.py)
    main, startup = merge_lr_counter(main, startup, plan)   (passes/classic/lr_counter.py)
    trainer_<id>/main     = build_trainer_main(main, plan, id)      (passes/classic/trainer.py)
    trainer_<id>/startup  = build_trainer_startup(startup, main, plan, id)
    pserver_<ep>/main     = build_pserver_main(main, plan, ep)      (passes/classic/pserver.py)
    pserver_<ep>/startup  = build_pserver_startup(startup, pserver main, aliases)

Fleet (style: fleet, the default): Paddle 2.x Fleet's parameter-server passes.

    plan = make_plan(main, startup, config)            # once, read-only (plan/fleet.py)
    trainer_<id>: trainer_main / trainer_startup       (passes/fleet/trainer.py)
                  runtime.json                         (output/runtime.py)
    pserver_<ep>: pserver_programs                     (passes/fleet/pserver.py)

Ps (style: ps): Paddle 2.1+'s parameter-server pipeline (PsProgramBuilder + TheOnePSRuntime).

    plan = make_plan(main, startup, config)            # tables, ids, rules (plan/ps.py)
    trainer_<id>: trainer_main / trainer_startup       (passes/ps/trainer.py)
                  worker_desc.txt                      (output/psdesc.py)
    pserver_<ep>: pserver_programs, server_desc.txt    (passes/ps/pserver.py)

Refusals (RefusedError) come from make_plan, before any program is built. Every pass reads its
inputs and returns new programs; the inputs are never modified, so splitting twice gives the
same result (Paddle's in-place transpiler did not). Both styles end with plan.json
(output/planjson.py) in the result.
"""
from __future__ import annotations

from typing import Callable, Optional

from .core.config import ClusterConfig
from .core.errors import UserError
from .core.gcpause import paused_gc
from .ir.program import Program
from .ir.roles import is_optimize_op
from .output.result import SplitResult, endpoint_dir


def split(main: Program, startup: Optional[Program], config: ClusterConfig,
          trainer_ids: Optional[list[int]] = None, *,
          progress: Optional[Callable[[int, int], None]] = None,
          emit: Optional[Callable[[str, Program], None]] = None) -> SplitResult:
    """Split a training program for a parameter-server cluster.

    `trainer_ids` defaults to the config's trainer_id ("all" = every id). Inputs are not modified.
    `progress(done, total)` is called as the programs are built (commands/progress.py draws
    it). With `emit`, each program is handed to emit(key, program) when built instead of being
    kept in the result (SplitResult.add). Raises UserError (RefusedError) for programs that
    cannot be split.
    """
    if startup is None:
        startup = Program.empty()
    ids = trainer_ids if trainer_ids is not None else config.trainer_ids()
    if not any(is_optimize_op(op) for _, _, op in main.ops()):
        raise UserError("nothing to split: no optimizer ops found — was minimize() called "
                        "before the program was saved?")
    with paused_gc():
        if config.style == "classic":
            return transpile_classic(main, startup, config, ids, progress=progress,
                                     emit=emit)
        if config.style == "ps":
            return transpile_ps(main, startup, config, ids, progress=progress, emit=emit)
        return transpile_fleet(main, startup, config, ids, progress=progress, emit=emit)


def transpile_classic(main: Program, startup: Program, config: ClusterConfig,
                      trainer_ids: list[int], *, progress=None, emit=None) -> SplitResult:
    """Split `main` / `startup` the way Paddle's DistributeTranspiler does (see the module doc).
    `progress(done, total)`: called after each trainer and each pserver; `emit`: see
    SplitResult."""
    from .passes.classic.lr_counter import merge_lr_counter
    from .passes.classic.pserver import (ClassicPserverIndex, build_pserver_main,
                                         build_pserver_startup, startup_writers)
    from .passes.classic.trainer import build_trainer_main, build_trainer_startup
    from .passes.fixes import serve_table_by_rows
    from .plan.classic import find_distributed_table, make_plan
    from .plan.faults import classic_faults, classic_table_fault
    from .output.planjson import plan_json
    origin_main, origin_startup = main, startup
    table_fault = classic_table_fault(main, config)
    if table_fault is not None and table_fault.fixed:
        main = serve_table_by_rows(main, find_distributed_table(main))
    plan = make_plan(main, config)
    main, startup = merge_lr_counter(main, startup, plan)
    result = SplitResult(emit=emit)
    result.faults = ([table_fault] if table_fault else []) + classic_faults(main, config, plan)
    total = len(trainer_ids) + len(plan.endpoints)
    progress = progress or (lambda done, total: None)
    for done, tid in enumerate(trainer_ids, 1):
        result.add("trainer_%d/main" % tid, build_trainer_main(main, plan, tid))
        result.add("trainer_%d/startup" % tid, build_trainer_startup(startup, main, plan, tid))
        progress(done, total)
    writers = startup_writers(startup)
    index = ClassicPserverIndex(main, plan, trainer_ids[0] if trainer_ids else 0)
    for done, ep in enumerate(plan.endpoints, len(trainer_ids) + 1):
        pmain, aliases = build_pserver_main(main, plan, ep, index.trainer_id, index)
        pstartup = build_pserver_startup(startup, pmain, aliases, writers, ep)
        result.add(endpoint_dir(ep) + "/main", pmain)
        result.add(endpoint_dir(ep) + "/startup", pstartup)
        del pmain, pstartup, aliases         # with emit set, nothing holds them now
        progress(done, total)
    result.plan = plan_json(plan, origin_main, origin_startup, config, result, trainer_ids)
    return result


def transpile_fleet(main: Program, startup: Program, config: ClusterConfig,
                    trainer_ids: list[int], *, progress=None, emit=None) -> SplitResult:
    """Split `main` / `startup` for a Fleet parameter-server cluster; inputs are not modified.
    `progress(done, total)`: called after each trainer and each pserver; `emit`: see
    SplitResult."""
    from .passes.fleet.pserver import FleetPserverIndex, pserver_programs
    from .passes.fleet.trainer import trainer_main, trainer_startup
    from .ir.lr_schedule import resolve
    from .passes.fixes import serve_table_by_rows
    from .plan.faults import fleet_faults, fleet_table_fault, large_scale_adam_tables
    from .plan.fleet import make_plan
    from .output.planjson import plan_json
    from .output.runtime import runtime_json
    table_fault = fleet_table_fault(main, config)
    if table_fault is not None and table_fault.fixed:
        for table in large_scale_adam_tables(main):
            main = serve_table_by_rows(main, table)
    plan = make_plan(main, startup, config,
                     lr_scheduler=resolve(config.lr_scheduler, main, startup))
    result = SplitResult(emit=emit)
    result.faults = ([table_fault] if table_fault else []) + fleet_faults(main, config, plan)
    total = len(trainer_ids) + len(plan.endpoints)
    progress = progress or (lambda done, total: None)
    for done, tid in enumerate(trainer_ids, 1):
        key = "trainer_%d" % tid
        result.add(key + "/main", trainer_main(main, plan, tid))
        result.add(key + "/startup", trainer_startup(startup, main, plan, tid))
        result.runtime[key] = runtime_json(plan, main, startup, tid, config.geo_push_nums)
        progress(done, total)
    index = FleetPserverIndex(main, startup, plan)
    for done, ep in enumerate(plan.endpoints, len(trainer_ids) + 1):
        ps_main, ps_startup = pserver_programs(main, startup, plan, ep, index)
        result.add(endpoint_dir(ep) + "/main", ps_main)
        result.add(endpoint_dir(ep) + "/startup", ps_startup)
        del ps_main, ps_startup              # with emit set, nothing holds them now
        progress(done, total)
    result.plan = plan_json(plan, main, startup, config, result, trainer_ids)
    return result


def transpile_ps(main: Program, startup: Program, config: ClusterConfig,
                 trainer_ids: list[int], *, progress=None, emit=None) -> SplitResult:
    """Split `main` / `startup` as Paddle 2.6's parameter-server pipeline does: trainer and
    pserver programs plus their descriptors (SplitResult.texts); inputs are not modified."""
    from .ir.lr_schedule import resolve
    from .output.planjson_ps import plan_json
    from .output.psdesc import DescWriter
    from .passes.ps.pserver import pserver_programs
    from .passes.ps.trainer import trainer_main, trainer_startup
    from .plan.ps import make_plan
    plan = make_plan(main, startup, config,
                     lr_scheduler=resolve(config.lr_scheduler, main, startup))
    result = SplitResult(emit=emit)
    descs = DescWriter(plan)
    total = len(trainer_ids) + len(plan.endpoints)
    progress = progress or (lambda done, total: None)
    for done, tid in enumerate(trainer_ids, 1):
        key = "trainer_%d" % tid
        result.add(key + "/main", trainer_main(main, plan, tid))
        result.add(key + "/startup", trainer_startup(startup, main, plan))
        result.add_text(key + "/worker_desc.txt", descs.worker_desc(tid))
        progress(done, total)
    for done, ep in enumerate(plan.endpoints, len(trainer_ids) + 1):
        ps_main, ps_startup = pserver_programs(plan, ep)
        result.add(endpoint_dir(ep) + "/main", ps_main)
        result.add(endpoint_dir(ep) + "/startup", ps_startup)
        result.add_text(endpoint_dir(ep) + "/server_desc.txt", descs.server_desc(ep))
        progress(done, total)
    result.plan = plan_json(plan, main, startup, config, result, trainer_ids)
    return result
