"""`check`: validate a parameter-server split (ours or Paddle's) without running it.

A split folder holds trainer_<id>/{main,startup}.pb (+ runtime.json in fleet style) and
pserver_<host>_<port>/{main,startup}.pb. The checks read the original program and the cluster
config and look at the split from both sides:

  structure   every var an op uses is declared in its block or an ancestor; block attrs point at
              existing blocks; blocks no op can reach only get a warning (Paddle leaves LR-decay
              sub-blocks behind in trainer programs);
  listen      each pserver has one listen_and_serv for its own endpoint, Fanin = trainers, the
              mode's distributed_mode, optimize_blocks without repeats, a grad_to_block_id that
              points into optimize_blocks;
  optimize    each parameter block has one optimizer op whose accumulators have the block's
              shape (main and startup), no dead computation, and in sync mode its merged grad is
              averaged over the trainers;
  coverage    the pserver blocks of every trainable parameter tile it exactly once (contiguous
              slices, shapes add up, dtypes agree);
  send / recv every grad a trainer sends reaches the endpoint that optimizes it under a name that
              endpoint knows; every received parameter block exists where it is received from;
              every optimized block is fed and read back;
  trainer     no optimizer op left on the trainer (except geo mode); sync mode has its barriers.

Findings are data (`Finding`); the renderers at the bottom only format them.
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Optional
from xml.sax.saxutils import escape, quoteattr

from .config import ClusterConfig
from .errors import ProgramFormatError, UserError
from .program import Op, Program, Var
from .result import endpoint_dir
from . import roles

MODE_IDS = {"sync": 0, "async": 1, "half_async": 2, "geo": 3}
CHECKS = ("structure", "listen", "optimize", "coverage", "send", "recv", "trainer", "golden")
_BLOCK_SUFFIX = re.compile(r"^(.*)\.block(\d+)$")
_PEER_SUFFIX = re.compile(r"\.(trainer|pserver)_\d+$")
_TRAINER_DIR = re.compile(r"^trainer_(\d+)$")
# ops that update a parameter without a `Param` input: the large-scale sparse tables
_TABLE_OPTIMIZERS_PREFIX = "lookup_sparse_table_fuse_"
_RPC_TRAINER_ID_OPS = ("send", "recv", "send_barrier", "fetch_barrier")
_INIT_OPS = ("fill_constant", "uniform_random", "gaussian_random", "truncated_gaussian_random")


# ---------------------------------------------------------------------------------------------
# data

@dataclass(frozen=True)
class Finding:
    """One thing wrong with a split: where (program, block, op index), what, what was expected."""
    check: str
    program: str                 # "trainer_0/main", "pserver_127.0.0.1_6174/startup", "split"
    block: Optional[int]
    op: Optional[int]
    message: str
    expected: str = ""

    def where(self) -> str:
        s = self.program
        if self.block is not None:
            s += " block %d" % self.block
        if self.op is not None:
            s += " op %d" % self.op
        return s

    def line(self) -> str:
        s = "%s: %s" % (self.where(), self.message)
        if self.expected:
            s += " (expected: %s)" % self.expected
        return s


@dataclass
class CheckReport:
    split_dir: str
    findings: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    programs: list = field(default_factory=list)     # the programs looked at

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict:
        return {"split": self.split_dir, "ok": self.ok, "programs": self.programs,
                "findings": [asdict(f) for f in self.findings],
                "warnings": [asdict(w) for w in self.warnings]}


@dataclass
class Part:
    """One program of the split, with where it came from."""
    name: str                    # "trainer_0/main"
    prog: Program


@dataclass
class Split:
    root: str
    trainers: dict = field(default_factory=dict)     # id -> {"main": Part, "startup": Part|None,
    #                                                        "runtime": dict|None}
    pservers: dict = field(default_factory=dict)     # endpoint -> {"main": Part, "startup": ...}
    stray: list = field(default_factory=list)        # folder names that are neither


@dataclass
class ParamBlock:
    """A pserver optimize block that updates one parameter (or one slice of it)."""
    endpoint: str
    prog: str
    block: int
    grad: str                    # the grad_to_block_id name
    param: Optional[str] = None  # the pserver-side name: fc_w, fc_w.block1
    var: Optional[Var] = None
    op_idx: Optional[int] = None
    op: Optional[Op] = None
    sparse: bool = False         # a sparse table / distributed lookup table shard


# ---------------------------------------------------------------------------------------------
# loading

def load_program_raw(path: str) -> Program:
    """Read a program without the structural validation of programio.load: a dangling block
    attr is a finding here, not a reason to refuse the input."""
    from . import programio, proto
    fmt = programio.program_format(path)
    data = programio.read_file_bytes(path)
    try:
        if fmt == "pb":
            return proto.decode(data)
        from . import textform
        return textform.loads(data)
    except ProgramFormatError as e:
        raise ProgramFormatError("%s: %s" % (path, e.message)) from None


def _find_program(folder: str, stem: str) -> Optional[str]:
    for ext in (".pb", ".pdmodel", ".json"):
        p = os.path.join(folder, stem + ext)
        if os.path.isfile(p):
            return p
    return None


def load_split(root: str, config: ClusterConfig) -> Split:
    """The programs of a split folder, keyed by trainer id and pserver endpoint."""
    if not os.path.exists(root):
        raise UserError("%s: no such folder" % root)
    if not os.path.isdir(root):
        raise UserError("%s: not a folder (expected a split: trainer_<id>/, pserver_<ep>/)"
                        % root)
    split = Split(root)
    by_dir = {endpoint_dir(ep): ep for ep in config.pservers}
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if not os.path.isdir(folder) or name.startswith("."):
            continue
        m = _TRAINER_DIR.match(name)
        if not m and not name.startswith("pserver_"):
            continue
        main_path = _find_program(folder, "main")
        if main_path is None:
            raise UserError("%s: no main program (main.pb or main.json)" % folder)
        startup_path = _find_program(folder, "startup")
        entry = {"main": Part(name + "/main", load_program_raw(main_path)),
                 "startup": Part(name + "/startup", load_program_raw(startup_path))
                 if startup_path else None}
        if m:
            rt_path = os.path.join(folder, "runtime.json")
            entry["runtime"] = None
            if os.path.isfile(rt_path):
                try:
                    with open(rt_path, "rb") as f:
                        entry["runtime"] = json.loads(f.read().decode("utf-8"))
                except (OSError, ValueError) as e:
                    raise UserError("%s: cannot read JSON (%s)" % (rt_path, e)) from None
            split.trainers[int(m.group(1))] = entry
        elif name in by_dir:
            split.pservers[by_dir[name]] = entry
        else:
            split.stray.append(name)
    if not split.trainers and not split.pservers:
        raise UserError("%s: not a split folder (no trainer_<id>/ or pserver_<host>_<port>/ "
                        "folders)" % root)
    return split


# ---------------------------------------------------------------------------------------------
# helpers

def _names(slots: dict) -> list:
    return [a for args in slots.values() for a in args if a]


def _colon_pairs(values) -> list:
    """"name:value" strings (grad_to_block_id and friends) -> [(name, value)] or None if bad."""
    out = []
    for s in values or ():
        name, sep, val = str(s).rpartition(":")
        if not sep or not name:
            return None
        out.append((name, val))
    return out


def _strip_peer(name: str) -> list:
    """Names a sent var may be known by on the pserver: itself, without .trainer_N/.pserver_N."""
    out = [name]
    n = name
    while _PEER_SUFFIX.search(n):
        n = _PEER_SUFFIX.sub("", n)
        out.append(n)
    return out


def _fmt_shape(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape or ()) + "]"


def _dense(v: Optional[Var]) -> bool:
    return v is not None and v.kind == "LOD_TENSOR" and v.shape is not None


def _static(shape) -> bool:
    return shape is not None and all(d >= 0 for d in shape)


def _is_update_op(op: Op) -> bool:
    """An op that writes a parameter with an optimizer rule."""
    if op.input("Param") and op.output("ParamOut"):
        return True
    return op.type.startswith(_TABLE_OPTIMIZERS_PREFIX)


def _is_geo_update(op: Op) -> bool:
    """Geo mode's `sum(param, param.delta) -> param`."""
    xs = op.input("X")
    out = op.output("Out")
    return op.type == "sum" and len(out) == 1 and out[0] in xs and \
        any(x.endswith(".delta") for x in xs)


def block_refs(op: Op) -> list:
    """Blocks an op makes run: BLOCK(S) attrs, *block_id ints, name:block string maps."""
    refs = list(op.block_refs())
    for k, a in op.attrs.items():
        if a.type in ("INT", "LONG") and k.endswith("block_id") and isinstance(a.value, int) \
                and a.value >= 0:
            refs.append(a.value)
        elif a.type == "STRINGS" and k in ("grad_to_block_id", "prefetch_var_name_to_block_id"):
            for _, v in _colon_pairs(a.value) or ():
                if v.lstrip("-").isdigit() and int(v) >= 0:
                    refs.append(int(v))
    return refs


def reachable_blocks(prog: Program) -> set:
    """Blocks that can run: block 0 and whatever ops in reachable blocks point at."""
    seen = {0}
    todo = [0]
    while todo:
        b = todo.pop()
        if not 0 <= b < len(prog.blocks):
            continue
        for op in prog.blocks[b].ops:
            for r in block_refs(op):
                if isinstance(r, int) and 0 <= r < len(prog.blocks) and r not in seen:
                    seen.add(r)
                    todo.append(r)
    return seen


class _Ctx:
    """What the checks share: the inputs, the split, and the findings so far."""

    def __init__(self, main: Program, startup: Optional[Program], config: ClusterConfig,
                 split: Split):
        self.main = main
        self.startup = startup
        self.config = config
        self.split = split
        self.findings: list = []
        self.warnings: list = []
        self.reach: dict = {}                 # part name -> reachable block set
        self.param_blocks: dict = {}          # endpoint -> [ParamBlock]
        self.grad_keys: dict = {}             # endpoint -> {grad name: block idx}
        self.listen: dict = {}                # endpoint -> (op, Part) or None
        self.sparse_params: set = set()       # pserver-side names of sparse tables

    def add(self, check, part, block, op, message, expected=""):
        self.findings.append(Finding(check, part if isinstance(part, str) else part.name,
                                     block, op, message, expected))

    def warn(self, check, part, block, op, message, expected=""):
        self.warnings.append(Finding(check, part if isinstance(part, str) else part.name,
                                     block, op, message, expected))

    @property
    def geo(self) -> bool:
        return self.config.mode == "geo"

    def parts(self):
        for tid in sorted(self.split.trainers):
            t = self.split.trainers[tid]
            yield t["main"]
            if t["startup"] is not None:
                yield t["startup"]
        for ep in self.config.pservers:
            p = self.split.pservers.get(ep)
            if p:
                yield p["main"]
                if p["startup"] is not None:
                    yield p["startup"]


# ---------------------------------------------------------------------------------------------
# structure

def check_structure(ctx: _Ctx) -> None:
    for part in ctx.parts():
        prog = part.prog
        n = len(prog.blocks)
        broken = False
        for i, b in enumerate(prog.blocks):
            if b.idx != i:
                ctx.add("structure", part, i, None, "block %d says its idx is %d" % (i, b.idx),
                        "idx %d" % i)
                broken = True
            if i > 0 and not 0 <= b.parent_idx < n:
                ctx.add("structure", part, i, None,
                        "parent_idx %d is not a block of the program" % b.parent_idx,
                        "a parent in 0..%d" % (n - 1))
                broken = True
            for j, op in enumerate(b.ops):
                for r in op.block_refs():
                    if not isinstance(r, int) or not 0 <= r < n:
                        ctx.add("structure", part, i, j,
                                "%s points at block %s, which does not exist" % (op.type, r),
                                "a block in 0..%d" % (n - 1))
        reach = reachable_blocks(prog) if not broken else set(range(n))
        ctx.reach[part.name] = reach
        for i in range(n):
            if i not in reach:
                ctx.warn("structure", part, i, None,
                         "block %d is never run (no op refers to it); not checked" % i)
        if broken:
            continue
        for bi in sorted(reach):
            b = prog.blocks[bi]
            for j, op in enumerate(b.ops):
                for name in _names(op.inputs) + _names(op.outputs):
                    if name == "@EMPTY@" or prog.find_var(name, bi) is not None:
                        continue
                    ctx.add("structure", part, bi, j,
                            "%s uses %s, which is not declared" % (op.type, name),
                            "a var %s in block %d or an ancestor" % (name, bi))


# ---------------------------------------------------------------------------------------------
# pservers: listen_and_serv and optimize blocks

def expected_distributed_mode(cfg: ClusterConfig) -> int:
    """listen_and_serv's distributed_mode: the classic transpiler knows only sync (0) and async
    (1), deriving it from sync_mode; Fleet has one per mode."""
    if cfg.style == "classic":
        return 0 if cfg.sync_mode else 1
    return MODE_IDS[cfg.mode]


def _listen_op(ctx, ep, part):
    ops = [(j, op) for j, op in enumerate(part.prog.global_block.ops)
           if op.type == "listen_and_serv"]
    if len(ops) != 1:
        ctx.add("listen", part, 0, None,
                "%d listen_and_serv ops in block 0" % len(ops), "exactly one")
        return None
    return ops[0]


def check_listen(ctx: _Ctx) -> None:
    cfg = ctx.config
    for name in ctx.split.stray:
        ctx.add("listen", name, None, None,
                "folder %s matches no pserver of the cluster config" % name,
                "one of %s" % ", ".join(endpoint_dir(e) for e in cfg.pservers))
    for ep in cfg.pservers:
        p = ctx.split.pservers.get(ep)
        if p is None:
            ctx.add("listen", endpoint_dir(ep), None, None,
                    "no program for pserver %s" % ep, "%s/main.pb" % endpoint_dir(ep))
            continue
        part = p["main"]
        found = _listen_op(ctx, ep, part)
        ctx.listen[ep] = found
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
        pairs = _colon_pairs(op.attr("grad_to_block_id"))
        if pairs is None:
            ctx.add("listen", part, 0, j, "grad_to_block_id is malformed: %s"
                    % op.attr("grad_to_block_id"), "entries \"<grad>:<block>\"")
            continue
        keys = ctx.grad_keys[ep]
        sparse_map = dict(_colon_pairs(op.attr("sparse_grad_to_param")) or [])
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
            _find_update(ctx, part, pb, sparse_map)
            ctx.param_blocks[ep].append(pb)
        by_block: dict = {}
        for pb in ctx.param_blocks[ep]:
            by_block.setdefault(pb.block, []).append(pb.grad)
        for bi, grads in sorted(by_block.items()):
            if len(grads) > 1:
                ctx.add("listen", part, bi, None, "block %d optimizes several grads: %s"
                        % (bi, ", ".join(grads)), "one parameter block per optimize block")


def _find_update(ctx: _Ctx, part: Part, pb: ParamBlock, sparse_map: dict) -> None:
    prog = part.prog
    block = prog.blocks[pb.block]
    geo = ctx.geo
    ups = [(j, op) for j, op in enumerate(block.ops)
           if (_is_geo_update(op) if geo else _is_update_op(op))]
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


def check_optimize(ctx: _Ctx) -> None:
    cfg = ctx.config
    for ep in cfg.pservers:
        p = ctx.split.pservers.get(ep)
        if not p or ep not in ctx.param_blocks:
            continue
        part, startup = p["main"], p["startup"]
        prog = part.prog
        want_acc: dict = {}
        for pb in ctx.param_blocks[ep]:
            if pb.op is None or pb.var is None:
                continue
            block = prog.blocks[pb.block]
            if not ctx.geo:
                _check_accumulators(ctx, part, pb, want_acc)
                if cfg.sync_mode and cfg.trainers > 1 and pb.var.kind != "SELECTED_ROWS":
                    _check_average(ctx, part, pb)
            _check_dead_ops(ctx, part, pb, block)
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
            want_acc[a] = (shape, pb)
            if v is not None and _dense(v) and _dense(pb.var) and tuple(v.shape) != \
                    tuple(shape):
                ctx.add("optimize", part, 0, None,
                        "accumulator %s (%s of %s on %s) has shape %s"
                        % (a, slot, pb.param, op.type, _fmt_shape(v.shape)),
                        "%s, the shape of %s" % (_fmt_shape(shape), pb.param))
    g = op.input("Grad")
    if g:
        gv = prog.find_var(g[0], pb.block)
        if _dense(gv) and _dense(pb.var) and _static(gv.shape) and \
                tuple(gv.shape) != tuple(shape):
            ctx.add("optimize", part, pb.block, pb.op_idx,
                    "%s reads grad %s of shape %s for %s" % (op.type, g[0],
                                                             _fmt_shape(gv.shape), pb.param),
                    "%s, the shape of %s" % (_fmt_shape(shape), pb.param))


def _check_startup_shapes(ctx, startup: Part, main: Program, want_acc: dict) -> None:
    sb = startup.prog.global_block
    for name, (shape, pb) in sorted(want_acc.items()):
        v = sb.vars.get(name)
        if _dense(v) and tuple(v.shape) != tuple(shape):
            ctx.add("optimize", startup, 0, None,
                    "accumulator %s of %s is declared %s" % (name, pb.param, _fmt_shape(v.shape)),
                    "%s, the shape of %s" % (_fmt_shape(shape), pb.param))
    for j, op in enumerate(sb.ops):
        if op.type not in _INIT_OPS or "shape" not in op.attrs:
            continue
        for out in op.output("Out"):
            if out in want_acc:
                shape = want_acc[out][0]
                if list(op.attr("shape")) != list(shape):
                    ctx.add("optimize", startup, 0, j,
                            "%s initialises %s with shape %s" % (op.type, out,
                                                                 _fmt_shape(op.attr("shape"))),
                            "%s, the shape of %s" % (_fmt_shape(shape), want_acc[out][1].param))
    # every persistable var both programs declare: the same shape
    for name, v in sb.vars.items():
        mv = main.global_block.vars.get(name)
        if name in want_acc or not (_dense(v) and _dense(mv)):
            continue
        if tuple(v.shape) != tuple(mv.shape):
            ctx.add("optimize", startup, 0, None,
                    "%s is declared %s here but %s in the main program"
                    % (name, _fmt_shape(v.shape), _fmt_shape(mv.shape)),
                    "the same shape in main and startup")


def _check_initialised(ctx, startup: Part, pbs: list) -> None:
    """Every parameter block a pserver optimizes is written by its startup program."""
    written = {n for _, _, op in startup.prog.ops() for n in _names(op.outputs)}
    for pb in pbs:
        if pb.param is None or pb.var is None or pb.param in written:
            continue
        if pb.op is not None and pb.op.type.startswith(_TABLE_OPTIMIZERS_PREFIX):
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


def _check_dead_ops(ctx, part, pb: ParamBlock, block) -> None:
    """An op in an optimize block whose result no other op reads does nothing (Paddle's L2Decay
    + clip chain wired past the optimizer, say)."""
    prog = part.prog
    readers: dict = {}
    for bi in ctx.reach.get(part.name, ()):
        for j, op in enumerate(prog.blocks[bi].ops):
            for a in _names(op.inputs):
                readers.setdefault(a, set()).add((bi, j))
    for j, op in enumerate(block.ops):
        if j == pb.op_idx or _is_update_op(op) or not op.outputs:
            continue
        outs = _names(op.outputs)
        if outs and all(not (readers.get(o, set()) - {(pb.block, j)}) for o in outs):
            reads = pb.op.input("Grad") or [pb.grad]
            ctx.add("optimize", part, pb.block, j,
                    "%s writes %s, which nothing reads: %s reads %s instead"
                    % (op.type, ", ".join(outs), pb.op.type, reads[0]),
                    "%s reads the result (%s)" % (pb.op.type, outs[0]))


# ---------------------------------------------------------------------------------------------
# coverage: the pserver blocks tile every trainable parameter

def trainable_params(main: Program) -> dict:
    """{name: Var} of the parameters the original program's optimizer ops update."""
    out = {}
    for bi, _, op in main.ops():
        if roles.is_optimize_op(op) or (_is_update_op(op) and roles.role(op) & roles.OPTIMIZE):
            for p in op.input("Param"):
                v = main.find_var(p, bi)
                if v is not None:
                    out[p] = v
    return out


def _origin(name: str, params: dict):
    if name in params:
        return name, None
    m = _BLOCK_SUFFIX.match(name)
    if m and m.group(1) in params:
        return m.group(1), int(m.group(2))
    return None, None


def check_coverage(ctx: _Ctx) -> None:
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
                    "parameter %s %s is optimized on no pserver" % (name, _fmt_shape(pv.shape)),
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
            _rows_add_up(ctx, name, pv, [(pb.param, pb) for pb in shards])
        elif shards and _dense(shards[0].var) and tuple(shards[0].var.shape) != \
                tuple(pv.shape):
            pb = shards[0]
            ctx.add("coverage", pb.prog, 0, None,
                    "%s is declared %s" % (pb.param, _fmt_shape(pb.var.shape)),
                    "%s, the shape of the original parameter" % _fmt_shape(pv.shape))
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


def _rows_add_up(ctx, name, pv: Var, parts: list) -> None:
    """Slices along dim 0: the other dims agree and the rows add up to the parameter's."""
    if not _static(pv.shape) or not pv.shape:
        return
    if any(pb.var is None or pb.var.shape is None for _, pb in parts):
        return      # a large-scale table lives outside the program: its size is not declared
    rows = 0
    offsets = []
    for label, pb in parts:
        v = pb.var
        if tuple(v.shape[1:]) != tuple(pv.shape[1:]) or len(v.shape) != len(pv.shape):
            ctx.add("coverage", pb.prog, 0, None,
                    "slice %s is %s" % (label, _fmt_shape(v.shape)),
                    "[rows, %s] like %s %s" % (", ".join(str(d) for d in pv.shape[1:]), name,
                                               _fmt_shape(pv.shape)))
            return
        offsets.append("%s@%d+%d" % (label, rows, v.shape[0]))
        rows += v.shape[0]
    if rows != pv.shape[0]:
        pb = parts[-1][1]
        ctx.add("coverage", pb.prog, 0, None,
                "the slices of %s cover %d rows (%s)" % (name, rows, ", ".join(offsets)),
                "%d rows, the first dim of %s %s" % (pv.shape[0], name, _fmt_shape(pv.shape)))


# ---------------------------------------------------------------------------------------------
# trainers: what they send and receive

@dataclass
class _Edge:
    """One var a trainer sends to or receives from one endpoint."""
    name: str
    endpoint: str
    part: str
    block: Optional[int]
    op: Optional[int]
    section: Optional[int] = None     # rows, from runtime.json
    via: str = ""                     # "send", "recv", "send_ctx", "recv_ctx"


def _edges_from_ops(ctx, part: Part, op_type: str, slot: str, out: list) -> None:
    prog = part.prog
    for bi in sorted(ctx.reach.get(part.name, {0})):
        for j, op in enumerate(prog.blocks[bi].ops):
            if op.type != op_type:
                continue
            eps = list(op.attr("epmap") or [])
            names = list(op.input(slot) if slot == "X" else op.output(slot))
            if not eps:
                continue
            # runtime_split_send_recv: one var on the wire per endpoint, split at run time
            split_names = list(op.attr("send_varnames" if op_type == "send"
                                       else "recv_varnames") or [])
            if split_names:
                names = split_names
            if len(eps) != len(names):
                ctx.add(op_type, part, bi, j,
                        "%s has %d vars but %d epmap entries" % (op_type, len(names), len(eps)),
                        "one endpoint per var")
                continue
            for n, ep in zip(names, eps):
                out.append(_Edge(n, ep, part.name, bi, j, via=op_type))


def _edges_from_ctx(ctx, tid, part_name, rt: dict, key: str, out: list) -> None:
    for var, c in (rt.get(key) or {}).items():
        if not isinstance(c, dict) or c.get("is_tensor_table"):
            continue
        names = list(c.get("split_varnames") or [])
        eps = list(c.get("split_endpoints") or [])
        secs = list(c.get("sections") or [])
        if len(names) != len(eps):
            ctx.add("send" if key == "send_ctx" else "recv", part_name, None, None,
                    "%s %s: %d split_varnames but %d split_endpoints"
                    % (key, var, len(names), len(eps)), "one endpoint per split var")
            continue
        for i, (n, ep) in enumerate(zip(names, eps)):
            out.append(_Edge(n, ep, part_name, None, None,
                             secs[i] if i < len(secs) and len(secs) == len(names) else None,
                             via=key))


def _where_optimized(ctx, names: list) -> list:
    return [(ep, n) for n in names for ep in ctx.config.pservers
            if n in ctx.grad_keys.get(ep, {})]


def check_trainers(ctx: _Ctx) -> None:
    cfg = ctx.config
    if not ctx.split.trainers:
        ctx.add("trainer", "split", None, None, "no trainer program in the split",
                "trainer_<id>/main.pb for an id in 0..%d" % (cfg.trainers - 1))
    for tid in sorted(ctx.split.trainers):
        t = ctx.split.trainers[tid]
        main = t["main"]
        if tid >= cfg.trainers:
            ctx.add("trainer", main, None, None,
                    "trainer id %d, but the cluster has %d trainers" % (tid, cfg.trainers),
                    "ids 0..%d" % (cfg.trainers - 1))
        _check_trainer_ops(ctx, tid, main)
        sends: list = []
        recvs: list = []
        fleet = cfg.style == "fleet"
        if fleet:
            rt = t.get("runtime")
            if rt is None:
                ctx.add("send", main.name.split("/")[0] + "/runtime.json", None, None,
                        "no runtime.json", "the communicator's send_ctx and recv_ctx "
                        "(fleet style)")
            else:
                rt_name = main.name.split("/")[0] + "/runtime.json"
                _edges_from_ctx(ctx, tid, rt_name, rt, "send_ctx", sends)
                _edges_from_ctx(ctx, tid, rt_name, rt, "recv_ctx", recvs)
                _check_send_ops_vs_ctx(ctx, main, rt, rt_name)
        else:
            _edges_from_ops(ctx, main, "send", "X", sends)
            _edges_from_ops(ctx, main, "recv", "Out", recvs)
            if t["startup"] is not None:
                _edges_from_ops(ctx, t["startup"], "recv", "Out", recvs)
        _check_sends(ctx, tid, main, sends)
        _check_recvs(ctx, tid, main, recvs, fleet)
        _check_barriers(ctx, main, fleet)


def _check_trainer_ops(ctx, tid, part: Part) -> None:
    prog = part.prog
    for bi in sorted(ctx.reach.get(part.name, {0})):
        for j, op in enumerate(prog.blocks[bi].ops):
            if not ctx.geo and (roles.is_optimize_op(op) or _is_update_op(op)):
                ctx.add("trainer", part, bi, j,
                        "the trainer keeps optimizer op %s for %s"
                        % (op.type, ", ".join(op.input("Param")) or "?"),
                        "no optimizer op on the trainer (the pservers update the parameters)")
            if op.type in _RPC_TRAINER_ID_OPS and "trainer_id" in op.attrs and \
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
    if ctx.geo:
        return          # geo: the communicator pushes dense deltas itself
    for var, c in send_ctx.items():
        if not isinstance(c, dict) or c.get("is_tensor_table") or c.get("is_sparse"):
            continue
        if var not in sent:
            ctx.add("send", part, None, None,
                    "the trainer never sends %s: no send op names it (runtime.json send_ctx "
                    "lists it)" % var,
                    "a send op with send_varnames [%s]" % var)


def _check_sends(ctx, tid, main: Part, sends: list) -> None:
    cfg = ctx.config
    fed: dict = {}
    for e in sends:
        if e.name.startswith("__control_var@"):
            continue
        if e.endpoint not in cfg.pservers:
            ctx.add("send", e.part, e.block, e.op,
                    "sends %s to %s, which is not a pserver of the cluster" % (e.name,
                                                                              e.endpoint),
                    "one of %s" % ", ".join(cfg.pservers))
            continue
        keys = ctx.grad_keys.get(e.endpoint)
        if keys is None:
            continue        # that pserver's program is missing or broken: reported there
        cands = _strip_peer(e.name)
        key = next((c for c in cands if c in keys), None)
        if key is None:
            elsewhere = _where_optimized(ctx, cands)
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
                                                      ", ".join(sorted(keys)) or "none"))
            continue
        fed.setdefault((e.endpoint, key), []).append(e)
        _check_send_target(ctx, e, key)
    if ctx.geo:
        return
    for ep in cfg.pservers:
        for pb in ctx.param_blocks.get(ep, ()):
            if (ep, pb.grad) not in fed:
                ctx.add("send", main, None, None,
                        "trainer %d never sends %s to %s (block %d optimizes %s with it)"
                        % (tid, pb.grad, ep, pb.block, pb.param or "?"),
                        "a send of %s%s to %s" % (pb.grad, ".trainer_%d" % tid
                                                  if cfg.sync_mode and cfg.trainers > 1
                                                  else "", ep))


def _check_send_target(ctx, e: _Edge, key: str) -> None:
    """The pserver must read what was sent, and its shape must be the block's."""
    p = ctx.split.pservers[e.endpoint]["main"]
    prog = p.prog
    bi = ctx.grad_keys[e.endpoint][key]
    if not 0 < bi < len(prog.blocks):
        return
    block = prog.blocks[bi]
    readers = [j for j, op in enumerate(block.ops) if e.name in _names(op.inputs)]
    writers = [j for j, op in enumerate(block.ops) if key in _names(op.outputs)
               and not _is_update_op(op) and not _is_geo_update(op)]
    if e.name != key and not readers:
        ctx.add("send", e.part, e.block, e.op,
                "sends %s, which %s block %d never reads" % (e.name, e.endpoint, bi),
                "a name block %d merges (%s)" % (bi, ", ".join(
                    n for op in block.ops if op.type == "sum" for n in op.input("X")) or key))
    elif e.name == key and writers and readers[:1] != [0] and not \
            any(e.name in block.ops[j].input("X") for j in writers):
        ctx.add("send", e.part, e.block, e.op,
                "sends %s, which %s block %d overwrites with op %d (%s) before using it"
                % (e.name, e.endpoint, bi, writers[0], block.ops[writers[0]].type),
                "one of the names op %d reads: %s" % (writers[0], ", ".join(
                    _names(block.ops[writers[0]].inputs))))
    pb = next((x for x in ctx.param_blocks[e.endpoint] if x.grad == key), None)
    if pb is None or not _dense(pb.var) or pb.sparse:
        return
    if e.section is not None:
        if pb.var.shape and e.section != pb.var.shape[0]:
            ctx.add("send", e.part, None, None,
                    "send_ctx sends %d rows of %s to %s" % (e.section, e.name, e.endpoint),
                    "%d rows, the first dim of %s there" % (pb.var.shape[0], pb.param))
        return
    tp = _trainer_prog(ctx, e.part)
    tv = tp.find_var(e.name, e.block or 0) if tp is not None else None
    if _dense(tv) and _static(tv.shape) and tuple(tv.shape) != tuple(pb.var.shape):
        ctx.add("send", e.part, e.block, e.op,
                "sends %s %s to %s" % (e.name, _fmt_shape(tv.shape), e.endpoint),
                "%s, the shape of %s there" % (_fmt_shape(pb.var.shape), pb.param))


def _trainer_prog(ctx, part_name: str) -> Optional[Program]:
    for t in ctx.split.trainers.values():
        for k in ("main", "startup"):
            if t.get(k) is not None and t[k].name == part_name:
                return t[k].prog
    return None


def _check_recvs(ctx, tid, main: Part, recvs: list, fleet: bool) -> None:
    cfg = ctx.config
    held: dict = {}
    for ep in cfg.pservers:
        for pb in ctx.param_blocks.get(ep, ()):
            if pb.param:
                held.setdefault(pb.param, []).append(pb)
    got = set()
    for e in recvs:
        if e.endpoint not in cfg.pservers:
            ctx.add("recv", e.part, e.block, e.op,
                    "receives %s from %s, which is not a pserver of the cluster"
                    % (e.name, e.endpoint), "one of %s" % ", ".join(cfg.pservers))
            continue
        if e.endpoint not in ctx.split.pservers:
            continue
        here = [pb for pb in held.get(e.name, ()) if pb.endpoint == e.endpoint]
        if not here:
            others = [pb.endpoint for pb in held.get(e.name, ())]
            pv = ctx.split.pservers[e.endpoint]["main"].prog.global_block.vars.get(e.name)
            if others:
                ctx.add("recv", e.part, e.block, e.op,
                        "receives %s from %s, but %s holds it" % (e.name, e.endpoint,
                                                                 others[0]),
                        "endpoint %s" % others[0])
            elif pv is None or not pv.persistable:
                ctx.add("recv", e.part, e.block, e.op,
                        "receives %s from %s, which has no such parameter block"
                        % (e.name, e.endpoint),
                        "a parameter block %s optimizes" % e.endpoint)
            continue
        got.add((e.endpoint, e.name))
        pb = here[0]
        if pb.sparse or not _dense(pb.var):
            continue
        if e.section is not None:
            if pb.var.shape and e.section != pb.var.shape[0]:
                ctx.add("recv", e.part, None, None,
                        "recv_ctx expects %d rows of %s from %s" % (e.section, e.name,
                                                                    e.endpoint),
                        "%d rows, the first dim of %s there" % (pb.var.shape[0], pb.param))
            continue
        tp = _trainer_prog(ctx, e.part)
        tv = tp.find_var(e.name, e.block or 0) if tp is not None else None
        if _dense(tv) and _static(tv.shape) and tuple(tv.shape) != tuple(pb.var.shape):
            ctx.add("recv", e.part, e.block, e.op,
                    "receives %s as %s from %s" % (e.name, _fmt_shape(tv.shape), e.endpoint),
                    "%s, the shape of %s there" % (_fmt_shape(pb.var.shape), pb.param))
    # every dense parameter block must come back to the trainer's main program
    main_got = {(e.endpoint, e.name) for e in recvs if e.part == main.name or fleet}
    looked_up = _looked_up_params(main.prog)
    for ep in cfg.pservers:
        for pb in ctx.param_blocks.get(ep, ()):
            if pb.param is None or pb.sparse or pb.var is None or not _dense(pb.var):
                continue
            origin = _BLOCK_SUFFIX.match(pb.param)
            if pb.param in looked_up or (origin and origin.group(1) in looked_up):
                continue
            if (ep, pb.param) not in main_got:
                ctx.add("recv", main, None, None,
                        "trainer %d never receives %s from %s" % (tid, pb.param, ep),
                        "a %s of %s from %s" % ("recv_ctx entry" if fleet else "recv",
                                                pb.param, ep))


def _looked_up_params(prog: Program) -> set:
    """Tables the trainer reads through remote lookups (not received whole)."""
    out = set()
    for _, _, op in prog.ops():
        if op.type in ("distributed_lookup_table", "prefetch") or \
                (op.type.startswith("lookup_table") and op.attr("remote_prefetch")):
            out.update(op.input("W"))
    return out


def _check_barriers(ctx, part: Part, fleet: bool) -> None:
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
    if recvs and not fleet:
        barriers = [j for j, op in enumerate(ops) if op.type == "fetch_barrier"]
        if not barriers or barriers[-1] < recvs[-1]:
            ctx.add("trainer", part, 0, recvs[-1],
                    "sync mode, but no fetch_barrier after the last recv",
                    "a fetch_barrier after op %d" % recvs[-1])


# ---------------------------------------------------------------------------------------------
# entry points

def check_split(main: Program, startup: Optional[Program], config: ClusterConfig,
                split: Split) -> CheckReport:
    """Run every check on a loaded split; findings and warnings in a report."""
    ctx = _Ctx(main, startup, config, split)
    check_structure(ctx)
    check_listen(ctx)
    check_optimize(ctx)
    check_coverage(ctx)
    check_trainers(ctx)
    report = CheckReport(split.root, ctx.findings, ctx.warnings,
                         [p.name for p in ctx.parts()])
    return report


def check_dir(main: Program, startup: Optional[Program], config: ClusterConfig,
              split_dir: str, expect_dir: Optional[str] = None,
              op_defaults: Optional[dict] = None) -> CheckReport:
    """Load a split folder and check it; with expect_dir, also diff it against a golden split."""
    split = load_split(split_dir, config)
    report = check_split(main, startup, config, split)
    if expect_dir is not None:
        report.findings.extend(golden_findings(split_dir, expect_dir, op_defaults))
    return report


def golden_findings(split_dir: str, expect_dir: str, op_defaults: Optional[dict] = None) -> list:
    """One finding per difference between a split and a golden split (through diff)."""
    from . import diff as diff_mod
    if not os.path.isdir(expect_dir):
        raise UserError("%s: --expect needs a split folder" % expect_dir)
    tree = diff_mod.diff_trees(expect_dir, split_dir, load=load_program_raw,
                               op_defaults=op_defaults)
    out = []
    for f in tree.files:
        prog = f.path.rsplit(".", 1)[0]
        if f.program is None:
            what = {"missing": "missing (the golden split has it)",
                    "extra": "not in the golden split"}.get(f.status, f.status)
            if f.status == "changed":
                for d in f.details:
                    out.append(Finding("golden", f.path, None, None,
                                       "differs from the golden split: %s" % d,
                                       "the golden value"))
                continue
            out.append(Finding("golden", f.path, None, None, what,
                               "the same files as %s" % expect_dir))
            continue
        for b in f.program.blocks:
            if b.status in ("added", "removed"):
                out.append(Finding("golden", prog, b.idx, None,
                                   "block %s" % ("not in the golden split" if b.status == "added"
                                                 else "missing"), "the golden block"))
                continue
            for d in b.details:
                out.append(Finding("golden", prog, b.idx, None, d, "the golden value"))
            for o in b.ops:
                if o.kind == "insert":
                    out.append(Finding("golden", prog, b.idx, o.b_index,
                                       "extra op %s" % o.op, "no such op (golden split)"))
                elif o.kind == "delete":
                    out.append(Finding("golden", prog, b.idx, o.b_index if o.b_index is not None
                                       else None, "missing op %s (golden op %d)"
                                       % (o.op, o.a_index), "the golden op"))
                else:
                    out.append(Finding("golden", prog, b.idx, o.b_index,
                                       "%s differs from the golden op %d: %s"
                                       % (o.type, o.a_index, "; ".join(o.details)),
                                       "the golden op"))
            for v in b.vars:
                msg = {"added": "extra var %s", "removed": "missing var %s",
                       "changed": "var %s differs"}[v.kind] % v.name
                out.append(Finding("golden", prog, b.idx, None,
                                   "%s: %s" % (msg, "; ".join(v.details)), "the golden var"))
    return out


# ---------------------------------------------------------------------------------------------
# renderers (formatting only)

def render_text(report: CheckReport, warnings: bool = True) -> str:
    lines = [f.line() for f in report.findings]
    if warnings:
        lines += ["warning: " + w.line() for w in report.warnings]
    n = len(report.findings)
    lines.append("%s: %s (%d program(s), %d warning(s))"
                 % (report.split_dir, "ok" if n == 0 else "%d finding(s)" % n,
                    len(report.programs), len(report.warnings)))
    return "\n".join(lines) + "\n"


def render_json(report: CheckReport) -> str:
    return json.dumps(report.to_dict(), indent=1, ensure_ascii=False) + "\n"


def render_junit(report: CheckReport) -> str:
    """JUnit XML: a failed test per finding, a passing test per check that found nothing."""
    cases = []
    failed = {f.check for f in report.findings}
    for f in report.findings:
        cases.append('  <testcase classname=%s name=%s>\n    <failure message=%s type=%s>%s'
                     '</failure>\n  </testcase>'
                     % (quoteattr("pstranspile.check." + f.check), quoteattr(f.where()),
                        quoteattr(f.message), quoteattr(f.check), escape(f.line())))
    for c in CHECKS:
        if c not in failed and c != "golden":
            cases.append('  <testcase classname=%s name=%s/>'
                         % (quoteattr("pstranspile.check." + c), quoteattr(c)))
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuite name=%s tests="%d" failures="%d" errors="0" skipped="0">'
           % (quoteattr("pstranspile check " + report.split_dir), len(cases),
              len(report.findings))]
    out += cases
    if report.warnings:
        out.append("  <system-out>%s</system-out>"
                   % escape("\n".join("warning: " + w.line() for w in report.warnings)))
    out.append("</testsuite>")
    return "\n".join(out) + "\n"


RENDERERS = {"text": render_text, "json": render_json, "junit": render_junit}
