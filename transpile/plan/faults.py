"""Paddle's known faults: places where the split Paddle makes does not train like the program it
came from, each with a stable id.

`split` reproduces them by default (`paddle_faults: reproduce`: the output equals Paddle's) and,
with `paddle_faults: fix`, writes the smallest change that makes the split train like the
original. A few faults are corrected in both settings (the reference corpus corrects them: the
output Paddle should have written). `simulate` proves the difference; `check` names the fault
of a split that reproduces one (check/faults.py).

This module is the vocabulary (FAULT_KINDS) and the finding of faults in a program for a config;
the fixes live where the programs are made (plan/classic.py, plan/fleet.py and the passes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core.styles import CLASSIC, FLEET, PS
from ..ir.program import indexed
from ..ir.tables import LOOKUP_TABLE_TYPES


# The fault ids: stable, documented in docs/faults.md; use these names, never the strings.
CLASSIC_LOCAL_TABLE_FAKE_INIT = "classic-local-table-fake-init"
CLASSIC_DIST_TABLE_OPTIMIZER = "classic-dist-table-optimizer"
CLASSIC_DIST_TABLE_IDS_NOT_2D = "classic-dist-table-ids-not-2d"
CLASSIC_RMSPROP_MEAN_GRAD_SHAPE = "classic-rmsprop-mean-grad-shape"
CLASSIC_UNWIRED_GRAD_CHAIN = "classic-unwired-grad-chain"
FLEET_CLIP_BEFORE_MERGE = "fleet-clip-before-merge"
FLEET_ORPHAN_SPARSE_GRAD_SUM = "fleet-orphan-sparse-grad-sum"
FLEET_LARGE_SCALE_ADAM = "fleet-large-scale-adam"
FLEET_SYNC_STEP_COUNTER = "fleet-sync-step-counter"
CLASSIC_LOOKUP_IDS_NOT_2D = "classic-lookup-ids-not-2d"
FLEET_LOOKUP_IDS_NOT_2D = "fleet-lookup-ids-not-2d"
PS_LOOKUP_IDS_NOT_2D = "ps-lookup-ids-not-2d"
CLASSIC_CLIP_ON_PSERVER = "classic-clip-on-pserver"
FLEET_SPARSE_CLIP_DROPPED = "fleet-sparse-clip-dropped"
PS_SPARSE_CLIP_DROPPED = "ps-sparse-clip-dropped"
PS_CLIP_BEFORE_MERGE = "ps-clip-before-merge"
PS_GEO_NO_SPARSE_TABLE = "ps-geo-no-sparse-table"
PS_PUSH_IDS_LOD2 = "ps-push-ids-lod2"
FLEET_GEO_DENSE_TABLE_GRAD = "fleet-geo-dense-table-grad"
PS_GEO_DENSE_TABLE_GRAD = "ps-geo-dense-table-grad"
FLEET_SPARSE_DECAY_WHOLE_TABLE = "fleet-sparse-decay-whole-table"
FLEET_DECAY_WHOLE_PARAM = "fleet-decay-whole-param"
CLASSIC_DIST_TABLE_CRASH = "classic-dist-table-crash"
CLASSIC_ASSIGN_INIT_WHOLE_PARAM = "classic-assign-init-whole-param"
FLEET_ASSIGN_INIT_WHOLE_PARAM = "fleet-assign-init-whole-param"
PS_DENSE_EMPTY_INIT = "ps-dense-empty-initializer"


@dataclass(frozen=True)
class FaultKind:
    id: str
    style: str          # the style's name (core/styles.py)
    modes: str          # where it occurs, as text
    paddle: str         # what happens in Paddle's split
    fix: str            # what `paddle_faults: fix` changes
    always_fixed: bool = False      # corrected in both settings (the corpus corrects it)
    refused: bool = False           # Paddle refuses the program: `split` exits 2 unless fixed
    crash: bool = False             # Paddle's pipeline raises on the program (a bug of its
                                    # own): the split is what it writes with the bug mended
    brief: str = ""                 # `fix` in one clause, for a finding that quotes it


# what `fix` writes for ps-dense-empty-initializer, which check's finding quotes
_DENSE_EMPTY_FIX = ("the dense table's Param starts as fill_constant&0.0, which the pserver "
                    "reads: trainer 0 pushes its own initialized dense parameters to the table "
                    "before any trainer pulls")

FAULT_KINDS = (
    FaultKind(CLASSIC_LOCAL_TABLE_FAKE_INIT, CLASSIC.name, "sync, async, half_async",
              "a sparse table the trainer looks up locally (lookup_table with is_sparse, no "
              "remote_prefetch) is fake_init'ed in the trainer startup and never received, so "
              "the first step reads a table with no values",
              "the trainer startup receives the table from the pservers (recv + concat), as "
              "every other parameter"),
    FaultKind(CLASSIC_DIST_TABLE_OPTIMIZER, CLASSIC.name, "sync, async, half_async",
              "the distributed lookup table (is_distributed) is trained on the pservers with sgd "
              "whatever the program's optimizer, and in sync mode the trainers' gradients are "
              "summed without the 1/trainers scale",
              "the table is served as row blocks looked up by remote prefetch (the "
              "transpiler's own mechanism for a sparse table), each block trained by the "
              "program's optimizer on the averaged gradient"),
    FaultKind(CLASSIC_DIST_TABLE_IDS_NOT_2D, CLASSIC.name, "sync, async, half_async",
              "the distributed table (is_distributed, static.nn.sparse_embedding) looked up by "
              "ids that are not 2-D (a padded multi-hot slot unsqueezed to [-1, n, 1]): the "
              "trainer's merge_ids gives one row per entry of the ids' first dim ([N, W]) where "
              "the program expects [N, n, W], so the trainer computes on the wrong rows and "
              "shapes",
              "the table is served as row blocks (classic-dist-table-optimizer's fix) and its "
              "lookups read their ids made 2-D (classic-lookup-ids-not-2d's fix)"),
    FaultKind(CLASSIC_RMSPROP_MEAN_GRAD_SHAPE, CLASSIC.name, "every mode",
              "rmsprop's MeanGrad accumulator keeps the whole parameter's shape on a pserver "
              "that holds a slice of it",
              "MeanGrad gets the slice's shape, as Moment and MeanSquare (corrected in both "
              "settings)", always_fixed=True),
    FaultKind(CLASSIC_UNWIRED_GRAD_CHAIN, CLASSIC.name, "every mode",
              "the pserver computes the clip / weight-decay chain of a parameter's gradient "
              "and then updates the parameter with the merged gradient, ignoring the chain",
              "the optimizer reads the chain's result (corrected in both settings)",
              always_fixed=True),
    FaultKind(FLEET_CLIP_BEFORE_MERGE, FLEET.name, "sync, 2+ trainers",
              "gradient clipping runs on each trainer's gradient before the pservers average "
              "them, not on the averaged gradient",
              "the trainer sends the gradient unclipped (the clip op becomes an assign) and "
              "each pserver clips the averaged gradient; clip by value, and clip by norm of an "
              "unsliced parameter (a global-norm clip needs every gradient at once and stays "
              "as Paddle has it)"),
    FaultKind(FLEET_ORPHAN_SPARSE_GRAD_SUM, FLEET.name, "sync, async, half_async",
              "a table looked up more than once: the trainer's lookup grads become one "
              "distributed_push_sparse, but the `sum` that added them stays over vars no op "
              "writes any more: empty SelectedRows, which Paddle's sum skips; its result is "
              "an empty gradient nothing reads (harmless on its own; a clip that reads it "
              "fails: fleet-sparse-clip-dropped)",
              "the orphaned `sum` is removed (the push sends the table's gradient)"),
    FaultKind(FLEET_LARGE_SCALE_ADAM, FLEET.name, "sync, async, half_async",
              "a large-scale table (is_distributed) trained with adam is updated by Paddle's "
              "fused lookup_sparse_table_fuse_adam, which corrects the bias with the next "
              "step's beta powers (it updates them in place first) and moves only the rows "
              "of each step's gradient, where adam without lazy_mode moves every row that "
              "has a moment",
              "the table is served as row blocks of a sparse table (looked up and pushed "
              "like any remote table), each block trained by the program's adam"),
    FaultKind(FLEET_SYNC_STEP_COUNTER, FLEET.name, "sync, with LR decay",
              "the trainers drop the step counter's increment and sync trainers never send "
              "it, so the pservers' @LR_DECAY_COUNTER@ keeps its startup value and the "
              "learning rate never follows the schedule",
              "the pservers' LR-decay block increments the counter once per step (the "
              "increment the original runs), as the classic transpiler does"),
)
_IDS_PADDLE = ("Paddle's distributed_lookup_table must be fed 2-D ids (its InferShape "
               "checks every Ids var as the pass inserts the op): a remote table looked up "
               "with ids of another rank ([-1], a slice of one feed tensor, or [-1, a, b]) is "
               "refused: \"The dimension of the 'Ids' tensor must be 2.\"")
_IDS_FIX = ("each such lookup reads its ids made 2-D, keeping the batch as their first dim "
            "(lookup_table_v2: unsqueeze2 of [-1] to [-1, 1], reshape2 [0, -1] of [-1, a, b]; "
            "lookup_table's [-1, n, 1]: reshape2 to [-1, 1] for the lookup, squeeze2 to [-1, n] "
            "for its grads and push) and its rows are made back into the shape the program "
            "uses (squeeze2 / reshape2) before their first reader; the grads are pushed by ids "
            "of the batch's first dim, so the push scales them as the original's (ids with "
            "more than one unknown dim besides the batch can not be fixed)")
_GEO_DENSE_PADDLE = ("geo mode, a sparse table whose gradient the trainer makes dense before it "
                     "sends it (a weight decay over the table: the gradient `sum`med with the "
                     "decay of the whole table): the geo communicator reads the rows a "
                     "SelectedRows gradient names, and the trainer fails at the send")
_GEO_DENSE_FIX = ("the geo send carries the table's raw gradient, the rows its lookups touched, "
                  "and the trainer pushes the deltas of those rows (the local update, decay "
                  "included)")
FAULT_KINDS += (
    FaultKind(CLASSIC_LOOKUP_IDS_NOT_2D, CLASSIC.name, "sync, async, half_async", _IDS_PADDLE,
              _IDS_FIX, refused=True),
    FaultKind(FLEET_LOOKUP_IDS_NOT_2D, FLEET.name, "sync, async, half_async", _IDS_PADDLE,
              _IDS_FIX, refused=True),
    FaultKind(PS_LOOKUP_IDS_NOT_2D, PS.name, "sync, async", _IDS_PADDLE, _IDS_FIX,
              refused=True),
    FaultKind(CLASSIC_CLIP_ON_PSERVER, CLASSIC.name, "every mode",
              "the transpiler moves a Paddle 2.x gradient clip (ClipGradByValue, "
              "ClipGradByNorm, ClipGradByGlobalNorm) to the pservers: the trainers send the "
              "clip's output, which no op of theirs computes, and each pserver clips the raw "
              "gradient, which it never receives, over the averaged one; a global-norm clip "
              "needs the norms of gradients other pservers hold",
              "the trainers send the raw gradient; each pserver averages it, clips the "
              "average, and the update reads the clip's output (clip by value, and by norm of "
              "an unsliced parameter); a global-norm clip, or a norm over a sliced parameter, "
              "which no pserver can run, stays on the trainers, which send what they clipped"),
    FaultKind(FLEET_SPARSE_CLIP_DROPPED, FLEET.name, "sync, async, half_async",
              "a clipped remote table: its lookup grads become a distributed_push_sparse, so "
              "the table's gradient the trainer's clip reads is an empty SelectedRows: the "
              "trainer fails at the clip at its first step (\"Tensor holds no memory\")",
              "the pserver clips the table's gradient block it receives (averaged first in "
              "sync) before the update: clip by value, and by norm of an unsliced table; a "
              "global-norm clip, or a norm over a sliced table, runs on the trainer, over its "
              "table's gradient rows merged by id, and the trainer pushes the clipped rows"),
    FaultKind(PS_SPARSE_CLIP_DROPPED, PS.name, "sync, async",
              "a clipped remote table: its lookup grads become a distributed_push_sparse, so "
              "the table's gradient the trainer's clip reads is an empty SelectedRows: the "
              "trainer fails at the clip at its first step (\"Tensor holds no memory\")",
              "the trainer keeps the table's lookup grads and clips the table's gradient rows "
              "(merged by id, as Paddle's clip merges them: by value, by norm, or by the "
              "global norm over dense and sparse gradients), then pushes the clipped rows"),
    FaultKind(PS_CLIP_BEFORE_MERGE, PS.name, "sync, 2+ trainers",
              "gradient clipping runs on each trainer's gradient (dense, and a clipped "
              "table's rows under `fix`) before the pservers average the dense ones and add "
              "the sparse ones, not on the averaged gradient",
              "not fixable in a split: Paddle's brpc tables have no clip, so the trainers "
              "clip what they send"),
    FaultKind(PS_GEO_NO_SPARSE_TABLE, PS.name, "geo",
              "geo mode on a program with no sparse table: Paddle's geo trainer program holds "
              "no send, and the geo communicator starts exchanging only at a sparse table's "
              "send: after trainer 0's start the trainers never push or pull, each trains "
              "alone (measured on Paddle 2.6.2's own parameter server: `pstranspile run`)",
              "not fixable in a split: the communicator needs a sparse table's send to "
              "exchange anything"),
    FaultKind(PS_PUSH_IDS_LOD2, PS.name, "sync, async",
              "a remote table looked up with ids of lod_level 2 (a neighbour's neighbours, "
              "as PGL's GraphSAGE feeds them): the distributed_push_sparse that replaces the "
              "lookup grads pushes with those ids, and Paddle's client "
              "(FleetWrapper::PushSparseFromTensorAsync) walks their first LoD level as their "
              "rows: the trainer fails at its first push",
              "not fixed: a split would have to push ids whose first LoD level is their rows; "
              "no such rewrite is verified on Paddle's runtime yet"),
    FaultKind(FLEET_GEO_DENSE_TABLE_GRAD, FLEET.name, "geo", _GEO_DENSE_PADDLE, _GEO_DENSE_FIX),
    FaultKind(PS_GEO_DENSE_TABLE_GRAD, PS.name, "geo", _GEO_DENSE_PADDLE, _GEO_DENSE_FIX),
    FaultKind(FLEET_SPARSE_DECAY_WHOLE_TABLE, FLEET.name, "sync, async, half_async",
              "a weight-decayed remote table sliced over the pservers: each pserver's decay "
              "reads the whole table and its whole gradient (`scale(<table>)`, "
              "`sum(<table>@GRAD, ...)`), vars it neither holds nor receives, and the update "
              "reads that result: the pserver fails at its first step",
              "the pserver's decay reads its block of the table and the block of the gradient "
              "it receives, and writes a decayed gradient of the block's shape"),
    FaultKind(FLEET_DECAY_WHOLE_PARAM, FLEET.name, "sync, async, half_async",
              "a weight-decayed dense parameter sliced over the pservers: as "
              "fleet-sparse-decay-whole-table, each pserver's decay reads the whole parameter "
              "and its whole gradient, vars it neither holds nor receives (the pserver fails "
              "at its first step), and the update reads the gradient block, not the decay's "
              "result",
              "the pserver's decay reads its block of the parameter and the averaged gradient "
              "block it receives, writes the decayed gradient block, and the update reads it"),
)
_ASSIGN_PADDLE = ("a parameter sliced over the pservers and initialized from values "
                  "(assign_value: nn.initializer.Assign, a numpy array): each pserver's "
                  "startup assigns the whole parameter's values to its block (the op's shape is "
                  "not cut to the block, and its InferShape declares the block with the whole "
                  "shape): every block starts as the whole parameter, its first rows where the "
                  "block's own should be; trainers that receive the blocks back concat them "
                  "into a parameter of the wrong shape")
_ASSIGN_FIX = "each block's assign_value holds the block's own rows, with the block's shape"
FAULT_KINDS += (
    FaultKind(CLASSIC_DIST_TABLE_CRASH, CLASSIC.name, "every mode",
              "Paddle's DistributeTranspiler raises IndexError (self.all_in_ids_vars[0], in "
              "_replace_lookup_table_op_with_prefetch) on every program with a distributed "
              "table (an is_distributed lookup_table: static.nn.sparse_embedding, fluid's "
              "embedding(is_distributed=True)): it looks for the table's lookups with "
              "`op.type == LOOKUP_TABLE_TYPE`, a list since lookup_table_v2 joined it, so it "
              "finds none",
              "written in both settings as the transpiler writes it with that test mended "
              "(the lookups become split_ids / prefetch / merge_ids; the reference corpus's "
              "classic cases were made so), with classic-dist-table-optimizer reproduced or "
              "fixed", always_fixed=True, crash=True),
    FaultKind(CLASSIC_ASSIGN_INIT_WHOLE_PARAM, CLASSIC.name, "every mode", _ASSIGN_PADDLE,
              _ASSIGN_FIX),
    FaultKind(FLEET_ASSIGN_INIT_WHOLE_PARAM, FLEET.name, "every mode", _ASSIGN_PADDLE,
              _ASSIGN_FIX),
    FaultKind(PS_DENSE_EMPTY_INIT, PS.name, "every mode",
              "the merged dense table's Param takes the initializer of its first parameter, "
              "and PsDescBuilder knows only gaussian_random, fill_constant, uniform_random and "
              "truncated_gaussian_random: a first dense parameter initialized otherwise (an "
              "assign_value: nn.initializer.Assign, a numpy array) gets an empty initializer, "
              "which MemoryDenseTable::CreateInitializer cannot read: every pserver fails at "
              "its start (\"Param can not be supported\"; Paddle 2.6.2's pserver dies of "
              "signal 11)",
              _DENSE_EMPTY_FIX + " (push_dense_params; geo: GeoCommunicator::InitDense), so "
              "the table's start values are never read (an empty initializer of another input "
              "can not be fixed)", brief=_DENSE_EMPTY_FIX),
)
KIND = {k.id: k for k in FAULT_KINDS}


@dataclass(frozen=True)
class Fault:
    """One fault found in a program: its kind, where, and whether this split fixes it."""
    id: str
    where: str
    fixed: bool
    note: str = ""          # why `paddle_faults: fix` cannot correct it, when it cannot
    differs: str = ""       # fixed, but what still differs from the original (sync mode's
    #                         per-trainer clips), for `simulate` to name

    @property
    def kind(self) -> FaultKind:
        return KIND[self.id]

    def to_dict(self) -> dict:
        d = {"id": self.id, "where": self.where, "fixed": self.fixed}
        if self.note:
            d["note"] = self.note
        if self.differs:
            d["differs"] = self.differs
        return d


def fault(fault_id: str, where: str, fix: bool, blocked: Optional[str] = None,
          differs: str = "") -> Fault:
    """A Fault of a known kind found at `where`. `fix`: the config asks for fixes; `blocked`:
    why this one cannot be fixed (None when it can); `differs`: what a fixed split still does
    differently from the original. Kinds corrected in both settings are always fixed."""
    if KIND[fault_id].always_fixed:
        return Fault(fault_id, where, True)
    fixed = fix and not blocked
    return Fault(fault_id, where, fixed, blocked or "", differs if fixed else "")


def _ids(faults) -> str:
    return ", ".join(sorted({f["id"] for f in faults}))


def summary(faults: list) -> Optional[str]:
    """One line for the terminal from plan.json's `faults` (dicts of Fault.to_dict): the
    faults this split reproduces or fixes, or None when it has none to speak of."""
    crashes = [f for f in faults if f["id"] in KIND and KIND[f["id"]].crash]
    faults = [f for f in faults if f["id"] in KIND and not KIND[f["id"]].always_fixed]
    parts = ["Paddle's own pipeline raises on this program: %s" % _ids(crashes)] \
        if crashes else []
    if not faults:
        return parts[0] if parts else None
    fixed = [f for f in faults if f["fixed"]]
    kept = [f for f in faults if not f["fixed"]]
    if fixed:
        n = len({f["id"] for f in fixed})
        line = "%d Paddle fault%s fixed: %s" % (n, "s" * (n > 1), _ids(fixed))
        left = sorted({(f["id"], f["differs"]) for f in fixed if f.get("differs")})
        if left:
            line += " (%s)" % "; ".join("%s still differs: %s" % x for x in left)
        parts.append(line)
    if kept:
        n = len({f["id"] for f in kept})
        line = "%d Paddle fault%s reproduced: %s" % (n, "s" * (n > 1), _ids(kept))
        fixable = [f for f in kept if not f.get("note")]
        stuck = [f for f in kept if f.get("note")]
        if fixable:
            line += "; `paddle_faults: fix` corrects %s" % (
                ("it" if n == 1 else "them") if not stuck else _ids(fixable))
        if stuck:
            line += "; not fixable in a split: %s" % _ids(stuck)
        parts.append(line)
    return "; ".join(parts)


# --- finding them ---------------------------------------------------------------------------------
def classic_table_fault(main, config) -> Optional[Fault]:
    """classic-dist-table-optimizer, found on the original program (its fix rewrites the
    program before it is planned: passes/classic/fixes.py)."""
    from .classic import find_distributed_table
    table = find_distributed_table(main)
    if table is None:
        return None
    opt = next((op.type for op in main.global_block.ops
                if op.input("Param") == [table] and op.input("Grad")), None)
    unscaled = config.sync_mode and config.trainers > 1
    if opt in (None, "sgd") and not unscaled:
        return None
    why = []
    if opt not in (None, "sgd"):
        why.append("sgd instead of %s" % opt)
    if unscaled:
        why.append("gradients summed, not averaged")
    return fault(CLASSIC_DIST_TABLE_OPTIMIZER, "table %s (%s)" % (table, "; ".join(why)),
                 config.fix_faults)


def classic_dist_ids_fault(main, config, ids_fixed: bool) -> Optional[Fault]:
    """classic-dist-table-ids-not-2d, found on the original program (fixed with
    classic-dist-table-optimizer's fix and the ids', `ids_fixed`)."""
    from ..ir.tables import ids_not_2d
    from .classic import find_distributed_table
    table = find_distributed_table(main)
    if table is None:
        return None
    block = main.global_block
    bad = ids_not_2d(block, [op for op in block.ops if op.type in LOOKUP_TABLE_TYPES
                             and op.input("W")[:1] == [table]])
    if not bad:
        return None
    return fault(CLASSIC_DIST_TABLE_IDS_NOT_2D, "%d lookup(s) of %s by ids of shape %s"
                 % (len(bad), table, bad[0][2]), config.fix_faults and ids_fixed,
                 None if ids_fixed or not config.fix_faults else "its ids can not be made 2-D")


def classic_crash_fault(main) -> Optional[Fault]:
    """classic-dist-table-crash: the original has a distributed table (found before any fix
    serves it by rows: Paddle's transpiler meets the program as given)."""
    from .classic import find_distributed_table
    table = find_distributed_table(main)
    if table is None:
        return None
    return fault(CLASSIC_DIST_TABLE_CRASH, "table %s" % table, True)


def classic_faults(main, config, plan, skip_chains: bool = False) -> list:
    """The faults of the classic plan made for `config` (its fixes already applied when asked;
    `skip_chains`: the clip chains are the classic-clip-on-pserver fix's, not a fault)."""
    out = [fault(CLASSIC_LOCAL_TABLE_FAKE_INIT, "table %s" % t, config.fix_faults)
           for t in plan.local_tables]
    op_of = {op.uid: op for op in main.global_block.ops}
    for p in plan.params:
        if p.sliced and any(s.slot == "MeanGrad" for s in p.states) and \
                p.optimizer_type == "rmsprop":
            out.append(fault(CLASSIC_RMSPROP_MEAN_GRAD_SHAPE, "parameter %s" % p.name, True))
        grad_in = op_of[p.optimizer_op].input("Grad")[:1]
        if grad_in and grad_in[0] != p.grad and not skip_chains:
            out.append(fault(CLASSIC_UNWIRED_GRAD_CHAIN, "parameter %s (%s)"
                             % (p.name, grad_in[0]), True))
    return out


def assign_init_faults(startup, sliced: dict, config, fault_id: str) -> list:
    """classic- / fleet-assign-init-whole-param: the parameters sliced over the pservers
    (`sliced`: name -> its number of blocks) that the startup initializes from values."""
    assigned = {n for op in startup.global_block.ops if op.type == "assign_value"
                for n in op.output("Out")}
    return [fault(fault_id, "parameter %s (%d blocks)" % (name, n), config.fix_faults)
            for name, n in sorted(sliced.items()) if name in assigned]


# the clip ops a pserver can run on the averaged gradient of a block it holds
PER_TENSOR_CLIPS = ("clip",)
PER_PARAM_CLIPS = ("clip_by_norm",)


def large_scale_adam_tables(main) -> list:
    """The is_distributed tables that adam updates (fleet-large-scale-adam; its fix serves them
    as sparse tables: passes/fixes.py)."""
    ops = main.global_block.ops
    updated = {o.input("Param")[0] for o in ops if o.type == "adam" and o.input("Param")}
    return sorted({op.input("W")[0] for op in ops
                   if op.type in LOOKUP_TABLE_TYPES and op.attr("is_distributed") is True
                   and op.input("W")[:1] and op.input("W")[0] in updated})


def fleet_table_fault(main, config) -> Optional[Fault]:
    """fleet-large-scale-adam, found on the original program (its fix rewrites the program
    before it is planned). Geo refuses large-scale tables anyway."""
    tables = large_scale_adam_tables(main) if config.mode != "geo" else []
    if not tables:
        return None
    return fault(FLEET_LARGE_SCALE_ADAM, "table%s %s" % ("s" * (len(tables) > 1),
                                                          ", ".join(tables)), config.fix_faults)


def fleet_faults(main, config, plan) -> list:
    """The faults of the fleet plan made for `config` (fixes already applied when asked),
    but those of clips and decay over sparse tables (clip_faults.fleet_table_faults)."""
    out = []
    for table in plan.orphan_sums:
        out.append(fault(FLEET_ORPHAN_SPARSE_GRAD_SUM, "table %s" % table,
                         config.fix_faults))
    if plan.is_sync and plan.trainers > 1 and plan.clip_ops:
        blocked = clip_fix_blocker(main.global_block.ops, plan.clip_ops, plan.grad_slices)
        out.append(fault(FLEET_CLIP_BEFORE_MERGE, "%d clip op(s) on the trainer"
                         % len(plan.clip_ops), config.fix_faults, blocked))
    if plan.is_sync and plan.need_global_step:
        out.append(fault(FLEET_SYNC_STEP_COUNTER, "the pservers' LR-decay block",
                         config.fix_faults))
    return out


def clip_fix_blocker(ops, clip_ops, grad_slices) -> Optional[str]:
    """Why the trainer's clip ops (`clip_ops`: their uids among the global block's `ops`)
    cannot move to the pservers, or None when they can: each must clip one gradient on its own
    (elementwise, or by the norm of a parameter no pserver holds in slices; `grad_slices`:
    grad -> its blocks)."""
    sliced = {g for g, blocks in grad_slices.items() if len(blocks) > 1}
    for i, op in indexed(ops, clip_ops):
        if op.type in PER_TENSOR_CLIPS:
            continue
        if op.type in PER_PARAM_CLIPS and not sliced & set(op.input("X")):
            continue
        return ("a %s clip (op %d) needs more than the gradient one pserver holds"
                % (op.type, i))
    return None


def dense_empty_init_fault(tables, config) -> Optional[Fault]:
    """ps-dense-empty-initializer: the dense tables' inputs Paddle's PsDescBuilder gives an
    empty initializer (`tables`: plan/ps_tables.py's PsTables, their `empty_inits`). Only a
    Param's can be fixed: trainer 0 pushes the dense parameters before any pull."""
    found = [(t, slot, var) for t in tables for slot, var in t.empty_inits]
    if not found:
        return None
    stuck = sorted({slot for _, slot, _ in found if slot != "Param"})
    return fault(PS_DENSE_EMPTY_INIT, ", ".join(
        "table %d (%s): %s, from %s" % (t.table_id, t.table_name, slot, var)
        for t, slot, var in found), config.fix_faults,
        "the table reads the start value of %s" % ", ".join(stuck) if stuck else None)
