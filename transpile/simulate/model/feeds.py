"""Random feeds for a training program: one global batch per step, cut into trainer shards."""
from __future__ import annotations

import numpy as np

from ...core.errors import UserError
from ...ir.dataflow import data_names
from ...ir.program import Program
from .values import np_dtype


def feed_vars(main: Program) -> list:
    """The vars block 0 reads before writing them that no op or initializer produces, then the
    data vars no op reads (ir/dataflow.py's data_names): what a user feeds."""
    block = main.global_block
    return [block.var(n) for n in data_names(main)]


_PASSTHROUGH = ("reshape", "reshape2", "cast", "assign", "squeeze2", "unsqueeze2", "squeeze",
                "unsqueeze", "flatten2", "flatten_contiguous_range")
_LOOKUPS = ("lookup_table", "lookup_table_v2", "distributed_lookup_table", "embedding")


def _ids_per_sample(main: Program) -> dict:
    """Feeds of one id per row that the program regroups by sample: a feed passed (reshaped)
    to a lookup whose rows a later reshape groups as [-1, k, width] carries k ids per sample
    (word2vec's neg_label: declared [-1, 1], reshaped to [-1, 5, 8]); a feed declared with
    its k ids a row ([-1, 5]) is left alone."""
    block = main.global_block
    fvars = {v.name: v for v in feed_vars(main)}
    feeds = set(fvars)
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
                declared = [int(d) for d in (fvars[f].shape or [])[1:]]
                row = int(np.prod(declared)) if all(d > 0 for d in declared) else 0
                if shape and shape[0] == -1 and len(fixed) == len(shape) - 1 and width and row:
                    per = int(np.prod(fixed)) // width // row
                    if per > 1 and per * width * row == int(np.prod(fixed)):
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


# forward ops whose output rows are not their input's rows (a sequence pooled to one row, a
# batch reduced): the rows of a feed stop there
_ROW_COLLAPSING = ("sequence_pool", "sequence_pad", "mean", "reduce_sum", "reduce_mean",
                   "reduce_max", "reduce_min", "reduce_prod", "accuracy", "auc")


def _sequence_feeds(main: Program) -> set:
    """LoD feeds whose rows (through lookups, reshapes and any forward op that keeps rows: fc,
    elementwise, activations, concat...) reach a sequence_* op: only those get sequences of
    random lengths; the others one row per sample (a feed declared lod_level 1 by habit and
    used per sample)."""
    from ...ir.roles import BACKWARD, OPTIMIZE, role
    block = main.global_block
    origin = {v.name: {v.name} for v in feed_vars(main)}
    out: set = set()
    for op in block.ops:
        if role(op) & (BACKWARD | OPTIMIZE):
            continue
        srcs = set().union(*[origin.get(n, set()) for n in op.input_names()])
        if not srcs:
            continue
        if op.type.startswith("sequence_"):
            out |= srcs
        if op.type not in _ROW_COLLAPSING:
            for n in op.output_names():
                origin.setdefault(n, set()).update(srcs)
    return out


def parse_lod(text: str) -> tuple:
    """`--lod`'s value: "N" (every sequence N long) or "MIN-MAX" (each length drawn in that
    range) -> (MIN, MAX); ValueError with the reason."""
    parts = str(text).split("-")
    try:
        lo, hi = (int(parts[0]), int(parts[-1])) if len(parts) <= 2 else (None, None)
    except ValueError:
        lo = hi = None
    if lo is None or lo < 0 or hi < max(lo, 1):
        raise ValueError("%r is not a length N >= 1 or a range MIN-MAX (0 <= MIN <= MAX, "
                         "MAX >= 1)" % text)
    return lo, hi


SEQ_LEN = 3      # the length given to a feed's variable-length dims ([-1, -1] id sequences)
LOD_LENGTHS = (1, 3)    # a LoD feed's sequence lengths are drawn in this range (--lod)


def id_pool(height: int, size: int, seed: int):
    """`size` ids spread over a table of `height` rows, one from each of `size` equal strata
    (so every pserver's row block gets some), the same for every feed bounded by that table
    and every step: ids recur, so rows trained in one step are read again in the next."""
    if height <= size:
        return np.arange(height, dtype=np.int64)
    rng = np.random.default_rng([seed, 104729, height])
    lo = (np.arange(size, dtype=np.int64) * height) // size
    hi = (np.arange(1, size + 1, dtype=np.int64) * height) // size
    return lo + (rng.random(size) * (hi - lo)).astype(np.int64)


class Feeder:
    """Deterministic random feeds: feed(step) is the global batch, shard() a trainer's part.

    Integer feeds (and float labels) take values their uses allow (feeduses.py): ids from a
    pool spread over the table, labels with every class in each trainer's shard, flags 0 / 1.
    """

    def __init__(self, main: Program, batch: int, seed: int, float_dtype, trainers: int = 1,
                 lod: tuple = LOD_LENGTHS):
        from .feeduses import Use, column_uses, feed_uses
        self.vars = feed_vars(main)
        self.uses = feed_uses(main)
        self.columns = column_uses(main, self.uses)
        self.per_sample = _ids_per_sample(main)
        self.sequences = _sequence_feeds(main)
        self.batch = batch
        self.trainers = trainers if trainers > 0 and batch % trainers == 0 else 1
        self.seed = seed
        self.fdt = float_dtype
        self.lod = tuple(lod)
        self.pool_size = max(4, 2 * batch)
        self.notes = []
        for v in self.vars:
            dt = np_dtype(v.dtype, float_dtype)
            if np.issubdtype(dt, np.integer) and v.name not in self.uses \
                    and v.name not in self.columns:
                self.uses[v.name] = Use("default", 2, "no use bounds it")
                self.notes.append("feed %s: an integer input no use bounds (no lookup, label, "
                                  "index, length or float cast): 0 or 1" % v.name)
        seqs = [v for v in self.vars if (v.lod_level or 0) >= 1 and v.name in self.sequences]
        if seqs:
            lo, hi = self.lod
            self.notes.append("LoD feeds %s: sequences of %s rows each, per sample (--lod)"
                              % (", ".join("%s (lod_level %d)" % (v.name, v.lod_level)
                                           for v in seqs),
                                 "%d" % lo if lo == hi else "%d to %d" % (lo, hi)))

    def use(self, name):
        """How feed `name`'s values are chosen (feeduses.Use), or None for plain floats."""
        return self.uses.get(name)

    def _ints(self, rng, name, rows, rest, use):
        n = rows * (int(np.prod(rest)) if rest else 1)
        if use.kind == "ids":
            pool = id_pool(use.bound, self.pool_size, self.seed)
            return pool[rng.integers(0, len(pool), size=n)].reshape((rows,) + rest)
        if use.kind == "label":
            # every class in each trainer's shard where the shard is big enough
            out = np.empty(n, dtype=np.int64)
            per = n // self.trainers if n % self.trainers == 0 else n
            for lo in range(0, n, per):
                m = min(per, n - lo)
                out[lo:lo + m] = rng.permutation(np.arange(m) % use.bound) \
                    if use.bound <= m else rng.choice(use.bound, m, replace=False)
            return out.reshape((rows,) + rest)
        if use.kind == "length":
            return rng.integers(1, use.bound + 1, size=(rows,) + rest)
        return rng.integers(0, use.bound, size=(rows,) + rest)

    def feed(self, step: int) -> dict:
        """name -> (array, lod or None) for the global batch of `step`.

        A LoD feed that reaches a sequence op gets sequences of lengths drawn in `lod` (per
        sample; a feed of lod_level k, k levels: each element of a level holds a drawn number
        of the next), the same for every such feed of the step at the levels they share (a
        node's neighbours and their neighbours agree); other LoD feeds one row per sample."""
        rng = np.random.default_rng([self.seed, 7919, step])
        levels: list = []       # the lengths of each level, drawn as deep feeds ask for them
        out = {}
        for v in self.vars:
            rest = tuple(SEQ_LEN if d < 0 else d for d in v.shape[1:]) if v.shape else ()
            lod = None
            rows = self.batch * self.per_sample.get(v.name, 1)
            depth = int(v.lod_level or 0)
            if depth >= 1:
                if not levels:      # drawn at the first LoD feed, whatever its kind
                    self._levels(rng, levels, 1)
                if v.name in self.sequences:
                    lod = self._levels(rng, levels, depth)
                else:
                    per = self.per_sample.get(v.name, 1)
                    lod = [list(range(0, self.batch + 1))] * (depth - 1) \
                        + [list(range(0, self.batch * per + 1, per))]
                rows = int(lod[-1][-1])
            out[v.name] = (self._values(rng, v, rows, rest), lod)
        return out

    def _levels(self, rng, levels: list, depth: int) -> list:
        """The offsets of `depth` LoD levels; `levels` holds the lengths drawn so far."""
        lo, hi = self.lod
        while len(levels) < depth:
            n = self.batch if not levels else int(levels[-1].sum())
            levels.append(rng.integers(lo, hi + 1, size=n))
        return [[0] + np.cumsum(lens).tolist() for lens in levels[:depth]]

    def _values(self, rng, v, rows, rest):
        dt = np_dtype(v.dtype, self.fdt)
        use = self.uses.get(v.name)
        if use is not None and (np.issubdtype(dt, np.integer) or use.kind == "label"):
            arr = self._ints(rng, v.name, rows, rest, use).astype(dt)
        elif dt == np.bool_:
            arr = rng.integers(0, 2, size=(rows,) + rest).astype(bool)
        else:
            # unit expected norm per sample: wide inputs at full scale make a plain
            # SGD/momentum MLP diverge within a few steps, and a diverging run only
            # compares rounding noise
            width = int(np.prod(rest)) if rest else 1
            arr = (rng.uniform(-1.0, 1.0, size=(rows,) + rest)
                   * np.sqrt(3.0 / max(width, 1))).astype(dt)
        for axis, lo, hi, cuse in self.columns.get(v.name, ()):
            self._fill_columns(rng, arr, axis, lo, hi, cuse)
        return arr

    def _fill_columns(self, rng, arr, axis, lo, hi, use):
        """Columns lo:hi along `axis` take the values their own use allows (ids in a float
        feed that a slice and a cast make ids)."""
        if not 0 < axis < arr.ndim:
            return
        n = arr.shape[axis]
        lo = max(0, min(n, lo + n if lo < 0 else lo))
        hi = max(lo, min(n, hi + n if hi < 0 else hi))
        idx = [slice(None)] * arr.ndim
        idx[axis] = slice(lo, hi)
        part = arr[tuple(idx)]
        if not part.size:
            return
        vals = self._ints(rng, None, part.shape[0], tuple(part.shape[1:]), use)
        arr[tuple(idx)] = vals.astype(arr.dtype)

    def shard(self, feed: dict, trainer: int, trainers: int) -> dict:
        """Trainer `trainer`'s contiguous share of the global batch: its samples, each with
        its whole sequences at every LoD level (as Paddle's readers cut a batch)."""
        if self.batch % trainers:
            raise UserError("--batch %d does not divide among %d trainers" % (self.batch, trainers))
        per = self.batch // trainers
        lo, hi = trainer * per, (trainer + 1) * per
        out = {}
        for name, (arr, lod) in feed.items():
            if lod:
                a, b, levels = lo, hi, []
                for off in lod:
                    levels.append([o - off[a] for o in off[a:b + 1]])
                    a, b = off[a], off[b]
                out[name] = (arr[a:b], levels)
            else:
                k = self.per_sample.get(name, 1)
                out[name] = (arr[lo * k:hi * k], None)
        return out
