"""Paddle 2.6.2's parameter-server tables in numpy: what the brpc pservers of `style: ps` do
with the tables `server_desc.txt` describes (docs/ps-runtime.md says what, and from where).

- `rules.py`: the sparse SGD rules (naive, AdaGrad, StdAdaGrad, Adam, shared Adam);
- `accessors.py`: the sparse row layouts and their create / select / update / merge / shrink;
- `sparse.py`: `MemorySparseTable` (rows created at their first push, short until embedx);
- `dense.py`: `MemoryDenseTable` and its rules (sgd, adam, adam_d2sum, summary, sum);
- `geo.py`: `MemorySparseGeoTable`;
- `server.py`: a pserver's tables built from a parsed descriptor, the `BarrierTable`, and the
  client's routing of keys and dense slices to pservers;
- `client.py`: what a trainer's `distributed_push_sparse` makes of ids and gradients.

Values are float32 where Paddle keeps floats (every table value), float64 where its code
computes in double. New sparse rows draw from counter-based generators keyed by seed, table,
key and part (embed / embedx), so a row's start does not depend on which pserver or in which
order it is created; `TableOptions.program_init` starts them from the program's own rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


class TableError(Exception):
    """A table cannot do what it is asked (a push of the wrong width, an unknown table id)."""


class ClientAborts(TableError):
    """A push Paddle's worker client cannot make: its trainer aborts (ids with a LoD of two
    levels: FleetWrapper::PushSparseFromTensorAsync walks the first level as rows)."""


class PserverRefuses(TableError):
    """A descriptor Paddle wrote but its pserver cannot start from (an empty initializer)."""


@dataclass(frozen=True)
class TableOptions:
    """How the simulated pservers depart from (or follow) Paddle's.

    seed: keys the new rows' draws (Paddle seeds from the clock).
    program_init: None, or a function (table_name, keys) -> [len(keys), emb] float rows (the
        table's `common.table_name` is the program's embedding parameter): new sparse rows take
        the program's own initial rows (laid out as a pull answers) instead of the table's
        rule's draws.
    create_value_when_push: Paddle's FLAGS_pserver_create_value_when_push (true in 2.6.2): a
        pull of a missing key answers zeros and creates nothing.
    lenient_initializers: an empty dense initializer (the_one_ps.py writes "" for a param no
        known initializer op fills) gives zeros and a note, where Paddle's
        MemoryDenseTable::CreateInitializer throws (PserverRefuses).
    """
    seed: int = 0
    program_init: Optional[Callable] = None
    create_value_when_push: bool = True
    lenient_initializers: bool = False
