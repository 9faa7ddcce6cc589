"""Is the learning rate set by a Python LR scheduler (`paddle.optimizer.lr.*`)?

Paddle's Fleet and PS passes keep the learning-rate var on the trainer when the Python program
has an `lr_scheduler` attribute (the executor writes the scheduler's value into the var before
each step). A ProgramDesc does not carry that attribute, but in Paddle 2.x the program shows it:

- the optimizer ops read a persistable LR var that no op of the main program writes (fluid's
  LR-decay ops would write it); a parameter with its own learning rate
  (`ParamAttr(learning_rate=...)`) has its optimizer read a `scale` of that var, which is
  followed back to it;
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
from .roles import OPTIMIZE, role

# the LR var Fleet's and the PS pipeline's delete_optimizer_pass keep on the trainer by this fixed
# name when the program has an LR scheduler (whatever the optimizer reads)
SCHEDULER_LR_VAR = "learning_rate_0"
CONSTANT_LR_FRAME = "create_global_var"
OPTIMIZER_LR_FRAME = "_create_global_learning_rate"


def global_lr_vars(main: Program) -> list:
    """The learning-rate vars the optimizer updates of block 0 read, in op order, each
    followed back through the `scale` ops that make a parameter's own rate
    (`ParamAttr(learning_rate=...)`: Paddle's `_create_param_lr`, built in the optimize role,
    where an LR-decay op is in the LR-schedule role only) to the global rate."""
    scaled = {}
    for op in main.global_block.ops:
        if op.type == "scale" and role(op) & OPTIMIZE and op.input("X") and op.output("Out"):
            scaled.setdefault(op.output("Out")[0], op.input("X")[0])
    out = []
    for op in main.global_block.ops:
        if not (op.input("Param") and op.input("LearningRate")):
            continue
        name, seen = op.input("LearningRate")[0], set()
        while name in scaled and name not in seen:
            seen.add(name)
            name = scaled[name]
        if name not in out:
            out.append(name)
    return out


def scheduler_fed(main: Program, startup: Program) -> bool:
    """True when the program's learning rate looks set by a Python LR scheduler (see the
    module doc): one of the global rates its optimizers read is."""
    return any(_fed(name, main, startup) for name in global_lr_vars(main))


def _fed(name: str, main: Program, startup: Program) -> bool:
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
