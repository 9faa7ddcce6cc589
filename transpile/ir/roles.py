"""Paddle's op_role attribute: which part of training an op belongs to.

Both styles decide what leaves the trainer from these predicates: the ops whose role is exactly
Optimize (minus gradient clipping), the learning-rate schedule ops, and the (param, grad) pairs
op_role_var names.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from .optimizers import is_optimizer_update
from .program import Op, Program

# OpRole values (paddle/fluid/framework/op_proto_maker.h); Loss is or-ed with Forward/Backward.
FORWARD = 0x0000
BACKWARD = 0x0001
OPTIMIZE = 0x0002
RPC = 0x0004
DIST = 0x0008
LRSCHED = 0x0010
LOSS = 0x0100
NOT_SPECIFIED = 0x1000

ROLE_ATTR = "op_role"
ROLE_VAR_ATTR = "op_role_var"

# The op_namescope that marks gradient-clip ops (optimize role, but they stay on the trainer,
# re-labelled Backward). The two Paddle transpilers look for different scopes: the classic
# DistributeTranspiler for "@CLIP", which Paddle 2.x's clip ops no longer carry (they are built
# under "gradient_clip", so classic moves them to the pservers with the optimizer); Fleet's
# ps passes (ir/public.py) for "gradient_clip".
CLASSIC_CLIP_NAME_SCOPE = "@CLIP"
FLEET_CLIP_NAME_SCOPE = "gradient_clip"


def role(op: Op) -> int:
    return int(op.attr(ROLE_ATTR, FORWARD) or 0)


def is_optimize_op(op: Op) -> bool:
    """An optimizer update (sgd, adam, ...) in the optimize role (not an LR-schedule op)."""
    r = role(op)
    return bool(r & OPTIMIZE) and not (r & LRSCHED) and is_optimizer_update(op)


def is_clip_op(op: Op, name_scope: str) -> bool:
    """A gradient-clip op: its op_namescope contains `name_scope` (see the constants above).
    Most ops are told apart by their bytes alone (Op.lacks_text), without decoding the attr."""
    if op.lacks_text(name_scope.encode()):
        return False
    return name_scope in str(op.attr("op_namescope", "") or "")


def is_moved_optimize_op(op: Op, clip_name_scope: str) -> bool:
    """An op the transpilers move to the pservers: op_role exactly Optimize, not a clip op.

    That is the optimizer updates and the regularization (and, in classic, clip) ops built
    under the optimizer's guard."""
    return role(op) == OPTIMIZE and not is_clip_op(op, clip_name_scope)


def is_lr_sched_op(op: Op) -> bool:
    """A learning-rate schedule op: role LRSched, or LRSched|Optimize (both transpilers' test)."""
    return role(op) in (LRSCHED, LRSCHED | OPTIMIZE)


def optimize_ops(program: Program, clip_name_scope: str) -> list[Op]:
    """The global block's ops moved to the pservers (is_moved_optimize_op), in order."""
    return [op for op in program.global_block.ops if is_moved_optimize_op(op, clip_name_scope)]


def clip_ops(program: Program, clip_name_scope: str) -> list[Op]:
    """The global block's optimize-role clip ops, which stay on the trainer, in order."""
    return [op for op in program.global_block.ops
            if role(op) == OPTIMIZE and is_clip_op(op, clip_name_scope)]


def lr_sched_ops(program: Program) -> list[Op]:
    """The global block's learning-rate schedule ops, in order."""
    return [op for op in program.global_block.ops if is_lr_sched_op(op)]


def classified_ops(program: Program, clip_name_scope: str) -> tuple[list, list, list]:
    """(optimize_ops, clip_ops, lr_sched_ops) of the program, in one walk over its global
    block: each op's role read once (a plan asks for all three)."""
    moved, clips, lr = [], [], []
    for op in program.global_block.ops:
        r = role(op)
        if r == OPTIMIZE:
            (clips if is_clip_op(op, clip_name_scope) else moved).append(op)
        elif r in (LRSCHED, LRSCHED | OPTIMIZE):
            lr.append(op)
    return moved, clips, lr


def params_grads(ops: Iterable[Op]) -> list[tuple[str, str]]:
    """(param, grad) pairs from the op_role_var of `ops`, in the order their first op comes."""
    seen = set()
    pairs = []
    for op in ops:
        rv = op.attr(ROLE_VAR_ATTR) or []
        if len(rv) >= 2 and rv[0] not in seen:
            seen.add(rv[0])
            pairs.append((rv[0], rv[1]))
    return pairs


def optimizer_only_vars(ops: Sequence[Op]) -> list[str]:
    """Inputs of `ops` that none of them names in op_role_var: the learning rate, accumulators
    and temporaries only the optimizer reads, which the trainer no longer needs. Sorted."""
    inputs, role_vars = set(), set()
    for op in ops:
        inputs.update(op.input_names())
        role_vars.update(op.attr(ROLE_VAR_ATTR) or [])
    return sorted(inputs - role_vars)
