"""Random feeds for a training program: one global batch per step, cut into trainer shards."""
from __future__ import annotations

import numpy as np

from ..core.errors import UserError
from ..ir.program import Program
from .values import np_dtype


def feed_vars(main: Program) -> list:
    """The vars block 0 reads before writing them that no op or initializer produces."""
    block = main.global_block
    written, feeds = set(), []
    all_written = {n for _, _, op in main.ops() for n in op.output_names()}
    for op in block.ops:
        for n in op.input_names():
            v = block.var(n)
            if (n not in written and n not in all_written and v is not None
                    and not v.is_persistable and n not in [f.name for f in feeds]
                    and v.kind == "LOD_TENSOR"):
                feeds.append(v)
        written.update(op.output_names())
    return feeds


def _ranges(main: Program) -> dict:
    """For int feeds: the exclusive upper bound of their values (table rows, class counts)."""
    out: dict = {}
    block = main.global_block

    def dim(name, axis):
        v = main.find_var(name)
        if v is None or not v.shape:
            return None
        d = v.shape[axis]
        return d if d > 0 else None

    for op in block.ops:
        if op.type in ("lookup_table", "lookup_table_v2", "distributed_lookup_table",
                       "embedding"):
            for ids in op.input("Ids"):
                w = (op.input("W") or [None])[0]
                if w is not None and dim(w, 0):
                    out[ids] = min(out.get(ids, 1 << 62), dim(w, 0))
        elif op.type in ("softmax_with_cross_entropy", "cross_entropy", "cross_entropy2"):
            lab = (op.input("Label") or [None])[0]
            src = (op.input("Logits") or op.input("X"))[0]
            if lab is not None and dim(src, -1):
                out[lab] = dim(src, -1)
        elif op.type == "sigmoid_cross_entropy_with_logits":
            lab = (op.input("Label") or [None])[0]
            if lab is not None:
                out[lab] = 2
    # a feed reshaped or cast before its use has the range of that use
    passthrough = ("reshape", "reshape2", "cast", "assign", "squeeze2", "unsqueeze2",
                   "squeeze", "unsqueeze", "flatten2", "flatten_contiguous_range")
    for _ in range(3):
        for op in reversed(block.ops):
            if op.type in passthrough and op.input("X") and op.output("Out"):
                if op.output("Out")[0] in out and op.input("X")[0] not in out:
                    out[op.input("X")[0]] = out[op.output("Out")[0]]
    return out


_PASSTHROUGH = ("reshape", "reshape2", "cast", "assign", "squeeze2", "unsqueeze2", "squeeze",
                "unsqueeze", "flatten2", "flatten_contiguous_range")
_LOOKUPS = ("lookup_table", "lookup_table_v2", "distributed_lookup_table", "embedding")


def _ids_per_sample(main: Program) -> dict:
    """Feeds of one id per row that the program regroups by sample: a feed passed (reshaped)
    to a lookup whose rows a later reshape groups as [-1, k, width] carries k ids per sample
    (word2vec's neg_label: declared [-1, 1], reshaped to [-1, 5, 8])."""
    block = main.global_block
    feeds = {v.name for v in feed_vars(main)}
    origin = {f: f for f in feeds}          # var -> the feed it is a plain view of
    rows_of = {}                             # lookup output -> (feed, row width)
    out: dict = {}
    for op in block.ops:
        if op.type in _PASSTHROUGH and op.input("X") and op.output("Out"):
            src = op.input("X")[0]
            if src in origin:
                origin[op.output("Out")[0]] = origin[src]
            elif src in rows_of:
                f, width = rows_of[src]
                shape = [int(d) for d in op.attr("shape", []) or []]
                fixed = [d for d in shape[1:] if d > 0]
                if shape and shape[0] == -1 and len(fixed) == len(shape) - 1 and width:
                    per = int(np.prod(fixed)) // width
                    if per > 1 and per * width == int(np.prod(fixed)):
                        out[f] = max(out.get(f, 1), per)
        elif op.type in _LOOKUPS:
            w = (op.input("W") or [None])[0]
            wv = main.find_var(w) if w else None
            width = int(np.prod(wv.shape[1:])) if wv is not None and wv.shape else 0
            outs = op.output("Out") or op.output("Outputs")
            for ids, o in zip(op.input("Ids"), outs):
                if ids in origin:
                    rows_of[o] = (origin[ids], width)
    return out


def _sequence_feeds(main: Program) -> set:
    """LoD feeds whose values (directly or through lookups and reshapes) reach a sequence_*
    op: only those get sequences of random lengths; the others one row per sample."""
    block = main.global_block
    origin = {v.name: {v.name} for v in feed_vars(main)}
    out: set = set()
    for op in block.ops:
        srcs = set().union(*[origin.get(n, set()) for n in op.input_names()])
        if not srcs:
            continue
        if op.type.startswith("sequence_"):
            out |= srcs
        if op.type in _PASSTHROUGH or op.type in _LOOKUPS:
            for n in op.output_names():
                origin.setdefault(n, set()).update(srcs)
    return out


class Feeder:
    """Deterministic random feeds: feed(step) is the global batch, shard() a trainer's part."""

    def __init__(self, main: Program, batch: int, seed: int, float_dtype):
        self.vars = feed_vars(main)
        self.ranges = _ranges(main)
        self.per_sample = _ids_per_sample(main)
        self.sequences = _sequence_feeds(main)
        self.batch = batch
        self.seed = seed
        self.fdt = float_dtype
        for v in self.vars:
            if v.shape and any(d < 0 for d in v.shape[1:]):
                raise UserError("feed var %s has shape %s: only the batch dim may be unknown"
                                % (v.name, list(v.shape)))
            dt = np_dtype(v.dtype, float_dtype)
            if np.issubdtype(dt, np.integer) and v.name not in self.ranges:
                raise UserError("feed var %s is an integer input, but no embedding table or "
                                "label use tells its range" % v.name)

    def feed(self, step: int) -> dict:
        """name -> (array, lod or None) for the global batch of `step`."""
        rng = np.random.default_rng([self.seed, 7919, step])
        lens = None
        out = {}
        for v in self.vars:
            rest = tuple(v.shape[1:]) if v.shape else ()
            lod = None
            rows = self.batch * self.per_sample.get(v.name, 1)
            if (v.lod_level or 0) >= 1:
                if lens is None:
                    lens = rng.integers(1, 4, size=self.batch)
                if v.name in self.sequences:
                    mine = lens
                else:
                    mine = np.full(self.batch, self.per_sample.get(v.name, 1))
                rows = int(mine.sum())
                lod = [[0] + np.cumsum(mine).tolist()]
            dt = np_dtype(v.dtype, self.fdt)
            if np.issubdtype(dt, np.integer):
                arr = rng.integers(0, self.ranges[v.name], size=(rows,) + rest).astype(dt)
            elif v.name in self.ranges:
                arr = rng.integers(0, self.ranges[v.name], size=(rows,) + rest).astype(dt)
            elif dt == np.bool_:
                arr = rng.integers(0, 2, size=(rows,) + rest).astype(bool)
            else:
                # unit expected norm per sample: wide inputs at full scale make a plain
                # SGD/momentum MLP diverge within a few steps, and a diverging run only
                # compares rounding noise
                width = int(np.prod(rest)) if rest else 1
                arr = (rng.uniform(-1.0, 1.0, size=(rows,) + rest)
                       * np.sqrt(3.0 / max(width, 1))).astype(dt)
            out[v.name] = (arr, lod)
        return out

    def shard(self, feed: dict, trainer: int, trainers: int) -> dict:
        """Trainer `trainer`'s contiguous share of the global batch (whole sequences)."""
        if self.batch % trainers:
            raise UserError("--batch %d does not divide among %d trainers" % (self.batch, trainers))
        per = self.batch // trainers
        lo, hi = trainer * per, (trainer + 1) * per
        out = {}
        for name, (arr, lod) in feed.items():
            if lod:
                off = lod[0]
                a, b = off[lo], off[hi]
                out[name] = (arr[a:b], [[o - a for o in off[lo:hi + 1]]])
            else:
                k = self.per_sample.get(name, 1)
                out[name] = (arr[lo * k:hi * k], None)
        return out
