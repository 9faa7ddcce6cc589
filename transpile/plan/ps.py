"""The ps-style plan (Paddle 2.1+'s parameter-server pipeline): computed once, then read-only.

It answers what Paddle 2.6's `ParameterServerOptimizer` and `TheOnePSRuntime` work out before
any program is rewritten (ps/utils/public.py, ps/the_one_ps.py):

  - the (param, grad) pairs the optimizer updates, sparse (embeddings looked up with
    remote_prefetch) and dense, in the order of their first optimizer op;
  - the send contexts and table ids: one sparse table per sparse pair, then ONE merged dense
    table `Dense@GRAD_<id>` for every dense grad (data_norm statistics get a table of their
    own), then the barrier table;
  - per table what the descriptors say of it (tables.py): accessor, the optimizer rule and its
    initializers, and the dense table's shard on each server;
  - the ops the trainer loses (optimizer, LR schedule) and the gradient-clip ops it keeps.

Refusals (RefusedError) are Paddle's, with its message, in the order a trainer meets them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Optional

from ..core.config import ClusterConfig
from ..core.errors import RefusedError, UserError
from ..ir import roles
from ..ir.lr_schedule import SCHEDULER_LR_VAR
from ..ir.program import Op, Program, numel, uids
from ..ir.tables import (ids_not_2d, ids_refusal, is_distributed_lookup, is_remote_prefetch,
                         is_sparse_lookup, table_of)
from .clip_faults import geo_raw_row_tables
from .faults import PS_GEO_DENSE_TABLE_GRAD, PS_SPARSE_CLIP_DROPPED
from .pairs import Pair
from .modes import DISTRIBUTED_MODES, ModeQuestions
from .ps_tables import TableSources, barrier_table, describe_table

# DistributedMode of Paddle's ps pipeline (ps/utils/public.py); half_async is not built on CPU
MODES = {m: DISTRIBUTED_MODES[m] for m in ("sync", "async", "geo")}
CLIP_NAME_SCOPE = roles.FLEET_CLIP_NAME_SCOPE
# grads of data_norm's statistics: a table of their own (public.py DATA_NORM_GRAD_NAME)
DATA_NORM_GRAD_SUFFIXES = (".batch_size@GRAD", ".batch_sum@GRAD", ".batch_square_sum@GRAD")


@dataclass(frozen=True)
class SendCtx:
    """One of Paddle's send contexts (get_the_one_send_context): a table and what feeds it."""
    name: str                     # emb@GRAD, Dense@GRAD_<id>, DataNorm@GRAD_<id>
    kind: str                     # sparse | dense | datanorm
    table_id: int
    grads: tuple                  # origin_varnames
    params: tuple
    sections: tuple               # sparse: (rows or 0 when distributed, dim); dense: (numel,)
    distributed: bool = False

    @property
    def is_sparse(self) -> bool:
        return self.kind == "sparse"


@dataclass(frozen=True)
class PsPlan(ModeQuestions):
    mode: str                                   # sync | async | geo
    endpoints: tuple
    trainers: int
    sparse_pairs: tuple
    dense_pairs: tuple
    ctxs: tuple                                 # SendCtx, in table-id order
    tables: tuple                               # PsTable per ctx, then the barrier table
    optimize_ops: tuple                         # uids (ir.program.Op.uid), clips excluded
    clip_ops: tuple                             # uids: optimize-role gradient clips (kept)
    lr_ops: tuple                               # uids: LR-schedule ops
    table_ids: Mapping[str, int]                # sparse param -> table id
    fake_init_tables: tuple                     # startup tables replaced by fake_init (sorted)
    lr_scheduler: bool = False
    notes: tuple = field(default=())
    fs_client_param: Optional[Mapping] = None   # the descriptors' fs client (the config's)
    trainer_clips: tuple = ()                   # clip_faults.TableClip: the trainer clips the
                                                # rows it pushes (passes/sparseclip.py)
    geo_table_rows: tuple = ()                  # geo: tables whose send carries the lookups'
                                                # raw gradient rows (passes/common.py)

    @property
    def dense_ctxs(self) -> tuple:
        return tuple(c for c in self.ctxs if not c.is_sparse)

    @property
    def sparse_ctxs(self) -> tuple:
        return tuple(c for c in self.ctxs if c.is_sparse)

    @property
    def barrier_table_id(self) -> int:
        return len(self.ctxs)

    def server_index(self, endpoint: str) -> int:
        """A pserver's role id: its place in the endpoint list."""
        return self.endpoints.index(endpoint)


def optimize_ops(main: Program) -> list[Op]:
    """Paddle's get_optimize_ops: op_role exactly Optimize, gradient-clip ops excluded."""
    return roles.optimize_ops(main, CLIP_NAME_SCOPE)


def remote_tables(main: Program) -> list[str]:
    """Ws of the lookups with remote_prefetch, first appearance first: the sparse params."""
    out: dict = {}
    for op in main.global_block.ops:
        if is_remote_prefetch(op) and op.input("W"):
            out.setdefault(op.input("W")[0], None)
    return list(out)


def startup_table_names(main: Program) -> list[str]:
    """Tables the trainer's startup fake_inits: W of sparse (not distributed) and of
    distributed lookups (get_sparse_tablenames), sorted (Paddle walks a set)."""
    names = set()
    for op in main.global_block.ops:
        if (is_sparse_lookup(op) or is_distributed_lookup(op)) and table_of(op):
            names.add(table_of(op))
    return tuple(sorted(names))


def _grad_var(main: Program, name: str, why: str):
    v = main.global_block.vars.get(name)
    if v is None:
        raise UserError("the program names %r (%s) but declares no such var" % (name, why))
    return v


def send_contexts(main: Program, sparse: list, dense: list) -> list:
    """Paddle's get_the_one_send_context, in table-id order."""
    ctxs = []
    for p in sparse:
        shape = list(_grad_var(main, p.grad, "a gradient in op_role_var").shape or (0, 0))
        if len(shape) < 2:
            raise UserError("sparse table %s: its grad %s has shape %s, not [rows, dim]"
                            % (p.param, p.grad, shape))
        if p.distributed:
            shape[0] = 0
        ctxs.append(SendCtx(p.grad, "sparse", len(ctxs), (p.grad,), (p.param,),
                            (int(shape[0]), int(shape[1])), p.distributed))
    if dense:
        groups = ([p for p in dense if not p.grad.endswith(DATA_NORM_GRAD_SUFFIXES)],
                  [p for p in dense if p.grad.endswith(DATA_NORM_GRAD_SUFFIXES)])
        for kind, pairs in zip(("dense", "datanorm"), groups):
            if kind == "datanorm" and not pairs:
                break
            size = sum(numel(_grad_var(main, p.grad, "a gradient").shape) for p in pairs)
            prefix = "Dense@GRAD_" if kind == "dense" else "DataNorm@GRAD_"
            ctxs.append(SendCtx(prefix + str(len(ctxs)), kind, len(ctxs),
                                tuple(p.grad for p in pairs), tuple(p.param for p in pairs),
                                (size,)))
    return ctxs


def make_plan(main: Program, startup: Program, config: ClusterConfig, *,
              lr_scheduler: bool = False) -> PsPlan:
    """Compute the ps plan; raises RefusedError where Paddle 2.6.2 refuses the program."""
    if config.mode not in MODES:
        raise RefusedError("mode %s: Paddle's parameter-server pipeline (style ps) runs sync, "
                           "async or geo" % config.mode)
    ops = main.global_block.ops
    opt = optimize_ops(main)
    remote = set(remote_tables(main))
    dist = {table_of(op) for op in ops if is_distributed_lookup(op)}
    sparse, dense = [], []
    for param, grad in roles.params_grads(opt):
        if param in remote:
            sparse.append(Pair(param, grad, True, param in dist))
        else:
            dense.append(Pair(param, grad))
    ctxs = send_contexts(main, sparse, dense)
    table_ids = {c.params[0]: c.table_id for c in ctxs if c.is_sparse}
    geo = config.mode == "geo"

    # the trainer's passes refuse first: distributed_ops_pass, delete_optimizer_pass,
    # fake_init_ops_pass; the descriptors after them
    if not geo:
        remote_by_table: dict = {}      # table -> its remote-prefetch lookups, in order
        for op in ops:
            if is_remote_prefetch(op) and op.input("W"):
                remote_by_table.setdefault(op.input("W")[0], []).append(op)
        for w in remote_tables(main):
            if w not in table_ids:
                raise RefusedError(
                    "'%s': embedding %s is looked up with remote_prefetch but no optimizer op "
                    "updates it (Paddle's distributed_ops_pass fails on its grad name: "
                    "KeyError '%s')" % (w, w, w))
            bad = ids_not_2d(main.global_block, remote_by_table.get(w, []))
            if bad:
                raise RefusedError(ids_refusal(w, bad, "Paddle's distributed_ops_pass"))
        if lr_scheduler and main.global_block.var(SCHEDULER_LR_VAR) is None:
            raise RefusedError("'%s': the learning rate is set by an LR scheduler, but the "
                               "program has no var %s (Paddle's delete_optimizer_pass looks "
                               "it up; set lr_scheduler: false if the rate is constant)"
                               % (SCHEDULER_LR_VAR, SCHEDULER_LR_VAR))
        check_table_inits(startup, startup_table_names(main))

    index = TableSources(main, startup, opt)
    entries = config.strategy_tables()
    tables = [describe_table(c, main, index, config, entries) for c in ctxs]
    tables.append(barrier_table(len(ctxs), config))
    check_server_block_attrs(main)

    notes = settings_notes(config, entries, [c.params[0] for c in ctxs if c.is_sparse], tables)
    if lr_scheduler:
        notes.append("the learning rate is fed by an LR scheduler (geo keeps the optimizer)"
                     if geo else "the learning rate is fed by an LR scheduler: the trainer "
                     "keeps %s as a persistable var" % SCHEDULER_LR_VAR)
    if geo:
        notes.append("geo_push_nums (the strategy's k_steps) selects geo mode; its value is "
                     "the communicator's and appears in no program or descriptor")

    return PsPlan(
        mode=config.mode, endpoints=tuple(config.pservers), trainers=config.trainers,
        sparse_pairs=tuple(sparse), dense_pairs=tuple(dense), ctxs=tuple(ctxs),
        tables=tuple(tables), optimize_ops=uids(opt),
        clip_ops=uids(roles.clip_ops(main, CLIP_NAME_SCOPE)),
        lr_ops=uids(roles.lr_sched_ops(main)), table_ids=MappingProxyType(table_ids),
        fake_init_tables=startup_table_names(main), lr_scheduler=lr_scheduler,
        notes=tuple(notes), fs_client_param=config.fs_client(),
        trainer_clips=_trainer_clips(main, config, [p.param for p in sparse]),
        geo_table_rows=geo_raw_row_tables(main, config, {p.param for p in sparse},
                                          PS_GEO_DENSE_TABLE_GRAD))


def _trainer_clips(main: Program, config, remote: list) -> tuple:
    """ps-sparse-clip-dropped fixed: the trainer clips the rows it pushes (TableClip)."""
    from .clip_faults import sparse_clip_fault, sparse_clip_tables, table_clips
    if not config.fix_faults or config.mode == "geo":
        return ()
    clip = sparse_clip_fault(main, config, set(remote), PS_SPARSE_CLIP_DROPPED)
    if clip is None or not clip.fixed:
        return ()
    return table_clips(main, [t for t in remote if t in sparse_clip_tables(main, set(remote))])


def check_server_block_attrs(main: Program) -> None:
    """A pserver's refusal, after every trainer got through: once the server's (one-block)
    program has replaced the loss block's program, TheOnePSRuntime's _set_basic_info reads
    every attr of every op of the original global block (get_param_grads), and an op whose
    BLOCK attr names a sub-block (a `while`, a `conditional_block`) fails framework.py's
    _block_attr assertion."""
    for i, op in enumerate(main.global_block.ops):
        if op.attr(roles.ROLE_ATTR) is None:
            continue
        sub = [b for b in op.block_refs() if b >= 1]
        if sub:
            raise RefusedError(
                "AssertionError (every pserver: TheOnePSRuntime._set_basic_info -> "
                "get_param_grads reads the attrs of op %d (%s), whose sub-block %d is no block "
                "of the one-block server program; framework.py _block_attr asserts)"
                % (i, op.type, sub[0]))


def settings_notes(config, entries: list, sparse_tables: list, tables: list) -> list:
    """What the plan says of the strategy settings Paddle skips, overwrites or ignores
    (core/ps_lint.py's problems, and the table names no sparse table has)."""
    from ..core.ps_lint import config_problems
    notes = ["%s: %s" % kp for kp in config_problems(config)] \
        if config.traits.strategy_settings else []
    if config.mode != "geo":
        seen: set = set()
        for kind, name, entry in entries:
            table = entry.get("table_name")
            if table not in sparse_tables:
                notes.append("%s.%s names no sparse table of the program (%s): Paddle "
                             "ignores it" % (kind, name, ", ".join(sparse_tables) or "none"))
            elif table in seen:
                notes.append("%s.%s: an earlier entry already sets table %s; Paddle reads "
                             "only the first" % (kind, name, table))
            seen.add(table)
    if config.adam_d2sum and config.mode != "geo":
        for t in tables:
            if t.kind == "dense" and t.rule != "adam_d2sum":
                notes.append("adam_d2sum: the dense table %d is updated by %s, not adam: "
                             "Paddle gives it the %s rule" % (t.table_id, t.optimizer, t.rule))
    return notes


def table_writers(startup: Program, tables) -> dict:
    """{table: [the startup ops that write it, each once, in order]}, in one walk."""
    out: dict = {t: [] for t in tables}
    for op in startup.global_block.ops:
        for name in set(op.output_names()):
            if name in out:
                out[name].append(op)
    return out


def check_table_inits(startup: Program, tables) -> None:
    """fake_init_ops_pass's refusals: a table must be declared in the startup program and
    written there by exactly one op."""
    writers = table_writers(startup, tables)
    for t in tables:
        if t not in startup.global_block.vars:
            raise RefusedError("'%s': the startup program does not declare the embedding "
                               "table %s (Paddle's fake_init_ops_pass: KeyError)" % (t, t))
        n = len(writers[t])
        if n != 1:
            raise RefusedError("table init op num should be 1, now is %d (table %s)" % (n, t))
