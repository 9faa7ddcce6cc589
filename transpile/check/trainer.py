"""The trainer checks: what each trainer sends and receives, and what it must no longer do.

  send / recv every grad a trainer sends reaches the endpoint that optimizes it under a name that
              endpoint knows; every received parameter block exists where it is received from;
              every optimized block is fed and read back. Classic splits say this with
              send/recv ops (epmap), fleet splits with runtime.json's send_ctx/recv_ctx;
  trainer     no optimizer op left on the trainer (except geo mode); sync mode has its barriers.

These run last: they read the parameter blocks and grad_to_block_id keys the pserver checks
collected in the context.
"""
from __future__ import annotations

from array import array
from sys import intern

from ..ir.program import Program
from ..ir import roles
from .context import CheckContext
from .edges import Edge, EdgeRuns, edges_from_ctx, edges_from_ops
from .inputs import sparse_numbers
from .loading import Part
from .ops import BLOCK_SUFFIX, is_dense, is_update_op
from .transfer import check_transfer_shape, sent_key, strip_peer, target_of

_RPC_TRAINER_ID_OPS = ("send", "recv", "send_barrier", "fetch_barrier")


def _where_optimized(ctx, names: list) -> list:
    """(endpoint, name) for each of `names` some pserver's grad_to_block_id knows."""
    where = ctx.grad_endpoints()
    return [(ep, n) for n in names for ep in where.get(n, ())]


def check_trainers(ctx: CheckContext) -> None:
    """Every trainer of the split: its ops, its sends and recvs, its barriers."""
    _no_trainers(ctx)
    for tid in sorted(ctx.split.trainers):
        recvs = _trainer_sends(ctx, tid)
        _trainer_recvs(ctx, tid, recvs)


def trainer_half(ctx: CheckContext, half: int) -> list:
    """One half of check_trainers, what it finds collected apart: [(findings, warnings) of
    the split as a whole, then of each trainer in id order]. Half 0 is each trainer's ops,
    edges and sends, half 1 its recvs and barriers (the edges read again, their findings
    being half 0's): two processes can each run one (most of the time goes to the sends and
    the recvs), and `joined` puts what they found in check_trainers' order."""
    out = []
    with ctx.collecting() as got:
        if half == 0:
            _no_trainers(ctx)
    out.append(got)
    for tid in sorted(ctx.split.trainers):
        with ctx.collecting() as got:
            if half == 0:
                _trainer_sends(ctx, tid)
            else:
                with ctx.collecting():
                    recvs = _edges(ctx, tid, sends=False)[1]
                _trainer_recvs(ctx, tid, recvs)
        out.append(got)
    return out


def joined(first: list, second: list) -> tuple[list, list]:
    """(findings, warnings) of trainer_half 0 and 1 in check_trainers' order."""
    found: list = []
    warned: list = []
    for a, b in zip(first, second):
        found += a[0] + b[0]
        warned += a[1] + b[1]
    return found, warned


def _no_trainers(ctx: CheckContext) -> None:
    if not ctx.split.trainers:
        cfg = ctx.config
        ctx.add("trainer", "split", None, None, "no trainer program in the split",
                "trainer_<id>/main.pb for an id in 0..%d" % (cfg.trainers - 1))


def _trainer_sends(ctx: CheckContext, tid: int) -> EdgeRuns:
    """Trainer `tid`'s ops, the edges of its sends and recvs, its sends; its recv edges."""
    cfg = ctx.config
    t = ctx.split.trainers[tid]
    main = t["main"]
    if tid >= cfg.trainers:
        ctx.add("trainer", main, None, None,
                "trainer id %d, but the cluster has %d trainers" % (tid, cfg.trainers),
                "ids 0..%d" % (cfg.trainers - 1))
    _check_trainer_ops(ctx, tid, main)
    sends, recvs = _edges(ctx, tid)
    if cfg.traits.runtime_json and t.get("runtime") is not None:
        _check_send_ops_vs_ctx(ctx, main, t["runtime"], _runtime_name(main))
    _check_sends(ctx, tid, main, sends)
    return recvs


def _trainer_recvs(ctx: CheckContext, tid: int, recvs: EdgeRuns) -> None:
    """Trainer `tid`'s recvs (`recvs`: their edges) and barriers."""
    main = ctx.split.trainers[tid]["main"]
    # trainers with runtime.json receive by its recv_ctx (the communicator's), not by recv ops
    by_ctx = ctx.config.traits.runtime_json
    _check_recvs(ctx, tid, main, recvs, by_ctx)
    _check_barriers(ctx, main, by_ctx)
    _let_edges_go(ctx, tid)     # (their last reader: the later checks read none)


def _runtime_name(main: Part) -> str:
    return main.name.split("/")[0] + "/runtime.json"


def _edges(ctx: CheckContext, tid: int, sends: bool = True) -> tuple[EdgeRuns, EdgeRuns]:
    """The (sends, recvs) edges of trainer `tid`, from runtime.json's contexts in fleet style
    (a missing runtime.json is a finding), from its send and recv ops otherwise; `sends`
    False: the recvs' only (the send edges left empty). Each kind is read once and kept
    until the trainer checks are done with it (tens of thousands at 64 pservers: the sends
    are read for streamed_edges and kept, the recvs read again for the trainer checks), what
    reading them finds said again at each call."""
    t = ctx.split.trainers[tid]
    by_ctx = ctx.config.traits.runtime_json
    rt = t.get("runtime")
    if by_ctx and rt is None:
        ctx.add("send", _runtime_name(t["main"]), None, None,
                "no runtime.json", "the communicator's send_ctx and recv_ctx "
                "(fleet style)")
        return EdgeRuns(), EdgeRuns()

    def send_edges(edges):
        if by_ctx:
            edges_from_ctx(ctx, _runtime_name(t["main"]), rt, "send_ctx", edges)
        else:
            edges_from_ops(ctx, t["main"], "send", "X", edges)

    def recv_edges(edges):
        if by_ctx:
            edges_from_ctx(ctx, _runtime_name(t["main"]), rt, "recv_ctx", edges)
            return
        edges_from_ops(ctx, t["main"], "recv", "Out", edges)
        if t["startup"] is not None:
            edges_from_ops(ctx, t["startup"], "recv", "Out", edges)
    out = _kept_edges(ctx, ("send_edges", tid), send_edges) if sends else EdgeRuns()
    return out, _kept_edges(ctx, ("recv_edges", tid), recv_edges)


def _kept_edges(ctx: CheckContext, key: tuple, read) -> EdgeRuns:
    """The edges `read(edges)` adds to an EdgeRuns, read once and kept as memo `key`, with
    the findings and warnings reading them made (added again at each call)."""
    def made():
        edges = EdgeRuns()
        with ctx.collecting() as got:
            read(edges)
        return edges, got
    edges, got = ctx.memo(key, made)
    ctx.findings.extend(got[0])
    ctx.warnings.extend(got[1])
    return edges


def _let_edges_go(ctx: CheckContext, tid: int, kinds=("send_edges", "recv_edges")) -> None:
    for kind in kinds:
        ctx.forget((kind, tid))


def _check_trainer_ops(ctx, tid, part: Part) -> None:
    prog = part.prog
    for bi in sorted(ctx.reach.get(part.name, {0})):
        for j, op in enumerate(prog.blocks[bi].ops):
            if not ctx.geo and (roles.is_optimize_op(op) or is_update_op(op)):
                ctx.add("trainer", part, bi, j,
                        "the trainer keeps optimizer op %s for %s"
                        % (op.type, ", ".join(op.input("Param")) or "?"),
                        "no optimizer op on the trainer (the pservers update the parameters)")
            if op.type in _RPC_TRAINER_ID_OPS and op.has_attr("trainer_id") and \
                    op.attr("trainer_id") != tid:
                ctx.add("trainer", part, bi, j, "%s has trainer_id %s" % (op.type,
                                                                         op.attr("trainer_id")),
                        "trainer_id %d" % tid)


def _check_send_ops_vs_ctx(ctx, part: Part, rt: dict, rt_name: str) -> None:
    send_ctx = rt.get("send_ctx") or {}
    sent = set()
    prog = part.prog
    for bi in sorted(ctx.reach.get(part.name, {0})):
        for j, op in enumerate(prog.blocks[bi].ops):
            if op.type != "send":
                continue
            for n in op.attr("send_varnames") or []:
                sent.add(n)
                if n not in send_ctx:
                    ctx.add("send", part, bi, j,
                            "send names %s, which runtime.json's send_ctx does not list" % n,
                            "a send_ctx entry for %s" % n)
    # a push sends to the sparse context its table_id numbers (runtime.json's order; a
    # number naming another table's context is a finding of inputs.py), or, without one, to
    # the context of the grad it names as the backward pass named its first part
    # (`<table>@GRAD@RENAME@block0@0` where several lookups summed into it)
    numbers = sparse_numbers(send_ctx)
    pushed = set()
    for bi in sorted(ctx.reach.get(part.name, {0})):
        for op in prog.blocks[bi].ops:
            if op.type == "distributed_push_sparse":
                pushed.update(n.split("@RENAME@")[0] for n in op.input("W"))
                if op.attr("table_id") is not None and int(op.attr("table_id")) in numbers:
                    pushed.add(numbers[int(op.attr("table_id"))])
    for var, c in send_ctx.items():
        if not isinstance(c, dict) or var in sent:
            continue
        if c.get("is_tensor_table"):
            # the step counter: async and geo trainers name it in a send (Fleet's sync and
            # half_async trainers drop it, and with it the LR decay's global step in sync: a
            # Paddle fault, not a finding)
            if ctx.config.mode in ("async", "geo"):
                ctx.add("send", part, None, None,
                        "the trainer never sends the step counter %s: no send op names it "
                        "(runtime.json send_ctx lists it)" % var,
                        "a send op with send_varnames [%s]" % var)
            continue
        if ctx.geo and not c.get("is_sparse"):
            continue    # geo: the communicator pushes dense deltas itself
        if c.get("is_sparse") and not ctx.geo:
            if var not in pushed:
                ctx.add("send", part, None, None,
                        "the trainer never sends the sparse grad %s: no send op names it and "
                        "no distributed_push_sparse pushes it (runtime.json send_ctx lists it)"
                        % var, "a distributed_push_sparse of %s, or a send op with "
                        "send_varnames [%s]" % (var, var))
            continue
        ctx.add("send", part, None, None,
                "the trainer never sends %s%s: no send op names it (runtime.json send_ctx "
                "lists it)" % ("the sparse table delta " if ctx.geo else "", var),
                "a send op with send_varnames [%s]" % var)


def _check_sends(ctx, tid, main: Part, sends: EdgeRuns) -> None:
    cfg = ctx.config
    fed: dict = {}      # endpoint -> the grad keys sent to it (a set of names per endpoint)
    known = set(cfg.pservers)
    for i, e in enumerate(sends):
        if e.name.startswith("__control_var@"):
            continue
        if e.endpoint not in known:
            ctx.add("send", e.part, e.block, e.op,
                    "sends %s to %s, which is not a pserver of the cluster" % (e.name,
                                                                              e.endpoint),
                    "one of %s" % ", ".join(cfg.pservers))
            continue
        keys = ctx.grad_keys.get(e.endpoint)
        if keys is None:
            continue        # that pserver's program is missing or broken: reported there
        if e.counter:
            _target(ctx, tid, i, e)
            continue
        key = sent_key(keys, e)
        if key is None:
            elsewhere = _where_optimized(ctx, strip_peer(e.name))
            if elsewhere:
                ctx.add("send", e.part, e.block, e.op,
                        "sends %s to %s, but %s optimizes it" % (e.name, e.endpoint,
                                                                 elsewhere[0][0]),
                        "endpoint %s" % elsewhere[0][0])
            else:
                ctx.add("send", e.part, e.block, e.op,
                        "sends %s to %s, whose grad_to_block_id does not know it"
                        % (e.name, e.endpoint),
                        "a grad %s optimizes (%s)" % (e.endpoint,
                                                      ctx.grad_key_list(e.endpoint)))
            continue
        fed.setdefault(e.endpoint, set()).add(intern(key))    # (strip_peer's are new strings)
        _target(ctx, tid, i, e)
    if ctx.geo:
        return
    for ep in cfg.pservers:
        got = fed.get(ep, ())
        for pb in ctx.param_blocks.get(ep, ()):
            if pb.grad not in got:
                ctx.add("send", main, None, None,
                        "trainer %d never sends %s to %s (block %d optimizes %s with it)"
                        % (tid, pb.grad, ep, pb.block, pb.param or "?"),
                        "a send of %s%s to %s" % (pb.grad, ".trainer_%d" % tid
                                                  if cfg.sync_mode and cfg.trainers > 1
                                                  else "", ep))


def _target(ctx, tid: int, i: int, e: Edge) -> None:
    """What send `i` of trainer `tid` meets at its pserver (transfer.target_of): found then
    by a streamed check, which asks it while that pserver's programs are read (stream.py),
    else now."""
    if ctx.targets_read:
        ctx.replay("send_target", (tid, i))
    else:
        target_of(ctx, e)


def streamed_edges(ctx: CheckContext) -> tuple[dict, set]:
    """What a streamed check needs of every trainer's edges while it reads the pservers
    (stream.py): endpoint -> [(trainer id, its send edges, the indexes among them (an
    array) of its sends to that pserver)] for the pservers of the split, the edges numbered
    as the trainer checks number them (sends_to lists them), and the names received (what
    the recv checks ask a pserver's summary: pssummary.for_recvs). What reading the edges
    finds is let go: the trainer checks find it again."""
    targets: dict = {}
    received: set = set()
    pservers = ctx.split.pservers
    with ctx.collecting():
        for tid in sorted(ctx.split.trainers):
            sends, recvs = _edges(ctx, tid)
            at: dict = {}
            for i, (_, ep, _) in enumerate(sends.heads()):
                if ep in pservers:
                    at.setdefault(ep, array("q")).append(i)
            for ep, indexes in at.items():
                targets.setdefault(ep, []).append((tid, sends, indexes))
            received.update(name for name, _, _ in recvs.heads())
            _let_edges_go(ctx, tid, ("recv_edges",))    # (the sends are held in `targets`)
    # (a frozenset: half the table the set grew to, held while the pservers are read)
    return targets, frozenset(received)


def sends_to(targets: list):
    """(trainer id, the edge's index among its sends, edge) of each send of streamed_edges'
    `targets` of one endpoint, in order."""
    for tid, sends, indexes in targets:
        for i in indexes:
            yield tid, i, sends.edge(i)


def _check_recvs(ctx, tid, main: Part, recvs: EdgeRuns, by_ctx: bool) -> None:
    cfg = ctx.config
    held = _held(ctx)
    known = set(cfg.pservers)
    for e in recvs:
        if e.endpoint not in known:
            ctx.add("recv", e.part, e.block, e.op,
                    "receives %s from %s, which is not a pserver of the cluster"
                    % (e.name, e.endpoint), "one of %s" % ", ".join(cfg.pservers))
            continue
        if e.endpoint not in ctx.split.pservers:
            continue
        pb = held.get(e.endpoint, {}).get(e.name)
        if pb is None:
            others = [ep for ep in cfg.pservers if e.name in held.get(ep, ())]
            if others:
                ctx.add("recv", e.part, e.block, e.op,
                        "receives %s from %s, but %s holds it" % (e.name, e.endpoint,
                                                                 others[0]),
                        "endpoint %s" % others[0])
            elif e.name not in ctx.pserver_summary(e.endpoint).persistable:
                ctx.add("recv", e.part, e.block, e.op,
                        "receives %s from %s, which has no such parameter block"
                        % (e.name, e.endpoint),
                        "a parameter block %s optimizes" % e.endpoint)
            continue
        if pb.sparse or not is_dense(pb.var):
            continue
        check_transfer_shape(ctx, "recv", e, pb)
    # every dense parameter block must come back to the trainer's main program
    got = _received(main, recvs, by_ctx)
    looked_up = _looked_up_params(main.prog)
    for ep in cfg.pservers:
        for pb in ctx.param_blocks.get(ep, ()):
            if pb.param is None or pb.sparse or pb.var is None or not is_dense(pb.var):
                continue
            if looked_up and (pb.param in looked_up or _origin_in(pb.param, looked_up)):
                continue
            eps = got.get(pb.param, ())
            if not (eps == ep if eps.__class__ is str else ep in eps):
                ctx.add("recv", main, None, None,
                        "trainer %d never receives %s from %s" % (tid, pb.param, ep),
                        "a %s of %s from %s" % ("recv_ctx entry" if by_ctx else "recv",
                                                pb.param, ep))


def _received(main: Part, recvs: EdgeRuns, by_ctx: bool) -> dict:
    """name -> the endpoint the trainer's main program receives it from (the recv edges of
    `main`, all of them `by_ctx`), or the set of them where there are more: one dict, not a
    set of names per endpoint (tens of thousands of slices at 64 pservers)."""
    got: dict = {}
    for name, ep, part in recvs.heads():
        if part == main.name or by_ctx:
            eps = got.get(name)
            if eps is None:
                got[name] = ep
            elif eps.__class__ is str:
                if eps != ep:
                    got[name] = {eps, ep}
            else:
                eps.add(ep)
    return got


def _held(ctx) -> dict:
    """endpoint -> {parameter: its first parameter block there} (a dict of names per
    endpoint, not a list of blocks per name: tens of thousands of slices at 64 pservers)."""
    held: dict = {}
    for ep in ctx.config.pservers:
        here: dict = {}
        for pb in ctx.param_blocks.get(ep, ()):
            if pb.param:
                here.setdefault(pb.param, pb)
        if here:
            held[ep] = here
    return held


def _origin_in(param: str, names: set) -> bool:
    """Whether `param` is a block (`<origin>.block<i>`) of one of `names`."""
    origin = BLOCK_SUFFIX.match(param)
    return bool(origin) and origin.group(1) in names


def _looked_up_params(prog: Program) -> set:
    """Tables the trainer reads through remote lookups (not received whole)."""
    out = set()
    for _, _, op in prog.ops():
        if op.type in ("distributed_lookup_table", "prefetch") or \
                (op.type.startswith("lookup_table") and op.attr("remote_prefetch")):
            out.update(op.input("W"))
    return out


def _check_barriers(ctx, part: Part, by_ctx: bool) -> None:
    if not ctx.config.sync_mode:
        return
    ops = part.prog.global_block.ops
    sends = [j for j, op in enumerate(ops) if op.type == "send"]
    recvs = [j for j, op in enumerate(ops) if op.type == "recv"]
    if sends:
        barriers = [j for j, op in enumerate(ops) if op.type == "send_barrier"]
        if not barriers or barriers[-1] < sends[-1]:
            ctx.add("trainer", part, 0, sends[-1],
                    "sync mode, but no send_barrier after the last send",
                    "a send_barrier after op %d" % sends[-1])
    if recvs and not by_ctx:
        barriers = [j for j, op in enumerate(ops) if op.type == "fetch_barrier"]
        if not barriers or barriers[-1] < recvs[-1]:
            ctx.add("trainer", part, 0, recvs[-1],
                    "sync mode, but no fetch_barrier after the last recv",
                    "a fetch_barrier after op %d" % recvs[-1])
