"""ir/dataflow.py: the reads a Paddle process fails at, told from the program.

What it models was measured on Paddle 2.6.2's executor (a program whose lookup grads were removed
as the splits remove them): a SELECTED_ROWS var no op writes is an empty SelectedRows that `sum`
skips and `merge_selected_rows` passes on; every other kernel reading its rows fails."""
from transpile.ir.dataflow import unvalued_reads
from transpile.ir.program import Op, Program, Var


def _prog(ops, sr=(), dense=()):
    prog = Program.empty()
    block = prog.global_block
    for n in sr:
        block.add_var(Var.tensor(n, "FP32", [10, 4], kind="SELECTED_ROWS"))
    for n in dense:
        block.add_var(Var.tensor(n, "FP32", [-1, 4]))
    block.ops += ops
    return prog


def test_a_var_no_op_writes_is_read_without_a_value():
    prog = _prog([Op("relu", {"X": ["x"]}, {"Out": ["y"]}),
                  Op("relu", {"X": ["z"]}, {"Out": ["w"]})], dense=("x", "y", "z", "w"))
    got = unvalued_reads(prog, {"x"})
    assert [(u.index, u.name, u.empty_rows) for u in got] == [(1, "z", False)]


def test_a_var_written_later_is_read_too_early():
    prog = _prog([Op("relu", {"X": ["y"]}, {"Out": ["w"]}),
                  Op("relu", {"X": ["x"]}, {"Out": ["y"]})], dense=("x", "y", "w"))
    assert [u.name for u in unvalued_reads(prog, {"x"})] == ["y"]


def test_empty_selected_rows_pass_through_sum_and_merge_and_fail_where_rows_are_read():
    prog = _prog([Op("sum", {"X": ["g@R0", "g@R1"]}, {"Out": ["g"]}),
                  Op("merge_selected_rows", {"X": ["g"]}, {"Out": ["m"]}),
                  Op("get_tensor_from_selected_rows", {"X": ["m"]}, {"Out": ["t"]})],
                 sr=("g@R0", "g@R1", "g", "m"), dense=("t",))
    got = unvalued_reads(prog, set())
    assert len(got) == 1
    assert (got[0].index, got[0].name, got[0].empty_from) == (2, "m", ("g@R0", "g@R1"))


def test_a_sum_with_one_written_input_has_rows():
    prog = _prog([Op("lookup_table_v2_grad", {"Ids": ["ids"], "Out@GRAD": ["d"], "W": ["w"]},
                     {"W@GRAD": ["g@R0"]}),
                  Op("sum", {"X": ["g@R0", "g@R1"]}, {"Out": ["g"]}),
                  Op("clip", {"X": ["g"]}, {"Out": ["c"]})],
                 sr=("g@R0", "g@R1", "g", "c"), dense=("ids", "d", "w"))
    assert unvalued_reads(prog, {"ids", "d", "w"}) == []


def test_dependency_inputs_are_not_value_reads():
    prog = _prog([Op("send_barrier", {"X": ["__control_var@0"]}, {}),
                  Op("distributed_push_sparse", {"Ids": ["ids"], "W": ["g@RENAME@0"],
                                                 "Outputs": ["d"]}, {"Outputs": ["d"]})],
                 sr=("g@RENAME@0",), dense=("ids", "d"))
    assert unvalued_reads(prog, {"ids", "d"}) == []


def test_a_loop_body_sees_what_its_later_ops_write():
    from transpile.ir.program import Attr, Block
    prog = _prog([Op("while", {"X": ["x"], "Condition": ["c"]}, {"Out": ["acc"]},
                     {})], dense=("x", "c", "acc", "tmp"))
    sub = Block(1, 0)
    sub.ops = [Op("elementwise_add", {"X": ["acc"], "Y": ["x"]}, {"Out": ["tmp"]}),
               Op("assign", {"X": ["tmp"]}, {"Out": ["acc"]})]
    prog.blocks.append(sub)
    prog.global_block.ops[0].attrs["sub_block"] = Attr("BLOCK", 1)
    assert unvalued_reads(prog, {"x", "c"}) == []
