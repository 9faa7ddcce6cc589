"""The optimizer ops parameter-server training supports, and which of their inputs are state.

An optimizer update reads Param, Grad, LearningRate and its accumulators; on a pserver the
accumulators that hold one value per parameter entry (adam's moments, ...) are sliced with the
parameter block, the others (beta powers, ...) are kept whole.
"""
from __future__ import annotations

from ..core.errors import RefusedError
from .program import Op

# Optimizer input slots that are never sliced with the parameter: the parameter, its grad and
# the scalar hyper-parameter tensors.
UNSLICED_SLOTS = ("Param", "Grad", "LearningRate", "Beta1Tensor", "Beta2Tensor")

# Fleet's pserver pass also leaves out the AMP master weight.
FLEET_UNSLICED_SLOTS = UNSLICED_SLOTS + ("MasterParam",)

# Per optimizer: the accumulator slots sliced with the parameter block. This is Paddle's table
# (DistributeTranspiler._get_optimizer_input_shape) plus rmsprop's MeanGrad, which Paddle forgot
# (the classic corpus corrections give it the block shape too). Any other optimizer is refused.
SLICED_STATE_SLOTS = {
    "sgd": (),
    "adam": ("Moment1", "Moment2"),
    "adagrad": ("Moment",),
    "adamax": ("Moment", "InfNorm"),
    "momentum": ("Velocity",),
    "lars_momentum": ("Velocity",),
    "rmsprop": ("Moment", "MeanSquare", "MeanGrad"),
    "decayed_adagrad": ("Moment",),
    "ftrl": ("SquaredAccumulator", "LinearAccumulator"),
}

# Fleet's pserver pass uses Paddle's table as it is: rmsprop's MeanGrad keeps its full shape.
FLEET_SLICED_STATE_SLOTS = {**SLICED_STATE_SLOTS, "rmsprop": ("Moment", "MeanSquare")}


def fleet_sliced_state_slots(op_type: str, table: bool) -> tuple:
    """The state slots Fleet's pserver pass slices like the parameter block: a remote table's
    every state (rmsprop's MeanGrad too, as Paddle 2.6.2 writes it), a dense parameter's by
    Paddle's table (FLEET_SLICED_STATE_SLOTS)."""
    return (SLICED_STATE_SLOTS if table else FLEET_SLICED_STATE_SLOTS).get(op_type, ())


def is_optimizer_update(op: Op) -> bool:
    """An op that updates a parameter (sgd, adam, ...), as opposed to clip / decay helpers: it
    reads a Param and a LearningRate."""
    return bool(op.input("Param")) and bool(op.input("LearningRate"))


def trainable_params(program) -> dict:
    """{name: Var} of the parameters the program's optimizer ops update (an op reading a Param
    and its Grad), in the order the ops update them."""
    out = {}
    for bi, _, op in program.ops():
        if op.input("Param") and op.input("Grad"):
            for p in op.input("Param"):
                v = program.find_var(p, bi)
                if v is not None:
                    out.setdefault(p, v)
    return out


def sliced_state_slots(op_type: str) -> tuple:
    """The accumulator slots of an optimizer that are sliced like its parameter (classic)."""
    if op_type not in SLICED_STATE_SLOTS:
        raise RefusedError("optimizer %r is not supported by parameter-server training "
                           "(Paddle supports sgd, momentum, adam, adagrad, adamax, rmsprop, "
                           "decayed_adagrad, ftrl, lars_momentum)" % op_type)
    return SLICED_STATE_SLOTS[op_type]
