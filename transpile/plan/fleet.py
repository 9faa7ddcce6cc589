"""The fleet-style distribution plan: computed once from (main, startup, config), then read-only.

It answers the questions Fleet's CompileTimeStrategy answers (ir/public.py), without mutating
anything: which (param, grad) pairs the optimizer updates and which of them are sparse tables,
how each param / grad is sliced into blocks, which endpoint owns each block, which ops are
optimizer and learning-rate ops. Every fleet pass reads this plan; none recomputes placement.

Fleet differs from the classic DistributeTranspiler in ways that are deliberate here:
  - the minimum block size is Fleet's fixed 81920 elements (the config's min_block_size,
    slice_var_up and split_method belong to the classic style; Fleet always slices and always
    dispatches round robin), except that `split_method: balanced` places the dense blocks by
    bytes (placement.py) in this style too;
  - sparse tables (embeddings with remote_prefetch) are sliced uniformly by rows, one block per
    endpoint, and their dispatch restarts at the first endpoint for every table;
  - gradient-clip ops are recognised by the "gradient_clip" name scope (classic: "@CLIP").
The arithmetic itself is shared with the classic style: slicing.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Mapping, Optional

from ..core.config import ClusterConfig
from ..core.errors import RefusedError, UserError
from ..ir import roles
from ..ir.lr_schedule import SCHEDULER_LR_VAR
from ..ir.optimizers import is_optimizer_update
from ..ir.program import Op, Program, Var, uids
from ..ir.tables import (LOOKUP_GRAD_TYPES, LOOKUP_TABLE_TYPES, is_distributed_lookup,
                         is_remote_prefetch, is_sparse_lookup, remote_lookup_groups, table_of)
from .faults import (FLEET_CLIP_BEFORE_MERGE, FLEET_ORPHAN_SPARSE_GRAD_SUM,
                     FLEET_DECAY_WHOLE_PARAM, FLEET_SPARSE_CLIP_DROPPED,
                     FLEET_SPARSE_DECAY_WHOLE_TABLE,
                     FLEET_SYNC_STEP_COUNTER, clip_fix_blocker)
from .pairs import Pair
from .placed import fleet_params
from .modes import ModeQuestions
from .slicing import (FLEET_MIN_BLOCK_SIZE, dispatch, slice_rows_evenly, slice_variable,
                      split_var, trainer_copy_name, trainer_copy_names)

STEP_COUNTER = "@PS_STEP_COUNTER@"
LR_DECAY_COUNTER = "@LR_DECAY_COUNTER@"
CLIP_NAME_SCOPE = roles.FLEET_CLIP_NAME_SCOPE



def delta_name(block: str) -> str:
    """Geo: the var a trainer pushes a param block's accumulated change as."""
    return block + ".delta"


def is_step_increment(op: Op) -> bool:
    """The global-step counter's increment: it stays with the trainers' communicator."""
    return op.type == "increment" and op.input("X")[:1] == [LR_DECAY_COUNTER]


def orphan_sums(ops: list[Op], grad_group: list[Op]) -> list[Op]:
    """The `sum` ops that add only the W@GRAD outputs of `grad_group` (a table's lookup grads,
    which distributed_push_sparse replaces): left alone, they read nothing."""
    outs = {o for op in grad_group for o in op.output("W@GRAD")}
    return [op for op in ops
            if op.type == "sum" and op.input("X") and outs.issuperset(op.input("X"))]


def sum_ops(ops: list[Op]) -> list[Op]:
    """The `sum` ops of `ops` (what orphan_sums looks at), for asking it of many tables."""
    return [op for op in ops if op.type == "sum"]


@dataclass(frozen=True)
class FleetPlan(ModeQuestions):
    mode: str                                   # sync | async | half_async | geo
    endpoints: tuple
    trainers: int
    dense_pairs: tuple
    sparse_pairs: tuple
    param_slices: Mapping[str, tuple]           # origin param name -> VarBlocks
    grad_slices: Mapping[str, tuple]            # origin grad name -> VarBlocks
    ep_params: Mapping[str, tuple]              # endpoint -> param VarBlocks, dispatch order
    ep_grads: Mapping[str, tuple]               # endpoint -> grad VarBlocks, dispatch order
    optimize_ops: tuple                         # op uids (ir.program.Op.uid), clips excluded
    clip_ops: tuple                             # uids of the gradient-clip ops
    lr_ops: tuple                               # uids of the LR-schedule ops
    sparse_tables: tuple                        # tables of is_sparse, non-distributed lookups
    distributed_tables: tuple                   # tables of is_distributed lookups
    table_ids: Mapping[str, int]                # sparse param -> the-one-ps table id
    update_ops: Mapping[str, int]               # param -> the uid of its optimizer op
    pserver_lr_ops: tuple                       # the LR ops the pservers run (lr_ops but the
                                                # step counter's increment)
    sparse_lookup_ops: tuple                    # uids of the remote lookups and their
                                                # grads, fused into distributed ops
    need_global_step: bool
    has_lr_scheduler: bool
    lr_var: Optional[str] = None
    notes: tuple = field(default=())
    split_method: str = "round_robin"           # "balanced" when asked for, else Fleet's own
    fixes: frozenset = frozenset()              # Paddle fault ids this split fixes (faults.py)
    orphan_sums: tuple = ()                     # tables whose lookup-grad sum outlives them
    trainer_clips: tuple = ()                   # clip_faults.TableClip: the trainer clips the
                                                # rows it pushes (passes/sparseclip.py)
    geo_table_rows: tuple = ()                  # geo: tables whose send carries the lookups'
                                                # raw gradient rows (passes/common.py)

    # --- questions the passes ask -----------------------------------------------------------
    def placed_params(self, main: Program) -> list:
        """The pairs as style-neutral PlacedParams (placed.py), in order."""
        return fleet_params(self, main)

    @property
    def dense_order(self) -> list:
        """The dense params in the order Fleet dispatches their blocks: program order."""
        return [p.param for p in self.dense_pairs]

    @property
    def pairs(self) -> tuple:
        return self.dense_pairs + self.sparse_pairs

    def pair_of_param(self, param: str) -> Optional[Pair]:
        return self._pair_index.get(param)

    @cached_property
    def _pair_index(self) -> dict:
        out = {}
        for p in self.pairs:
            out.setdefault(p.param, p)
        return out

    def grad_to_param(self) -> dict:
        return {p.grad: p.param for p in self.pairs}

    def merged_grad_names(self, param: str) -> list:
        """Per param block, the name the pserver merges its grad under (geo: the delta)."""
        if self.is_geo:
            return [delta_name(b.name) for b in self.param_slices[param]]
        grad = self.pair_of_param(param).grad
        return [g.name for g in self.grad_slices[grad]]

    def sent_grad_name(self, merged: str, trainer_id: int) -> str:
        """The name trainer `trainer_id` sends a grad block under (sync with several trainers
        appends .trainer_<id>)."""
        if self.is_sync and self.trainers > 1:
            return trainer_copy_name(merged, trainer_id)
        return merged

    def sent_grad_names(self, merged, trainer_id: int) -> list:
        """[sent_grad_name(m, trainer_id) for m in merged], made in one go (not interned)."""
        if self.is_sync and self.trainers > 1:
            return trainer_copy_names(merged, trainer_id)
        return list(merged)

    def trainer_copies(self) -> int:
        """The gradient copies the pservers declare, one per trainer and gradient block (sync
        mode with several trainers), or 0."""
        if not (self.is_sync and self.trainers > 1):
            return 0
        return self.trainers * sum(len(v) for v in self.grad_slices.values())

    def endpoint_of(self, slice_name: str) -> list:
        """Endpoints holding a param or grad slice of that name (Paddle's build_ctx lookup)."""
        eps = self._slice_endpoints.get(slice_name, ())
        return [eps] if eps.__class__ is str else list(eps)

    @cached_property
    def _slice_endpoints(self) -> dict:
        """slice name -> its endpoint, or a tuple of them when several hold a slice of that
        name (the endpoint's own string, not a list per slice: a split to many pservers has a
        hundred thousand slices)."""
        out: dict = {}
        for ep in self.endpoints:
            for s in self.ep_params[ep] + self.ep_grads[ep]:
                eps = out.get(s.name)
                if eps is None:
                    out[s.name] = ep
                elif eps.__class__ is str:
                    if eps != ep:
                        out[s.name] = (eps, ep)
                elif eps[-1] != ep:
                    out[s.name] = eps + (ep,)
        return out


def trainer_send_queues(plan: FleetPlan) -> list:
    """(queue name, vars sent) per send op, in order: the communicator send contexts.

    Sparse tables outside geo are pushed by distributed_push_sparse, so they get no send."""
    if plan.is_geo:
        queues = [(p.param, [p.grad]) for p in plan.sparse_pairs]
        return queues + [(STEP_COUNTER, [])]
    queues = [(p.grad, [p.grad]) for p in plan.dense_pairs]
    if plan.mode == "async":
        queues.append((STEP_COUNTER, []))
    return queues


def _var(main: Program, name: str, why: str) -> Var:
    v = main.global_block.vars.get(name)
    if v is None:
        raise UserError("the program names %r (%s) but declares no such var" % (name, why))
    if v.kind not in ("LOD_TENSOR", "SELECTED_ROWS"):
        raise UserError("%s: a %s var can not be distributed (LOD_TENSOR or SELECTED_ROWS only)"
                        % (name, v.kind))
    return v


def make_plan(main: Program, startup: Program, config: ClusterConfig, *,
              lr_scheduler: bool = False) -> FleetPlan:
    """Compute the fleet plan; raises RefusedError where Paddle refuses the program.

    `lr_scheduler`: the program's learning rate is set by a Python LRScheduler each step
    (ir/lr_schedule.py tells it from the program, the config can say it); Fleet then keeps the
    LR var on the trainer.
    """
    ops = main.global_block.ops
    remote, sparse_tables, dist_tables = _tables(ops)
    optimize_ops, clip_ops, lr_ops = roles.classified_ops(main, CLIP_NAME_SCOPE)
    dense, sparse = [], []
    for param, grad in roles.params_grads(optimize_ops):
        _var(main, param, "a parameter in op_role_var")
        _var(main, grad, "a gradient in op_role_var")
        if param in remote:
            sparse.append(Pair(param, grad, True, param in dist_tables))
        else:
            dense.append(Pair(param, grad))
    _check_ops(ops, optimize_ops, dense + sparse, remote)
    if config.mode == "geo":
        _check_geo(sparse, dist_tables)
    placed_params, placed_grads, ep_params, ep_grads = _place(main, config, dense, sparse,
                                                              optimize_ops)
    need_global_step = any(is_step_increment(op) for op in lr_ops)
    update_ops = {}
    for op in optimize_ops:
        if is_optimizer_update(op):
            update_ops.setdefault(op.input("Param")[0], op.uid)
    pulls, pushes = remote_lookup_groups(ops)
    lr_var, notes = _lr_var(main, optimize_ops), []
    if lr_scheduler:
        lr_var = _scheduler_lr_var(main)
        notes.append("the learning rate %s is fed by an LR scheduler: the trainer keeps it as a "
                     "persistable var" % lr_var)
    # tables whose lookup grads Paddle's backward added with a `sum` that fusing them into one
    # push leaves reading nothing (fault fleet-orphan-sparse-grad-sum)
    sums = sum_ops(ops) if pushes and config.mode != "geo" else []
    orphans = tuple(sorted(t for t, group in pushes.items()
                           if config.mode != "geo" and orphan_sums(sums, group)))
    fixes = _fixes(main, config, orphans, need_global_step, clip_ops, placed_grads,
                   [p.param for p in sparse], placed_params)
    lookup_uids = {o.uid for group in list(pulls.values()) + list(pushes.values())
                   for o in group}
    trainer_clips = _trainer_clips(main, config, fixes, [p.param for p in sparse])
    return FleetPlan(
        mode=config.mode, endpoints=tuple(config.pservers), trainers=config.trainers,
        dense_pairs=tuple(dense), sparse_pairs=tuple(sparse),
        param_slices=MappingProxyType(placed_params), grad_slices=MappingProxyType(placed_grads),
        ep_params=MappingProxyType(ep_params), ep_grads=MappingProxyType(ep_grads),
        optimize_ops=uids(optimize_ops), clip_ops=uids(clip_ops), lr_ops=uids(lr_ops),
        sparse_tables=tuple(sparse_tables), distributed_tables=tuple(dist_tables),
        table_ids=MappingProxyType(_table_ids(dense, sparse)),
        update_ops=MappingProxyType(update_ops),
        pserver_lr_ops=uids(op for op in lr_ops if not is_step_increment(op)
                            or FLEET_SYNC_STEP_COUNTER in fixes),
        sparse_lookup_ops=uids(op for op in ops if op.uid in lookup_uids),
        need_global_step=need_global_step, has_lr_scheduler=lr_scheduler, lr_var=lr_var,
        notes=tuple(notes),
        split_method="balanced" if config.split_method == "balanced" else "round_robin",
        fixes=frozenset(fixes), orphan_sums=orphans, trainer_clips=trainer_clips,
        geo_table_rows=_geo_table_rows(main, config, [p.param for p in sparse]))


def _geo_table_rows(main: Program, config: ClusterConfig, remote: list) -> tuple:
    from .clip_faults import geo_raw_row_tables
    from .faults import FLEET_GEO_DENSE_TABLE_GRAD
    return geo_raw_row_tables(main, config, set(remote), FLEET_GEO_DENSE_TABLE_GRAD)


def _trainer_clips(main: Program, config: ClusterConfig, fixes: set, remote: list) -> tuple:
    """fleet-sparse-clip-dropped fixed where the pservers cannot clip (a global-norm clip, a
    norm over a sliced table): the trainer clips the rows it pushes (clip_faults.TableClip)."""
    from .clip_faults import sparse_clip_fault, sparse_clip_tables, table_clips
    if not config.fix_faults or config.mode == "geo" or FLEET_SPARSE_CLIP_DROPPED in fixes:
        return ()
    clip = sparse_clip_fault(main, config, set(remote), FLEET_SPARSE_CLIP_DROPPED)
    if clip is None or not clip.fixed:
        return ()
    return table_clips(main, [t for t in remote if t in sparse_clip_tables(main, set(remote))])


def _tables(ops) -> tuple:
    """(remote-prefetch params: Fleet's "sparse" params, sparse tables, distributed tables),
    each in first-use order: dicts with None values, ordered sets (a CTR model has a table per
    slot, thousands of them: looked up, not searched)."""
    remote, sparse_tables, dist_tables = {}, {}, {}
    for op in ops:
        table = table_of(op)
        if table is None:
            continue
        if is_remote_prefetch(op):
            remote.setdefault(table)
        if is_sparse_lookup(op):
            sparse_tables.setdefault(table)
        if is_distributed_lookup(op):
            dist_tables.setdefault(table)
    return remote, sparse_tables, dist_tables


def _check_geo(sparse: list, dist_tables: dict) -> None:
    if not sparse:
        raise RefusedError("geo mode needs a sparse parameter (an embedding looked up with "
                           "is_sparse and remote_prefetch); this program has none")
    if dist_tables:
        raise RefusedError("geo mode can not handle large-scale embedding tables "
                           "(is_distributed lookups: %s); use a plain sparse embedding"
                           % ", ".join(dist_tables))


def _place(main: Program, config: ClusterConfig, dense: list, sparse: list,
           optimize_ops: list) -> tuple:
    """(param blocks, grad blocks, {endpoint: param blocks}, {endpoint: grad blocks}).

    Round robin: dense blocks continue from one var to the next, each sparse table restarts
    at the first endpoint; a grad block goes where its param block goes. split_method
    balanced places the dense blocks by bytes instead (placement.py)."""
    endpoints = tuple(config.pservers)
    n = len(endpoints)
    param_slices, grad_slices = {}, {}
    for pairs, sizes_of in ((dense, _dense_sizes), (sparse, slice_rows_evenly)):
        for p in pairs:
            pv, gv = main.global_block.vars[p.param], main.global_block.vars[p.grad]
            param_slices.setdefault(p.param, _blocks(pv, sizes_of(tuple(pv.shape or ()), n)))
            grad_slices.setdefault(p.grad, _blocks(gv, sizes_of(tuple(gv.shape or ()), n)))
    ep_params = {ep: [] for ep in endpoints}
    ep_grads = {ep: [] for ep in endpoints}
    placed_params, placed_grads = {}, {}
    for group in [dense] + [[p] for p in sparse]:
        group = _first_per_grad(group, placed_grads)
        if config.split_method == "balanced" and group and not group[0].sparse:
            from .placement import fleet_placement
            eps = iter(fleet_placement(main, group, sparse, param_slices, optimize_ops,
                                       endpoints, config.mode == "geo"))
        else:
            eps = iter(dispatch([b.name for p in group for b in param_slices[p.param]],
                                endpoints, "round_robin"))
        for p in group:
            gs, ps = grad_slices[p.grad], param_slices[p.param]
            if len(gs) != len(ps):
                raise UserError("%s and its grad %s have different shapes: %s vs %s"
                                % (p.param, p.grad, ps[0].shape, gs[0].shape))
            new_p, new_g = [], []
            for g, b in zip(gs, ps):
                ep = next(eps)
                new_p.append(b.at(ep))
                new_g.append(g.at(ep))
                ep_params[ep].append(new_p[-1])
                ep_grads[ep].append(new_g[-1])
            placed_params[p.param], placed_grads[p.grad] = tuple(new_p), tuple(new_g)
    return (placed_params, placed_grads, {k: tuple(v) for k, v in ep_params.items()},
            {k: tuple(v) for k, v in ep_grads.items()})


def _table_ids(dense: list, sparse: list) -> dict:
    """The-one-ps table ids of the sparse params: after the one dense table, in order."""
    dense_offset = 1 if dense else 0
    return {p.param: dense_offset + i for i, p in enumerate(sparse)}


def _scheduler_lr_var(main: Program) -> str:
    """Fleet's delete_optimizer_pass (_add_lr_var) re-declares the var by this fixed name,
    whatever the optimizer reads, and fails when the program has no such var."""
    if main.global_block.var(SCHEDULER_LR_VAR) is None:
        raise RefusedError("the learning rate is set by an LR scheduler, but the program has "
                           "no var %s: Fleet's delete_optimizer_pass looks that name up and "
                           "fails (set lr_scheduler: false if the rate is constant)"
                           % SCHEDULER_LR_VAR)
    return SCHEDULER_LR_VAR


def sparse_table_fixes(main: Program, config: ClusterConfig, remote, param_slices) -> set:
    """fleet-sparse-clip-dropped and fleet-sparse-decay-whole-table, when fixable."""
    from .clip_faults import decayed_sliced, pserver_clip_blocker, sparse_clip_fault
    remote = set(remote)
    sliced = {p for p, blocks in param_slices.items() if len(blocks) > 1}
    out = set()
    clip = sparse_clip_fault(main, config, remote, FLEET_SPARSE_CLIP_DROPPED)
    if clip is not None and clip.fixed and pserver_clip_blocker(main, remote, sliced) is None:
        out.add(FLEET_SPARSE_CLIP_DROPPED)          # the pservers clip the blocks they get
    decayed = decayed_sliced(main, sliced)
    if set(decayed) & remote:
        out.add(FLEET_SPARSE_DECAY_WHOLE_TABLE)
    if set(decayed) - remote:
        out.add(FLEET_DECAY_WHOLE_PARAM)
    return out


def _fixes(main: Program, config: ClusterConfig, orphans: tuple, need_global_step: bool,
           clip_ops: list, placed_grads: dict, remote=(), placed_params=None) -> set:
    """The Paddle faults (plan/faults.py) this split fixes, when the config asks for that."""
    fixes = set()
    if config.fix_faults and orphans:
        fixes.add(FLEET_ORPHAN_SPARSE_GRAD_SUM)
    if config.fix_faults and config.mode != "geo":
        fixes |= sparse_table_fixes(main, config, remote, placed_params)
    if config.fix_faults and config.mode == "sync":
        if need_global_step:
            fixes.add(FLEET_SYNC_STEP_COUNTER)
        if config.trainers > 1 and clip_ops and \
                clip_fix_blocker(main.global_block.ops, uids(clip_ops), placed_grads) is None:
            fixes.add(FLEET_CLIP_BEFORE_MERGE)
    return fixes


def _check_ops(ops: list, optimize_ops: list, pairs: list, remote: dict) -> None:
    """The slots and attrs the fleet passes rely on are there (a saved program that lost them
    would otherwise fail deep inside a pass)."""
    def need(op, io, slot):
        if not (op.inputs if io == "input" else op.outputs).get(slot):
            raise UserError("%s op: %s %s is missing or empty" % (op.type, io, slot))

    for op in optimize_ops:
        rv = op.attr("op_role_var") or []
        if len(rv) == 1 or len(rv) % 2:
            raise UserError("%s op (optimize role): op_role_var %r should name a (param, grad) "
                            "pair" % (op.type, rv))
        if is_optimizer_update(op):
            need(op, "input", "Grad")
            if op.type == "adam":
                for slot in ("Moment1", "Moment2", "Beta1Pow", "Beta2Pow"):
                    need(op, "input", slot)
    updated = {op.input("Param")[0] for op in optimize_ops if is_optimizer_update(op)}
    for p in pairs:
        if p.param not in updated:
            raise UserError("parameter %s has optimize ops (op_role_var) but no optimizer op "
                            "(with Param and LearningRate) updates it" % p.param)
    for op in ops:
        if op.type in LOOKUP_TABLE_TYPES and op.input("W")[:1] and op.input("W")[0] in remote:
            need(op, "input", "Ids")
            need(op, "output", "Out")
        if op.type in LOOKUP_GRAD_TYPES and op.input("W")[:1] and op.input("W")[0] in remote:
            need(op, "input", "Ids")
            need(op, "input", "Out@GRAD")
            need(op, "output", "W@GRAD")


def _first_per_grad(pairs: list, placed: dict) -> list:
    """The pairs whose grad is not placed yet, the first of those sharing a grad."""
    out, seen = [], set()
    for p in pairs:
        if p.grad not in placed and p.grad not in seen:
            seen.add(p.grad)
            out.append(p)
    return out


def _dense_sizes(shape: tuple, slice_count: int) -> list:
    """Fleet's _slice_variable: the shared arithmetic with the fixed minimum block size."""
    return slice_variable(shape, slice_count, FLEET_MIN_BLOCK_SIZE)


def _blocks(var: Var, sizes: list) -> list:
    return split_var(var.name, tuple(var.shape or ()), sizes, var.dtype, var.kind, var.lod_level)


def _lr_var(main: Program, optimize_ops) -> Optional[str]:
    """The learning-rate var the optimizer ops read (the first one, when they differ)."""
    for op in optimize_ops:
        lr = op.input("LearningRate")
        if lr:
            return lr[0]
    return None
