"""Is the learning rate set by a Python LR scheduler (`paddle.optimizer.lr.*`)?

Paddle's Fleet and PS passes keep the learning-rate var on the trainer when the Python program
has an `lr_scheduler` attribute (the executor writes the scheduler's value into the var before
each step). A ProgramDesc does not carry that attribute, but in Paddle 2.x the program shows it:

- the optimizer ops read a persistable LR var that no op of the main program writes (fluid's
  LR-decay ops would write it);
- the startup program initialises that var with one op whose `op_callstack` passes through the
  optimizer's `_create_global_learning_rate` and `set_variable_initializer` directly, while a
  constant rate is made by `paddle.static.create_global_var` (a frame named `create_global_var`);
  a var with no initialiser at all is fed by the executor too.

Without callstacks (a program saved with them stripped) a constant rate and a scheduler look
the same; `lr_scheduler: true` in the cluster config says so then.
"""
from __future__ import annotations

from typing import Optional

from .program import Program

# the LR var Fleet's and the PS pipeline's delete_optimizer_pass keep on the trainer by this fixed
# name when the program has an LR scheduler (whatever the optimizer reads)
SCHEDULER_LR_VAR = "learning_rate_0"
CONSTANT_LR_FRAME = "create_global_var"
OPTIMIZER_LR_FRAME = "_create_global_learning_rate"


def optimizer_lr_var(main: Program) -> Optional[str]:
    """The first LearningRate input of an optimizer update in block 0, or None."""
    for op in main.global_block.ops:
        if op.input("Param") and op.input("LearningRate"):
            return op.input("LearningRate")[0]
    return None


def scheduler_fed(main: Program, startup: Program) -> bool:
    """True when the program's learning rate looks set by a Python LR scheduler (see the
    module doc)."""
    name = optimizer_lr_var(main)
    if name is None:
        return False
    var = main.global_block.var(name)
    if var is None or not var.persistable:
        return False
    if any(name in op.output_names() for _, _, op in main.ops()):
        return False
    inits = [op for op in startup.global_block.ops if name in op.output_names()]
    if not inits:
        return True
    if len(inits) != 1:
        return False
    stack = inits[0].attr("op_callstack") or []
    if not isinstance(stack, list) or not stack:
        return False
    text = "\n".join(str(line) for line in stack)
    return OPTIMIZER_LR_FRAME in text and CONSTANT_LR_FRAME not in text


def resolve(setting, main: Program, startup: Program) -> bool:
    """The config's `lr_scheduler` (True, False or "auto") for this program."""
    if setting == "auto":
        return scheduler_fed(main, startup)
    return bool(setting)
