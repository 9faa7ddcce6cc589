"""Style classic: Paddle's fluid DistributeTranspiler.

    plan = make_plan(main, config)                what goes where, once (plan/classic.py)
    main, startup = merge_lr_counter(...)         async LR decay (passes/classic/lr_counter.py)
    trainer_<id>: main, startup                   (passes/classic/trainer.py)
    pserver_<ep>: main, startup                   (passes/classic/pserver_passes.py)
"""
from __future__ import annotations

from ..core.styles import CLASSIC
from ..output.planjson import classic_plan_parts
from ..passes.classic import pserver_passes, trainer
from ..passes.classic.lr_counter import merge_lr_counter
from ..passes.classic.pserver import ClassicPserverIndex, startup_writers
from ..ir.tables import CLASSIC_REMOTE_PREFETCH_TYPES
from ..passes.fixes import clip_on_trainer, send_raw_grads, serve_table_by_rows
from ..passes.idsfix import lookups_2d
from ..plan.classic import find_distributed_table, make_plan
from ..plan.clip_faults import (CLIP_SCOPE, classic_clip_fault, classic_clip_on_trainer, ids_fault,
                                new_var_clips)
from ..plan.faults import (CLASSIC_ASSIGN_INIT_WHOLE_PARAM, CLASSIC_LOOKUP_IDS_NOT_2D,
                           assign_init_faults, classic_crash_fault, classic_dist_ids_fault,
                           classic_faults,
                           classic_table_fault)
from .base import Prepared, Style


def _assign_faults(startup, config, plan) -> list:
    """classic-assign-init-whole-param of the params sliced over the pservers."""
    if startup is None:
        return []
    sliced = {p.name: len(p.blocks) for p in plan.params if len(p.blocks) > 1}
    return assign_init_faults(startup, sliced, config, CLASSIC_ASSIGN_INIT_WHOLE_PARAM)


class ClassicStyle(Style):
    traits = CLASSIC

    def make_plan(self, main, startup, config):
        return make_plan(main, config)

    def prepare(self, main, startup, config, trainer_ids=(0,)) -> Prepared:
        fixed, found = self._fix_inputs(main, config)
        plan = make_plan(fixed, config)
        sliced = {p.name for p in plan.params if p.sliced}
        clip = classic_clip_fault(fixed, config, sliced)
        if clip is not None:
            found.append(clip)
            if clip.fixed and classic_clip_on_trainer(fixed, sliced):
                fixed = clip_on_trainer(fixed, CLIP_SCOPE)
                plan = make_plan(fixed, config)
            elif clip.fixed:
                fixed = send_raw_grads(fixed, new_var_clips(fixed))
                plan = make_plan(fixed, config)
        fixed, fixed_startup = merge_lr_counter(fixed, startup, plan)
        faults = found + classic_faults(fixed, config, plan,
                                        skip_chains=clip is not None and clip.fixed) + \
            _assign_faults(fixed_startup, config, plan)
        # the pservers name the first trainer asked for's copies (Paddle transpiles as one)
        index = ClassicPserverIndex(fixed, plan, trainer_ids[0] if trainer_ids else 0)
        return Prepared(config, main, startup, fixed, fixed_startup, plan, faults,
                        shared={"index": index, "writers": startup_writers(fixed_startup),
                                "fixed": frozenset(f.id for f in faults if f.fixed)})

    @staticmethod
    def _fix_inputs(main, config) -> tuple:
        """(the program with the fixes made before planning, the faults they fix)."""
        crash = classic_crash_fault(main)
        fixed, found = main, [crash] if crash else []
        ids = ids_fault(main, config, CLASSIC_LOOKUP_IDS_NOT_2D, CLASSIC_REMOTE_PREFETCH_TYPES)
        dist_ids = classic_dist_ids_fault(main, config, ids is not None and ids.fixed)
        if dist_ids is not None:
            found.append(dist_ids)
        if ids is not None:
            found.append(ids)
            if ids.fixed:
                fixed = lookups_2d(fixed, CLASSIC_REMOTE_PREFETCH_TYPES)
        table_fault = classic_table_fault(fixed, config)
        if table_fault is not None:
            found.append(table_fault)
            if table_fault.fixed:
                fixed = serve_table_by_rows(fixed, find_distributed_table(fixed))
        return fixed, found

    def faults(self, main, startup, config, plan=None) -> list:
        plan = plan if plan is not None else make_plan(main, config)
        table = classic_table_fault(main, config)
        crash = classic_crash_fault(main)
        dist_ids = classic_dist_ids_fault(main, config, False)
        clip = classic_clip_fault(main, config, {p.name for p in plan.params if p.sliced})
        return ([crash] if crash else []) + ([table] if table else []) + \
            ([dist_ids] if dist_ids else []) + ([clip] if clip else []) + \
            classic_faults(main, config, plan) + _assign_faults(startup, config, plan)

    def pipelines(self, mode: str) -> dict:
        return {"trainer main": trainer.MAIN, "trainer startup": trainer.STARTUP,
                "pserver main": pserver_passes.MAIN, "pserver startup": pserver_passes.STARTUP}

    def pserver_env(self, prep, endpoint):
        # Paddle's pserver names the copies of the trainer it was transpiled as
        return prep.env(endpoint=endpoint, trainer_id=prep.shared["index"].trainer_id)

    def plan_parts(self, prep, trainer_ids):
        return classic_plan_parts(prep.plan, prep.origin_main, prep.origin_startup, prep.config,
                                  trainer_ids, prep.faults)
