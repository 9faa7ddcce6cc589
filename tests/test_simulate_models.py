"""simulate on what couples a batch's samples: batch_norm, dropout, losses summed over the
batch. The original is trained data-parallel (dataparallel.py) and random ops draw per sample
(keyed.py), so a correct split trains exactly like it."""
from __future__ import annotations

import os

import numpy as np

from transpile.core.config import load_config
from transpile.format import programio
from transpile.ir.program import Block, Op, Program, Var
from transpile.simulate import simulate
from transpile.simulate.refs.dataparallel import ShardedStep, mean_of
from transpile.simulate.model.executor import Executor, OpCtx
from transpile.simulate.runs.loading import load_split_dir
from transpile.simulate.model.values import SelectedRows

CONVNET = os.path.join(os.path.dirname(__file__), "fixtures", "convnet_sync")


def _convnet():
    main = programio.load(os.path.join(CONVNET, "main.pb"))
    startup = programio.load(os.path.join(CONVNET, "startup.pb"))
    progs, rts = load_split_dir(os.path.join(CONVNET, "expected"))
    return main, startup, load_config(os.path.join(CONVNET, "cluster.yaml")), progs, rts


def test_a_conv_net_split_by_paddle_trains_like_the_original():
    """conv2d + bias at axis 1 of NCHW, batch_norm in training mode, max pool, dropout, fc,
    softmax cross entropy with 5 classes, accuracy; Paddle's classic split."""
    main, startup, cfg, progs, rts = _convnet()
    res = simulate(main, startup, cfg, progs, rts, steps=3, batch=8, seed=0)
    assert res.error is None and res.exit_code == 0, \
        [(p.name, p.max_rel) for p in res.params if not p.ok]
    # the first conv's bias feeds batch_norm, which takes the mean out: its gradient is 0
    assert res.unchanged == ["conv2d_0.b_0"]
    stats = {p.name: p for p in res.params if not p.trainable}
    assert set(stats) == {"batch_norm_0.w_1", "batch_norm_0.w_2"}
    assert all(p.ok for p in stats.values())


def test_a_conv_net_with_a_dropped_update_is_caught():
    main, startup, cfg, progs, rts = _convnet()
    for key, prog in progs.items():
        if key.startswith("pserver_") and key.endswith("/main"):
            for b in prog.blocks[1:]:
                b.ops = [op for op in b.ops if op.input("Param") != ["conv2d_1.w_0"]]
    res = simulate(main, startup, cfg, progs, rts, steps=2, batch=8, seed=0)
    assert res.exit_code == 1 and "conv2d_1.w_0" in {p.name for p in res.params if not p.ok}


def _executor(samples, offset, step=0):
    b = Block(0, -1)
    b.add_var(Var.tensor("x", "FP64", [-1, 3]))
    ex = Executor("t", Program([b]))
    ex.begin_step(step, samples, offset)
    return ex, OpCtx(ex, 0, Op("dropout", {"X": ["x"]}, {"Out": ["x"]}))


def test_keyed_draws_give_a_shard_the_originals_rows():
    _, whole = _executor(8, 0)
    _, shard = _executor(4, 4)
    u = whole.keyed_uniform((8, 3))
    assert np.array_equal(shard.keyed_uniform((4, 3)), u[4:])
    # two rows a sample (a [-1, 2, 3] tensor reshaped to rows): still the same samples
    _, whole = _executor(8, 0)
    _, shard = _executor(4, 4)
    assert np.array_equal(shard.keyed_uniform((8, 3)), whole.keyed_uniform((16, 3))[8:])
    # another step, another draw; a second run of the op in one step, another draw
    _, other = _executor(8, 0, step=1)
    assert not np.array_equal(other.keyed_uniform((8, 3)), u)
    _, again = _executor(8, 0)
    first = again.keyed_uniform((8, 3))
    assert np.array_equal(first, u) and not np.array_equal(again.keyed_uniform((8, 3)), u)


def _batch_sum_program():
    """loss = mean(x w) + sum over the batch of (x w)^2: the second term is not a mean."""
    b = Block(0, -1)
    for n, shape in (("x", [-1, 2]), ("w", [2, 1]), ("h", [-1, 1]), ("m", []), ("sq", [-1, 1]),
                     ("s", []), ("loss", []), ("loss@GRAD", []), ("m@GRAD", []), ("s@GRAD", []),
                     ("sq@GRAD", [-1, 1]), ("h@GRAD", [-1, 1]), ("h@GRAD@R0", [-1, 1]),
                     ("h@GRAD@R1", [-1, 1]), ("w@GRAD", [2, 1]), ("lr", [1])):
        b.add_var(Var.tensor(n, "FP64", shape, persistable=n in ("w", "lr")))
    b.vars["w"].is_parameter = True
    ops = [Op("matmul_v2", {"X": ["x"], "Y": ["w"]}, {"Out": ["h"]}),
           Op("reduce_mean", {"X": ["h"]}, {"Out": ["m"]}),
           Op("square", {"X": ["h"]}, {"Out": ["sq"]}),
           Op("reduce_sum", {"X": ["sq"]}, {"Out": ["s"]}),
           Op("elementwise_add", {"X": ["m"], "Y": ["s"]}, {"Out": ["loss"]}),
           Op("fill_constant", {}, {"Out": ["loss@GRAD"]}),
           Op("elementwise_add_grad", {"X": ["m"], "Y": ["s"], "Out@GRAD": ["loss@GRAD"]},
              {"X@GRAD": ["m@GRAD"], "Y@GRAD": ["s@GRAD"]}),
           Op("reduce_sum_grad", {"X": ["sq"], "Out@GRAD": ["s@GRAD"]}, {"X@GRAD": ["sq@GRAD"]}),
           Op("square_grad", {"X": ["h"], "Out@GRAD": ["sq@GRAD"]}, {"X@GRAD": ["h@GRAD@R0"]}),
           Op("reduce_mean_grad", {"X": ["h"], "Out@GRAD": ["m@GRAD"]}, {"X@GRAD": ["h@GRAD@R1"]}),
           Op("sum", {"X": ["h@GRAD@R0", "h@GRAD@R1"]}, {"Out": ["h@GRAD"]}),
           Op("matmul_v2_grad", {"X": ["x"], "Y": ["w"], "Out@GRAD": ["h@GRAD"]},
              {"Y@GRAD": ["w@GRAD"]}),
           Op("sgd", {"Param": ["w"], "Grad": ["w@GRAD"], "LearningRate": ["lr"]},
              {"ParamOut": ["w"]})]
    for op in ops[1:5] + ops[6:11]:
        op.set_attr("reduce_all", True)
    ops[5].set_attr("shape", [])
    ops[5].set_attr("value", 1.0)
    ops[5].set_attr("dtype", 6)
    ops[-1].set_attr("op_role", 2)
    b.ops = ops
    return Program([b])


def test_the_original_steps_as_trainers_do_their_shards():
    """A loss term summed over the batch: each trainer's sum covers its shard, so the averaged
    gradient is the mean of the shards' — what ShardedStep computes, not the whole batch's."""
    prog = _batch_sum_program()
    x = np.arange(8.0).reshape(4, 2) / 10
    w0 = np.array([[0.5], [-0.25]])

    def step(trainers):
        ex = Executor("t", prog)
        ex.scope.put("w", w0.copy())
        ex.scope.put("lr", np.array([0.1]))
        per = 4 // trainers
        ShardedStep(ex, trainers).run(0, [{"x": (x[t * per:(t + 1) * per], None)}
                                          for t in range(trainers)], per)
        return ex.scope.get("w")

    def grad(xs):
        h = xs @ w0
        return xs.T @ (np.full_like(h, 1 / len(xs)) + 2 * h)
    assert np.allclose(step(1), w0 - 0.1 * grad(x))
    assert np.allclose(step(2), w0 - 0.1 * (grad(x[:2]) + grad(x[2:])) / 2)
    assert not np.allclose(step(1), step(2))


def test_shards_mean_of_sparse_grads_is_the_pservers_sum_and_scale():
    a = SelectedRows([1, 3], np.ones((2, 2)), 5)
    b = SelectedRows([3], np.full((1, 2), 3.0), 5)
    m = mean_of([a, b])
    assert m.rows.tolist() == [1, 3, 3] and np.allclose(m.to_dense()[3], [2.0, 2.0])
    assert np.allclose(mean_of([np.ones(2), np.full(2, 3.0)]), [2.0, 2.0])


def test_coalesce_tensor_keeps_its_inputs_and_fuses_them():
    """multiview_simnet's startup packs its GRU weights with coalesce_tensor (copy_data)."""
    from kernelkit import run_op
    a, b = np.arange(6.0).reshape(2, 3), np.array([7.0, 8.0])
    out = run_op("coalesce_tensor", {"Input": [a, b]}, {"Output": 2, "FusedOutput": 1},
                 {"copy_data": True, "set_constant": False, "dtype": 6})
    assert np.array_equal(out["Output"][0], a) and np.array_equal(out["Output"][1], b)
    assert np.array_equal(out["FusedOutput"], [0.0, 1, 2, 3, 4, 5, 7, 8])
    out = run_op("coalesce_tensor", {"Input": [a]}, {"Output": 1, "FusedOutput": 1},
                 {"set_constant": True, "constant": 0.5, "dtype": 6})
    assert np.array_equal(out["Output"], np.full((2, 3), 0.5))
