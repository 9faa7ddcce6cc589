"""The coverage check: the pserver blocks of every trainable parameter tile it exactly once
(contiguous slices, shapes add up, dtypes agree)."""
from __future__ import annotations

from ..ir.program import Var
from ..ir.optimizers import trainable_params
from .context import CheckContext
from .ops import BLOCK_SUFFIX, fmt_shape, is_dense, is_static


def _origin(name: str, params: dict):
    """(parameter, slice index or None) a pserver-side name stands for; (None, None) if none."""
    if name in params:
        return name, None
    m = BLOCK_SUFFIX.match(name)
    if m and m.group(1) in params:
        return m.group(1), int(m.group(2))
    return None, None


def check_coverage(ctx: CheckContext) -> None:
    """Every trainable parameter of the original program, tiled by the pservers' blocks."""
    params = trainable_params(ctx.main)
    pieces: dict = {}
    for ep in ctx.config.pservers:
        for pb in ctx.param_blocks.get(ep, ()):
            if pb.param is None:
                continue
            origin, k = _origin(pb.param, params)
            if origin is None:
                ctx.add("coverage", pb.prog, pb.block, pb.op_idx,
                        "optimizes %s, which is not a trainable parameter of the original "
                        "program" % pb.param, "a parameter or a .block<k> slice of one")
                continue
            pieces.setdefault(origin, []).append((k, pb))
    for name, pv in params.items():
        got = pieces.get(name)
        if not got:
            ctx.add("coverage", "split", None, None,
                    "parameter %s %s is optimized on no pserver" % (name, fmt_shape(pv.shape)),
                    "its blocks in the optimize blocks of the pservers")
            continue
        _check_tiling(ctx, name, pv, got)


def _check_tiling(ctx, name: str, pv: Var, got: list) -> None:
    sliced = sorted(((k, pb) for k, pb in got if k is not None), key=lambda x: x[0])
    whole = [pb for k, pb in got if k is None]
    for _, pb in got:
        if pb.var is not None and pv.dtype and pb.var.dtype and pb.var.dtype != pv.dtype:
            ctx.add("coverage", pb.prog, 0, None,
                    "%s is %s" % (pb.param, pb.var.dtype), "%s like %s" % (pv.dtype, name))
    if sliced and whole:
        ctx.add("coverage", whole[0].prog, whole[0].block, whole[0].op_idx,
                "%s is optimized whole here and in slices elsewhere (%s)"
                % (name, ", ".join("%s on %s" % (pb.param, pb.endpoint) for _, pb in sliced)),
                "either the whole parameter on one pserver or its slices, once each")
        return
    if whole:
        shards = [pb for pb in whole if pb.var is not None]
        if len(whole) > 1 and not all(pb.sparse for pb in whole):
            ctx.add("coverage", whole[1].prog, whole[1].block, whole[1].op_idx,
                    "%s is optimized on %d pservers (%s)"
                    % (name, len(whole), ", ".join(pb.endpoint for pb in whole)),
                    "exactly one pserver")
            return
        if len(whole) > 1:                  # a distributed table: each pserver holds a shard
            _rows_add_up(ctx, name, pv, [(pb.param, pb) for pb in shards], shards=True)
        elif shards and is_dense(shards[0].var) and tuple(shards[0].var.shape) != \
                tuple(pv.shape):
            pb = shards[0]
            ctx.add("coverage", pb.prog, 0, None,
                    "%s is declared %s" % (pb.param, fmt_shape(pb.var.shape)),
                    "%s, the shape of the original parameter" % fmt_shape(pv.shape))
        return
    seen: dict = {}
    for k, pb in sliced:
        if k in seen:
            ctx.add("coverage", pb.prog, pb.block, pb.op_idx,
                    "%s.block%d is optimized twice: on %s block %d and on %s block %d"
                    % (name, k, seen[k].endpoint, seen[k].block, pb.endpoint, pb.block),
                    "each slice on exactly one pserver")
        else:
            seen[k] = pb
    missing = [k for k in range(max(seen) + 1) if k not in seen]
    if missing:
        ctx.add("coverage", "split", None, None,
                "no pserver optimizes %s" % ", ".join("%s.block%d" % (name, k) for k in missing),
                "slices %s.block0..block%d, each once" % (name, max(seen)))
        return
    _rows_add_up(ctx, name, pv, [("%s.block%d" % (name, k), seen[k]) for k in sorted(seen)])


def _rows_add_up(ctx, name, pv: Var, parts: list, shards: bool = False) -> None:
    """Slices along dim 0: the other dims agree and the rows add up to the parameter's.
    `shards`: the parts are a distributed table's, which Paddle's transpiler declares
    ceil(rows / pservers) rows each (its ids are dealt out by remainder): that adds up too."""
    if not is_static(pv.shape) or not pv.shape:
        return
    if any(pb.var is None or pb.var.shape is None for _, pb in parts):
        return      # a large-scale table lives outside the program: its size is not declared
    rows = 0
    rest = tuple(pv.shape[1:])
    for label, pb in parts:
        shape = pb.var.shape        # (asked once: tens of thousands of slices)
        if tuple(shape[1:]) != rest or len(shape) != len(pv.shape):
            ctx.add("coverage", pb.prog, 0, None,
                    "slice %s is %s" % (label, fmt_shape(shape)),
                    "[rows, %s] like %s %s" % (", ".join(str(d) for d in pv.shape[1:]), name,
                                               fmt_shape(pv.shape)))
            return
        rows += shape[0]
    per_shard = -(-pv.shape[0] // len(parts))
    if shards and all(pb.var.shape[0] == per_shard for _, pb in parts):
        return
    if rows != pv.shape[0]:
        offsets, at = [], 0         # (said only here: most parameters' rows add up)
        for label, pb in parts:
            offsets.append("%s@%d+%d" % (label, at, pb.var.shape[0]))
            at += pb.var.shape[0]
        pb = parts[-1][1]
        ctx.add("coverage", pb.prog, 0, None,
                "the slices of %s cover %d rows (%s)" % (name, rows, ", ".join(offsets)),
                "%d rows, the first dim of %s %s" % (pv.shape[0], name, fmt_shape(pv.shape)))
