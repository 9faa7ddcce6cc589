"""The trainer clips the table rows it pushes: the fix of ps-sparse-clip-dropped (and of
fleet-sparse-clip-dropped where no pserver can clip: a global-norm clip, a norm over a sliced
table).

The trainer keeps the table's lookup grads (and their `sum`), so `<table>@GRAD` is computed
as in the original and the program's own clip ops read it (a global norm counts the table's
rows, merged by id, as Paddle's clip merges them). What the push sends is the lookups' output
grads, one row per id occurrence, which the client adds up by id; each is made to add up to
the clipped gradient (TableClip):

- global norm (`elementwise_mul` of the gradient by the clip's scale): every pushed grad is
  multiplied by the same scale;
- norm (`clip_by_norm`): by `max_norm / max(norm, max_norm)`, the norm of the merged rows;
- value (`clip`): each occurrence of id i gets `g + (clip(G_i) - G_i) / n_i`, where `G_i` is
  row i of the merged gradient (looked up by id in the merged SelectedRows) and `n_i` the
  occurrences of i in the push: they add up to `clip(G_i)`. The program's `clip` of the
  SelectedRows goes (Paddle 2.6.2's sparse clip kernel fails: "Tensor holds no memory"); the
  rows are clipped dense.

Every op used runs on Paddle 2.6.2's CPU executor (a lookup reads a SelectedRows W by id).
"""
from __future__ import annotations

from ..ir.program import Attr, Op, Program
from ..ir.roles import BACKWARD
from ..ir.tables import LOOKUP_GRAD_TYPES
from .build import make_op, new_tensor, role_attrs

PUSH = "distributed_push_sparse"


def clip_pushed_rows(prog: Program, clips, table_ids, lookup_type: dict) -> Program:
    """`prog` with each clipped table's push (by table id) sending clipped rows; `clips`:
    TableClips; `lookup_type`: table -> its lookups' type (lookup_table or lookup_table_v2)."""
    out = prog.shallow_copy()
    block = out.global_block
    doomed = {c.op for c in clips if c.kind in ("value", "norm")}
    block.ops = [op for op in block.ops if op.uid not in doomed]
    for clip in clips:
        at = next(i for i, op in enumerate(block.ops) if op.type == PUSH
                  and op.attr("table_id") == table_ids[clip.table])
        push = block.ops[at] = block.ops[at].copy()
        grads = _pushed(push)
        made, renames = _Maker(block, clip, lookup_type[clip.table]).ops(grads, push)
        for slots in (push.inputs, push.outputs):
            if "Outputs" in slots:
                slots["Outputs"] = [renames[g] for g in slots["Outputs"]]
        block.ops[at:at] = made
    return out


def _pushed(push: Op) -> list:
    return list(push.output("Outputs") or push.input("Outputs"))


class _Maker:
    """The ops and vars of one table's clip before its push."""

    def __init__(self, block, clip, lookup: str):
        self.block, self.clip, self.lookup = block, clip, lookup
        self.table = block.var(clip.table)
        self.made: list = []

    def op(self, type_, inputs, outputs, attrs=None):
        self.made.append(make_op(type_, inputs, outputs, {**(attrs or {}),
                                                          **role_attrs(BACKWARD)}))

    def var(self, name, like=None, shape=(1,), kind="LOD_TENSOR"):
        if name not in self.block.vars:
            v = self.block.var(like) if like else None
            self.block.add_var(new_tensor(name, v.shape if v is not None else shape,
                                          self.table.dtype if self.table else "FP32",
                                          kind=kind, lod_level=None))
        return name

    def ops(self, grads: list, push: Op):
        c = self.clip
        if c.kind == "global":
            renames = {g: self.scaled(g, c.scale) for g in grads}
        elif c.kind == "norm":
            scale = self.norm_scale()
            renames = {g: self.scaled(g, scale) for g in grads}
        else:
            renames = self.by_value(grads, push.input("Ids"))
        return self.made, renames

    def scaled(self, g: str, scale: str) -> str:
        out = self.var(g + "@CLIPPED", like=g)
        self.op("elementwise_mul", {"X": [g], "Y": [scale]}, {"Out": [out]},
                {"axis": Attr("INT", -1)})
        return out

    def merged(self, sr: str, name: str) -> str:
        out = self.var(name, like=self.clip.table, kind="SELECTED_ROWS")
        self.op("merge_selected_rows", {"X": [sr]}, {"Out": [out]})
        return out

    def fill(self, name: str, value: float) -> str:
        out = self.var(name)
        self.op("fill_constant", {}, {"Out": [out]}, {
            "shape": Attr("LONGS", [1]), "dtype": Attr("INT", 5), "value": Attr("FLOAT", value),
            "str_value": Attr("STRING", ""), "force_cpu": Attr("BOOLEAN", False)})
        return out

    def norm_scale(self) -> str:
        """max_norm / max(norm of the merged gradient, max_norm)."""
        g = self.clip.grad
        rows = self.var(g + "@ROWS_VALUE", shape=(-1, self.width()))
        self.op("get_tensor_from_selected_rows", {"X": [self.merged(g, g + "@MERGED")]},
                {"Out": [rows]})
        sq, norm, den, scale = (self.var(g + s) for s in ("@SQUARED_NORM", "@NORM",
                                                          "@NORM_BOUND", "@CLIP_SCALE"))
        self.op("squared_l2_norm", {"X": [rows]}, {"Out": [sq]})
        self.op("sqrt", {"X": [sq]}, {"Out": [norm]})
        bound = self.fill(g + "@MAX_NORM", self.clip.max_norm)
        self.op("elementwise_max", {"X": [norm], "Y": [bound]}, {"Out": [den]},
                {"axis": Attr("INT", -1)})
        self.op("elementwise_div", {"X": [bound], "Y": [den]}, {"Out": [scale]},
                {"axis": Attr("INT", -1)})
        return scale

    def width(self) -> int:
        shape = self.table.shape if self.table is not None else None
        return int(shape[1]) if shape and len(shape) > 1 else -1

    def rows_of(self, sr: str, ids: str, out: str, like: str) -> str:
        self.var(out, like=like)
        self.op(self.lookup, {"Ids": [ids], "W": [sr]}, {"Out": [out]},
                {"padding_idx": Attr("LONG", -1), "is_sparse": Attr("BOOLEAN", False)})
        return out

    def by_value(self, grads: list, ids: list) -> dict:
        """g + (clip(G_i) - G_i) / n_i per occurrence (see the module's docstring)."""
        c = self.clip
        merged = self.merged(c.grad, c.grad + "@MERGED")
        counts = []
        for k, (g, i) in enumerate(zip(grads, ids)):
            ones = self.var(g + "@ONES", like=g)
            self.op("fill_any_like", {"X": [g]}, {"Out": [ones]},
                    {"value": Attr("FLOAT", 1.0), "dtype": Attr("INT", -1)})
            n = self.var("%s@COUNT@RENAME@%d" % (c.grad, k), like=c.table, kind="SELECTED_ROWS")
            self.op(_grad_type(self.lookup), {"Ids": [i], "Out@GRAD": [ones], "W": [c.table]},
                    {"W@GRAD": [n]}, {"is_sparse": Attr("BOOLEAN", True),
                                       "padding_idx": Attr("LONG", -1)})
            counts.append(n)
        total = self.var(c.grad + "@COUNT", like=c.table, kind="SELECTED_ROWS")
        self.op("sum", {"X": counts}, {"Out": [total]})
        per_id = self.merged(total, c.grad + "@COUNT@MERGED")
        one = self.fill(c.grad + "@ONE", 1.0)
        renames = {}
        for g, i in zip(grads, ids):
            rows = self.rows_of(merged, i, g + "@ROWS", g)
            n = self.rows_of(per_id, i, g + "@COUNT", g)
            clipped, delta, share, n1 = (self.var(g + s, like=g) for s in (
                "@ROWS_CLIPPED", "@CLIP_DELTA", "@CLIP_SHARE", "@COUNT_AT_LEAST_1"))
            self.op("clip", {"X": [rows]}, {"Out": [clipped]},
                    {"min": Attr("FLOAT", c.min), "max": Attr("FLOAT", c.max)})
            self.op("elementwise_sub", {"X": [clipped], "Y": [rows]}, {"Out": [delta]},
                    {"axis": Attr("INT", -1)})
            self.op("elementwise_max", {"X": [n], "Y": [one]}, {"Out": [n1]},
                    {"axis": Attr("INT", -1)})
            self.op("elementwise_div", {"X": [delta], "Y": [n1]}, {"Out": [share]},
                    {"axis": Attr("INT", -1)})
            out = self.var(g + "@CLIPPED", like=g)
            self.op("elementwise_add", {"X": [g], "Y": [share]}, {"Out": [out]},
                    {"axis": Attr("INT", -1)})
            renames[g] = out
        return renames


def lookup_types(main: Program) -> dict:
    """table -> the type of its first lookup in `main` (lookup_table or lookup_table_v2)."""
    out: dict = {}
    for op in main.global_block.ops:
        if op.type in ("lookup_table", "lookup_table_v2") and op.input("W"):
            out.setdefault(op.input("W")[0], op.type)
    return out


def _grad_type(lookup: str) -> str:
    grad = lookup + "_grad"
    assert grad in LOOKUP_GRAD_TYPES, grad
    return grad
