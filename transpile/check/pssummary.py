"""What the trainer checks read of a pserver's main program, kept small: a streamed check
(stream.py) lets each pserver's programs go once it has checked them, and keeps this."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from types import MappingProxyType
from typing import Mapping, NamedTuple

from ..ir.program import Program
from .ops import all_names, is_geo_update, is_update_op


class LiteOp(NamedTuple):
    """An op of an optimize block, as the send checks read it (a named tuple: tens of
    thousands are made, and sent back by a forked check's child, on a large cluster)."""
    type: str
    inputs: tuple            # input_names(op)
    outputs: tuple           # output_names(op)
    x: tuple                 # op.input("X")
    plain_writer: bool       # neither an optimizer update nor geo's sum(param, delta)


@dataclass(frozen=True)
class PserverSummary:
    n_blocks: int
    later_inputs: frozenset  # what the ops of blocks 1.. read
    blocks: Mapping          # block idx -> (LiteOp, ...): the blocks grad_to_block_id names
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
    blocks = {}
    for bi in set(block_ids):
        if 0 < bi < n:
            # (input_names / output_names made tuples at once: ~60k ops at 64 pservers)
            blocks[bi] = tuple(
                LiteOp(op.type, tuple(filter(None, chain.from_iterable(op.inputs.values()))),
                       tuple(filter(None, chain.from_iterable(op.outputs.values()))),
                       tuple(op.inputs.get("X", ())),
                       not is_update_op(op) and not is_geo_update(op))
                for op in prog.blocks[bi].ops)
    persistable = frozenset(name for name, v in prog.global_block.vars.items()
                            if v.persistable)
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
