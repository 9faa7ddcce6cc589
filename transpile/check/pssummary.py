"""What the trainer checks read of a pserver's main program, kept small: a streamed check
(stream.py) lets each pserver's programs go once it has checked them, and keeps this."""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, NamedTuple

from ..ir.program import Program
from .ops import all_names, input_names, is_geo_update, is_update_op, output_names


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


def summarize(prog: Program, grad_keys: Mapping, asked=None) -> PserverSummary:
    """The summary of a pserver main program; `grad_keys`: its grad_to_block_id ({grad name:
    block}). `asked`: None, or the only names the trainer checks will ask about (every
    trainer's edges: trainer.edge_names), for a summary kept while the other pservers are read
    (stream.py): its sets and ops then hold only what those questions and the findings' words
    read, and answer every one of them as the whole summary would."""
    n = len(prog.blocks)
    later = all_names([op for b in prog.blocks[1:] for op in b.ops], "inputs")
    persistable = (name for name, v in prog.global_block.vars.items() if v.persistable)
    if asked is not None:
        later, persistable = asked.intersection(later), asked.intersection(persistable)
    keys = frozenset(grad_keys)
    blocks = {}
    same: dict = {}         # each tuple of names made once: a scale reads and writes one name
    for bi in set(grad_keys.values()):
        if 0 < bi < n:
            blocks[bi] = tuple(_lite(op, asked, keys, same) for op in prog.blocks[bi].ops)
    return PserverSummary(n, frozenset(later), MappingProxyType(blocks), frozenset(persistable))


def _lite(op, asked, keys: frozenset, same: dict) -> LiteOp:
    """An op of an optimize block as the send checks read it (_check_send_target): whether it
    reads a sent name (inputs), overwrites a grad key as a plain writer (outputs; its inputs
    and X then named in a finding), a sum's X (named too). With `asked`, an op that writes no
    key keeps only the asked names it reads. Equal tuples of names are one (`same`)."""
    ins, outs = input_names(op), output_names(op)
    plain = not is_update_op(op) and not is_geo_update(op)
    x = op.input("X")
    if asked is not None and not (plain and not keys.isdisjoint(outs)):
        ins, outs = [n for n in ins if n in asked], ()
        if op.type != "sum":
            x = [n for n in x if n in asked]
    ins, outs, x = tuple(ins), tuple(outs), tuple(x)
    return LiteOp(op.type, same.setdefault(ins, ins), same.setdefault(outs, outs),
                  same.setdefault(x, x), plain)
