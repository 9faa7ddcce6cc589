"""Style ps: Paddle 2.1+'s parameter-server pipeline (PsProgramBuilder's passes, and
TheOnePSRuntime's descriptors of the brpc tables).

    plan = make_plan(main, startup, config)       tables, ids, rules (plan/ps.py)
    trainer_<id>: main, startup                   (passes/ps/trainer.py), worker_desc.txt
    pserver_<ep>: main, startup                   (passes/ps/pserver.py), server_desc.txt
"""
from __future__ import annotations

from ..core.styles import PS
from ..output.planjson_ps import PsPlanParts
from ..output.psdesc import DescWriter
from ..output.result import endpoint_dir
from ..passes.idsfix import lookups_2d
from ..passes.ps import pserver, trainer
from ..plan.clip_faults import (geo_dense_table_fault, ids_fault, push_ids_lod2_fault,
                                sparse_clip_fault)
from ..plan.faults import (PS_CLIP_BEFORE_MERGE, PS_GEO_DENSE_TABLE_GRAD, PS_GEO_NO_SPARSE_TABLE,
                           PS_LOOKUP_IDS_NOT_2D, PS_PUSH_IDS_LOD2, PS_SPARSE_CLIP_DROPPED,
                           dense_empty_init_fault, fault)
from ..plan.ps import make_plan
from .base import Prepared, Style, plan_knowing_the_scheduler


class PsStyle(Style):
    traits = PS

    def make_plan(self, main, startup, config):
        return plan_knowing_the_scheduler(make_plan, main, startup, config)

    def prepare(self, main, startup, config, trainer_ids=(0,)) -> Prepared:
        fixed, found = main, []
        ids = ids_fault(main, config, PS_LOOKUP_IDS_NOT_2D)
        if ids is not None:
            found.append(ids)
            if ids.fixed:
                fixed = lookups_2d(fixed)
        plan = self.make_plan(fixed, startup, config)
        faults = found + self.faults(fixed, startup, config, plan)
        return Prepared(config, main, startup, fixed, startup, plan, faults,
                        shared={"descs": DescWriter(plan)})

    def faults(self, main, startup, config, plan=None) -> list:
        plan = plan if plan is not None else self.make_plan(main, startup, config)
        clip = sparse_clip_fault(main, config, {p.param for p in plan.sparse_pairs},
                                 PS_SPARSE_CLIP_DROPPED)
        out = [clip] if clip is not None else []
        dense = geo_dense_table_fault(main, config, {p.param for p in plan.sparse_pairs},
                                      PS_GEO_DENSE_TABLE_GRAD)
        if dense is not None:
            out.append(dense)
        lod2 = push_ids_lod2_fault(main, config, {p.param for p in plan.sparse_pairs},
                                   PS_PUSH_IDS_LOD2)
        if lod2 is not None:
            out.append(lod2)
        if plan.is_geo and not plan.sparse_pairs and plan.dense_pairs and plan.trainers > 1:
            out.append(fault(PS_GEO_NO_SPARSE_TABLE, "no sparse table", config.fix_faults,
                             "the geo communicator needs a sparse table's send to exchange "
                             "anything"))
        if plan.is_sync and plan.trainers > 1 and plan.clip_ops:
            out.append(fault(PS_CLIP_BEFORE_MERGE, "%d clip op(s) on the trainer"
                             % len(plan.clip_ops), config.fix_faults,
                             "Paddle's brpc tables have no clip: the trainers clip what they "
                             "send"))
        empty = dense_empty_init_fault(plan.tables, config)
        if empty is not None:
            out.append(empty)
        return out

    def pipelines(self, mode: str) -> dict:
        geo = mode == "geo"
        return {"trainer main": trainer.GEO_MAIN if geo else trainer.MAIN,
                "trainer startup": trainer.GEO_STARTUP if geo else trainer.STARTUP,
                "pserver main": pserver.GEO_MAIN if geo else pserver.MAIN,
                "pserver startup": pserver.STARTUP}

    def trainer_files(self, prep, trainer_id, result) -> None:
        result.add_text_pieces("trainer_%d/worker_desc.txt" % trainer_id,
                               prep.shared["descs"].worker_desc_pieces(trainer_id))

    def pserver_files(self, prep, endpoint, result) -> None:
        result.add_text_pieces(endpoint_dir(endpoint) + "/server_desc.txt",
                               prep.shared["descs"].server_desc_pieces(endpoint))

    def plan_parts(self, prep, trainer_ids):
        return PsPlanParts(prep.plan, prep.main, prep.startup, prep.config, trainer_ids,
                           prep.faults)
