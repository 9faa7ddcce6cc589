"""`MemorySparseTable` of Paddle 2.6.2 (`ps/table/memory_sparse_table.cc`), one pserver's part.

Rows live in a dict, key -> float32 row in the accessor's layout, short (without the mf tail:
embedx_w and its state) until a push finds NeedExtendMF true. With
FLAGS_pserver_create_value_when_push (2.6.2's default) a pull creates nothing and answers
zeros for a missing key and for a short row's embedx; a push creates the row (Create, its
short part kept), updates a full-width buffer, and on extension takes a fresh Create for the
tail: the extending push's embedx gradient is lost.

New rows draw their uniforms from `keyed` generators keyed by the options' seed, the table id,
the part (embed / embedx) and the key: the same row starts the same on any pserver, in any
order. `TableOptions.program_init` replaces the drawn weights with the program's own rows.
"""
from __future__ import annotations

import numpy as np

from ...model import keyed
from . import TableError, TableOptions
from .accessors import make_accessor
from .rules import F32


def as_keys(keys):
    """Feature keys as Paddle's uint64 (an int64 id cast), as a numpy uint64 array."""
    return np.asarray(keys).astype(np.int64).reshape(-1).astype(np.uint64)


def key_waves(keys):
    """Index arrays that split `keys` into runs of distinct keys, each key's occurrences in
    order: Paddle applies a request's values key by key, so a key pushed twice is updated
    twice, one after the other."""
    seen: dict = {}
    waves: list = []
    for i, k in enumerate(keys.tolist()):
        n = seen.get(k, 0)
        seen[k] = n + 1
        if n == len(waves):
            waves.append([])
        waves[n].append(i)
    return [np.asarray(w, dtype=np.int64) for w in waves]


class MemorySparseTable:
    """One pserver's rows of a sparse table, with its accessor."""
    table_class = "MemorySparseTable"

    def __init__(self, param, options: TableOptions = TableOptions(), where: str = "table"):
        self.table_id = int(param.table_id)
        self.table_name = param.common.table_name
        self.shard_num = int(param.shard_num)
        self.accessor = make_accessor(param.accessor, where + ".accessor")
        self.options = options
        self.rows: dict = {}

    def __len__(self):
        return len(self.rows)

    def keys(self):
        return sorted(self.rows)

    def row(self, key):
        """A copy of the stored row (short or full) of `key`, or None."""
        r = self.rows.get(int(as_keys([key])[0]))
        return None if r is None else r.copy()

    # --- creation ----------------------------------------------------------------------------
    def _draw_key(self, part: str) -> int:
        return keyed.key_of(self.options.seed, "pstable", self.table_id, part)

    def create_rows(self, keys):
        """Full new rows for `keys` (Create), drawn per key, or the program's rows."""
        acc = self.accessor
        keys = as_keys(keys)
        ids = keys.astype(np.int64)
        embed_u = keyed.uniform(self._draw_key("embed"), ids, 1)
        embedx_u = keyed.uniform(self._draw_key("embedx"), ids, acc.embedx_dim)
        rows = acc.create(embed_u, embedx_u)
        if self.options.program_init is not None and len(keys):
            emb = np.asarray(self.options.program_init(self.table_name, ids), dtype=F32)
            acc.set_weights(rows, *acc.split_embedding(emb.reshape(len(keys), -1)))
        return rows

    # --- pull --------------------------------------------------------------------------------
    def pull(self, keys):
        """PullSparse: [len(keys), select_dim] float32, as the trainer receives them."""
        acc = self.accessor
        keys = as_keys(keys)
        buf = np.zeros((len(keys), acc.dim), dtype=F32)
        for i, k in enumerate(keys.tolist()):
            row = self.rows.get(k)
            if row is None:
                if self.options.create_value_when_push:
                    continue        # zeros, nothing created
                row = self.create_rows([k])[0, :acc.short_dim].copy()
                self.rows[k] = row
            buf[i, :len(row)] = row
        return acc.select(buf)

    # --- push --------------------------------------------------------------------------------
    def push(self, keys, values):
        """PushSparse: one pushed value ([slot, show, click, embed_g, embedx_g...]) per key,
        applied in order."""
        keys = as_keys(keys)
        values = self.accessor.check_push(values)
        if len(values) != len(keys):
            raise TableError("table %d: %d keys pushed with %d values"
                             % (self.table_id, len(keys), len(values)))
        for wave in key_waves(keys):
            self._push_distinct(keys[wave], values[wave])

    def _push_distinct(self, keys, values):
        acc = self.accessor
        klist = keys.tolist()
        missing = [k for k in klist if k not in self.rows]
        if missing:
            for k, r in zip(missing, self.create_rows(missing)):
                self.rows[k] = r[:acc.short_dim].copy()
        buf = np.zeros((len(klist), acc.dim), dtype=F32)
        short = np.zeros(len(klist), dtype=bool)
        for i, k in enumerate(klist):
            row = self.rows[k]
            buf[i, :len(row)] = row     # a short row's tail is scratch: never kept
            short[i] = len(row) < acc.dim
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            new = acc.update(buf, values)
        extend = short & acc.need_extend_mf(new)
        fresh = iter(self.create_rows(keys[extend]) if extend.any() else [])
        for i, k in enumerate(klist):
            if not short[i]:
                self.rows[k] = new[i]
            elif extend[i]:
                row = next(fresh)
                row[:acc.short_dim] = new[i, :acc.short_dim]
                self.rows[k] = row
            else:
                self.rows[k] = new[i, :acc.short_dim].copy()

    # --- shrink ------------------------------------------------------------------------------
    def shrink(self):
        """Shrink: every row's show and click decay; rows below delete_threshold (or unseen
        too long) go. Returns the deleted keys."""
        acc = self.accessor
        keys = self.keys()
        if not keys:
            return []
        buf = np.zeros((len(keys), acc.dim), dtype=F32)
        sizes = [len(self.rows[k]) for k in keys]
        for i, k in enumerate(keys):
            buf[i, :sizes[i]] = self.rows[k]
        buf, delete = acc.shrink(buf)
        gone = []
        for i, k in enumerate(keys):
            if delete[i]:
                del self.rows[k]
                gone.append(k)
            else:
                self.rows[k] = buf[i, :sizes[i]].copy()
        return gone

    def pour(self):
        """Pour (the barrier's): nothing for a sparse table."""
