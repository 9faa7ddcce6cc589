"""Style ps: Paddle 2.1+'s parameter-server pipeline (PsProgramBuilder's passes, and
TheOnePSRuntime's descriptors of the brpc tables).

    plan = make_plan(main, startup, config)       tables, ids, rules (plan/ps.py)
    trainer_<id>: main, startup                   (passes/ps/trainer.py), worker_desc.txt
    pserver_<ep>: main, startup                   (passes/ps/pserver.py), server_desc.txt
"""
from __future__ import annotations

from ..core.styles import PS
from ..ir.lr_schedule import resolve
from ..output.planjson_ps import plan_json
from ..output.psdesc import DescWriter
from ..output.result import endpoint_dir
from ..passes.ps import pserver, trainer
from ..plan.ps import make_plan
from .base import Prepared, Style


class PsStyle(Style):
    traits = PS

    def make_plan(self, main, startup, config):
        return make_plan(main, startup, config,
                         lr_scheduler=resolve(config.lr_scheduler, main, startup))

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

    def build_trainer(self, prep, trainer_id, result, run) -> None:
        pipes = self.pipelines(prep.plan.mode)
        env = prep.env(trainer_id=trainer_id)
        key = "trainer_%d" % trainer_id
        result.add(key + "/main", run(pipes["trainer main"], prep.main, env, key + "/main"))
        result.add(key + "/startup", run(pipes["trainer startup"], prep.startup, env,
                                         key + "/startup"))
        result.add_text(key + "/worker_desc.txt", prep.shared["descs"].worker_desc(trainer_id))

    def build_pserver(self, prep, endpoint, result, run) -> None:
        pipes = self.pipelines(prep.plan.mode)
        env = prep.env(endpoint=endpoint)
        key = endpoint_dir(endpoint)
        result.add(key + "/main", run(pipes["pserver main"], prep.main, env, key + "/main"))
        result.add(key + "/startup", run(pipes["pserver startup"], prep.startup, env,
                                         key + "/startup"))
        result.add_text(key + "/server_desc.txt", prep.shared["descs"].server_desc(endpoint))

    def plan_json(self, prep, result, trainer_ids) -> dict:
        return plan_json(prep.plan, prep.main, prep.startup, prep.config, result, trainer_ids)
