"""The structure check's declared-vars pass (check/programs.py) on programs made here."""
from transpile.check.loading import Part
from transpile.check.programs import _declared_vars
from transpile.ir.program import Block, Op, Program, Var


def test_undeclared_vars_are_found_op_by_op_wherever_they_are():
    """The structure check's declared-vars pass (names gathered per block as sets, the ops
    gone through only where a name is missing) finds what looking up every argument of every
    op finds, in op order: in block 0, in blocks whose parent is block 0 (a pserver's optimize
    blocks: they share block 0's vars), in a block nested deeper, and not in a block that
    cannot run."""

    def var(n):
        return Var.tensor(n, "FP32", (2,))

    def op(ins, outs):
        return Op("scale", {"X": list(ins)}, {"Out": list(outs)})
    blocks = [
        Block(0, -1, {n: var(n) for n in ("a", "b", "lr")},
              [op(["a", "gone0"], ["b"]), op(["", "@EMPTY@"], ["a"])]),
        Block(1, 0, {"m": var("m")}, [op(["m", "lr"], ["a"]), op(["gone1", "m"], ["gone1"])]),
        Block(2, 0, {}, [op(["a"], ["b"])]),
        Block(3, 1, {"n": var("n")}, [op(["n", "m", "b"], ["gone3"]), op(["gone3"], ["n"])]),
        Block(4, 0, {}, [op(["never"], ["a"])]),
    ]
    prog = Program(blocks)
    reach = {0, 1, 2, 3}
    want = [(bi, j, name) for bi in sorted(reach) for j, o in enumerate(blocks[bi].ops)
            for slots in (o.inputs, o.outputs) for args in slots.values() for name in args
            if name not in ("", "@EMPTY@") and prog.find_var(name, bi) is None]
    assert want == [(0, 0, "gone0"), (1, 1, "gone1"), (1, 1, "gone1"), (3, 0, "gone3"),
                    (3, 1, "gone3")]

    class Ctx:
        found: list = []

        def add(self, check, part, block, op_idx, message, expected, fault=""):
            self.found.append((block, op_idx, message.split(" uses ")[1].split(",")[0]))
    ctx = Ctx()
    _declared_vars(ctx, Part("p/main", prog), reach, set())
    assert ctx.found == want
