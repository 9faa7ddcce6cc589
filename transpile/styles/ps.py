"""Style ps: Paddle 2.1+'s parameter-server pipeline (PsProgramBuilder's passes, and
TheOnePSRuntime's descriptors of the brpc tables).

    plan = make_plan(main, startup, config)       tables, ids, rules (plan/ps.py)
    trainer_<id>: main, startup                   (passes/ps/trainer.py), worker_desc.txt
    pserver_<ep>: main, startup                   (passes/ps/pserver.py), server_desc.txt
"""
from __future__ import annotations

from ..core.styles import PS
from ..output.planjson_ps import plan_json
from ..output.psdesc import DescWriter
from ..output.result import endpoint_dir
from ..passes.ps import pserver, trainer
from ..plan.ps import make_plan
from .base import Prepared, Style, plan_knowing_the_scheduler


class PsStyle(Style):
    traits = PS

    def make_plan(self, main, startup, config):
        return plan_knowing_the_scheduler(make_plan, main, startup, config)

    def prepare(self, main, startup, config, trainer_ids=(0,)) -> Prepared:
        plan = self.make_plan(main, startup, config)
        return Prepared(config, main, startup, main, startup, plan,
                        shared={"descs": DescWriter(plan)})

    def pipelines(self, mode: str) -> dict:
        geo = mode == "geo"
        return {"trainer main": trainer.GEO_MAIN if geo else trainer.MAIN,
                "trainer startup": trainer.GEO_STARTUP if geo else trainer.STARTUP,
                "pserver main": pserver.GEO_MAIN if geo else pserver.MAIN,
                "pserver startup": pserver.STARTUP}

    def trainer_files(self, prep, trainer_id, result) -> None:
        result.add_text("trainer_%d/worker_desc.txt" % trainer_id,
                        prep.shared["descs"].worker_desc(trainer_id))

    def pserver_files(self, prep, endpoint, result) -> None:
        result.add_text(endpoint_dir(endpoint) + "/server_desc.txt",
                        prep.shared["descs"].server_desc(endpoint))

    def plan_json(self, prep, result, trainer_ids) -> dict:
        return plan_json(prep.plan, prep.main, prep.startup, prep.config, result, trainer_ids)
