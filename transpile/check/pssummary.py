"""What the trainer checks read of a pserver's main program, kept small: a streamed check
(stream.py) lets each pserver's programs go once it has checked them, and keeps this."""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from ..ir.program import Program
from ..ir.vartable import persistable_names
from .ops import all_names


@dataclass(frozen=True)
class PserverSummary:
    n_blocks: int
    later_inputs: frozenset  # what the ops of blocks 1.. read
    blocks: Mapping          # block idx -> its ops: the blocks grad_to_block_id names (read
    #                          while the program is held: a streamed check's for_recvs drops them)
    persistable: frozenset   # the persistable vars of block 0

    def __reduce__(self):        # a forked check's child sends summaries back (stream.py)
        return (_unpickled, (self.n_blocks, self.later_inputs, dict(self.blocks),
                             self.persistable))


def _unpickled(n_blocks, later_inputs, blocks: dict, persistable) -> PserverSummary:
    return PserverSummary(n_blocks, later_inputs, MappingProxyType(blocks), persistable)


def summarize(prog: Program, block_ids) -> PserverSummary:
    """The summary of a pserver main program; `block_ids`: its grad_to_block_id's blocks."""
    n = len(prog.blocks)
    later = frozenset(all_names([op for b in prog.blocks[1:] for op in b.ops], "inputs"))
    blocks = {bi: prog.blocks[bi].ops for bi in set(block_ids) if 0 < bi < n}
    persistable = frozenset(persistable_names(prog.global_block.vars))
    return PserverSummary(n, later, MappingProxyType(blocks), persistable)


def for_recvs(summary: PserverSummary, asked, held=()) -> PserverSummary:
    """What a streamed check keeps of a pserver's summary once it has checked every send's
    target there (stream.py, transfer.target_of): what the recv checks ask, whether a name
    received from the pserver is persistable there, for the names they will ask about
    (`asked`: every trainer's recvs, trainer.streamed_edges) but `held`, the parameters of
    the pserver's own parameter blocks (the recv checks ask this only of a name no parameter
    block holds: tens of thousands of slices at 64 pservers, let go here)."""
    persistable = summary.persistable & asked
    if held:
        persistable = persistable.difference(held)
    return PserverSummary(summary.n_blocks, frozenset(), MappingProxyType({}), persistable)
