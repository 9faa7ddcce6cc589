"""Which values a program reads that nothing gives it: the reads a Paddle process fails at.

Paddle's executor creates every var a block declares before it runs the block's ops; a var is
given a value by an op that writes it, by a feed, by its startup program or what the runtime
receives or pulls into it (persistable vars), and nothing else. Reading a var without a value
fails ("Tensor holds no memory", "not initialized"), with one exception, measured on Paddle
2.6.2's executor: a var declared SELECTED_ROWS that no op writes is an **empty** SelectedRows,
which `sum` skips (its kernel type falls back when no input is initialized) and
`merge_selected_rows` passes on; every other kernel that reads its value fails (`clip`,
`clip_by_norm`, `get_tensor_from_selected_rows`, ...). So a `sum` of lookup grads that are
gone (a table's grads pushed by `distributed_push_sparse` instead) makes an empty gradient,
harmless until an op needs its rows.

`unvalued_reads(program, given)` walks block 0 in order (a control-flow op's sub-block where the
op runs it: a `while` body sees what any of its ops writes, from an earlier turn) and returns the
reads of vars without a value, each with the empty SelectedRows it comes from, if it does.
"""
from __future__ import annotations

from dataclasses import dataclass

from .program import Program

# ops whose kernels take an empty SelectedRows (and give one when all they read is empty)
EMPTY_ROWS_OK = ("sum", "merge_selected_rows")
# ops that run a sub-block where they stand; `while` may run it again
LOOP_OPS = ("while", "recurrent")
NO_VAR = ("", "@EMPTY@")
# inputs an op lists for ordering or naming only, never reading their values: the control vars
# of the RPC barriers and recvs, the grad var a fleet push names as its W
DEPENDENCY_SLOTS = {"send_barrier": ("X",), "fetch_barrier": ("X",), "recv": ("X",),
                    "distributed_push_sparse": ("W",)}


@dataclass(frozen=True)
class Unvalued:
    """A read of a var with no value: where, and, for an empty SelectedRows, the vars no op
    writes that it was summed / merged from (`empty_from`; empty for a plain unwritten var)."""
    block: int
    index: int
    op_type: str
    name: str
    empty_from: tuple = ()

    @property
    def empty_rows(self) -> bool:
        return bool(self.empty_from)


def is_selected_rows(program: Program, name: str, block_idx: int = 0) -> bool:
    v = program.find_var(name, block_idx)
    return v is not None and v.kind == "SELECTED_ROWS"


class _Flow:
    def __init__(self, program: Program, given):
        self.program = program
        # what has a value: `given` (looked up, not copied: tens of thousands of persistable
        # slices in a trainer of a split to many pservers) and what the ops wrote so far
        self.given = given
        self.have: set = set()
        self.empty: dict = {}       # empty SelectedRows name -> the unwritten vars it comes from
        self.out: list = []

    def block(self, idx: int) -> None:
        for i, op in enumerate(self.program.blocks[idx].ops):
            self.op(idx, i, op)

    def op(self, bidx: int, i: int, op) -> None:
        roots: list = []
        for name in value_inputs(op):
            if name in NO_VAR or name in self.have or name in self.given:
                continue
            if name in self.empty:
                src = self.empty[name]
            elif is_selected_rows(self.program, name, bidx):
                src = (name,)
            else:
                self.out.append(Unvalued(bidx, i, op.type, name))
                continue
            if op.type in EMPTY_ROWS_OK:
                roots.extend(src)
            else:
                self.out.append(Unvalued(bidx, i, op.type, name, tuple(src)))
        self.sub_blocks(op)
        reads_value = any(n in self.have or n in self.given for n in op.input_names())
        for name in op.output_names():
            if name in NO_VAR:
                continue
            if op.type in EMPTY_ROWS_OK and roots and not reads_value:
                self.empty[name] = tuple(dict.fromkeys(roots))
            else:
                self.have.add(name)
                self.empty.pop(name, None)

    def sub_blocks(self, op) -> None:
        for b in op.block_refs():
            if not 0 < b < len(self.program.blocks):
                continue
            if op.type in LOOP_OPS:
                self.have |= writes_of(self.program, b)
            self.block(b)


def value_inputs(op) -> list:
    """The input names whose values `op` reads (DEPENDENCY_SLOTS left out)."""
    skip = DEPENDENCY_SLOTS.get(op.type)
    if not skip:
        return op.input_names()
    return [n for slot, names in op.inputs.items() if slot not in skip for n in names]


def writes_of(program: Program, idx: int) -> set:
    """Every name the ops of block `idx` (and the blocks they run) write."""
    out: set = set()
    for op in program.blocks[idx].ops:
        out.update(op.output_names())
        for b in op.block_refs():
            if 0 < b < len(program.blocks) and b != idx:
                out |= writes_of(program, b)
    return out


def unvalued_reads(program: Program, given) -> list:
    """The reads of block 0 (and the sub-blocks its ops run) of vars without a value, in the
    order they happen; `given`: the names with a value before the first op (feeds, the
    persistable vars the startup program or the runtime fills)."""
    flow = _Flow(program, given)
    flow.block(0)
    return flow.out


def data_names(program: Program) -> list:
    """feed_names, then the data vars (need_check_feed: declared by `static.data`) of block 0
    that no op reads or writes: a user feeds them all the same, and a split may read them (a
    ShowClickEntry's show and click, which the trainer pushes with the table's gradients)."""
    names = feed_names(program)
    taken = set(names) | {n for _, _, op in program.ops() for n in op.output_names()}
    block = program.global_block
    return names + [n for n, v in block.vars.items()
                    if v.need_check_feed and not v.is_persistable and v.kind == "LOD_TENSOR"
                    and n not in taken]


def feed_names(program: Program) -> list:
    """The vars block 0 reads before writing them that no op or initializer produces and that a
    feed fills: non-persistable LOD_TENSORs no op of the program writes."""
    block = program.global_block
    written, feeds = set(), []
    all_written = {n for _, _, op in program.ops() for n in op.output_names()}
    for op in block.ops:
        for n in op.input_names():
            v = block.var(n)
            if (n not in written and n not in all_written and v is not None
                    and not v.is_persistable and n not in feeds
                    and v.kind == "LOD_TENSOR"):
                feeds.append(n)
        written.update(op.output_names())
    return feeds


# ops that give a SelectedRows for a SelectedRows input (X), and a sum of SelectedRows only
ROWS_KEEPING_OPS = ("clip", "clip_by_norm", "scale", "merge_selected_rows", "assign",
                    "elementwise_mul")
LOOKUP_GRADS = ("lookup_table_grad", "lookup_table_v2_grad")


def dense_at(program: Program, op_types=("send",), wanted=None) -> list:
    """(op index, op, input name) of block 0's ops of `op_types` (or that `wanted(op)`
    accepts) reading a var that held a
    SelectedRows gradient (a sparse lookup's, or what keeps one: ROWS_KEEPING_OPS, a sum of
    them) and was made dense since (a `sum` with a dense term: a weight decay's)."""
    rows, densified = set(), set()
    out = []
    for i, op in enumerate(program.global_block.ops):
        if (op.type in op_types if wanted is None else wanted(op)):
            out.extend((i, op, n) for n in op.input_names() if n in densified)
        ins = op.input("X")
        keeps = (op.type in LOOKUP_GRADS and op.attr("is_sparse") is True) or \
            (op.type == "sum" and bool(ins) and all(n in rows for n in ins)) or \
            (op.type in ROWS_KEEPING_OPS and ins[:1] != [] and ins[0] in rows)
        for n in op.output_names():
            if keeps:
                rows.add(n)
                densified.discard(n)
            elif n in rows:
                rows.discard(n)
                densified.add(n)
    return out
