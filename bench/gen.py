#!/usr/bin/env python3
"""Generate large, realistic Paddle training programs (ProgramDesc bytes) without Paddle.

    python bench/gen.py --kind mlp|ctr --ops N --optimizer sgd|momentum|adam [--lr-decay] --out DIR

writes DIR/main.pb, DIR/startup.pb, DIR/info.json and the cluster configs
DIR/cluster_p{2,16,64}_{fleet,classic,ps}.yaml (sync mode, 2 trainers).

The programs imitate what Paddle 2.6 writes after `optimizer.minimize(loss)` (compare with
/work/shared/corpus-perf): the same op types, slot names, attr names, attr types and attr order
(extra attrs first, then the rest sorted), op_role / op_role_var / op_namescope / op_callstack on
every op, vars sorted by name with Paddle's flags, grad ops in reverse order with op_role_var
pairs, one optimizer op per parameter (sorted by parameter name) with its accumulators
(persistable, initialised in startup), the learning-rate var, and optionally an exponential
LR decay on the @LR_DECAY_COUNTER@ global step (op_role LRSched) as Paddle emits it.

Kinds:
  mlp  a deep MLP: x -> L x fc(relu) -> fc(1) -> square_error_cost -> mean
  ctr  CTR-style: S sparse id slots, each lookup_table(_v2) (is_sparse, SELECTED_ROWS grad) +
       sequence_pool(SUM), concat, an MLP tower, fc(2), softmax_with_cross_entropy, mean

The op count is reached within a few ops (the model is made of fixed-size pieces). Everything
is deterministic given --seed (layer widths, vocabulary sizes, callstack line numbers).
Generation goes through the project's model (transpile.ir.program) and its writer
(transpile.format.programio), so the bytes are exactly what the project writes (and a
decode/encode round trip is byte-identical). The op and var vocabulary is gen_ops.py, the
callstacks gen_callstacks.py, the program builder gen_builder.py; this module has the two kinds,
the API and the command line.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _path in (ROOT, HERE):          # the project, and the gen_*.py modules beside this one
    if _path not in sys.path:
        sys.path.insert(0, _path)

from gen_builder import Builder  # noqa: E402
from gen_ops import BACKWARD, B_TRUE, FORWARD, LOSS, make_op, v_feed, v_tmp  # noqa: E402
from transpile.format import programio  # noqa: E402
from transpile.ir.program import Program, Var  # noqa: E402


# ---------------------------------------------------------------------------------------------
# the two kinds

MLP_FIXED = 7            # sub, square, mean, fill_constant, mean/square/sub grads
MLP_PER_LAYER = 8        # mul add relu, 3 grads, 2 optimizer ops
MLP_LAST = 6             # mul add, 2 grads, 2 optimizer ops
LR_OPS = 7               # increment, cast, scale, floor, fill_constant, elementwise_pow, scale
CTR_FIXED = 7 + 2        # softmax_ce, mean x2, fill_constant, 3 grads; concat + concat_grad
CTR_PER_SLOT = 5         # lookup, pool, 2 grads, 1 optimizer op


def plan_mlp(ops: int, lr_decay: bool) -> int:
    """Hidden layers so that the main program has about `ops` ops."""
    fixed = MLP_FIXED + MLP_LAST + (LR_OPS if lr_decay else 0)
    return max(1, round((ops - fixed) / MLP_PER_LAYER))


def plan_ctr(ops: int, lr_decay: bool, slots: int | None, slot_share: float) -> tuple:
    fixed = CTR_FIXED + MLP_LAST + (LR_OPS if lr_decay else 0)
    if slots is None:
        slots = max(1, round(ops * slot_share / CTR_PER_SLOT))
    layers = max(1, round((ops - fixed - CTR_PER_SLOT * slots) / MLP_PER_LAYER))
    return slots, layers


def build_mlp(args) -> tuple:
    b = Builder("mlp", args.optimizer, args.lr_decay, args.seed, args.callstack, args.lr)
    layers = plan_mlp(args.ops, args.lr_decay)
    w = args.width
    choices = [w, w, w, max(1, w // 2), w * 2]
    widths = [b.rng.choice(choices) for _ in range(layers)]
    x = b.var(v_feed("x", (-1, w)))
    y = b.var(v_feed("y", (-1, 1)))
    pred, backs = b.mlp_tower(x, w, widths, 1, x_needs_grad=False)
    # square_error_cost + mean
    d = b.var(v_tmp("square_error_cost_0.tmp_0", (-1, 1)))
    sq = b.var(v_tmp("square_error_cost_0.tmp_1", (-1, 1)))
    loss = b.var(Var.tensor("mean_0.tmp_0", "FP32", (), lod_level=None, persistable=False,
                            stop_gradient=False))
    cs_sub, cs_sq, cs_mean = b.cs.get("loss.sub"), b.cs.get("loss.square"), b.cs.get("mean")
    fwd = [make_op("elementwise_sub", {"X": [pred], "Y": [y]}, {"Out": [d]}, role=FORWARD,
                   callstack=cs_sub),
           make_op("square", {"X": [d]}, {"Out": [sq]}, role=FORWARD, callstack=cs_sq),
           make_op("reduce_mean", {"X": [sq]}, {"Out": [loss]}, role=LOSS, callstack=cs_mean)]
    lg = loss + "@GRAD"
    bwd = [make_op("reduce_mean_grad", {"Out@GRAD": [lg], "X": [sq]},
                   {"X@GRAD": [b.grad_of(sq)]}, role=BACKWARD, callstack=cs_mean),
           make_op("square_grad", {"Out@GRAD": [b.grad_of(sq)], "X": [d]},
                   {"X@GRAD": [b.grad_of(d)]}, role=BACKWARD, callstack=cs_sq),
           make_op("elementwise_sub_grad", {"Out@GRAD": [b.grad_of(d)], "X": [pred], "Y": [y]},
                   {"X@GRAD": [b.grad_of(pred)]}, role=BACKWARD, callstack=cs_sub)]
    for i, bk in reversed(list(enumerate(backs))):
        b.bwd += bk(x_needs_grad=i > 0)
    info = {"hidden_layers": layers, "width": w}
    return b.finish(fwd, lg, bwd) + (info,)


def build_ctr(args) -> tuple:
    b = Builder("ctr", args.optimizer, args.lr_decay, args.seed, args.callstack, args.lr)
    slots, layers = plan_ctr(args.ops, args.lr_decay, args.slots, args.slot_share)
    dim = args.emb_dim
    vocabs = [b.rng.choice([1000, 10000, 100000, 100000, 1000000]) if args.vocab is None
              else args.vocab for _ in range(slots)]
    table = "lookup_table" if args.table == "v1" else "lookup_table_v2"
    tattrs = {"is_distributed": B_TRUE} if args.distributed else None
    cs_emb, cs_pool = b.cs.get("embedding"), b.cs.get("sequence_pool")
    pools, emb_backs = [], []
    for i in range(slots):
        ids = b.var(v_feed("slot_%d" % i, (-1, 1), "INT64", lod=1))
        w = b.param("emb_%d" % i, (vocabs[i], dim), "init.emb", sparse=True)
        e = b.var(v_tmp("embedding_%d.tmp_0" % i, (-1, 1, dim), lod=1))
        p = b.var(v_tmp("sequence_pool_%d.tmp_0" % i, (-1, 1, dim)))
        mi = b.var(Var.tensor("sequence_pool_%d.tmp_1" % i, "FP32", (), lod_level=None,
                              persistable=False, stop_gradient=False))
        b.fwd.append(make_op(table, {"Ids": [ids], "W": [w]}, {"Out": [e]}, role=FORWARD,
                             callstack=cs_emb, attrs=tattrs))
        b.fwd.append(make_op("sequence_pool", {"X": [e]}, {"MaxIndex": [mi], "Out": [p]},
                             role=FORWARD, callstack=cs_pool))
        pools.append(p)
        emb_backs.append((ids, w, e, p))
    label = b.var(v_feed("label", (-1, 1), "INT64"))
    cat = b.var(v_tmp("concat_0.tmp_0", (-1, slots, dim)))
    cs_cat = b.cs.get("concat")
    b.fwd.append(make_op("concat", {"X": list(pools)}, {"Out": [cat]}, role=FORWARD,
                         callstack=cs_cat))
    hidden = args.width
    choices = [hidden, hidden, max(1, hidden // 2)]
    widths = [b.rng.choice(choices) for _ in range(layers)]
    logits, backs = b.mlp_tower(cat, slots * dim, widths, 2, x_needs_grad=True)
    sm = b.var(v_tmp("softmax_with_cross_entropy_0.tmp_0", (-1, 2)))
    ce = b.var(v_tmp("softmax_with_cross_entropy_0.tmp_1", (-1, 1)))
    m0 = b.var(Var.tensor("mean_0.tmp_0", "FP32", (), lod_level=None, persistable=False,
                          stop_gradient=False))
    m1 = b.var(Var.tensor("mean_1.tmp_0", "FP32", (), lod_level=None, persistable=False,
                          stop_gradient=False))
    cs_ce, cs_m0, cs_m1 = b.cs.get("softmax_ce"), b.cs.get("mean.0"), b.cs.get("mean.1")
    fwd = [make_op("softmax_with_cross_entropy", {"Label": [label], "Logits": [logits]},
                   {"Loss": [ce], "Softmax": [sm]}, role=FORWARD, callstack=cs_ce),
           make_op("reduce_mean", {"X": [ce]}, {"Out": [m0]}, role=FORWARD, callstack=cs_m0),
           make_op("reduce_mean", {"X": [m0]}, {"Out": [m1]}, role=LOSS, callstack=cs_m1)]
    lg = m1 + "@GRAD"
    bwd = [make_op("reduce_mean_grad", {"Out@GRAD": [lg], "X": [m0]},
                   {"X@GRAD": [b.grad_of(m0)]}, role=BACKWARD, callstack=cs_m1),
           make_op("reduce_mean_grad", {"Out@GRAD": [b.grad_of(m0)], "X": [ce]},
                   {"X@GRAD": [b.grad_of(ce)]}, role=BACKWARD, callstack=cs_m0),
           make_op("softmax_with_cross_entropy_grad",
                   {"Label": [label], "Loss@GRAD": [b.grad_of(ce)], "Softmax": [sm]},
                   {"Logits@GRAD": [b.grad_of(logits)]}, role=BACKWARD, callstack=cs_ce)]
    # as Paddle has them: the grad of a scalar mean made by reduce_mean_grad has lod_level 0,
    # the logits grad made by softmax_with_cross_entropy_grad has none
    b.main_vars[m0 + "@GRAD"] = Var.tensor(m0 + "@GRAD", "FP32", (), lod_level=0,
                                           stop_gradient=False)
    lv = b.main_vars[logits + "@GRAD"]
    b.main_vars[logits + "@GRAD"] = Var.tensor(lv.name, "FP32", lv.shape, lod_level=None,
                                               stop_gradient=False)
    for bk in reversed(backs):
        b.bwd += bk(x_needs_grad=True)
    b.bwd.append(make_op("concat_grad", {"Out@GRAD": [b.grad_of(cat)], "X": list(pools)},
                         {"X@GRAD": [b.grad_of(p) for p in pools]}, role=BACKWARD,
                         callstack=cs_cat))
    for ids, w, e, p in reversed(emb_backs):
        b.bwd.append(make_op("sequence_pool_grad", {"Out@GRAD": [b.grad_of(p)], "X": [e]},
                             {"X@GRAD": [b.grad_of(e)]}, role=BACKWARD, callstack=cs_pool))
        b.bwd.append(make_op(table + "_grad",
                             {"Ids": [ids], "Out@GRAD": [b.grad_of(e)], "W": [w]},
                             {"W@GRAD": [w + "@GRAD"]}, role=BACKWARD,
                             role_var=(w, w + "@GRAD"), callstack=cs_emb, attrs=tattrs))
    info = {"slots": slots, "hidden_layers": layers, "width": hidden, "emb_dim": dim,
            "table": table, "is_distributed": bool(args.distributed)}
    return b.finish(fwd, lg, bwd) + (info,)


# ---------------------------------------------------------------------------------------------
# API and CLI

def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        prog="gen.py", description="Generate a large realistic Paddle training program "
        "(main.pb, startup.pb, cluster configs) without Paddle.")
    ap.add_argument("--kind", choices=["mlp", "ctr"], required=True)
    ap.add_argument("--ops", type=int, required=True, help="ops in the main program (about)")
    ap.add_argument("--optimizer", choices=["sgd", "momentum", "adam"], default="sgd")
    ap.add_argument("--lr-decay", action="store_true",
                    help="exponential LR decay on @LR_DECAY_COUNTER@ (op_role LRSched)")
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=None,
                    help="learning rate (default 0.01 sgd/momentum, 0.001 adam)")
    ap.add_argument("--width", type=int, default=None,
                    help="layer width (default 512 mlp, 400 ctr); hidden layers vary around it")
    ap.add_argument("--slots", type=int, default=None, help="ctr: sparse slots (default: "
                    "--slot-share of the ops)")
    ap.add_argument("--slot-share", type=float, default=0.5,
                    help="ctr: share of the ops spent on the sparse slots (default 0.5)")
    ap.add_argument("--emb-dim", type=int, default=16, help="ctr: embedding width")
    ap.add_argument("--vocab", type=int, default=None,
                    help="ctr: rows of every table (default: 1k..1M, chosen by the seed)")
    ap.add_argument("--table", choices=["v1", "v2"], default="v2",
                    help="ctr: lookup_table (v1) or lookup_table_v2 (default)")
    ap.add_argument("--distributed", action="store_true",
                    help="ctr: tables is_distributed=True")
    ap.add_argument("--callstack", choices=["full", "short", "none"], default="full",
                    help="op_callstack: full tracebacks like Paddle (default), the last 3 "
                         "frames, or empty lists")
    ap.add_argument("--no-configs", action="store_true", help="skip the cluster configs")
    args = ap.parse_args(argv)
    if args.ops < 1:
        ap.error("--ops must be >= 1")
    if args.lr is None:
        args.lr = 0.001 if args.optimizer == "adam" else 0.01
    if args.width is None:
        args.width = 512 if args.kind == "mlp" else 400
    return args


def generate(args) -> tuple:
    """(main Program, startup Program, info dict) for parsed args."""
    return build_mlp(args) if args.kind == "mlp" else build_ctr(args)


def generate_programs(kind: str, ops: int, optimizer: str = "sgd", lr_decay: bool = False,
                      seed: int = 0, **kw) -> tuple:
    """Python API: (main, startup, info). Keyword args as the CLI's long options."""
    argv = ["--kind", kind, "--ops", str(ops), "--optimizer", optimizer, "--out", "-",
            "--seed", str(seed)]
    if lr_decay:
        argv.append("--lr-decay")
    for k, v in kw.items():
        opt = "--" + k.replace("_", "-")
        if v is True:
            argv.append(opt)
        elif v not in (None, False):
            argv += [opt, str(v)]
    return generate(parse_args(argv))


PSERVER_COUNTS = (2, 16, 64)
STYLES = ("fleet", "classic", "ps")


def cluster_yaml(n: int, style: str, trainers: int = 2) -> str:
    eps = ", ".join('"127.0.0.1:%d"' % (6174 + i) for i in range(n))
    return "pservers: [%s]\ntrainers: %d\nmode: sync\nstyle: %s\n" % (eps, trainers, style)


def write(args, main: Program, startup: Program, info: dict, t0: float) -> dict:
    """Write the programs, the cluster configs and info.json (seconds since t0 included)."""
    os.makedirs(args.out, exist_ok=True)
    mb, sb = programio.to_bytes(main), programio.to_bytes(startup)
    programio.write_atomic(os.path.join(args.out, "main.pb"), mb)
    programio.write_atomic(os.path.join(args.out, "startup.pb"), sb)
    if not args.no_configs:
        for n in PSERVER_COUNTS:
            for style in STYLES:
                with open(os.path.join(args.out, "cluster_p%d_%s.yaml" % (n, style)), "w") as f:
                    f.write(cluster_yaml(n, style))
    types: dict = {}
    for op in main.global_block.ops:
        types[op.type] = types.get(op.type, 0) + 1
    info = dict({"kind": args.kind, "optimizer": args.optimizer, "lr_decay": args.lr_decay,
                 "seed": args.seed, "callstack": args.callstack, "ops_requested": args.ops,
                 "ops_main": len(main.global_block.ops),
                 "ops_startup": len(startup.global_block.ops),
                 "vars_main": len(main.global_block.vars), "params": len(main.parameters()),
                 "bytes_main": len(mb), "bytes_startup": len(sb),
                 "generate_seconds": round(time.perf_counter() - t0, 3),
                 "op_types_main": types},
                **info)
    with open(os.path.join(args.out, "info.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    return info


def main(argv=None) -> int:
    args = parse_args(argv)
    # millions of small, long-lived objects: the cyclic GC would rescan them again and again
    # (paused only while generating: a caller in the same process gets its collector back)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        t = time.perf_counter()
        main_prog, startup, info = generate(args)
        info = write(args, main_prog, startup, info, t)
    finally:
        if was_enabled:
            gc.enable()
    seconds = time.perf_counter() - t
    print("%s: %s, %d ops (%d params), main %.1f MB, startup %.1f MB, %.1fs"
          % (args.out, args.kind, info["ops_main"], info["params"], info["bytes_main"] / 1e6,
             info["bytes_startup"] / 1e6, seconds), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
