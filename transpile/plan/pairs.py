"""A parameter the optimizer updates and the gradient it is updated with: what every style's
plan is made of."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    """A parameter the optimizer updates and the grad it is updated with (op_role_var)."""
    param: str
    grad: str
    sparse: bool = False          # an embedding table looked up with remote_prefetch
    distributed: bool = False     # ... a large-scale (is_distributed) one: sparse_embedding
