"""Paddle's op_role attribute: which part of training an op belongs to."""
from __future__ import annotations

from .program import Op

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


def role(op: Op) -> int:
    return int(op.attr(ROLE_ATTR, FORWARD) or 0)


def is_optimize_op(op: Op) -> bool:
    """An optimizer update (sgd, adam, ...): OPTIMIZE role and it names a (param, grad) pair."""
    r = role(op)
    return bool(r & OPTIMIZE) and not (r & LRSCHED) and "Param" in op.inputs


def is_lr_sched_op(op: Op) -> bool:
    return bool(role(op) & LRSCHED)


def is_backward_op(op: Op) -> bool:
    return bool(role(op) & BACKWARD)
