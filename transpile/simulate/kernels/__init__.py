"""numpy kernels of Paddle ops, forward and grad, keyed by op type.

A kernel is `fn(ctx)`: it reads inputs and attrs through the OpCtx (transpile/simulate/executor.py)
and writes outputs with ctx.set(). Written from the ops' documented semantics. The registry is
registry.py; importing this package imports the op modules, which register their kernels.
"""
from __future__ import annotations

from .registry import KERNELS, kernel  # noqa: F401  (the registry the modules below fill)
from . import math_ops, nn_ops, optim_ops, table_ops, tensor_ops  # noqa: F401  (register)
