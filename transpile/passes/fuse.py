"""The pull fusion of the fleet and ps trainers (`_pull_sparse_fuse` of Paddle's
distributed_ops_pass, ir/trainer_pass.py and passes/ps_trainer_pass.py): the lookups of one
remote table (its W) become one `distributed_lookup_table` fed with all their ids, placed right
after the last producer of those ids, provided every consumer of the looked-up rows comes
later; if not, each lookup is replaced in place. Before that, Paddle tries to make room: it
hoists the producers of the ids (and what they need) above the first consumer of the rows
(dag_check_up_and_reorder), reproduced here step by step, stale indices included.

The two Paddles differ in one place: the ps pass stops hoisting when a needed producer reads
the rows; the Fleet 2.0 pass tests that flag with `is True` on an int, never true, and goes on.
"""
from __future__ import annotations

from typing import Callable

from ..core.errors import RefusedError
from ..ir.program import Op
from ..ir.tables import ids_not_2d, ids_refusal
from .build import OpOrder

# make_lookup(w, ids, outs) -> the distributed_lookup_table op of table w
MakeLookup = Callable[[str, list, list], Op]


def reorder(ops: list, inputs: list, outputs: list, stop_at_reader: bool = True) -> None:
    """dag_check_up_and_reorder, in place on the op list: as Paddle does it, step by step
    (fuse_pulls calls it only when it would move something). `stop_at_reader`: the ps pass's
    test (False: the Fleet 2.0 pass's, which never stops there)."""
    ins, outs = set(inputs), set(outputs)
    n = len(ops)
    in_flag = [0] * n
    out_flag = [0] * n
    max_in, min_out = -1, n
    for i, op in enumerate(ops):
        if any(a in ins for a in op.output_names()):
            in_flag[i] = 1
            max_in = max(max_in, i)
        if any(a in outs for a in op.input_names()):
            out_flag[i] = 1
            min_out = min(min_out, i)
    if any(a and b for a, b in zip(in_flag, out_flag)):
        return              # an op both reads the rows and makes ids: Paddle warns, no move
    if not min_out < max_in:
        return
    moves = [(ops[i], i) for i in range(min_out + 1, n) if in_flag[i]]
    for first, pos0 in moves:
        queue = [pos0]
        visited = {id(first)}
        start = 0
        while start < len(queue):
            op = ops[queue[start]]
            needed = set(op.input_names())
            for j in range(queue[start] - 1, min_out - 1, -1):
                other = ops[j]
                if id(other) in visited:
                    continue
                if any(a in needed for a in other.output_names()):
                    if out_flag[j] and stop_at_reader:
                        return          # Paddle warns and stops; moves made so far stay
                    queue.append(j)
                    visited.add(id(other))
            start += 1
        for index in sorted(queue):
            ops.insert(min_out, ops.pop(index))
            in_flag.insert(min_out, in_flag.pop(index))
            out_flag.insert(min_out, out_flag.pop(index))
            min_out += 1


def fuse_by_index(ops: list, w: str, group: list, make_lookup: MakeLookup) -> None:
    """One table's lookups fused as Paddle writes it, with list indices (in place)."""
    inputs = [op.input("Ids")[0] for op in group]
    outputs = [op.output("Out")[0] for op in group]
    pos = {id(op): i for i, op in enumerate(ops)}
    op_idxs = [pos[id(op)] for op in group]
    for i in sorted(op_idxs, reverse=True):
        del ops[i]
    in_idx = [-1] * len(inputs)
    out_idx = [len(ops) + 1] * len(outputs)
    for i, op in enumerate(ops):
        made, read = set(op.output_names()), set(op.input_names())
        for k, name in enumerate(inputs):
            if name in made:
                in_idx[k] = i
        for k, name in enumerate(outputs):
            if name in read and out_idx[k] > i:
                out_idx[k] = i
    if min(out_idx) - max(in_idx) >= 1:
        at = min(op_idxs) if max(in_idx) == -1 else max(in_idx) + 1
        ops.insert(at, make_lookup(w, inputs, outputs))
    else:
        for k in range(len(inputs)):
            ops.insert(op_idxs[k], make_lookup(w, [inputs[k]], [outputs[k]]))


def _needs_reorder(order: OpOrder, inputs: list, outputs: list) -> bool:
    """Whether dag_check_up_and_reorder would move anything: no op both makes ids and reads
    rows, and a reader of the rows comes before a maker of the ids."""
    makers = [op for name in inputs for op in order.producers.get(name, ())
              if id(op) in order.live]
    readers = [op for name in outputs for op in order.consumers.get(name, ())
               if id(op) in order.live]
    if not makers or not readers or {id(op) for op in makers} & {id(op) for op in readers}:
        return False
    return min(order.key[id(op)] for op in readers) < max(order.key[id(op)] for op in makers)


def fuse_pulls(block, pulls: dict, make_lookup: MakeLookup, stop_at_reader: bool,
               where: str) -> list:
    """_pull_sparse_fuse over `block`'s ops, table by table (`pulls`: {W: its lookups}); the
    new op list. A table whose ids are not all 2-D is refused as Paddle's InferShape refuses it
    when the pass inserts its lookup (`where`: the pass, for the message).

    Positions are OpOrder keys rather than list indices, so a table costs what its ids and
    rows touch, not a walk over the program: inserting at `max producer index + 1` is placing
    right after the last producer (before what an earlier insert put there, as a list insert
    would), inserting at a removed lookup's index is taking its key. Only when Paddle would
    reorder, or a reorder left the table's lookups out of order, is the list materialized and
    Paddle's algorithm run as it is (reorder, fuse_by_index)."""
    ops = block.ops
    order = OpOrder(ops)
    for w, group in pulls.items():
        inputs = [op.input("Ids")[0] for op in group]
        outputs = [op.output("Out")[0] for op in group]
        if _needs_reorder(order, inputs, outputs):
            ops = order.ops()
            reorder(ops, inputs, outputs, stop_at_reader)
            order = OpOrder(ops)
        bad = ids_not_2d(block, group)
        if bad:
            raise RefusedError(ids_refusal(w, bad, where), op=bad[0][0])
        keys = [order.key[id(op)] for op in group]
        if keys != sorted(keys):
            # a reorder moved lookups of this table past each other: Paddle's stale indices
            # then put the ops where only its own list arithmetic says
            ops = order.ops()
            fuse_by_index(ops, w, group, make_lookup)
            order = OpOrder(ops)
            continue
        for op in group:
            order.remove(op)
        made = order.keys(order.producers, inputs)
        read = order.keys(order.consumers, outputs)
        if not made or not read or max(made) < min(read):
            at = min(keys) if not made else order.after(max(made))
            order.add(make_lookup(w, inputs, outputs), at)
        else:
            for k in range(len(inputs)):
                order.add(make_lookup(w, [inputs[k]], [outputs[k]]), keys[k])
    return order.ops()
