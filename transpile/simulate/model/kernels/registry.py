"""The kernel registry: op type -> kernel, filled by the op modules with @kernel."""
from __future__ import annotations

KERNELS: dict = {}


def kernel(*names):
    def deco(fn):
        for n in names:
            KERNELS[n] = fn
        return fn
    return deco


# Forward ops whose output carries an input's LoD in Paddle 2.6.2 (InferShape's ShareLoD, phi's
# share_lod: concat and sum from their first input, the normalizations, dropout, fc) where the
# kernel itself does not set one: the executor copies it when the rows agree.
SHARES_LOD = {
    "concat": ("X", ("Out",)), "sum": ("X", ("Out",)), "dropout": ("X", ("Out",)),
    "layer_norm": ("X", ("Y",)), "batch_norm": ("X", ("Y",)), "fc": ("Input", ("Out",)),
    "softsign": ("X", ("Out",)), "leaky_relu": ("X", ("Out",)), "relu": ("X", ("Out",)),
    "tanh": ("X", ("Out",)), "sigmoid": ("X", ("Out",)), "clip": ("X", ("Out",)),
    "scale": ("X", ("Out",)), "cast": ("X", ("Out",)),
}
