"""The checks of a lazily read split (classic and fleet styles, where every pserver has a main
and a startup program about as large as the original's): each pserver's programs are read,
checked and let go, so that one pserver's programs are held at a time (by each process: a
forked child may read some of them, check_dir's workers).

What the checks do with one pserver's programs is done while they are held, and kept
(CheckContext.recording): they read only that pserver's programs, the trainers' and the
index of both; so does what the trainer checks find of each send to it (what it meets there:
transfer.py). What the later checks read of it is kept too: its part of the index (index.py:
parameter blocks, grad keys), gathered pserver by pserver in cluster order, and of the summary
of its main program what the recv checks ask (pssummary.for_recvs). Then the checks run in
their order as ever, replaying what was kept in its place: the findings and warnings, and
their order, are those of the checks on a split read whole."""
from __future__ import annotations

from dataclasses import dataclass
from sys import intern

from ..core.forked import share_pieces, take_pieces, worth_forking
from ..core.heaptrim import give_back
from ..format.opsource import forget_parsed, vartype_key
from ..plan.faults import FLEET_LARGE_SCALE_ADAM, FLEET_SYNC_STEP_COUNTER, KIND
from ..plan.faults import CLASSIC_DIST_TABLE_OPTIMIZER
from .context import CheckContext
from .faults import dist_table_of, dist_table_target, large_scale_adam_of, step_counter_of
from .index import IndexBuilder, ParamBlock
from .inputs import pserver_reads
from .loading import Split, load_pserver, release_pserver
from .programs import structure_of
from .reads import trainer_reads_first
from .pssummary import for_recvs
from .trainer import sends_to, streamed_edges
from .transfer import target_of
from .pserver import listen_of, optimize_of


def is_lazy(split: Split) -> bool:
    """Whether the split's pserver programs are read on demand (load_split(lazy=True))."""
    return any("paths" in p for p in split.pservers.values())


@dataclass
class PserverRead:
    """What reading one pserver's programs left: its part of the index (the reach of its
    programs, its listen_and_serv read, what reading that found), the findings and warnings
    of the checks of its programs (CheckContext.recorded) and its summary. Picklable: a
    forked child sends these back."""
    endpoint: str
    reach: dict
    broken: set
    reader: tuple               # (listen entry or None, grad keys, parameter blocks, findings)
    recorded: dict
    summary: object


def streamed_context(main, startup, config, split: Split, workers: int = 1) -> CheckContext:
    """A CheckContext whose index is complete and whose per-pserver findings are recorded,
    every pserver program read once and let go. With `workers` 2 (and a split large enough:
    core/forked.py's worth_forking, as split's), a forked child reads some of them: what
    each pserver's checks find depends only on its own programs and the trainers', and the
    reads are gathered in cluster order, so the report is the same however they were shared."""
    builder = IndexBuilder(config, split)
    for tid in sorted(split.trainers):
        t = split.trainers[tid]
        for k in ("main", "startup"):
            if t[k] is not None:
                builder.add_part(t[k])
    ctx = CheckContext(main, startup, config, split, index=builder.index())
    # every send's target checked with its pserver (that pserver's summary then kept small)
    targets, asked = streamed_edges(ctx)
    eps = [ep for ep in config.pservers if ep in split.pservers]
    trainers = (dict(builder.reach), set(builder.broken))

    def read(i):
        return _read_pserver(ctx, trainers, eps[i], targets.get(eps[i], ()), asked)
    if worth_forking(workers, len(eps), len(eps), len(main.global_block.ops)):
        reads, theirs = share_pieces(
            len(eps), read,
            lambda queue: {i: _packed(r) for i, r in take_pieces(queue, read).items()},
            first=lambda: trainer_reads_first(ctx))
        while theirs:
            i, r = theirs.popitem()
            reads[i] = _unpacked(r)
    else:
        reads = {i: read(i) for i in range(len(eps))}
    for i in range(len(eps)):
        _gather(builder, ctx, reads[i])
    ctx.index = builder.index()
    ctx.targets_read = True
    return ctx


def _read_pserver(ctx: CheckContext, trainers: tuple, ep: str, sends, asked) -> PserverRead:
    """Read pserver `ep`'s programs, check them and the targets of `sends` (streamed_edges'),
    the findings recorded, and let them go: of its summary, what the recv checks ask about
    `asked` is kept. The index the checks see meanwhile is the trainers' and this
    pserver's."""
    split, config = ctx.split, ctx.config
    p = split.pservers[ep]
    load_pserver(split, p, config)
    own = IndexBuilder(config, split)
    own.reach, own.broken = dict(trainers[0]), set(trainers[1])
    parts = [p["main"]] + ([p["startup"]] if p["startup"] is not None else [])
    for part in parts:
        own.add_part(part)
    own.read_pserver(ep, p["main"])
    ctx.index = own.index()
    saved, ctx.recorded = ctx.recorded, {}
    try:
        summary = for_recvs(_record(ctx, ep, p, parts, sends), asked,
                            {pb.param for pb in own.reader.param_blocks[ep] if pb.param})
        ctx.remember(("pserver_summary", ep), summary)      # the whole one let go
        recorded = ctx.recorded
    finally:
        ctx.recorded = saved
    release_pserver(p)
    forget_parsed()     # (the messages of its ops last parsed: no longer of use)
    give_back()         # (core/heaptrim.py: what reading them made, let go with them)
    r = own.reader
    # the checks that read a parameter block's optimizer op (optimize_of's) ran above; what the
    # later ones read of a block is its names and its var's type and flags: the op, which
    # holds its bytes, goes, and the var is one shared by the blocks whose vars differ only
    # in name (_kept_var)
    kept = ctx.memo("kept_vars", dict)
    type_keys: dict = {}
    blocks = [ParamBlock(pb.endpoint, pb.prog, pb.block, pb.grad, pb.param,
                         _kept_var(pb.var, kept, type_keys), pb.op_idx, None, pb.sparse)
              for pb in r.param_blocks[ep]]
    # nor is its listen_and_serv read again (check_listen replays what listen_of found): its
    # index only, which says that the pserver has one
    listen = r.listen.get(ep)
    return PserverRead(ep, {part.name: own.reach[part.name] for part in parts},
                       {part.name for part in parts if part.name in own.broken},
                       (listen and (listen[0], None), r.grad_keys[ep], blocks, r.findings),
                       recorded, summary)


def _kept_var(var, kept: dict, type_keys: dict):
    """`var` as a parameter block keeps it once its pserver is let go: the first var read with
    the same type and flags (the later checks read those of a block's var, never its name;
    the name of a block is its `param`): tens of thousands of blocks at 64 pservers, a few
    kinds of var among them. `type_keys`: id(VarType) -> its vartype_key, for the vars of
    one program (which share a few VarTypes, each held by the program meanwhile)."""
    if var is None or var.attrs:
        return var
    vt = var.type
    tk = type_keys.get(id(vt))
    if tk is None:
        tk = type_keys[id(vt)] = vartype_key(vt)
    key = (tk, var.persistable, var.need_check_feed, var.is_parameter, var.stop_gradient)
    try:
        found = kept.get(key)
    except TypeError:           # (a type of a kind no parameter has: kept as it is)
        return var
    if found is None:
        found = kept[key] = var
    return found


# a parameter block's fields, as _packed sends them
_BLOCK_FIELDS = ParamBlock.__slots__


def _packed(read: PserverRead) -> PserverRead:
    """`read` as a forked child sends it back: its grad keys and parameter blocks a column per
    field (a tuple of each block's grad, one of each param...) rather than an object per
    block: unpickled, an object's state is one more object per block, all held until the
    whole result is read (megabytes at 64 pservers, and the holes they leave once freed)."""
    listen, keys, blocks, findings = read.reader
    cols = tuple(tuple(getattr(pb, f) for pb in blocks) for f in _BLOCK_FIELDS)
    read.reader = (listen, (tuple(keys), tuple(keys.values())), cols, findings)
    return read


def _unpacked(read: PserverRead) -> PserverRead:
    """A read _packed sent back, as it was made, its grad keys' and parameter blocks' names
    the strings this process holds (the trainers' vars', interned when read): unpickled,
    each would be a string of its own, thousands of them per pserver kept to the end."""
    listen, (names, values), cols, findings = read.reader
    keys = dict(zip(map(intern, names), values))
    fields = dict(zip(_BLOCK_FIELDS, cols))
    fields["grad"] = tuple(map(intern, fields["grad"]))
    fields["param"] = tuple(None if n is None else intern(n) for n in fields["param"])
    blocks = [ParamBlock(*row) for row in zip(*(fields[f] for f in _BLOCK_FIELDS))]
    read.reader = (listen, keys, blocks, findings)
    return read


def _gather(builder: IndexBuilder, ctx: CheckContext, read: PserverRead) -> None:
    """One pserver's read in the index being built and in `ctx`, as if read there."""
    ep = read.endpoint
    builder.reach.update(read.reach)
    builder.broken |= read.broken
    listen, keys, blocks, findings = read.reader
    r = builder.reader
    if listen is not None:
        r.listen[ep] = listen
    r.grad_keys[ep], r.param_blocks[ep] = keys, blocks
    r.findings.extend(findings)
    ctx.recorded.update(read.recorded)
    ctx.remember(("pserver_summary", ep), read.summary)


def _record(ctx: CheckContext, ep: str, p: dict, parts: list, sends):
    """What the checks do with pserver `ep`'s programs and the targets of `sends`, kept for
    their replay (a send's only where it finds something); its summary."""
    for part in parts:
        with ctx.recording("structure", part.name):
            structure_of(ctx, part)
    with ctx.recording("listen", ep):
        listen_of(ctx, ep, p)
    if ep in ctx.param_blocks:
        with ctx.recording("optimize", ep):
            optimize_of(ctx, ep, p)
    ctx.recorded[("reads", ep)] = pserver_reads(ctx, p)
    style = ctx.config.style
    if KIND[CLASSIC_DIST_TABLE_OPTIMIZER].style == style:
        target = ctx.memo("dist_table_target", lambda: dist_table_target(ctx))
        if target is not None:
            with ctx.recording("dist_table", ep):
                dist_table_of(ctx, p, *target)
    if KIND[FLEET_SYNC_STEP_COUNTER].style == style and ctx.config.sync_mode:
        with ctx.recording("step_counter", ep):
            step_counter_of(ctx, p)
    if KIND[FLEET_LARGE_SCALE_ADAM].style == style:
        with ctx.recording("large_scale_adam", ep):
            large_scale_adam_of(ctx, p)
    # (one collecting() for them all, each send's share of it cut out: tens of thousands)
    with ctx.collecting() as got:
        found, warned = got
        for tid, i, e in sends_to(sends):
            nf, nw = len(found), len(warned)
            target_of(ctx, e)
            if len(found) > nf or len(warned) > nw:
                ctx.recorded[("send_target", (tid, i))] = (found[nf:], warned[nw:])
    return ctx.pserver_summary(ep)
