"""A pserver's large-scale tables (Fleet's `is_distributed` sparse tables): what
`lookup_sparse_table_init` creates from its `large_scale_metas`, and the fused optimizers that
update them (`lookup_sparse_table_fuse_adam`, `lookup_sparse_table_fuse_sgd`).

A meta reads `name:value names:dims:mode:grad:vars:initializers:entry`, e.g.
`T.block0:Param,Moment1,Moment2:16,16,16:0:T@GRAD.block0:T.block0,T_moment1_0,...:
uniform_random&0&-1.0&1.0,fill_constant&0.0,fill_constant&0.0:none`. Each value becomes a
values.LazyTable of the block's rows; the Param's initial rows are aligned with the original's
(reference.py) like any random init of the split. The fused kernels follow Paddle 2.0's
arithmetic as it is (lookup_sparse_table_fuse_adam_op.h): adam's moments and update on the rows
of the gradient only, with the learning rate scaled by sqrt(1 - beta2_pow) / (1 - beta1_pow)
read after it wrote the new powers (in place, as Fleet wires them: beta^(t+1), one step ahead
of adam's), so a large-scale table does not train like the original's adam, and the run says
so.
"""
from __future__ import annotations

import numpy as np

from ...ir.program import Attr, Op
from . import keyed
from .values import LazyTable, SelectedRows, SimError, dense

_INIT_ATTRS = {"uniform_random": ("seed", "min", "max"),
               "gaussian_random": ("seed", "mean", "std"),
               "truncated_gaussian_random": ("seed", "mean", "std"),
               "fill_constant": ("value",)}


def parse_meta(meta: str) -> dict:
    parts = str(meta).split(":")
    if len(parts) < 7:
        raise SimError("large_scale_metas entry %r: expected 8 fields separated by ':'" % meta)
    return {"name": parts[0], "values": parts[1].split(","),
            "dims": [int(d) for d in parts[2].split(",")], "grad": parts[4],
            "vars": parts[5].split(","), "inits": parts[6].split(",")}


def _init_op(spec: str, out: str) -> Op:
    """The startup op an initializer string stands for (`uniform_random&seed&min&max`)."""
    kind, *args = spec.split("&")
    names = _INIT_ATTRS.get(kind)
    if names is None:
        raise SimError("large-scale table initializer %r is not simulated" % spec)
    attrs = {}
    for n, a in zip(names, args):
        attrs[n] = Attr.infer(int(a) if n == "seed" else float(a))
    return Op(kind, {}, {"Out": [out]}, attrs)


def _height(program, m):
    """The rows of a large-scale table block (0 for a block of no rows): its var's, else
    (Paddle's async pservers declare no var for the block, only its grad) its grad's; None
    if neither says."""
    for name in (m["name"], m["grad"]):
        var = program.find_var(name)
        if var is not None and var.shape and var.shape[0] >= 0:
            return int(var.shape[0])
    return None


def block_shapes(program) -> dict:
    """name -> shape of each large-scale table block `program` initializes (its
    lookup_sparse_table_init's metas), where its rows are known."""
    out = {}
    for _, _, op in program.ops():
        if op.type != "lookup_sparse_table_init":
            continue
        for meta in op.attr("large_scale_metas", []) or []:
            m = parse_meta(meta)
            height = _height(program, m)
            if height is not None and m["dims"]:
                out[m["name"]] = (height, m["dims"][0])
    return out


def init_tables(cluster, ps, op):
    """lookup_sparse_table_init: the pserver's large-scale tables, by table name."""
    for meta in op.attr("large_scale_metas", []) or []:
        m = parse_meta(meta)
        height = _height(ps.main, m)
        height = 1 << 40 if height is None else height
        values = {}
        for i, (vname, dim, spec) in enumerate(zip(m["values"], m["dims"], m["inits"])):
            init = _init_op(spec, m["name"] if i == 0 else m["vars"][i])
            table = keyed.lazy_table(init, cluster.seed, height, (dim,), cluster.float_dtype)
            if i == 0:
                table = _as_table(cluster.reference.align_random(
                    "pserver %s startup" % ps.endpoint, m["name"], table, init, cluster.notes))
            values[vname] = table
        ps.large_scale[m["name"]] = {"grad": m["grad"], "values": values}


def _as_table(value):
    """A table the fused kernels update by rows: the original's rows come back as an array
    when the original keeps its table whole (a small one)."""
    if isinstance(value, LazyTable):
        return value
    rows = np.array(value, copy=True)
    return LazyTable(rows.shape[0], rows.shape[1:], rows.dtype,
                     lambda ids: rows[np.asarray(ids, dtype=np.int64)])


def fuse(cluster, ps, ex, op):
    """lookup_sparse_table_fuse_adam / _sgd on the table `tablename` with a SelectedRows grad."""
    name = op.attr("tablename")
    table = ps.large_scale.get(name)
    if table is None:
        raise SimError("%s of %s: pserver %s has no large-scale table %s (no "
                       "lookup_sparse_table_init made it)" % (op.type, name, ps.endpoint, name))
    g = ex.read(op.input("Grad")[0])
    if not isinstance(g, SelectedRows):
        raise SimError("%s of %s: the grad is not SelectedRows" % (op.type, name))
    if not len(g.rows):
        return
    g = g.merged()
    vals = table["values"]
    lr = float(np.asarray(dense(ex.read(op.input("LearningRate")[0]))).reshape(-1)[0])
    p = vals["Param"].copy()
    if op.type == "lookup_sparse_table_fuse_sgd":
        p.set(g.rows, p.get(g.rows) - lr * g.value)
        vals["Param"] = p
        return
    beta1, beta2 = op.attr("beta1", 0.9), op.attr("beta2", 0.999)
    eps = op.attr("epsilon", 1e-8)
    # Paddle's kernel writes the new powers first and then reads Beta1Pow / Beta2Pow: where the
    # outputs are the inputs (as Fleet wires them), it corrects the bias with beta^(t+1)
    for slot, beta in (("Beta1Pow", beta1), ("Beta2Pow", beta2)):
        ex.write(0, op.output(slot + "Out")[0],
                 np.asarray(dense(ex.read(op.input(slot)[0]))) * beta)
    b1 = float(np.asarray(dense(ex.read(op.input("Beta1Pow")[0]))).reshape(-1)[0])
    b2 = float(np.asarray(dense(ex.read(op.input("Beta2Pow")[0]))).reshape(-1)[0])
    lr_ = lr * np.sqrt(1 - b2) / (1 - b1)
    m1, m2 = vals["Moment1"].copy(), vals["Moment2"].copy()
    m1v = beta1 * m1.get(g.rows) + (1 - beta1) * g.value
    m2v = beta2 * m2.get(g.rows) + (1 - beta2) * g.value * g.value
    m1.set(g.rows, m1v)
    m2.set(g.rows, m2v)
    p.set(g.rows, p.get(g.rows) - lr_ * (m1v / (np.sqrt(m2v) + eps)))
    vals.update(Param=p, Moment1=m1, Moment2=m2)
    if op.input("Beta1Pow") == op.output("Beta1PowOut"):
        cluster.note("pserver %s: %s updates the large-scale table %s with Paddle's fused "
                     "kernel, which updates Beta1Pow / Beta2Pow in place before reading them: "
                     "its bias correction is a step ahead of adam's, and it moves only the "
                     "rows of each gradient" % (ps.endpoint, op.type, name))
