"""A learning rate set by a Python LR scheduler: told from the program (ir/lr_schedule.py) or by
the config's `lr_scheduler`, and kept on the Fleet trainer as Paddle's delete_optimizer_pass does."""
import os
from dataclasses import replace

import pytest

from transpile import load, split
from transpile.core.config import load_config_text
from transpile.core.errors import ConfigError, RefusedError
from transpile.ir.lr_schedule import resolve, scheduler_fed

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "lr_scheduler")
CONFIG = load_config_text("pservers: [127.0.0.1:6174, 127.0.0.1:6175]\ntrainers: 2\n")


def _programs(kind):
    return (load(os.path.join(DATA, kind + "_main.pb")),
            load(os.path.join(DATA, kind + "_startup.pb")))


def test_the_startup_callstack_tells_a_scheduler_from_a_constant():
    assert scheduler_fed(*_programs("scheduler"))
    assert not scheduler_fed(*_programs("constant"))


def test_without_callstacks_a_rate_looks_constant():
    main, startup = _programs("scheduler")
    startup = startup.copy()
    for op in startup.global_block.ops:
        if "learning_rate_0" in op.output_names():
            op.set_attr("op_callstack", [])
    assert not scheduler_fed(main, startup)


def test_a_rate_with_no_initialiser_is_fed_by_the_executor():
    main, startup = _programs("constant")
    startup = startup.copy()
    startup.global_block.ops = [op for op in startup.global_block.ops
                                if "learning_rate_0" not in op.output_names()]
    assert scheduler_fed(main, startup)


def test_the_config_overrides_the_guess():
    main, startup = _programs("constant")
    assert resolve(True, main, startup) is True
    assert resolve(False, *_programs("scheduler")) is False
    assert resolve("auto", *_programs("scheduler")) is True


@pytest.mark.parametrize("text", ["lr_scheduler: maybe", "lr_scheduler: 1"])
def test_bad_setting_names_the_key(text):
    with pytest.raises(ConfigError, match="lr_scheduler.*auto, true or false"):
        load_config_text("pservers: [a:1]\n" + text, "c.yaml")


@pytest.mark.parametrize("mode", ["sync", "async", "half_async"])
def test_fleet_trainer_keeps_the_scheduler_var_only(mode):
    cfg = replace(CONFIG, mode=mode)
    sched = split(*_programs("scheduler"), cfg)
    const = split(*_programs("constant"), cfg)
    kept = sched.programs["trainer_0/main"].global_block.var("learning_rate_0")
    assert kept is not None and kept.persistable
    assert const.programs["trainer_0/main"].global_block.var("learning_rate_0") is None
    forced = split(*_programs("constant"), replace(cfg, lr_scheduler=True))
    assert forced.programs["trainer_0/main"].global_block.var("learning_rate_0") is not None
    assert sched.plan["lr"]["scheduler"] is True and const.plan["lr"]["scheduler"] is False


def test_a_scheduler_without_learning_rate_0_is_refused_as_paddle_fails():
    main, startup = _programs("scheduler")
    main = main.copy()
    block = main.global_block
    block.vars["lr_other"] = block.vars.pop("learning_rate_0")
    block.vars["lr_other"].name = "lr_other"
    for op in block.ops:
        op.inputs = {s: ["lr_other" if a == "learning_rate_0" else a for a in args]
                     for s, args in op.inputs.items()}
    with pytest.raises(RefusedError, match="no var learning_rate_0"):
        split(main, startup, replace(CONFIG, lr_scheduler=True))


def _own_rate(main, role):
    """`main` with its first optimizer update reading its own rate, `scale(learning_rate_0)`
    in op role `role` (Paddle's ParamAttr(learning_rate=...) makes it Optimize|LRSched)."""
    from transpile.ir.program import Var
    from transpile.passes.build import make_op
    main = main.copy()
    block = main.global_block
    at = next(i for i, op in enumerate(block.ops) if op.input("Param") and
              op.input("LearningRate"))
    block.vars["tmp_lr"] = Var.tensor("tmp_lr", "FP32", (1,))
    block.ops.insert(at, make_op("scale", {"X": ["learning_rate_0"]}, {"Out": ["tmp_lr"]},
                                 {"scale": 0.6, "op_role": role}))
    block.ops[at + 1].inputs["LearningRate"] = ["tmp_lr"]
    return main


def test_a_parameter_with_its_own_rate_is_followed_to_the_global_rate():
    """The first update reads scale(learning_rate_0): the scheduler is still seen (it was not,
    when only the first update's LearningRate was looked at)."""
    from transpile.ir.lr_schedule import global_lr_vars
    main, startup = _programs("scheduler")
    own = _own_rate(main, 0x12)
    assert global_lr_vars(own) == ["learning_rate_0"]
    assert scheduler_fed(own, startup)
    assert not scheduler_fed(_own_rate(_programs("constant")[0], 0x12),
                             _programs("constant")[1])
    # an LR-decay op (LRSched role only) computes the rate: not followed
    assert global_lr_vars(_own_rate(main, 0x10))[0] == "tmp_lr"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_fleet_and_ps_trainers_keep_the_scheduler_var_with_own_rates(mode):
    main, startup = _programs("scheduler")
    own = _own_rate(main, 0x12)
    for style in ("fleet", "ps"):
        cfg = replace(CONFIG, mode=mode, style=style)
        res = split(own, startup, cfg)
        kept = res.programs["trainer_0/main"].global_block.var("learning_rate_0")
        assert kept is not None and kept.persistable, style
