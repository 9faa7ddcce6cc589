"""numpy kernels of Paddle ops, forward and grad, keyed by op type.

A kernel is `fn(ctx)`: it reads inputs and attrs through the OpCtx (transpile/simulate/executor.py)
and writes outputs with ctx.set(). Written from the ops' documented semantics.
"""
from __future__ import annotations

KERNELS: dict = {}


def kernel(*names):
    def deco(fn):
        for n in names:
            KERNELS[n] = fn
        return fn
    return deco


def _load():
    from . import (act_ops, math_ops, metric_ops, nn_ops, norm_ops, optim_ops,  # noqa: F401
                   shape_ops, table_ops, tensor_ops, loss_ops, seq_ops, extra_ops)  # (register)


_load()
