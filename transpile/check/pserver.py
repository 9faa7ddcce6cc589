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
from ..ir.vartable import name_types, type_of
from ..plan.clip_faults import GLOBAL_NORM_OPS
from ..plan.faults import (CLASSIC_ASSIGN_INIT_WHOLE_PARAM, CLASSIC_CLIP_ON_PSERVER,
                           FLEET_ASSIGN_INIT_WHOLE_PARAM, KIND)
from ..plan.modes import mode_id
from ..output.result import endpoint_dir
from .context import CheckContext
from .index import ParamBlock
from .loading import Part
from .ops import (TABLE_OPTIMIZERS_PREFIX, all_names, fmt_shape, is_dense, is_dense_type,
                  is_static, is_update_op, output_names, shared_attr, var_in)

# Startup ops whose "shape" attr must be the shape of the var they initialise.
_INIT_OPS = ("fill_constant", "uniform_random", "gaussian_random", "truncated_gaussian_random")


def expected_distributed_mode(cfg: ClusterConfig) -> int:
    """listen_and_serv's distributed_mode: the classic transpiler knows only sync (0) and async
    (1), deriving it from sync_mode; Fleet has one per mode."""
    if cfg.traits.sync_mode_from_flag:
        return 0 if cfg.sync_mode else 1
    return mode_id(cfg.mode)


def check_stray_folders(ctx: CheckContext) -> None:
    """A pserver_* folder of the split that no endpoint of the config names."""
    for name in ctx.split.stray:
        ctx.add("listen", name, None, None,
                "folder %s matches no pserver of the cluster config" % name,
                "one of %s" % ", ".join(endpoint_dir(e) for e in ctx.config.pservers))


def check_listen(ctx: CheckContext) -> None:
    """listen_and_serv of every pserver (ctx.index read it: its grad keys, parameter blocks
    and the problems reading it showed)."""
    cfg = ctx.config
    check_stray_folders(ctx)
    ctx.findings.extend(ctx.index.findings_of("listen"))
    for ep in cfg.pservers:
        p = ctx.split.pservers.get(ep)
        if p is None:
            ctx.add("listen", endpoint_dir(ep), None, None,
                    "no program for pserver %s" % ep, "%s/main.pb" % endpoint_dir(ep))
            continue
        if not ctx.replay("listen", ep):
            listen_of(ctx, ep, p)


def listen_of(ctx: CheckContext, ep: str, p: dict) -> None:
    """The listen findings of pserver `ep` (its entry `p`), past what the index found."""
    if ep in ctx.index.listen:
        _check_listen_op(ctx, ep, p["main"])


def _check_listen_op(ctx: CheckContext, ep: str, part: Part) -> None:
    cfg = ctx.config
    j, op = ctx.index.listen[ep]
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
    for g, bi in ctx.grad_keys.get(ep, {}).items():
        if bi not in seen:
            ctx.add("listen", part, 0, j,
                    "grad_to_block_id sends %s to block %d, which optimize_blocks does not "
                    "list" % (g, bi), "block %d in optimize_blocks %s" % (bi, blocks))
    by_block: dict = {}
    for pb in ctx.param_blocks.get(ep, ()):
        by_block.setdefault(pb.block, []).append(pb.grad)
    for bi, grads in sorted(by_block.items()):
        if len(grads) > 1:
            ctx.add("listen", part, bi, None, "block %d optimizes several grads: %s"
                    % (bi, ", ".join(grads)), "one parameter block per optimize block")


def check_optimize(ctx: CheckContext) -> None:
    """The optimize blocks of every pserver and what its startup program declares for them."""
    cfg = ctx.config
    ctx.findings.extend(ctx.index.findings_of("optimize"))
    for ep in cfg.pservers:
        p = ctx.split.pservers.get(ep)
        if not p or ep not in ctx.param_blocks:
            continue
        if not ctx.replay("optimize", ep):
            optimize_of(ctx, ep, p)


def optimize_of(ctx: CheckContext, ep: str, p: dict) -> None:
    """The optimize findings of pserver `ep` (its entry `p`), past what the index found."""
    cfg = ctx.config
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
    dense = is_dense(pb.var)
    for slot, args in op.inputs.items():
        if slot in ("Param", "Grad", "LearningRate", "MasterParam") or slot.endswith("Pow"):
            continue
        outs = op.output(slot + "Out")
        for a in args:
            if a not in outs:
                continue
            v = var_in(prog, a, pb.block)
            want_acc[a] = (shape, pb, _accumulator_fault(op, slot))
            if dense and is_dense(v) and tuple(v.shape) != tuple(shape):
                ctx.add("optimize", part, 0, None,
                        "accumulator %s (%s of %s on %s) has shape %s%s"
                        % (a, slot, pb.param, op.type, fmt_shape(v.shape),
                           _accumulator_fault(op, slot)),
                        "%s, the shape of %s" % (fmt_shape(shape), pb.param))
    g = op.input("Grad")
    if g and dense:
        gv = var_in(prog, g[0], pb.block)
        gshape = None if gv is None else gv.shape
        if gshape != shape and is_dense(gv) and is_static(gshape) and \
                tuple(gshape) != tuple(shape):
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
    # (their VarTypes read, no Var made: thousands of vars per pserver, whose VarTypes are a
    # few per program, each pair of them compared once)
    main_vars = main.global_block.vars
    alike: dict = {}        # (id(startup VarType), id(main VarType)) -> nothing to say
    for name, t in name_types(sb.vars):
        mt = type_of(main_vars, name)
        if mt is None:
            continue
        pair = (id(t), id(mt))
        same = alike.get(pair)
        if same is None:
            same = alike[pair] = t.shape == mt.shape or \
                not (is_dense_type(t) and is_dense_type(mt))
        if same or name in want_acc:
            continue
        if tuple(t.shape) != tuple(mt.shape):
            fault = _whole_assign_fault(ctx, sb, name, t.shape)
            ctx.add("optimize", startup, 0, None,
                    "%s is declared %s here but %s in the main program%s"
                    % (name, fmt_shape(t.shape), fmt_shape(mt.shape),
                       " (Paddle fault %s: its assign_value assigns the whole parameter's "
                       "values to the block)" % fault if fault else ""),
                    "the same shape in main and startup", fault)


def _whole_assign_fault(ctx, sb, name: str, shape) -> str:
    """classic- / fleet-assign-init-whole-param when an assign_value of the startup block `sb`
    gives `name` the (whole parameter's) shape it is declared with, else ''."""
    if not any(op.type == "assign_value" and op.output("Out") == [name] and
               [int(d) for d in op.attr("shape") or ()] == [int(d) for d in shape]
               for op in sb.ops):
        return ""
    return next((f for f in (CLASSIC_ASSIGN_INIT_WHOLE_PARAM, FLEET_ASSIGN_INIT_WHOLE_PARAM)
                 if KIND[f].style == ctx.config.style), "")


def _check_initialised(ctx, startup: Part, pbs: list) -> None:
    """Every parameter block a pserver optimizes is written by its startup program."""
    written = all_names([op for _, _, op in startup.prog.ops()], "outputs")
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
    ops = part.prog.blocks[pb.block].ops
    n = ctx.config.trainers
    grad, want = pb.grad, [pb.grad]
    # the merging sum reads the per-trainer copies, not its own output (an L2Decay sum does):
    # the first before the optimizer op (ops looked at one by one: one block of the tens of
    # thousands of a large split, whose sum is its first op)
    end = min(pb.op_idx, len(ops))
    sj = -1
    for j in range(end):
        op = ops[j]
        if op.type == "sum" and op.output("Out") == want and grad not in op.input("X"):
            sj, sop = j, op
            break
    if sj < 0:
        ctx.add("optimize", part, pb.block, pb.op_idx,
                "the grads of %s from the %d trainers are never summed" % (pb.param, n),
                "sum(X=[%s.trainer_0, ...]) -> %s" % (pb.grad, pb.grad))
        return
    if len(sop.input("X")) != n:
        ctx.add("optimize", part, pb.block, sj,
                "sum merges %d grads into %s" % (len(sop.input("X")), pb.grad),
                "one per trainer: %d" % n)
    for j in range(sj + 1, end):
        sc = ops[j]
        if sc.type == "scale" and sc.input("X") == want:
            break
    else:
        ctx.add("optimize", part, pb.block, pb.op_idx,
                "the merged grad %s is not averaged: no scale between sum and %s"
                % (pb.grad, pb.op.type),
                "scale(X=%s, scale=%g) before %s" % (pb.grad, 1.0 / n, pb.op.type))
        return
    # (the scale ops of a pserver's blocks mostly hold the same attr: decoded once)
    s = shared_attr(sc, "scale")
    if s is None or not math.isclose(float(s), 1.0 / n, rel_tol=1e-5):
        ctx.add("optimize", part, pb.block, j, "scale %s averages %s" % (s, pb.grad),
                "scale = 1/trainers = %g" % (1.0 / n))


# _readers' value for a var that several ops read
_MANY = "several ops"


def _readers(ctx, part) -> dict:
    """{var name: the (block, op index) of the one op that reads it, or _MANY} over the
    reachable blocks of a program; built once per program, for all of its optimize blocks
    (no set per name: a pserver's program reads thousands)."""
    prog = part.prog
    readers: dict = {}
    get = readers.get
    for bi in ctx.reach.get(part.name, ()):
        for j, op in enumerate(prog.blocks[bi].ops):
            at = (bi, j)
            for args in op.inputs.values():
                for a in args:
                    if a:
                        r = get(a)
                        if r is None:
                            readers[a] = at
                        elif r is not _MANY and r != at:
                            readers[a] = _MANY
    return readers


def _check_dead_ops(ctx, part, pb: ParamBlock, block, readers: dict) -> None:
    """An op in an optimize block whose result no other op reads does nothing (Paddle's L2Decay
    + clip chain wired past the optimizer, say). `readers`: _readers of the program."""
    get = readers.get
    for j, op in enumerate(block.ops):
        if j == pb.op_idx or not op.outputs or is_update_op(op):
            continue
        outs = output_names(op)
        if not outs:
            continue
        here = (pb.block, j)
        # (_read_by_others inlined: every op of tens of thousands of blocks)
        for o in outs:
            r = get(o)
            if r is not None and (r is _MANY or r != here):
                break
        else:
            reads = pb.op.input("Grad") or [pb.grad]
            if op.type in GLOBAL_NORM_OPS and ctx.config.traits.sliced_by_config:
                # a global-norm clip's piece: the norm it feeds is summed on another pserver
                ctx.add("optimize", part, pb.block, j,
                        "Paddle fault %s: %s writes %s, which no op of this pserver reads: "
                        "the global norm it is a part of is computed elsewhere, if at all"
                        % (CLASSIC_CLIP_ON_PSERVER, op.type, ", ".join(outs)),
                        "a global norm of every gradient", fault=CLASSIC_CLIP_ON_PSERVER)
                continue
            ctx.add("optimize", part, pb.block, j,
                    "%s writes %s, which nothing reads: %s reads %s instead%s"
                    % (op.type, ", ".join(outs), pb.op.type, reads[0],
                       " (Paddle fault classic-unwired-grad-chain)"
                       if ctx.config.traits.sliced_by_config else ""),
                    "%s reads the result (%s)" % (pb.op.type, outs[0]))

