"""Style fleet (the default): Paddle 2.0 Fleet's parameter-server passes (ir/trainer_pass.py,
ir/pserver_pass.py) and the communicator contexts its trainers start with.

    plan = make_plan(main, startup, config)       once, read-only (plan/fleet.py)
    trainer_<id>: main, startup                   (passes/fleet/trainer.py), runtime.json
    pserver_<ep>: main, startup                   (passes/fleet/pserver_passes.py)
"""
from __future__ import annotations

from ..core.styles import FLEET
from ..output.planjson import fleet_plan_parts
from ..output.runtime import runtime_json
from ..passes.fixes import send_raw_grads, serve_table_by_rows
from ..passes.idsfix import lookups_2d
from ..passes.fleet import pserver_passes, trainer
from ..passes.fleet.pserver import FleetPserverIndex
from ..plan.clip_faults import fleet_table_faults, ids_fault, new_var_clips
from ..plan.faults import (FLEET_ASSIGN_INIT_WHOLE_PARAM, FLEET_LOOKUP_IDS_NOT_2D,
                           FLEET_SPARSE_CLIP_DROPPED, assign_init_faults, fleet_faults,
                           fleet_table_fault, large_scale_adam_tables)
from ..plan.fleet import make_plan
from .base import Prepared, Style, plan_knowing_the_scheduler


def _assign_faults(startup, config, plan) -> list:
    """fleet-assign-init-whole-param of the params sliced over the pservers (a large-scale
    table's rows are made by its table, not by a startup op)."""
    if startup is None:
        return []
    dist = set(plan.distributed_tables)
    sliced = {name: len(blocks) for name, blocks in plan.param_slices.items()
              if len(blocks) > 1 and name not in dist}
    return assign_init_faults(startup, sliced, config, FLEET_ASSIGN_INIT_WHOLE_PARAM)


class FleetStyle(Style):
    traits = FLEET

    def make_plan(self, main, startup, config):
        return plan_knowing_the_scheduler(make_plan, main, startup, config)

    def prepare(self, main, startup, config, trainer_ids=(0,)) -> Prepared:
        fixed, found = main, []
        ids = ids_fault(main, config, FLEET_LOOKUP_IDS_NOT_2D)
        if ids is not None:
            found.append(ids)
            if ids.fixed:
                fixed = lookups_2d(fixed)
        table_fault = fleet_table_fault(fixed, config)
        if table_fault is not None:
            found.append(table_fault)
            if table_fault.fixed:
                for table in large_scale_adam_tables(fixed):
                    fixed = serve_table_by_rows(fixed, table)
        plan = self.make_plan(fixed, startup, config)
        if FLEET_SPARSE_CLIP_DROPPED in plan.fixes:
            # the clipped tables' contexts carry the raw grad the push sends; the pservers clip
            sparse = {p.param for p in plan.sparse_pairs}
            clips = {t: c for t, c in new_var_clips(fixed).items() if t in sparse}
            if clips:
                fixed = send_raw_grads(fixed, clips)
                plan = self.make_plan(fixed, startup, config)
        faults = found + fleet_faults(fixed, config, plan) + \
            fleet_table_faults(fixed, config, plan) + _assign_faults(startup, config, plan)
        return Prepared(config, main, startup, fixed, startup, plan, faults,
                        shared={"index": FleetPserverIndex(fixed, startup, plan),
                                "fixed": frozenset(f.id for f in faults if f.fixed)})

    def faults(self, main, startup, config, plan=None) -> list:
        plan = plan if plan is not None else self.make_plan(main, startup, config)
        table = fleet_table_fault(main, config)
        return ([table] if table else []) + fleet_faults(main, config, plan) + \
            fleet_table_faults(main, config, plan) + _assign_faults(startup, config, plan)

    def pipelines(self, mode: str) -> dict:
        geo = mode == "geo"
        return {"trainer main": trainer.GEO_MAIN if geo else trainer.MAIN,
                "trainer startup": trainer.GEO_STARTUP if geo else trainer.STARTUP,
                "pserver main": pserver_passes.MAIN[mode],
                "pserver startup": pserver_passes.STARTUP}

    def trainer_files(self, prep, trainer_id, result) -> None:
        result.add_runtime("trainer_%d" % trainer_id, runtime_json(
            prep.plan, prep.main, prep.startup, trainer_id, prep.config.geo_push_nums))

    def plan_parts(self, prep, trainer_ids):
        return fleet_plan_parts(prep.plan, prep.main, prep.startup, prep.config, trainer_ids,
                                prep.faults)
