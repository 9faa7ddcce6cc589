"""batch_norm, layer_norm, conv2d / pool2d, embeddings, dropout: by hand and by central
differences; and a check that the grad checks catch a wrong kernel."""
from __future__ import annotations

import numpy as np
import pytest

from kernelkit import check_grad, run_op
from transpile.simulate.model import kernels
from transpile.simulate.model.values import SelectedRows

R = np.random.default_rng(2)
BN_OUTS = {"Y": 1, "MeanOut": 1, "VarianceOut": 1, "SavedMean": 1, "SavedVariance": 1}


def _bn_inputs(c):
    return {"Scale": R.uniform(0.5, 1.5, size=c), "Bias": R.normal(size=c),
            "Mean": R.normal(size=c), "Variance": R.uniform(0.5, 2, size=c)}


def test_batch_norm_training_by_hand():
    x = np.array([[1.0, 10.0], [3.0, 14.0], [5.0, 12.0], [7.0, 16.0]])
    ins = {"X": x, "Scale": np.array([2.0, 0.5]), "Bias": np.array([1.0, -1.0]),
           "Mean": np.array([0.5, 1.0]), "Variance": np.array([1.0, 2.0])}
    res = run_op("batch_norm", ins, BN_OUTS, {"momentum": 0.9, "epsilon": 1e-5,
                                              "is_test": False, "data_layout": "NCHW"})
    mean = np.array([4.0, 13.0])
    var = np.array([5.0, 5.0])              # biased: mean of squared deviations
    inv = 1 / np.sqrt(var + 1e-5)
    assert np.allclose(res["Y"], (x - mean) * inv * [2.0, 0.5] + [1.0, -1.0])
    assert np.allclose(res["MeanOut"], 0.9 * np.array([0.5, 1.0]) + 0.1 * mean)
    assert np.allclose(res["VarianceOut"], 0.9 * np.array([1.0, 2.0]) + 0.1 * var)
    assert np.allclose(res["SavedMean"], mean)
    assert np.allclose(res["SavedVariance"], inv)       # Paddle saves the inverse std


def test_batch_norm_inference_and_global_stats_use_running_stats():
    x = R.normal(size=(3, 2, 2, 2))
    ins = dict(_bn_inputs(2), X=x)
    for attrs in ({"is_test": True}, {"use_global_stats": True}):
        res = run_op("batch_norm", ins, BN_OUTS, dict(attrs, epsilon=1e-5))
        b = (1, 2, 1, 1)
        ref = (x - ins["Mean"].reshape(b)) / np.sqrt(ins["Variance"].reshape(b) + 1e-5) \
            * ins["Scale"].reshape(b) + ins["Bias"].reshape(b)
        assert np.allclose(res["Y"], ref)
        assert np.allclose(res["MeanOut"], ins["Mean"])
    check_grad("batch_norm", ins, {"use_global_stats": True, "epsilon": 1e-5},
               wrt=["X", "Scale", "Bias"], outs=("Y",),
               extra_outs=("MeanOut", "VarianceOut", "SavedMean", "SavedVariance"),
               grad_inputs=("X", "Scale", "Bias", "Mean", "Variance", "SavedMean",
                            "SavedVariance"))


@pytest.mark.parametrize("shape,layout", [((4, 3), "NCHW"), ((2, 3, 2, 2), "NCHW"),
                                          ((2, 2, 2, 3), "NHWC")])
def test_batch_norm_training_grad(shape, layout):
    x = R.normal(size=shape)
    ins = dict(_bn_inputs(3), X=x)
    attrs = {"momentum": 0.8, "epsilon": 1e-3, "is_test": False, "data_layout": layout}
    res = run_op("batch_norm", ins, BN_OUTS, attrs)
    axes = tuple(i for i in range(x.ndim) if i != (x.ndim - 1 if layout == "NHWC" else 1))
    assert np.allclose(res["SavedMean"], x.mean(axis=axes))
    assert np.allclose(res["VarianceOut"], 0.8 * ins["Variance"] + 0.2 * x.var(axis=axes))
    check_grad("batch_norm", ins, attrs, wrt=["X", "Scale", "Bias"], outs=("Y",),
               extra_outs=("MeanOut", "VarianceOut", "SavedMean", "SavedVariance"),
               grad_inputs=("X", "Scale", "Bias", "SavedMean", "SavedVariance"))


def test_a_wrong_grad_kernel_fails_the_check(monkeypatch):
    """The finite-difference checks are not vacuous: batch_norm_grad off by 0.1% fails."""
    good = kernels.KERNELS["batch_norm_grad"]

    def skewed(ctx):
        good(ctx)
        name = ctx.op.output("X@GRAD")[0]
        ctx.ex.scope.put(name, ctx.ex.scope.get(name) * 1.001)
    monkeypatch.setitem(kernels.KERNELS, "batch_norm_grad", skewed)
    ins = dict(_bn_inputs(3), X=R.normal(size=(4, 3)))
    with pytest.raises(AssertionError, match="central differences"):
        check_grad("batch_norm", ins, {"is_test": False}, wrt=["X"], outs=("Y",),
                   extra_outs=("MeanOut", "VarianceOut", "SavedMean", "SavedVariance"))


@pytest.mark.parametrize("shape,k,affine", [((3, 4), 1, True), ((2, 3, 4), 2, True),
                                            ((2, 3, 4), 1, False)])
def test_layer_norm(shape, k, affine):
    x = R.normal(size=shape)
    n = int(np.prod(shape[k:]))
    ins = {"X": x}
    if affine:
        ins.update(Scale=R.uniform(0.5, 1.5, size=n), Bias=R.normal(size=n))
    res = run_op("layer_norm", ins, {"Y": 1, "Mean": 1, "Variance": 1},
                 {"begin_norm_axis": k, "epsilon": 1e-5})
    x2 = x.reshape(int(np.prod(shape[:k])), n)
    ref = (x2 - x2.mean(1, keepdims=True)) / np.sqrt(x2.var(1, keepdims=True) + 1e-5)
    if affine:
        ref = ref * ins["Scale"] + ins["Bias"]
    assert np.allclose(res["Y"], ref.reshape(shape))
    assert res["Mean"].shape == shape[:k] and np.allclose(res["Variance"].reshape(-1), x2.var(1))
    check_grad("layer_norm", ins, {"begin_norm_axis": k, "epsilon": 1e-5},
               wrt=["X"] + (["Scale", "Bias"] if affine else []), outs=("Y",),
               extra_outs=("Mean", "Variance"),
               grad_inputs=("X", "Scale", "Bias", "Mean", "Variance"))


def _conv_ref(x, w, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[1]), (pad[2], pad[3])))
    oh = (xp.shape[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (xp.shape[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, oc, oh, ow))
    og = oc // groups
    for o in range(oc):
        g = o // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * stride[0]:i * stride[0] + dil[0] * (kh - 1) + 1:dil[0],
                           j * stride[1]:j * stride[1] + dil[1] * (kw - 1) + 1:dil[1]]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    return out


@pytest.mark.parametrize("attrs,wshape", [
    ({"strides": [2, 2], "paddings": [1, 1], "groups": 1}, (4, 3, 3, 3)),
    ({"strides": [1, 2], "paddings": [1, 0, 2, 1], "dilations": [2, 1], "groups": 1}, (2, 3, 2, 3)),
    ({"strides": [1, 1], "paddings": [1, 1], "groups": 3}, (6, 1, 3, 3)),
])
def test_conv2d(attrs, wshape):
    x, w = R.normal(size=(2, 3, 5, 5)), R.normal(size=wshape)
    out = run_op("conv2d", {"Input": x, "Filter": w}, {"Output": 1}, attrs)["Output"]
    p = attrs["paddings"]
    p = p * 2 if len(p) == 2 else p
    p = [p[0], p[1], p[2], p[3]] if len(attrs["paddings"]) == 4 else [p[0], p[0], p[1], p[1]]
    assert np.allclose(out, _conv_ref(x, w, attrs["strides"], p, attrs.get("dilations", [1, 1]),
                                      attrs["groups"]))
    check_grad("conv2d", {"Input": x[:1, :, :4, :4], "Filter": w}, attrs, wrt=["Input", "Filter"],
               outs=("Output",))


def test_conv2d_nhwc_depthwise_and_same_padding():
    x, w = R.normal(size=(1, 3, 5, 5)), R.normal(size=(3, 1, 3, 3))
    ref = run_op("depthwise_conv2d", {"Input": x, "Filter": w}, {"Output": 1},
                 {"paddings": [1, 1], "groups": 3})["Output"]
    assert np.allclose(ref, _conv_ref(x, w, [1, 1], [1, 1, 1, 1], [1, 1], 3))
    nhwc = run_op("depthwise_conv2d", {"Input": x.transpose(0, 2, 3, 1), "Filter": w},
                  {"Output": 1}, {"paddings": [1, 1], "groups": 3, "data_format": "NHWC"})
    assert np.allclose(nhwc["Output"], ref.transpose(0, 2, 3, 1))
    check_grad("depthwise_conv2d", {"Input": x.transpose(0, 2, 3, 1)[:, :4, :4], "Filter": w},
               {"paddings": [1, 1], "groups": 3, "data_format": "NHWC"}, wrt=["Input", "Filter"],
               outs=("Output",))
    # SAME: out = ceil(in / stride), and Paddle ignores the dilations
    same = run_op("conv2d", {"Input": x, "Filter": w[:1].repeat(3, 1)}, {"Output": 1},
                  {"strides": [2, 2], "padding_algorithm": "SAME", "dilations": [2, 2],
                   "paddings": [0, 0]})["Output"]
    assert np.allclose(same, _conv_ref(x, w[:1].repeat(3, 1), [2, 2], [1, 1, 1, 1], [1, 1], 1))


@pytest.mark.parametrize("attrs", [
    {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0]},
    {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]},
    {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1],
     "exclusive": False},
    {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0],
     "ceil_mode": True},
    {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1],
     "ceil_mode": True},
    {"pooling_type": "avg", "ksize": [1, 1], "adaptive": True},
    {"pooling_type": "avg", "ksize": [3, 2], "adaptive": True},
    {"pooling_type": "max", "ksize": [1, 1], "global_pooling": True},
])
def test_pool2d_grad(attrs):
    x = R.normal(size=(1, 2, 5, 5))
    check_grad("pool2d", {"X": x}, attrs, wrt=["X"], grad_inputs=("X", "Out"))


def test_pool2d_values_by_hand():
    x = np.arange(25.0).reshape(1, 1, 5, 5)
    mx = run_op("pool2d", {"X": x}, {"Out": 1}, {"pooling_type": "max", "ksize": [2, 2],
                                                  "strides": [2, 2], "paddings": [0, 0],
                                                  "ceil_mode": True})["Out"]
    assert np.array_equal(mx[0, 0], [[6, 8, 9], [16, 18, 19], [21, 23, 24]])
    av = run_op("pool2d", {"X": x}, {"Out": 1}, {"pooling_type": "avg", "ksize": [3, 3],
                                                  "strides": [2, 2], "paddings": [1, 1]})["Out"]
    assert av[0, 0, 0, 0] == np.mean([0, 1, 5, 6])                 # exclusive: 4 real cells
    ad = run_op("pool2d", {"X": x}, {"Out": 1}, {"pooling_type": "avg", "ksize": [2, 2],
                                                  "adaptive": True})["Out"]
    # adaptive bins of 5 into 2: [0, 3) and [2, 5)
    assert ad[0, 0, 0, 0] == x[0, 0, 0:3, 0:3].mean() and ad[0, 0, 1, 1] == x[0, 0, 2:5, 2:5].mean()


def test_lookup_table_v2_padding_and_sparse_grad():
    w = R.normal(size=(10, 3))
    ids = np.array([[1, 2], [5, 1]])
    out = run_op("lookup_table_v2", {"Ids": ids, "W": w}, {"Out": 1}, {"padding_idx": 2})["Out"]
    assert out.shape == (2, 2, 3)
    assert np.allclose(out[0, 0], w[1]) and np.allclose(out[1, 0], w[5])
    assert np.array_equal(out[0, 1], [0, 0, 0])
    d = np.arange(12.0).reshape(2, 2, 3)
    dense = run_op("lookup_table_v2_grad", {"Ids": ids, "W": w, "Out@GRAD": d}, {"W@GRAD": 1},
                   {"padding_idx": 2, "is_sparse": False})["W@GRAD"]
    ref = np.zeros((10, 3))
    ref[1] = d[0, 0] + d[1, 1]
    ref[5] = d[1, 0]
    assert np.allclose(dense, ref)                     # the padding row gets no gradient
    check_grad("lookup_table_v2", {"Ids": ids, "W": w}, {"padding_idx": 2}, wrt=["W"],
               grad_inputs=("Ids", "W"))
    sp = run_op("lookup_table_v2_grad", {"Ids": ids, "W": w, "Out@GRAD": d}, {"W@GRAD": 1},
                {"padding_idx": 2, "is_sparse": True})["W@GRAD"]
    # one row per id looked up, repeats kept; Paddle 2.6.2 keeps the padding id's row too
    assert isinstance(sp, SelectedRows) and sp.height == 10
    assert list(sp.rows) == [1, 2, 5, 1] and np.allclose(sp.value, d.reshape(4, 3))
    merged = sp.merged()
    assert list(merged.rows) == [1, 2, 5] and np.allclose(merged.value[0], ref[1])


def test_lookup_table_v1_ids_end_in_one():
    w = R.normal(size=(6, 2))
    ids = np.array([[3], [0], [3]])
    out = run_op("lookup_table", {"Ids": ids, "W": w}, {"Out": 1}, {"padding_idx": -1})["Out"]
    assert out.shape == (3, 2) and np.allclose(out, w[[3, 0, 3]])
    g = run_op("lookup_table_grad", {"Ids": ids, "W": w, "Out@GRAD": np.ones((3, 2))},
               {"W@GRAD": 1}, {"is_sparse": True})["W@GRAD"]
    assert list(g.rows) == [3, 0, 3]
    with pytest.raises(Exception, match="outside"):
        run_op("lookup_table_v2", {"Ids": np.array([6]), "W": w}, {"Out": 1})


def test_dropout_modes():
    x = np.ones((200, 50))
    for impl, scale in (("downgrade_in_infer", 1.0), ("upscale_in_train", 1 / 0.7)):
        res = run_op("dropout", {"X": x}, {"Out": 1, "Mask": 1},
                     {"dropout_prob": 0.3, "is_test": False, "dropout_implementation": impl})
        m = res["Mask"].astype(bool)
        assert abs(m.mean() - 0.7) < 0.02
        assert np.allclose(res["Out"], np.where(m, scale, 0.0))
        d = R.normal(size=x.shape)
        g = run_op("dropout_grad", {"Mask": res["Mask"], "Out@GRAD": d}, {"X@GRAD": 1},
                   {"dropout_prob": 0.3, "dropout_implementation": impl})["X@GRAD"]
        assert np.allclose(g, d * m * scale)
    test = run_op("dropout", {"X": x}, {"Out": 1}, {"dropout_prob": 0.3, "is_test": True})["Out"]
    assert np.allclose(test, 0.7)
    test = run_op("dropout", {"X": x}, {"Out": 1}, {"dropout_prob": 0.3, "is_test": True,
                                                    "dropout_implementation": "upscale_in_train"})
    assert np.allclose(test["Out"], 1.0)


def test_dropout_draws_a_new_mask_each_run_of_the_op():
    from transpile.simulate.model.executor import Executor
    from kernelkit import build
    prog, ins, outs = build("dropout", {"X": np.ones((20, 20))}, {"Out": 1, "Mask": 1},
                            {"dropout_prob": 0.5})
    ex = Executor("t", prog, seed=3)
    ex.scope.put(ins["X"][0], np.ones((20, 20)))
    ex.run_block(0)
    first = ex.scope.get(outs["Mask"][0]).copy()
    ex.run_block(0)
    assert not np.array_equal(first, ex.scope.get(outs["Mask"][0]))
    ex2 = Executor("t", prog, seed=3)
    ex2.scope.put(ins["X"][0], np.ones((20, 20)))
    ex2.run_block(0)
    assert np.array_equal(first, ex2.scope.get(outs["Mask"][0]))     # reproducible


def test_fill_and_random_init_ops():
    out = run_op("fill_constant", {}, {"Out": 1}, {"shape": [2, 3], "value": 1.5, "dtype": 5})
    assert np.allclose(out["Out"], np.full((2, 3), 1.5))
    x = R.normal(size=(2, 2))
    assert np.allclose(run_op("fill_any_like", {"X": x}, {"Out": 1}, {"value": 2.0})["Out"], 2.0)
    assert np.allclose(run_op("fill_zeros_like", {"X": x}, {"Out": 1})["Out"], 0.0)
    u = run_op("uniform_random", {}, {"Out": 1}, {"shape": [1000], "min": -2.0, "max": 3.0,
                                                  "seed": 1})["Out"]
    assert u.min() >= -2 and u.max() <= 3 and abs(u.mean() - 0.5) < 0.2
    g = run_op("gaussian_random", {}, {"Out": 1}, {"shape": [2000], "mean": 1.0, "std": 2.0,
                                                   "seed": 1})["Out"]
    assert abs(g.mean() - 1) < 0.2 and abs(g.std() - 2) < 0.2
    t = run_op("truncated_gaussian_random", {}, {"Out": 1},
               {"shape": [2000], "mean": 0.0, "std": 1.0, "seed": 1})["Out"]
    assert np.abs(t).max() <= 2.0


@pytest.mark.parametrize("layout,shape,groups", [("NCHW", (2, 4, 3, 3), 2),
                                                 ("NHWC", (2, 3, 3, 6), 3)])
def test_group_norm(layout, shape, groups):
    x = R.normal(size=shape)
    c = shape[1] if layout == "NCHW" else shape[-1]
    ins = {"X": x, "Scale": R.uniform(0.5, 1.5, size=c), "Bias": R.normal(size=c)}
    attrs = {"groups": groups, "epsilon": 1e-5, "data_layout": layout}
    res = run_op("group_norm", ins, {"Y": 1, "Mean": 1, "Variance": 1}, attrs)
    xc = x if layout == "NCHW" else np.moveaxis(x, -1, 1)
    xg = xc.reshape(shape[0], groups, -1)
    assert np.allclose(res["Mean"], xg.mean(2)) and np.allclose(res["Variance"], xg.var(2))
    yc = ((xg - xg.mean(2, keepdims=True)) / np.sqrt(xg.var(2, keepdims=True) + 1e-5)) \
        .reshape(xc.shape) * ins["Scale"].reshape(1, c, 1, 1) + ins["Bias"].reshape(1, c, 1, 1)
    assert np.allclose(res["Y"], yc if layout == "NCHW" else np.moveaxis(yc, 1, -1))
    # the true gradient (Paddle 2.6.2's static group_norm_grad disagrees with its own forward)
    check_grad("group_norm", ins, attrs, wrt=["X", "Scale", "Bias"], outs=("Y",),
               extra_outs=("Mean", "Variance"),
               grad_inputs=("X", "Scale", "Bias", "Mean", "Variance", "Y"))


def test_instance_norm():
    x = R.normal(size=(2, 3, 2, 2))
    ins = {"X": x, "Scale": R.uniform(0.5, 1.5, size=3), "Bias": R.normal(size=3)}
    res = run_op("instance_norm", ins, {"Y": 1, "SavedMean": 1, "SavedVariance": 1},
                 {"epsilon": 1e-5})
    m = x.mean(axis=(2, 3), keepdims=True)
    v = x.var(axis=(2, 3), keepdims=True)
    assert np.allclose(res["Y"], (x - m) / np.sqrt(v + 1e-5) * ins["Scale"].reshape(1, 3, 1, 1)
                       + ins["Bias"].reshape(1, 3, 1, 1))
    assert np.allclose(res["SavedVariance"], 1 / np.sqrt(v.reshape(-1) + 1e-5))
    check_grad("instance_norm", ins, {"epsilon": 1e-5}, wrt=["X", "Scale", "Bias"], outs=("Y",),
               extra_outs=("SavedMean", "SavedVariance"),
               grad_inputs=("X", "Scale", "SavedMean", "SavedVariance"))
