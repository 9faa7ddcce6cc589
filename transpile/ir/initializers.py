"""Startup initializers as Paddle describes them in table metas: shared by the passes that
write pserver startups and the outputs that name a table's initializer (runtime.json)."""
from __future__ import annotations

from .program import Op

# Startup initialisers: the attrs that say how they fill a var (Paddle writes them into the
# large-scale table metas and geo's sparse_attrs). Their "shape" attr follows the var they
# initialise, so a pserver's copy is reshaped to its block.
INITIALIZER_ATTRS = {"gaussian_random": ("seed", "mean", "std"), "fill_constant": ("value",),
                     "uniform_random": ("seed", "min", "max"),
                     "truncated_gaussian_random": ("seed", "mean", "std")}


def initializer_signature(op: Op) -> str:
    """`gaussian_random&<seed>&<mean>&<std>`: an initializer and its attrs, as Paddle formats
    them in table metas."""
    return "&".join([op.type] + [str(op.attr(a)) for a in INITIALIZER_ATTRS[op.type]])
