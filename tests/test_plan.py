"""The slicing and dispatch arithmetic (transpile/plan/slicing.py) and the optimizer state table."""
import zlib

import pytest
from hypothesis import given, strategies as st

from transpile.core.errors import RefusedError
from transpile.ir.optimizers import sliced_state_slots
from transpile.plan.slicing import (block_shapes, dispatch, hash_name_index, origin_varname,
                                    paddle_shuffle, slice_variable, split_var, varname_parts)


def test_slices_by_whole_rows():
    assert slice_variable([1000, 1000], 2, 8192) == [500000, 500000]
    # 3 blocks of 1000 rows: ceil(1000/3)=334 rows, the last takes the rest
    assert slice_variable([1000, 1000], 3, 8192) == [334000, 334000, 332000]
    assert block_shapes([1000, 1000], [334000, 334000, 332000]) == [
        (334, 1000), (334, 1000), (332, 1000)]


def test_small_tensors_stay_whole():
    assert slice_variable([1000], 2, 8192) == [1000]
    assert slice_variable([64, 128], 2, 8192) == [8192]
    assert slice_variable([1000, 1000], 2, 1048576) == [1000000]
    assert block_shapes([1000], [1000]) == [(1000,)]


def test_block_count_is_bounded_by_min_block_size_and_endpoints():
    # 10000 elements, min block 4000: at most 2 blocks even with 5 endpoints
    assert len(slice_variable([10000], 5, 4000)) == 2
    assert len(slice_variable([10000, 8], 2, 8192)) == 2


def test_one_dimensional_params_split_element_wise():
    assert slice_variable([20000], 3, 1) == [6667, 6667, 6666]
    assert block_shapes([20000], [6667, 6667, 6666]) == [(6667,), (6667,), (6666,)]


def test_rounding_to_rows_can_give_fewer_blocks():
    # 5 rows of 10000: ceil(50000/4) = 12500 -> rounded up to 2 rows = 20000 -> 3 blocks
    assert slice_variable([5, 10000], 4, 1) == [20000, 20000, 10000]


@given(st.lists(st.integers(1, 300), min_size=1, max_size=3), st.integers(1, 6),
       st.integers(1, 5000))
def test_slices_cover_the_tensor_in_whole_rows(shape, count, min_block):
    sizes = slice_variable(shape, count, min_block)
    numel = 1
    for d in shape:
        numel *= d
    assert sum(sizes) == numel
    assert 1 <= len(sizes) <= count
    assert all(s > 0 for s in sizes)
    if len(sizes) > 1:
        shapes = block_shapes(shape, sizes)
        assert sum(s[0] for s in shapes) == shape[0]
        assert all(list(s[1:]) == list(shape[1:]) for s in shapes)


def test_round_robin_cycles_through_endpoints():
    eps = ["a:1", "b:2"]
    assert dispatch(["x", "y.block0", "y.block1"], eps, "round_robin") == ["a:1", "b:2", "a:1"]


def test_hash_name_is_crc32_of_the_block_name():
    eps = ["a:1", "b:2", "c:3"]
    names = ["fc_w.block0", "fc_w.block1", "fc_b"]
    assert dispatch(names, eps, "hash_name") == [
        eps[zlib.crc32(n.encode("utf-8")) % 3] for n in names]
    assert hash_name_index("fc_w.block0", 3) == zlib.crc32(b"fc_w.block0") % 3


def test_paddle_shuffle_is_numpys_legacy_seed0_shuffle():
    # np.random.seed(0); np.random.shuffle(["a", "b"]) swaps them (first draw is even)
    assert paddle_shuffle(["a", "b"]) == ["b", "a"]
    items = list(range(10))
    assert sorted(paddle_shuffle(items)) == items and paddle_shuffle(items) == paddle_shuffle(items)


def test_sliced_accumulators_per_optimizer():
    assert sliced_state_slots("adam") == ("Moment1", "Moment2")
    assert "MeanGrad" in sliced_state_slots("rmsprop")
    assert sliced_state_slots("sgd") == ()
    with pytest.raises(RefusedError, match="not supported"):
        sliced_state_slots("lamb")


def test_varname_parts():
    assert varname_parts("fc_w@GRAD.block1.trainer_0") == ("fc_w@GRAD", "block1", "trainer_0")
    assert varname_parts("fc_w@GRAD.trainer_1") == ("fc_w@GRAD", "", "trainer_1")
    assert varname_parts("fc_w.block0") == ("fc_w", "block0", "")
    assert varname_parts("fc_b") == ("fc_b", "", "")


def test_origin_varname_is_the_first_part():
    assert origin_varname("fc_w@GRAD.block1.trainer_0") == "fc_w@GRAD"
    assert origin_varname("fc_w") == "fc_w"


def test_split_var_blocks_carry_row_offsets():
    blocks = split_var("w", (1000, 10), [3340, 3340, 3320], "FP32")
    assert [b.name for b in blocks] == ["w.block0", "w.block1", "w.block2"]
    assert [b.row_offset for b in blocks] == [0, 334, 668]
    assert [b.offset_elements for b in blocks] == [0, 3340, 6680]
    assert [b.nbytes() for b in blocks] == [13360, 13360, 13280]
    whole = split_var("b", (10,), [10], "FP32")
    assert [(b.name, b.row_offset, b.shape) for b in whole] == [("b", 0, (10,))]


def test_blocks_made_through_their_fields_are_the_dataclass_s_own():
    """split_var and VarBlock.at fill a block's fields directly (faster than the frozen
    dataclass's __init__): equality, hash, repr, fields, replace and pickling as if built by
    VarBlock(...)."""
    import dataclasses
    import pickle
    from transpile.plan.slicing import VarBlock, split_var
    made = split_var("w", (10, 3, 2), [24, 24, 12], "FP16", "SELECTED_ROWS", 1)
    built = [VarBlock("w.block%d" % i, "w", i, 4 * i, (rows, 3, 2), "FP16", "",
                      "SELECTED_ROWS", 1) for i, rows in enumerate((4, 4, 2))]
    assert made == built and [hash(b) for b in made] == [hash(b) for b in built]
    assert [repr(b) for b in made] == [repr(b) for b in built]
    for m, b in zip(made, built):
        placed = m.at("h:1")
        assert placed == dataclasses.replace(b, endpoint="h:1") and m.endpoint == ""
        assert dataclasses.asdict(placed) == dataclasses.asdict(b.at("h:1"))
        assert pickle.loads(pickle.dumps(placed)) == placed
        with pytest.raises(dataclasses.FrozenInstanceError):
            placed.endpoint = "x"
    assert split_var("v", (5,), [5], None) == [VarBlock("v", "v", 0, 0, (5,), None)]


def test_blocks_of_one_size_share_one_shape():
    """A var's blocks have one or two shapes (the remainder's): each made once and shared
    (a split to many pservers makes a hundred thousand blocks)."""
    shapes = block_shapes((10, 4), [12, 12, 12, 4])
    assert shapes == [(3, 4), (3, 4), (3, 4), (1, 4)]
    assert shapes[0] is shapes[1] is shapes[2]
    assert block_shapes((7, 2, 3), [42]) == [(7, 2, 3)]


def test_split_var_dispatched_where_endpoints_put_its_blocks():
    """split_var with endpoints: the blocks as dispatching them afterwards (at) gives them."""
    eps = {"w.block0": "b:2", "w.block1": "a:1", "w.block2": "b:2", "b": "a:1"}
    for name, shape, sizes in (("w", (1000, 10), [3340, 3340, 3320]), ("b", (10,), [10])):
        made = split_var(name, shape, sizes, "FP32", endpoints=eps)
        assert made == [b.at(eps[b.name]) for b in split_var(name, shape, sizes, "FP32")]
        assert [b.endpoint for b in made] == [eps[b.name] for b in made]
    with pytest.raises(KeyError):
        split_var("v", (4,), [4], "FP32", endpoints=eps)


def test_the_ops_classified_in_one_walk_are_the_three_walks():
    """roles.classified_ops (a plan's one walk) gives what optimize_ops, clip_ops and
    lr_sched_ops give, on programs with clips, LR schedules and neither."""
    from golden import load_case
    from transpile.ir import roles
    seen = [0, 0, 0]
    for family, name in (("classic", "l2decay_piecewise"), ("classic", "basic"),
                         ("fleet", "l2decay_clip_unsplit_sync"),
                         ("fleet", "lrdecay_momentum_sync")):
        main_prog = load_case(family, name)[0]
        for scope in (roles.CLASSIC_CLIP_NAME_SCOPE, roles.FLEET_CLIP_NAME_SCOPE):
            got = roles.classified_ops(main_prog, scope)
            assert got == (roles.optimize_ops(main_prog, scope), roles.clip_ops(main_prog, scope),
                           roles.lr_sched_ops(main_prog))
            seen = [n + len(x) for n, x in zip(seen, got)]
    assert all(seen), "a kind of op none of the programs has: compared nothing there"
