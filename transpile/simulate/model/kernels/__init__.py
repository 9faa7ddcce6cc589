"""numpy kernels of Paddle ops, forward and grad, keyed by op type.

A kernel is `fn(ctx)`: it reads inputs and attrs through the OpCtx (simulate/model/executor.py) and
writes outputs with ctx.set(). Written from the ops' documented semantics. The registry is
registry.py; importing this package imports the op modules, which register their kernels.
"""
from __future__ import annotations

from .registry import KERNELS, kernel  # noqa: F401  (the registry the modules below fill)
from . import (act_ops, datanorm_ops, extra_ops, index_ops, loss_ops, math_ops,  # noqa: F401
               metric_ops, nn_ops, norm_ops, optim_ops, seq_ops, shape_ops, table_ops,
               tensor_ops)  # (register)

