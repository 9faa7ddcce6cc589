"""What the checks look up in a split, indexed once before any check runs and never changed
after: the blocks of each program that can run, and each pserver's parameter blocks as its
listen_and_serv names them (grad_to_block_id, the optimizer op of each block).

Reading listen_and_serv is also where some of its problems show (a malformed entry, a block
without an optimizer op): those are recorded here as findings of the check they belong to
(listen, optimize), which reports them with its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Optional

from ..core.config import ClusterConfig
from ..ir.program import Op, Var
from .blocks import reachable_blocks, structure_broken
from .findings import Finding
from .loading import Part, Split
from .ops import colon_pairs, is_geo_update, is_update_op, var_in


@dataclass(slots=True)
class ParamBlock:
    """A pserver optimize block that updates one parameter (or one slice of it). (Slots: a
    large split has one per parameter slice, tens of thousands, kept to the end; not frozen,
    though never changed: a frozen one is three times as long to make, and each is made two
    or three times.)"""
    endpoint: str
    prog: str
    block: int
    grad: str                    # the grad_to_block_id name
    param: Optional[str] = None  # the pserver-side name: fc_w, fc_w.block1
    var: Optional[Var] = None
    op_idx: Optional[int] = None
    op: Optional[Op] = None
    sparse: bool = False         # a sparse table / distributed lookup table shard


@dataclass(frozen=True)
class SplitIndex:
    reach: Mapping          # part name -> the blocks that can run (all when the structure is off)
    broken: frozenset       # part names whose blocks are numbered or parented wrongly
    listen: Mapping         # endpoint -> (op index, listen_and_serv op) when there is one
    grad_keys: Mapping      # endpoint -> {grad name: block idx} from grad_to_block_id
    param_blocks: Mapping   # endpoint -> (ParamBlock, ...)
    by_grad: Mapping        # endpoint -> {grad name: its first ParamBlock}
    grad_endpoints: Mapping  # grad name -> [endpoints whose grad_to_block_id knows it]
    trainer_progs: Mapping  # trainer part name -> Program
    findings: tuple         # what reading listen_and_serv found (Finding, check "listen"...)

    def findings_of(self, check: str) -> list:
        return [f for f in self.findings if f.check == check]


_EVERY_BLOCK: dict = {}          # n -> frozenset(range(n))
_EVERY_BLOCK_KEPT = 256


def every_block(n: int) -> frozenset:
    """frozenset(range(n)), one shared set per n: the reach of each pserver main program of
    a large split (hundreds of blocks, tens of such programs) is all of its blocks."""
    found = _EVERY_BLOCK.get(n)
    if found is None:
        if len(_EVERY_BLOCK) >= _EVERY_BLOCK_KEPT:
            _EVERY_BLOCK.clear()
        found = _EVERY_BLOCK[n] = frozenset(range(n))
    return found


def build_index(config: ClusterConfig, split: Split, parts: list) -> SplitIndex:
    """The index of `split` (`parts`: every program of it, trainers first)."""
    builder = IndexBuilder(config, split)
    for part in parts:
        builder.add_part(part)
    for ep in config.pservers:
        p = split.pservers.get(ep)
        if p is not None:
            builder.read_pserver(ep, p["main"])
    return builder.index()


class IndexBuilder:
    """The index, built a program at a time (a streamed check reads each pserver's programs,
    checks them and lets them go): add_part for every program, read_pserver for every pserver
    main program in cluster order; index() is what is known so far."""

    def __init__(self, config: ClusterConfig, split: Split):
        self.config = config
        self.split = split
        self.reach: dict = {}
        self.broken: set = set()
        self.reader = _ListenReader(config)

    def add_part(self, part: Part) -> None:
        n = len(part.prog.blocks)
        if structure_broken(part.prog):
            self.broken.add(part.name)
            self.reach[part.name] = every_block(n)
        else:
            reach = reachable_blocks(part.prog)
            # (every block of the program, as in a pserver's: one set shared by the programs
            # with as many blocks; reach holds only blocks 0..n-1)
            self.reach[part.name] = every_block(n) if len(reach) == n else frozenset(reach)

    def read_pserver(self, ep: str, part: Part) -> None:
        self.reader.read(ep, part)

    def index(self) -> SplitIndex:
        reader, split = self.reader, self.split
        # (the endpoints of a grad a tuple, one per list of them: most grads have one, the
        # same few tuples for tens of thousands of grads at 64 pservers)
        grad_eps: dict = {}
        eps_of: dict = {}
        for ep in self.config.pservers:
            for g in reader.grad_keys.get(ep, {}):
                e = grad_eps.get(g, ()) + (ep,)
                grad_eps[g] = eps_of.setdefault(e, e)
        by_grad = {}
        for ep, blocks in reader.param_blocks.items():
            first: dict = {}
            for pb in blocks:
                first.setdefault(pb.grad, pb)
            by_grad[ep] = MappingProxyType(first)
        progs: dict = {}
        for t in split.trainers.values():
            for k in ("main", "startup"):
                if t.get(k) is not None:
                    progs.setdefault(t[k].name, t[k].prog)
        frozen = MappingProxyType
        return SplitIndex(
            frozen(dict(self.reach)), frozenset(self.broken), frozen(dict(reader.listen)),
            frozen({ep: frozen(k) for ep, k in reader.grad_keys.items()}),
            frozen({ep: tuple(b) for ep, b in reader.param_blocks.items()}), frozen(by_grad),
            frozen(grad_eps), frozen(progs),
            tuple(reader.findings))


class _ListenReader:
    """Reads each pserver's listen_and_serv into grad keys and parameter blocks."""

    def __init__(self, config: ClusterConfig):
        self.geo = config.mode == "geo"
        self.listen: dict = {}
        self.grad_keys: dict = {}
        self.param_blocks: dict = {}
        self.findings: list = []

    def add(self, check, part, block, op, message, expected=""):
        self.findings.append(Finding(check, part.name, block, op, message, expected))

    def read(self, ep: str, part: Part) -> None:
        ops = [(j, op) for j, op in enumerate(part.prog.global_block.ops)
               if op.type == "listen_and_serv"]
        self.grad_keys[ep], self.param_blocks[ep] = {}, []
        if len(ops) != 1:
            self.add("listen", part, 0, None, "%d listen_and_serv ops in block 0" % len(ops),
                     "exactly one")
            return
        j, op = self.listen[ep] = ops[0]
        pairs = colon_pairs(op.attr("grad_to_block_id"))
        if pairs is None:
            self.add("listen", part, 0, j, "grad_to_block_id is malformed: %s"
                     % op.attr("grad_to_block_id"), "entries \"<grad>:<block>\"")
            return
        keys = self.grad_keys[ep]
        updates: dict = {}          # block idx -> its update ops, found once per block
        sparse_map = dict(colon_pairs(op.attr("sparse_grad_to_param")) or [])
        for g, v in pairs:
            if not v.isdigit():
                self.add("listen", part, 0, j, "grad_to_block_id entry %s:%s has no block "
                         "number" % (g, v), "\"<grad>:<block>\"")
                continue
            if g in keys:
                self.add("listen", part, 0, j, "grad_to_block_id lists %s twice" % g,
                         "each grad once")
                continue
            bi = keys[g] = int(v)
            if 0 < bi < len(part.prog.blocks):
                self.param_blocks[ep].append(self._param_block(ep, part, bi, g, sparse_map,
                                                               updates))

    def _param_block(self, ep: str, part: Part, bi: int, grad: str, sparse_map: dict,
                     updates: dict) -> ParamBlock:
        """A block's optimizer op and the parameter it updates. `updates` caches each block's
        update ops for the other grads that point at it."""
        prog, geo = part.prog, self.geo
        ups = updates.get(bi)
        if ups is None:
            ups = updates[bi] = [(j, op) for j, op in enumerate(prog.blocks[bi].ops)
                                 if (is_geo_update(op) if geo else is_update_op(op))]
        if not ups:
            self.add("optimize", part, bi, None, "optimize block for %s has no %s" % (
                grad, "sum(param, delta) update" if geo else "optimizer op"),
                "one optimizer op updating the parameter block of %s" % grad)
            return ParamBlock(ep, part.name, bi, grad)
        if len(ups) > 1:
            self.add("optimize", part, bi, ups[1][0],
                     "optimize block for %s has %d optimizer ops (%s)"
                     % (grad, len(ups), ", ".join(o.type for _, o in ups)), "exactly one")
        j, op = ups[0]
        sparse = False
        if geo:
            param = op.output("Out")[0]
        elif op.input("Param"):
            param = op.input("Param")[0]
        else:
            param = op.attr("tablename") or sparse_map.get(grad)
            sparse = True
        if param is None:
            self.add("optimize", part, bi, j, "%s names no parameter" % op.type,
                     "a Param input, a tablename attr or a sparse_grad_to_param entry")
            return ParamBlock(ep, part.name, bi, grad, None, None, j, op, sparse)
        var = var_in(prog, param, bi)
        if var is not None and (var.kind == "SELECTED_ROWS" or param in sparse_map.values()):
            sparse = True
        return ParamBlock(ep, part.name, bi, grad, param, var, j, op, sparse)

