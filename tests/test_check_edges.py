"""A trainer's edges (check/edges.py) kept an entry per send or recv op (EdgeRuns): gone through
in order, or the i-th asked for, they are the Edges one per var would be; the op's own list of
names held, not a copy, and its endpoints one tuple per list of them."""
from transpile.check.edges import Edge, EdgeRuns, edges_from_ops
from transpile.check.loading import Part
from transpile.ir.program import Attr, Block, Op, Program


def _edges() -> list:
    return [Edge("a", "e0", "trainer_0/main", 0, 3, via="recv"),
            Edge("w.block0", "e0", "trainer_0/main", 0, 5, via="recv"),
            Edge("w.block1", "e1", "trainer_0/main", 0, 5, via="recv"),
            Edge("step", "e0", "trainer_0/main", 0, 7, via="send", counter=True),
            Edge("step", "e1", "trainer_0/main", 0, 7, via="send", counter=True),
            Edge("c", "e1", "trainer_0/startup", None, None, 4, via="recv_ctx")]


def test_edge_runs_give_the_edges_in_order_and_by_index():
    runs = EdgeRuns()
    runs.append(_edges()[0])
    runs.add_run(["w.block0", "w.block1"], ["e0", "e1"], "trainer_0/main", 0, 5, "recv", False)
    runs.add_run(["step", "step"], ["e0", "e1"], "trainer_0/main", 0, 7, "send", True)
    assert [runs.edge(i) for i in range(5)] == _edges()[:5]     # (the index made here)
    runs.append(_edges()[5])                                    # (and made again)
    assert list(runs) == _edges()
    assert [runs.edge(i) for i in range(6)] == _edges()
    assert list(EdgeRuns()) == []


class _Ctx:
    reach: dict = {}

    def __init__(self):
        self.memos: dict = {}

    def memo(self, key, make):
        if key not in self.memos:
            self.memos[key] = make()
        return self.memos[key]

    def add(self, *args, **kwargs):
        raise AssertionError("no finding expected: %r" % (args,))


def test_a_recv_op_is_one_entry_holding_its_own_lists():
    eps = ["127.0.0.1:%d" % (6174 + i) for i in range(64)]
    names = ["fc_w.block%d" % i for i in range(64)]
    op = Op("recv", {"X": []}, {"Out": names}, {"epmap": Attr("STRINGS", eps)})
    other = Op("recv", {"X": []}, {"Out": ["fc_v.block%d" % i for i in range(64)]},
               {"epmap": Attr("STRINGS", list(eps))})
    part = Part("trainer_0/main", Program([Block(0, -1, {}, [op, other])]))
    runs = EdgeRuns()
    edges_from_ops(_Ctx(), part, "recv", "Out", runs)
    assert len(runs.items) == 2
    held_names, held_eps = runs.items[0][:2]
    assert held_names is op.output("Out") and held_eps == tuple(eps)
    assert runs.items[1][1] is held_eps         # (the same endpoints: one tuple)
    assert list(runs)[:64] == [Edge(n, ep, "trainer_0/main", 0, 0, via="recv")
                               for n, ep in zip(names, eps)]
