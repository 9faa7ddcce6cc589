"""What a trainer sends a sparse table: `distributed_push_sparse` as Paddle 2.6.2's
`FleetWrapper::PushSparseFromTensorAsync` (`ps/wrapper/fleet.cc`) builds its values, and the
brpc client's merge of equal keys (`BrpcPsClient::PushSparseAsyncShardMerge`).

Per id occurrence (padding ids skipped): `[slot, show, click, g...]`, the gradient row
multiplied by the batch size (when every input of the op has the same one), show = Shows[i]
for the i-th id (the i-th sequence with LoD) while Shows has that many values, else 1, click
likewise with 0; with `use_cvm_op` `[slot, g...]` and the first two gradient columns not
scaled. Equal keys are then merged by the accessor (every field summed but the slot).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .rules import F32
from .sparse import as_keys


def batch_size(ids_list, lods=None):
    """The batch size the op scales by: each input's dim 0 (its sequence count with LoD);
    None when they differ (then nothing is scaled)."""
    sizes = []
    for k, ids in enumerate(ids_list):
        lod = lods[k] if lods is not None else None
        sizes.append(len(lod) - 1 if lod else int(np.shape(ids)[0]))
    return sizes[0] if sizes and all(s == sizes[0] for s in sizes) else None


def _per_id(values, seq, default: float):
    """values[seq[i]] while seq[i] is inside values, else the default."""
    out = np.full(len(seq), default, dtype=F32)
    inside = seq < len(values)
    out[inside] = values[seq[inside]]
    return out


@dataclass(frozen=True)
class Push:
    """How one input of distributed_push_sparse is pushed besides its ids and gradient: the
    batch size its gradient is scaled by (None: not scaled), the op's slot, the show / click
    values per example (None: show 1, click 0), padding_idx (not pushed), use_cvm_op (no show
    and click columns) and the ids' LoD (shows and clicks then per sequence)."""
    batch: Optional[int] = None
    slot: int = 0
    shows: object = None
    clicks: object = None
    padding_idx: int = -1
    use_cvm_op: bool = False
    lod: object = None


def push_values(ids, grad, emb_dim: int, how: Push = Push()):
    """(keys, values) one input of distributed_push_sparse pushes, as `how` says: keys uint64
    [n], values float32 [n, emb_dim + 3] (or emb_dim + 1 with use_cvm_op)."""
    batch, slot, shows, clicks, padding_idx, use_cvm_op, lod = (
        how.batch, how.slot, how.shows, how.clicks, how.padding_idx, how.use_cvm_op, how.lod)
    ids = np.asarray(ids).reshape(-1).astype(np.int64)
    g = np.array(grad, dtype=F32).reshape(-1, emb_dim)
    if len(g) != len(ids):
        raise ValueError("%d ids with %d gradient rows" % (len(ids), len(g)))
    if batch is not None:
        cols = slice(2, None) if use_cvm_op else slice(None)
        g[:, cols] = g[:, cols] * F32(batch)
    shows = np.asarray([] if shows is None else shows, dtype=F32).reshape(-1)
    clicks = np.asarray([] if clicks is None else clicks, dtype=F32).reshape(-1)
    seq = np.arange(len(ids))
    if lod:
        if int(lod[-1]) != len(ids):
            from . import ClientAborts
            raise ClientAborts(
                "%d ids pushed with a LoD whose first level ends at %d (ids of lod_level 2): "
                "Paddle 2.6.2's push (FleetWrapper::PushSparseFromTensorAsync) walks the "
                "first LoD level as the ids' rows, its rows then do not cover the gradient "
                "and its trainer fails there" % (len(ids), int(lod[-1])))
        seq = np.repeat(np.arange(len(lod) - 1), np.diff(np.asarray(lod)))
    keep = as_keys(ids) != as_keys([padding_idx])[0]
    keys, g, seq = as_keys(ids)[keep], g[keep], seq[keep]
    if use_cvm_op:
        return keys, np.concatenate([np.full((len(keys), 1), slot, F32), g], axis=1)
    head = np.stack([np.full(len(keys), slot, F32), _per_id(shows, seq, 1.0),
                     _per_id(clicks, seq, 0.0)], axis=1)
    return keys, np.concatenate([head, g], axis=1)


def merge_by_key(keys, values, accessor):
    """The client's merge: keys sorted, equal keys merged by the accessor in the order pushed.
    Returns (keys, values) with each key once."""
    keys = as_keys(keys)
    values = np.asarray(values, dtype=F32)
    order = np.argsort(keys, kind="stable")
    out_keys, out_vals = [], []
    for i in order.tolist():
        k = int(keys[i])
        if out_keys and out_keys[-1] == k:
            out_vals[-1] = accessor.merge(out_vals[-1], values[i])
        else:
            out_keys.append(k)
            out_vals.append(values[i].copy())
    width = values.shape[1] if values.ndim == 2 else 0
    return (np.asarray(out_keys, dtype=np.uint64),
            np.asarray(out_vals, dtype=F32).reshape(len(out_keys), width))


def fit_push(values, accessor):
    """The floats the brpc client copies per key: the accessor's update size
    (`BrpcPsClient::PushSparse` copies `update_size` bytes of each value). A value built wider
    (a CtrCommonAccessor table pushed without `use_cvm_op`: `[slot, show, click, g[emb]]` with
    emb = 3 + X) loses its tail, and its gradient columns are read shifted (embed_g is the
    gradient of the pulled show column). None when nothing is cut."""
    values = np.asarray(values, dtype=F32)
    if values.ndim == 2 and values.shape[1] > accessor.update_dim:
        return values[:, :accessor.update_dim]
    return None
