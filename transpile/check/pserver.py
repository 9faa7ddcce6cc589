"""The pserver checks: listen_and_serv and the optimize blocks it serves.

  listen      each pserver has one listen_and_serv for its own endpoint, Fanin = trainers, the
              mode's distributed_mode, optimize_blocks without repeats, a grad_to_block_id that
              points into optimize_blocks;
  optimize    each parameter block has one optimizer op whose accumulators have the block's
              shape (main and startup), no dead computation, and in sync mode its merged grad is
              averaged over the trainers.
"""
from __future__ import annotations

import math

from ..core.config import ClusterConfig
from ..ir.program import Program
from ..plan.modes import mode_id
from ..output.result import endpoint_dir
from .context import CheckContext, ParamBlock
from .loading import Part
from .ops import (TABLE_OPTIMIZERS_PREFIX, colon_pairs, fmt_shape, is_dense,
                  is_geo_update, is_static, is_update_op, output_names)

# Startup ops whose "shape" attr must be the shape of the var they initialise.
_INIT_OPS = ("fill_constant", "uniform_random", "gaussian_random", "truncated_gaussian_random")


def expected_distributed_mode(cfg: ClusterConfig) -> int:
    """listen_and_serv's distributed_mode: the classic transpiler knows only sync (0) and async
    (1), deriving it from sync_mode; Fleet has one per mode."""
    if cfg.style == "classic":
        return 0 if cfg.sync_mode else 1
    return mode_id(cfg.mode)


def _listen_op(ctx, part):
    """(op index, op) of the one listen_and_serv in block 0, or None (and a finding)."""
    ops = [(j, op) for j, op in enumerate(part.prog.global_block.ops)
           if op.type == "listen_and_serv"]
    if len(ops) != 1:
        ctx.add("listen", part, 0, None,
                "%d listen_and_serv ops in block 0" % len(ops), "exactly one")
        return None
    return ops[0]


def check_stray_folders(ctx: CheckContext) -> None:
    """A pserver_* folder of the split that no endpoint of the config names."""
    for name in ctx.split.stray:
        ctx.add("listen", name, None, None,
                "folder %s matches no pserver of the cluster config" % name,
                "one of %s" % ", ".join(endpoint_dir(e) for e in ctx.config.pservers))


def check_listen(ctx: CheckContext) -> None:
    """listen_and_serv of every pserver; fills ctx.param_blocks and ctx.grad_keys."""
    cfg = ctx.config
    check_stray_folders(ctx)
    for ep in cfg.pservers:
        p = ctx.split.pservers.get(ep)
        if p is None:
            ctx.add("listen", endpoint_dir(ep), None, None,
                    "no program for pserver %s" % ep, "%s/main.pb" % endpoint_dir(ep))
            continue
        part = p["main"]
        found = _listen_op(ctx, part)
        ctx.grad_keys[ep] = {}
        ctx.param_blocks[ep] = []
        if found is None:
            continue
        j, op = found
        prog = part.prog
        if op.attr("endpoint") not in (None, ep):
            ctx.add("listen", part, 0, j, "listen_and_serv serves %s" % op.attr("endpoint"), ep)
        fanin = op.attr("Fanin")
        if fanin is not None and fanin != cfg.trainers:
            ctx.add("listen", part, 0, j, "Fanin is %s" % fanin,
                    "Fanin = trainers = %d" % cfg.trainers)
        dmode = op.attr("distributed_mode")
        want = expected_distributed_mode(cfg)
        if dmode is not None and dmode != want:
            ctx.add("listen", part, 0, j, "distributed_mode is %s" % dmode,
                    "%d (%s mode, %s style)" % (want, cfg.mode, cfg.style))
        blocks = list(op.attr("optimize_blocks") or [])
        seen = set()
        for b in blocks:
            if b in seen:
                ctx.add("listen", part, 0, j,
                        "optimize_blocks lists block %d twice: %s" % (b, blocks),
                        "each optimize block once")
            seen.add(b)
            if not 0 < b < len(prog.blocks):
                ctx.add("listen", part, 0, j, "optimize_blocks lists block %d, which does not "
                        "exist" % b, "blocks in 1..%d" % (len(prog.blocks) - 1))
        pairs = colon_pairs(op.attr("grad_to_block_id"))
        if pairs is None:
            ctx.add("listen", part, 0, j, "grad_to_block_id is malformed: %s"
                    % op.attr("grad_to_block_id"), "entries \"<grad>:<block>\"")
            continue
        keys = ctx.grad_keys[ep]
        updates: dict = {}          # block idx -> its update ops, found once per block
        sparse_map = dict(colon_pairs(op.attr("sparse_grad_to_param")) or [])
        for g, v in pairs:
            if not v.isdigit():
                ctx.add("listen", part, 0, j, "grad_to_block_id entry %s:%s has no block "
                        "number" % (g, v), "\"<grad>:<block>\"")
                continue
            bi = int(v)
            if g in keys:
                ctx.add("listen", part, 0, j, "grad_to_block_id lists %s twice" % g,
                        "each grad once")
                continue
            keys[g] = bi
            if bi not in seen:
                ctx.add("listen", part, 0, j,
                        "grad_to_block_id sends %s to block %d, which optimize_blocks does not "
                        "list" % (g, bi), "block %d in optimize_blocks %s" % (bi, blocks))
            if not 0 < bi < len(prog.blocks):
                continue
            pb = ParamBlock(ep, part.name, bi, g)
            _find_update(ctx, part, pb, sparse_map, updates)
            ctx.param_blocks[ep].append(pb)
        by_block: dict = {}
        for pb in ctx.param_blocks[ep]:
            by_block.setdefault(pb.block, []).append(pb.grad)
        for bi, grads in sorted(by_block.items()):
            if len(grads) > 1:
                ctx.add("listen", part, bi, None, "block %d optimizes several grads: %s"
                        % (bi, ", ".join(grads)), "one parameter block per optimize block")


def _find_update(ctx: CheckContext, part: Part, pb: ParamBlock, sparse_map: dict,
                 updates: dict) -> None:
    """Fill in the optimizer op of a parameter block and the parameter it updates. `updates`
    caches each block's update ops for the other grads that point at it."""
    prog = part.prog
    geo = ctx.geo
    ups = updates.get(pb.block)
    if ups is None:
        ups = updates[pb.block] = [(j, op) for j, op in enumerate(prog.blocks[pb.block].ops)
                                   if (is_geo_update(op) if geo else is_update_op(op))]
    if not ups:
        ctx.add("optimize", part, pb.block, None,
                "optimize block for %s has no %s" % (pb.grad, "sum(param, delta) update"
                                                     if geo else "optimizer op"),
                "one optimizer op updating the parameter block of %s" % pb.grad)
        return
    if len(ups) > 1:
        ctx.add("optimize", part, pb.block, ups[1][0],
                "optimize block for %s has %d optimizer ops (%s)"
                % (pb.grad, len(ups), ", ".join(o.type for _, o in ups)), "exactly one")
    j, op = ups[0]
    pb.op_idx, pb.op = j, op
    if geo:
        pb.param = op.output("Out")[0]
    elif op.input("Param"):
        pb.param = op.input("Param")[0]
    else:
        pb.param = op.attr("tablename") or sparse_map.get(pb.grad)
        pb.sparse = True
    if pb.param is None:
        ctx.add("optimize", part, pb.block, j, "%s names no parameter" % op.type,
                "a Param input, a tablename attr or a sparse_grad_to_param entry")
        return
    pb.var = prog.find_var(pb.param, pb.block)
    if pb.var is None:
        return          # the structure check reports the undeclared var
    if pb.var.kind == "SELECTED_ROWS" or pb.param in sparse_map.values():
        pb.sparse = True


def check_optimize(ctx: CheckContext) -> None:
    """The optimize blocks of every pserver and what its startup program declares for them."""
    cfg = ctx.config
    for ep in cfg.pservers:
        p = ctx.split.pservers.get(ep)
        if not p or ep not in ctx.param_blocks:
            continue
        part, startup = p["main"], p["startup"]
        prog = part.prog
        want_acc: dict = {}
        readers = None
        for pb in ctx.param_blocks[ep]:
            if pb.op is None or pb.var is None:
                continue
            block = prog.blocks[pb.block]
            if not ctx.geo:
                _check_accumulators(ctx, part, pb, want_acc)
                if cfg.sync_mode and cfg.trainers > 1 and pb.var.kind != "SELECTED_ROWS":
                    _check_average(ctx, part, pb)
            if readers is None:
                readers = _readers(ctx, part)
            _check_dead_ops(ctx, part, pb, block, readers)
        if startup is not None:
            _check_startup_shapes(ctx, startup, prog, want_acc)
            _check_initialised(ctx, startup, ctx.param_blocks[ep])


def _check_accumulators(ctx, part, pb: ParamBlock, want_acc: dict) -> None:
    """In-place optimizer state (Moment1 -> Moment1Out, ...) is elementwise: the block's shape."""
    op, prog = pb.op, part.prog
    shape = pb.var.shape
    for slot, args in op.inputs.items():
        if slot in ("Param", "Grad", "LearningRate", "MasterParam") or slot.endswith("Pow"):
            continue
        outs = op.output(slot + "Out")
        for a in args:
            if a not in outs:
                continue
            v = prog.find_var(a, pb.block)
            want_acc[a] = (shape, pb, _accumulator_fault(op, slot))
            if v is not None and is_dense(v) and is_dense(pb.var) and tuple(v.shape) != \
                    tuple(shape):
                ctx.add("optimize", part, 0, None,
                        "accumulator %s (%s of %s on %s) has shape %s%s"
                        % (a, slot, pb.param, op.type, fmt_shape(v.shape),
                           _accumulator_fault(op, slot)),
                        "%s, the shape of %s" % (fmt_shape(shape), pb.param))
    g = op.input("Grad")
    if g:
        gv = prog.find_var(g[0], pb.block)
        if is_dense(gv) and is_dense(pb.var) and is_static(gv.shape) and \
                tuple(gv.shape) != tuple(shape):
            ctx.add("optimize", part, pb.block, pb.op_idx,
                    "%s reads grad %s of shape %s for %s" % (op.type, g[0],
                                                             fmt_shape(gv.shape), pb.param),
                    "%s, the shape of %s" % (fmt_shape(shape), pb.param))


def _accumulator_fault(op, slot: str) -> str:
    """The Paddle fault a wrongly shaped accumulator is, as a suffix of the finding."""
    if op.type == "rmsprop" and slot == "MeanGrad":
        return " (Paddle fault classic-rmsprop-mean-grad-shape)"
    return ""


def _check_startup_shapes(ctx, startup: Part, main: Program, want_acc: dict) -> None:
    """The startup program declares and initialises each accumulator with its block's shape."""
    sb = startup.prog.global_block
    for name, (shape, pb, fault) in sorted(want_acc.items()):
        v = sb.vars.get(name)
        if is_dense(v) and tuple(v.shape) != tuple(shape):
            ctx.add("optimize", startup, 0, None,
                    "accumulator %s of %s is declared %s%s" % (name, pb.param,
                                                             fmt_shape(v.shape), fault),
                    "%s, the shape of %s" % (fmt_shape(shape), pb.param))
    for j, op in enumerate(sb.ops):
        if op.type not in _INIT_OPS or not op.has_attr("shape"):
            continue
        for out in op.output("Out"):
            if out in want_acc:
                shape = want_acc[out][0]
                if list(op.attr("shape")) != list(shape):
                    ctx.add("optimize", startup, 0, j,
                            "%s initialises %s with shape %s%s"
                            % (op.type, out, fmt_shape(op.attr("shape")), want_acc[out][2]),
                            "%s, the shape of %s" % (fmt_shape(shape), want_acc[out][1].param))
    # every persistable var both programs declare: the same shape
    main_vars = main.global_block.vars
    for name, v in sb.vars.items():
        mv = main_vars.get(name)
        if mv is None or name in want_acc or not (is_dense(v) and is_dense(mv)):
            continue
        if tuple(v.shape) != tuple(mv.shape):
            ctx.add("optimize", startup, 0, None,
                    "%s is declared %s here but %s in the main program"
                    % (name, fmt_shape(v.shape), fmt_shape(mv.shape)),
                    "the same shape in main and startup")


def _check_initialised(ctx, startup: Part, pbs: list) -> None:
    """Every parameter block a pserver optimizes is written by its startup program."""
    written = {n for _, _, op in startup.prog.ops() for n in output_names(op)}
    for pb in pbs:
        if pb.param is None or pb.var is None or pb.param in written:
            continue
        if pb.op is not None and pb.op.type.startswith(TABLE_OPTIMIZERS_PREFIX):
            continue        # a large-scale table initialises its rows when they are first used
        ctx.add("optimize", startup, 0, None,
                "nothing initialises %s, which block %d of the main program optimizes"
                % (pb.param, pb.block), "an initializer op writing %s" % pb.param)


def _check_average(ctx, part, pb: ParamBlock) -> None:
    """Sync mode: the trainers' grads are summed, then scaled by 1/trainers, then applied."""
    block = part.prog.blocks[pb.block]
    n = ctx.config.trainers
    # the merging sum reads the per-trainer copies, not its own output (an L2Decay sum does)
    sums = [(j, op) for j, op in enumerate(block.ops[:pb.op_idx])
            if op.type == "sum" and op.output("Out") == [pb.grad]
            and pb.grad not in op.input("X")]
    if not sums:
        ctx.add("optimize", part, pb.block, pb.op_idx,
                "the grads of %s from the %d trainers are never summed" % (pb.param, n),
                "sum(X=[%s.trainer_0, ...]) -> %s" % (pb.grad, pb.grad))
        return
    sj, sop = sums[0]
    if len(sop.input("X")) != n:
        ctx.add("optimize", part, pb.block, sj,
                "sum merges %d grads into %s" % (len(sop.input("X")), pb.grad),
                "one per trainer: %d" % n)
    scales = [(j, op) for j, op in enumerate(block.ops[sj + 1:pb.op_idx], sj + 1)
              if op.type == "scale" and op.input("X") == [pb.grad]]
    if not scales:
        ctx.add("optimize", part, pb.block, pb.op_idx,
                "the merged grad %s is not averaged: no scale between sum and %s"
                % (pb.grad, pb.op.type),
                "scale(X=%s, scale=%g) before %s" % (pb.grad, 1.0 / n, pb.op.type))
        return
    j, sc = scales[0]
    s = sc.attr("scale")
    if s is None or not math.isclose(float(s), 1.0 / n, rel_tol=1e-5):
        ctx.add("optimize", part, pb.block, j, "scale %s averages %s" % (s, pb.grad),
                "scale = 1/trainers = %g" % (1.0 / n))


def _readers(ctx, part) -> dict:
    """{var name: {(block, op index)} of the ops that read it} over the reachable blocks of a
    program; built once per program, for all of its optimize blocks."""
    prog = part.prog
    readers: dict = {}
    for bi in ctx.reach.get(part.name, ()):
        for j, op in enumerate(prog.blocks[bi].ops):
            for args in op.inputs.values():
                for a in args:
                    if a:
                        r = readers.get(a)
                        if r is None:
                            readers[a] = {(bi, j)}
                        else:
                            r.add((bi, j))
    return readers


def _check_dead_ops(ctx, part, pb: ParamBlock, block, readers: dict) -> None:
    """An op in an optimize block whose result no other op reads does nothing (Paddle's L2Decay
    + clip chain wired past the optimizer, say). `readers`: _readers of the program."""
    for j, op in enumerate(block.ops):
        if j == pb.op_idx or is_update_op(op) or not op.outputs:
            continue
        outs = output_names(op)
        here = (pb.block, j)
        if outs and all(not _read_by_others(readers.get(o), here) for o in outs):
            reads = pb.op.input("Grad") or [pb.grad]
            ctx.add("optimize", part, pb.block, j,
                    "%s writes %s, which nothing reads: %s reads %s instead%s"
                    % (op.type, ", ".join(outs), pb.op.type, reads[0],
                       " (Paddle fault classic-unwired-grad-chain)"
                       if ctx.config.style == "classic" else ""),
                    "%s reads the result (%s)" % (pb.op.type, outs[0]))


def _read_by_others(readers, here) -> bool:
    """Whether an op other than `here` (block, op index) is among `readers`."""
    return bool(readers) and (len(readers) > 1 or here not in readers)
