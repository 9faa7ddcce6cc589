"""The kernel registry: op type -> kernel, filled by the op modules with @kernel."""
from __future__ import annotations

KERNELS: dict = {}


def kernel(*names):
    def deco(fn):
        for n in names:
            KERNELS[n] = fn
        return fn
    return deco
