"""The batch size a program fixes in its own ops.

Most programs take any batch (their feeds and everything computed from them are declared
[-1, ...]). Some are built for the batch of their model config: a feed declared [1, 50, 50], a
`slice` of the predictions at rows [0, 64) and [64, 128) (pairwise ranking: the first half of
the batch positive), a `fill_constant` of shape [64, 1] subtracted from them, a `reshape` to
[10, -1]. On another batch such a program fails (shapes that do not broadcast); simulate then
tries the per-trainer batch sizes these ops suggest (`candidates`), strongest first.
"""
from __future__ import annotations

from ...ir import roles
from ...ir.program import Program
from .feeds import feed_vars

# A dim this large is "to the end" (Paddle's INT_MAX / INT64_MAX in slice ends), not a size.
_HUGE = 1 << 30
MAX_TRIES = 4


def _forward_ops(main: Program) -> list:
    return [op for op in main.global_block.ops
            if not roles.role(op) & (roles.BACKWARD | roles.OPTIMIZE | roles.LRSCHED)
            and not op.type.endswith("_grad")]


def data_dependent(main: Program) -> set:
    """The vars block 0's forward ops compute from the feeds."""
    dep = {v.name for v in feed_vars(main)}
    for op in _forward_ops(main):
        if any(n in dep for n in op.input_names()):
            dep.update(op.output_names())
    return dep


def candidates(main: Program) -> list:
    """Per-trainer batch sizes the program's own ops suggest, strongest first: a feed's
    declared batch; row bounds of a slice of computed values and the leading dim a reshape of
    them asks for; a fill_constant's leading dim; a computed value's declared leading dim (not
    a persistable one's: a state kept across steps, as auc's bucket counts, has no batch)."""
    feeds = [int(v.shape[0]) for v in feed_vars(main) if v.shape and v.shape[0] > 0]
    dep = data_dependent(main)
    cuts, fills, declared = [], [], []
    for op in _forward_ops(main):
        reads = any(n in dep for n in op.input_names())
        if op.type in ("slice", "strided_slice") and reads:
            for k, axis in enumerate(op.attr("axes", []) or []):
                if int(axis) != 0:
                    continue
                for attr in ("ends", "starts"):
                    vals = op.attr(attr, []) or []
                    if k < len(vals) and 0 < int(vals[k]) < _HUGE:
                        cuts.append(int(vals[k]))
        elif op.type in ("reshape", "reshape2") and reads:
            shape = op.attr("shape", []) or []
            if shape and int(shape[0]) > 0:
                cuts.append(int(shape[0]))
        elif op.type == "fill_constant" and not reads:
            shape = op.attr("shape", []) or []
            if shape and int(shape[0]) > 1:
                fills.append(int(shape[0]))
        if reads:   # a persistable output is a state kept across steps (auc's buckets)
            for n in op.output_names():
                v = main.find_var(n)
                if v is not None and v.shape and 1 < v.shape[0] < _HUGE \
                        and not v.persistable:
                    declared.append(int(v.shape[0]))
    out: list = []
    for group in (feeds, sorted(cuts, reverse=True), sorted(fills, reverse=True),
                  sorted(declared, reverse=True)):
        for b in group:
            if b not in out:
                out.append(b)
    return out[:MAX_TRIES]
