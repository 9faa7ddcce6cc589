"""Ops on a pserver's auto-grown sparse table (values.SparseTable): the prefetch block's
lookup_sparse_table and sgd on the table with a SelectedRows grad; and ops on SelectedRows
(merge_selected_rows, get_tensor_from_selected_rows: what a global-norm clip does to a sparse
gradient)."""
from __future__ import annotations

import numpy as np

from ..values import SelectedRows, SimError, SparseTable, dense
from .registry import kernel


@kernel("lookup_sparse_table")
def lookup_sparse_table(ctx):
    """Rows of W for Ids; ids not yet in the table are added (auto-grown) unless is_test."""
    w = ctx.x("W")
    ids = np.asarray(ctx.x("Ids")).reshape(-1).astype(np.int64)
    pad = ctx.attr("padding_idx", -1)
    if isinstance(w, SparseTable):
        out = w.get(ids, grow=not ctx.attr("is_test", False))
    else:
        w = dense(w)
        if ids.size and (ids.min() < 0 or ids.max() >= w.shape[0]):
            raise SimError("lookup_sparse_table: id %d outside the %d rows of %s"
                           % (int(ids.max()), w.shape[0], ctx.op.input("W")[0]))
        out = w[ids]
    if pad is not None and pad != -1:
        out = np.where((ids == pad)[:, None], 0.0, out)
    ctx.set("Out", out)


def table_sgd(ctx, table: SparseTable):
    """sgd on a table: every grad row (repeats included) updates its id's row; the id must
    already be in the table (Paddle's sparse sgd looks it up without growing)."""
    g = ctx.x("Grad")
    if not isinstance(g, SelectedRows):
        raise SimError("sgd: Param %s is a sparse table but Grad %s is dense"
                       % (ctx.op.input("Param")[0], ctx.op.input("Grad")[0]))
    lr = np.asarray(dense(ctx.x("LearningRate"))).reshape(-1)[0]
    out = table.copy()
    try:
        for r, v in zip(g.rows, g.value):
            out.value[out.slot(int(r), grow=False)] -= lr * v
    except SimError as e:
        raise SimError("sgd on %s: %s" % (ctx.op.input("Param")[0], e)) from None
    ctx.set("ParamOut", out)


@kernel("merge_selected_rows")
def merge_selected_rows(ctx):
    """Repeated rows added up, rows sorted (MergeAdd); a dense X passes through."""
    x = ctx.x("X")
    if isinstance(x, SelectedRows) and x.no_memory:
        ctx.set("Out", x)
    elif isinstance(x, SelectedRows):
        ctx.set("Out", x.merged())
    else:
        ctx.set("Out", np.array(dense(x), copy=True), lod=ctx.lod("X"))


@kernel("get_tensor_from_selected_rows")
def get_tensor_from_selected_rows(ctx):
    """The value block of a SelectedRows ([rows, ...]), as a tensor."""
    x = ctx.x("X")
    if not isinstance(x, SelectedRows):
        raise SimError("get_tensor_from_selected_rows: X %s is not SelectedRows"
                       % ctx.op.input("X")[0])
    # declared as X (the table's height), holding X's rows: Paddle's InferShape copies X's dims
    ctx.set("Out", np.array(x.value, copy=True), rows=True)
