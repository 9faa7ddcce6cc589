"""What a user can do about each Paddle fault (plan/faults.py), beside `paddle_faults: fix`:
the change to the model that avoids it (AVOID) and what a split made with `fix` still does
differently from the original (STILL). docs/faults.md gives each fault all four parts (what
Paddle writes, what `fix` writes, what still differs, how to avoid it); `check`'s findings and
warnings add the model change. Only changes shown to avoid the fault are listed (the test that
shows it is named)."""
from __future__ import annotations

from .faults import (CLASSIC_CLIP_ON_PSERVER, CLASSIC_DIST_TABLE_IDS_NOT_2D,
                     CLASSIC_LOOKUP_IDS_NOT_2D, FLEET_CLIP_BEFORE_MERGE,
                     FLEET_GEO_DENSE_TABLE_GRAD, PS_GEO_DENSE_TABLE_GRAD,
                     FLEET_LARGE_SCALE_ADAM, FLEET_LOOKUP_IDS_NOT_2D,
                     FLEET_ORPHAN_SPARSE_GRAD_SUM, FLEET_SPARSE_CLIP_DROPPED,
                     PS_CLIP_BEFORE_MERGE, PS_GEO_NO_SPARSE_TABLE, PS_LOOKUP_IDS_NOT_2D,
                     PS_SPARSE_CLIP_DROPPED)

# shown by tests/test_sparse_clip.py (widedeep with need_clip=False on its tables)
_NO_TABLE_CLIP = ("`need_clip=False` in the sparse tables' `paddle.ParamAttr` (the tables "
                  "then train unclipped in the original too)")
# Paddle's own passes take 2-D ids (tests/test_ids_shapes.py)
_IDS_2D = "feed the ids 2-D: `[-1, 1]` for one id a sample, `[-1, n]` for a slot of n ids"
_PER_TRAINER = ("in sync mode each trainer clips its own gradient before the pservers merge "
                "the trainers'; the original clips their average (equal in async, half_async "
                "and geo, where each trainer's step is its own)")

_NO_TABLE_DECAY = ("weight decay on the dense layers only, in their `paddle.ParamAttr("
                   "regularizer=...)`, not the optimizer's `weight_decay`, which decays the "
                   "tables too; or mode sync or async")

AVOID = {
    FLEET_GEO_DENSE_TABLE_GRAD: _NO_TABLE_DECAY,
    PS_GEO_DENSE_TABLE_GRAD: _NO_TABLE_DECAY,
    PS_SPARSE_CLIP_DROPPED: _NO_TABLE_CLIP,
    FLEET_SPARSE_CLIP_DROPPED: _NO_TABLE_CLIP,
    CLASSIC_LOOKUP_IDS_NOT_2D: _IDS_2D,
    FLEET_LOOKUP_IDS_NOT_2D: _IDS_2D,
    PS_LOOKUP_IDS_NOT_2D: _IDS_2D,
    CLASSIC_DIST_TABLE_IDS_NOT_2D: _IDS_2D,
    FLEET_ORPHAN_SPARSE_GRAD_SUM: ("one table per field, each looked up once (nothing to sum); "
                                   "the sum is harmless anyway unless a clip reads it"),
    FLEET_LARGE_SCALE_ADAM: ("`nn.Embedding(sparse=True)` for the table instead of "
                             "`static.nn.sparse_embedding`: a sparse table whose row blocks the "
                             "pservers train with the program's adam"),
    PS_CLIP_BEFORE_MERGE: "mode async or geo, where each trainer's step is its own",
    PS_GEO_NO_SPARSE_TABLE: ("mode sync or async; or a sparse table in the model "
                             "(`nn.Embedding(sparse=True)`), whose send starts the exchange"),
    FLEET_CLIP_BEFORE_MERGE: ("mode async or half_async; or, in sync, `ClipGradByValue` or "
                              "`ClipGradByNorm` instead of `ClipGradByGlobalNorm`, which `fix` "
                              "moves to the pservers"),
}

STILL = {
    CLASSIC_CLIP_ON_PSERVER: "where no pserver can clip (a global-norm clip, a norm over a "
                             "sliced parameter) the trainers clip: " + _PER_TRAINER,
    FLEET_SPARSE_CLIP_DROPPED: "where no pserver can clip a table (a global-norm clip, a norm "
                               "over a sliced table) the trainers clip its rows: " + _PER_TRAINER,
    PS_SPARSE_CLIP_DROPPED: _PER_TRAINER + " (ps-clip-before-merge)",
    FLEET_CLIP_BEFORE_MERGE: "a global-norm clip, or a norm over a sliced parameter: "
                             + _PER_TRAINER,
    PS_CLIP_BEFORE_MERGE: _PER_TRAINER,
    PS_GEO_NO_SPARSE_TABLE: "the trainers never exchange: each trains alone",
}


def avoid_text(fault_id: str) -> str:
    """' (or, in the model: ...)' for a fault a model change avoids, else ''."""
    text = AVOID.get(fault_id)
    return "; or, in the model: %s" % text if text else ""
