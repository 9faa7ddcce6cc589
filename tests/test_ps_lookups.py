"""The pull fuse of the ps and fleet styles (distributed_ops_pass, passes/fuse.py) works on
position keys rather than list indices, to cost what each table touches instead of a walk over
the program per table. Here it is held against Paddle's algorithm as Paddle writes it (list
indices, the lookups removed and the fused op inserted by index, dag_check_up_and_reorder on
the list), on random programs, with the ps pass's reorder and with Fleet 2.0's (which never
stops at a producer that reads the rows)."""
import random
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from transpile.ir.program import Attr, Op
from transpile.passes.fuse import fuse_pulls as fuse_block_pulls, reorder
from transpile.ir.tables import lookup_groups


def fuse_pulls(ops: list, pulls: dict, stop_at_reader: bool = True) -> list:
    """passes/fuse.py's fuse_pulls over a block of `ops` that declares no vars."""
    block = SimpleNamespace(ops=list(ops), var=lambda name: None)

    def make(w, ids, outs):
        return Op("distributed_lookup_table", {"Ids": ids, "W": [w]}, {"Outputs": outs}, {})
    return fuse_block_pulls(block, pulls, make, stop_at_reader, "test")


def paddle_fuse_pulls(ops: list, pulls: dict, stop_at_reader: bool = True) -> list:
    """_pull_sparse_fuse as Paddle writes it (indices into the op list)."""
    ops = list(ops)
    for w, group in pulls.items():
        inputs = [op.input("Ids")[0] for op in group]
        outputs = [op.output("Out")[0] for op in group]
        reorder(ops, inputs, outputs, stop_at_reader)
        op_idxs = [next(i for i, o in enumerate(ops) if o is op) for op in group]
        for i in sorted(op_idxs, reverse=True):
            del ops[i]
        in_idx = [-1] * len(inputs)
        out_idx = [len(ops) + 1] * len(outputs)
        for i, op in enumerate(ops):
            for k, name in enumerate(inputs):
                if name in op.output_names():
                    in_idx[k] = max(in_idx[k], i)
            for k, name in enumerate(outputs):
                if name in op.input_names():
                    out_idx[k] = min(out_idx[k], i)
        if min(out_idx) - max(in_idx) >= 1:
            at = min(op_idxs) if max(in_idx) == -1 else max(in_idx) + 1
            ops.insert(at, Op("distributed_lookup_table", {"Ids": inputs, "W": [w]},
                              {"Outputs": outputs}, {}))
        else:
            for k in range(len(inputs)):
                ops.insert(op_idxs[k], Op("distributed_lookup_table",
                                          {"Ids": [inputs[k]], "W": [w]},
                                          {"Outputs": [outputs[k]]}, {}))
    return ops


def _lookup(w, ids, out):
    return Op("lookup_table_v2", {"Ids": [ids], "W": [w]}, {"Out": [out]},
              {"remote_prefetch": Attr("BOOLEAN", True)})


def random_program(rnd: random.Random) -> list:
    """Ops over a few vars: plain ops reading and writing them, and lookups of 2-3 tables
    whose ids are data or made by plain ops and whose rows are read later (or earlier)."""
    names = ["v%d" % i for i in range(8)]
    ops = []
    n_lookups = 0
    for _ in range(rnd.randint(4, 16)):
        if rnd.random() < 0.35:
            w = "emb%d" % rnd.randint(0, 2)
            ids = rnd.choice(names + ["data%d" % rnd.randint(0, 2)])
            ops.append(_lookup(w, ids, "rows%d" % n_lookups))
            names.append("rows%d" % n_lookups)
            n_lookups += 1
        else:
            ins = rnd.sample(names, rnd.randint(1, 2))
            ops.append(Op("scale", {"X": ins}, {"Out": [rnd.choice(names[:8])]}, {}))
    return ops


def _shape(ops):
    return [(op.type, op.inputs, op.outputs) for op in ops]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.booleans())
def test_key_based_pull_fuse_equals_paddles_index_based_one(seed, stop_at_reader):
    ops = random_program(random.Random(seed))
    pulls, _, _ = lookup_groups(ops)
    ours = fuse_pulls(ops, pulls, stop_at_reader)
    assert _shape(ours) == _shape(paddle_fuse_pulls(ops, pulls, stop_at_reader))


@pytest.mark.parametrize("ops,expected", [
    # two tables on one concat's output: table 1's op lands before table 0's (rec_fm)
    ([Op("concat", {"X": ["a"]}, {"Out": ["ids"]}, {}), _lookup("e0", "ids", "r0"),
      _lookup("e1", "ids", "r1"), Op("sum", {"X": ["r0", "r1"]}, {"Out": ["s"]}, {})],
     ["concat", "distributed_lookup_table:e1", "distributed_lookup_table:e0", "sum"]),
])
def test_known_orders(ops, expected):
    pulls, _, _ = lookup_groups(ops)
    got = [op.type + (":" + op.input("W")[0] if op.input("W") else "")
           for op in fuse_pulls(ops, pulls)]
    assert got == expected
