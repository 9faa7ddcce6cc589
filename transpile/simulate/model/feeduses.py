"""What a program does with its integer (and label) feeds, read from the ops that use them.

A feed's values must suit its uses: ids index a table (the table's height bounds them), labels
pick a class (the logits' width bounds them; a binary loss or metric wants 0 / 1), a mask or
flag cast to float is a number (0 / 1 will do), so is a mask compared with 1, a length compared
with positions or masking a
sequence counts 1 up to the positions' width (sequence_mask's maxlen; DEFAULT_LENGTH where
nothing says). The use is often a few ops away: ids
concatenated, reshaped, squeezed or cast before the lookup, a label cast before the loss. The
bound found at a use travels back through those value-preserving ops to every feed that reaches
it (through a concat, to each of the feeds it joins).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.program import Program

# Ops whose outputs hold (a rearrangement of) their inputs' values: a bound on an output holds
# for every X input. `split` / `unstack` have several outputs: the input gets the tightest.
VIEW_OPS = frozenset({
    "reshape", "reshape2", "squeeze", "squeeze2", "unsqueeze", "unsqueeze2", "cast", "assign",
    "flatten", "flatten2", "flatten_contiguous_range", "concat", "stack", "slice",
    "strided_slice", "split", "unstack", "transpose", "transpose2", "expand", "expand_v2",
    "expand_as", "expand_as_v2", "tile", "share_data", "memcpy", "gather", "index_select"})
LOOKUPS = frozenset({"lookup_table", "lookup_table_v2", "distributed_lookup_table", "embedding"})
# Losses and metrics whose label is 0 or 1 (a float or an int).
BINARY_LABEL = {"sigmoid_cross_entropy_with_logits": "Label", "log_loss": "Labels",
                "bce_loss": "Label", "auc": "Label", "rank_loss": "Label",
                "hinge_loss": "Labels"}
# Float arithmetic a cast integer feed may enter as a plain number (a mask, a flag).
_FLOAT_DTYPES = ("FP16", "FP32", "FP64", "BF16", 4, 5, 6, 22)
# A length no width bounds (sequence_mask without maxlen, range's end): 1 .. DEFAULT_LENGTH.
DEFAULT_LENGTH = 3
# Comparisons: a length (of a sequence) compared with positions.
_COMPARE = ("less_than", "less_equal", "greater_than", "greater_equal")


@dataclass(frozen=True)
class Use:
    """What bounds a feed: `kind` is "ids" (a table of `bound` rows), "label" (`bound`
    classes), "flag" (a number cast to float: 0 or 1), "length" (1 .. `bound`) or "default"
    (no use bounds it: 0 or 1); `where` names the use."""
    kind: str
    bound: int
    where: str


def _dim(main: Program, name, axis):
    v = main.find_var(name) if name else None
    if v is None or not v.shape or len(v.shape) <= (axis if axis >= 0 else -axis - 1):
        return None
    d = v.shape[axis]
    return int(d) if d and d > 0 else None


def _sink_uses(main: Program) -> dict:
    """var -> [Use] at the ops that read it as ids or as a label."""
    out: dict = {}
    producer = {n: op for _, _, op in main.ops() for n in op.output_names()}

    def add(name, use):
        if name and use.bound:
            out.setdefault(name, []).append(use)

    for _, _, op in main.ops():
        t = op.type
        if t.endswith("_grad"):
            continue
        if t in LOOKUPS:
            w = (op.input("W") or [None])[0]
            h = _dim(main, w, 0)
            for ids in op.input("Ids"):
                add(ids, Use("ids", h or 0, "%s of %s" % (t, w)))
        elif t in BINARY_LABEL:
            for lab in op.input(BINARY_LABEL[t]):
                add(lab, Use("label", 2, t))
        elif t == "softmax_with_cross_entropy" and not op.attr("soft_label", False):
            axis = op.attr("axis", -1)
            for lab in op.input("Label"):
                add(lab, Use("label", _dim(main, op.input("Logits")[0], axis) or 0, t))
        elif t in ("cross_entropy", "cross_entropy2", "bpr_loss") \
                and not op.attr("soft_label", False):
            for lab in op.input("Label"):
                add(lab, Use("label", _dim(main, op.input("X")[0], -1) or 0, t))
        elif t == "nll_loss":
            for lab in op.input("Label"):
                add(lab, Use("label", _dim(main, op.input("X")[0], 1) or 0, t))
        elif t == "accuracy":
            # the class count is the width of the logits top_k ranked
            idx = (op.input("Indices") or [None])[0]
            src = producer.get(idx)
            k = _dim(main, src.input("X")[0], -1) if src is not None and src.input("X") else None
            for lab in op.input("Label"):
                add(lab, Use("label", k or 2, t))
        elif t in ("one_hot", "one_hot_v2"):
            for x in op.input("X"):
                add(x, Use("label", int(op.attr("depth", 0) or 0), t))
        elif t in ("gather", "index_select", "index_sample", "take_along_axis"):
            slot = "Index"
            src = (op.input("X") or [None])[0]
            axis = op.attr("axis", op.attr("dim", 0)) or 0
            if isinstance(axis, list):
                axis = axis[0] if axis else 0
            for idx in op.input(slot):
                add(idx, Use("ids", _dim(main, src, int(axis)) or 0, "%s of %s" % (t, src)))
    return out


def _length_uses(main: Program) -> dict:
    """var -> Use for lengths: sequence_mask's X, a range's bounds, a tensor slice bound, a
    side of a comparison with positions (bounded by the other side's last width)."""
    out: dict = {}

    def add(name, bound, where):
        u = Use("length", int(bound) if bound and bound > 0 else DEFAULT_LENGTH, where)
        if name and (name not in out or u.bound < out[name].bound):
            out[name] = u

    for _, _, op in main.ops():
        t = op.type
        if t == "sequence_mask":
            for x in op.input("X"):
                add(x, op.attr("maxlen", -1), t)
        elif t == "range":
            for slot in ("Start", "End", "Step"):
                for x in op.input(slot):
                    add(x, None, t)
        elif t in ("slice", "strided_slice"):
            for slot in ("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList"):
                for x in op.input(slot):
                    add(x, None, t)
        elif t in _COMPARE and op.input("X") and op.input("Y"):
            x, y = op.input("X")[0], op.input("Y")[0]
            add(x, _dim(main, y, -1), t)
            add(y, _dim(main, x, -1), t)
    return out


def _flag_uses(main: Program) -> dict:
    """var -> Use for integers cast to float (a mask or flag in arithmetic) and for a var
    compared for equality with a constant v (dmr's mask == ones_like(mask)): 0 .. max(v, 1)."""
    out = {}
    producer = {n: op for _, _, op in main.ops() for n in op.output_names()}
    for _, _, op in main.ops():
        if op.type == "cast" and op.attr("out_dtype") in _FLOAT_DTYPES:
            for x in op.input("X"):
                out[x] = Use("flag", 2, "cast to float")
        elif op.type in ("equal", "not_equal") and op.input("X") and op.input("Y"):
            x, y = op.input("X")[0], op.input("Y")[0]
            for a, b in ((x, y), (y, x)):
                src = producer.get(b)
                v = src.attr("value") if src is not None and src.type in (
                    "fill_any_like", "fill_constant") else None
                if v is not None and float(v) == int(v) and 0 <= int(v) < 1000:
                    out.setdefault(a, Use("flag", max(2, int(v) + 1),
                                          "compared with %d" % int(v)))
    return out


def feed_uses(main: Program) -> dict:
    """var -> Use: the tightest bound any use puts on the var, carried back through VIEW_OPS.

    Labels win over ids and ids over flags where a var has several kinds of use."""
    rank = {"label": 0, "ids": 1, "flag": 2, "length": 3, "default": 4}
    best: dict = {}

    def offer(name, use):
        cur = best.get(name)
        if cur is None or (rank[use.kind], use.bound) < (rank[cur.kind], cur.bound):
            best[name] = use
            return True
        return False

    for name, uses in _sink_uses(main).items():
        for u in uses:
            offer(name, u)
    for name, u in list(_flag_uses(main).items()) + list(_length_uses(main).items()):
        if name not in best:
            best[name] = u
    ops = [op for _, _, op in main.ops() if op.type in VIEW_OPS]
    changed = True
    while changed:
        changed = False
        for op in reversed(ops):
            outs = [best[n] for n in op.output_names() if n in best
                    and n not in op.output("XShape")]
            if not outs:
                continue
            tight = min(outs, key=lambda u: (rank[u.kind], u.bound))
            for x in op.input("X"):
                if offer(x, tight):
                    changed = True
    return best


# Ops that keep a var's columns where they are (a column's bound holds for the input's column).
_COLUMN_VIEWS = frozenset({"cast", "assign", "share_data", "memcpy"})
_INT_MAX = 1 << 30


def column_uses(main: Program, best: dict = None) -> dict:
    """var -> [(axis, start, end, Use)]: bounds on column ranges of a var that `slice`s cut
    along one axis other than the batch's, carried back through `cast` and `assign` to the
    feed (dmr packs 267 features in one float feed: columns 0:50 ids of one table, 250:251 of
    another, 264:265 a float)."""
    best = feed_uses(main) if best is None else best
    rank = {"label": 0, "ids": 1, "flag": 2, "length": 3, "default": 4}
    out: dict = {}
    producer = {}
    for _, _, op in main.ops():
        if op.type.endswith("_grad"):
            continue
        if op.type in _COLUMN_VIEWS and op.input("X"):
            for n in op.output_names():
                producer[n] = op.input("X")[0]
        if op.type not in ("slice", "strided_slice") or not op.input("Input") \
                or op.input("StartsTensor") or op.input("EndsTensor") \
                or op.input("StartsTensorList") or op.input("EndsTensorList"):
            continue
        axes = [int(a) for a in op.attr("axes", []) or []]
        starts = [int(a) for a in op.attr("starts", []) or []]
        ends = [int(a) for a in op.attr("ends", []) or []]
        if len(axes) != 1 or axes[0] == 0 or len(starts) != 1 or len(ends) != 1:
            continue
        uses = [best[n] for n in op.output_names() if n in best]
        if uses:
            use = min(uses, key=lambda u: (rank[u.kind], u.bound))
            out.setdefault(op.input("Input")[0], []).append(
                (axes[0], starts[0], min(ends[0], _INT_MAX), use))
    for var in list(out):
        src = producer.get(var)
        seen = {var}
        while src is not None and src not in seen:
            out.setdefault(src, []).extend(out[var])
            seen.add(src)
            src = producer.get(src)
    return out
