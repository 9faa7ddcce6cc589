#!/usr/bin/env python3
"""Generate large, realistic Paddle training programs (ProgramDesc bytes) without Paddle.

    python bench/gen.py --kind mlp|ctr --ops N --optimizer sgd|momentum|adam [--lr-decay] --out DIR

writes DIR/main.pb, DIR/startup.pb, DIR/info.json and the cluster configs
DIR/cluster_p{2,16,64}_{fleet,classic}.yaml (sync mode, 2 trainers).

The programs imitate what Paddle 2.6 writes after `optimizer.minimize(loss)` (compare with
/work/shared/corpus-perf): the same op types, slot names, attr names, attr types and attr order
(extra attrs first, then the rest sorted), op_role / op_role_var / op_namescope / op_callstack on
every op, vars sorted by name with Paddle's flags, grad ops in reverse order with op_role_var
pairs, one optimizer op per parameter (sorted by parameter name) with its accumulators
(persistable, initialised in startup), the learning-rate var, and optionally an exponential
LR decay on the @LR_DECAY_COUNTER@ global step (op_role LRSched) as Paddle emits it.

Kinds:
  mlp  a deep MLP: x -> L x fc(relu) -> fc(1) -> square_error_cost -> mean
  ctr  CTR-style: S sparse id slots, each lookup_table(_v2) (is_sparse, SELECTED_ROWS grad) +
       sequence_pool(SUM), concat, an MLP tower, fc(2), softmax_with_cross_entropy, mean

The op count is reached within a few ops (the model is made of fixed-size pieces). Everything
is deterministic given --seed (layer widths, vocabulary sizes, callstack line numbers).
Generation goes through the transpile.program model and transpile.programio, so the bytes are
exactly what the project writes (and a decode/encode round trip is byte-identical).
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import struct
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from transpile.format import programio  # noqa: E402
from transpile.ir.program import Attr, Block, Op, Program, Var  # noqa: E402

PADDLE_VERSION = 2006002
# op_version_map as Paddle 2.6.2 writes it on every program
OP_VERSION_MAP = [
    ("distribute_fpn_proposals", 2), ("elementwise_add", 1), ("elementwise_sub", 1),
    ("send_and_recv", 1), ("matrix_nms", 1), ("lstsq", 1), ("quantize", 2),
    ("depthwise_conv2d_transpose", 1), ("rank_attention", 1), ("roi_pool", 2), ("mish", 1),
    ("generate_proposals_v2", 1), ("flip", 1), ("collect_fpn_proposals", 1),
    ("fill_constant", 2), ("cumsum", 1), ("instance_norm", 1), ("coalesce_tensor", 2),
    ("for_pybind_test__", 4), ("lamb", 1), ("p_norm", 1), ("momentum", 1), ("cudnn_lstm", 1),
    ("hard_shrink", 1), ("transfer_layout", 1), ("conv3d_transpose", 1),
    ("fake_channel_wise_quantize_abs_max", 1), ("conv2d_transpose", 2), ("pixel_shuffle", 1),
    ("gather", 1), ("lookup_table", 1), ("depthwise_conv2d", 1), ("greater_equal", 1),
    ("dequantize", 1), ("generate_proposal_labels", 2), ("conv2d", 1), ("yolo_box", 1),
    ("less_equal", 1), ("linspace", 1), ("roll", 2), ("grid_sampler", 1), ("affine_grid", 1),
    ("allclose", 2), ("conv3d", 1), ("clip", 1), ("roi_align", 3), ("auc", 1),
    ("elementwise_div", 1), ("leaky_relu", 1), ("trace", 1), ("softplus", 1), ("print", 1),
    ("unique_consecutive", 1), ("elementwise_mul", 1), ("set_value", 4), ("seed", 1),
    ("requantize", 1), ("less_than", 1), ("data_norm", 1), ("matmul", 1),
    ("generate_proposals", 2), ("elementwise_pow", 1), ("lookup_table_v2", 1), ("equal", 1),
    ("greater_than", 1), ("not_equal", 1), ("moving_average_abs_max_scale", 2),
    ("fake_channel_wise_dequantize_max_abs", 2)]

# op_role values (paddle OpRole)
FORWARD, BACKWARD, OPTIMIZE, LRSCHED, LOSS = 0, 1, 2, 16, 256
FP32, INT64 = 5, 3   # VarType.Type numbers used in dtype attrs


def f32(x: float) -> float:
    """x rounded to float32, as the FLOAT attr will hold it."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ---------------------------------------------------------------------------------------------
# attrs: shared Attr instances for constant values (the model is read-only once built)

def A(type_: str, value) -> Attr:
    return Attr(type_, value)


B_FALSE, B_TRUE = A("BOOLEAN", False), A("BOOLEAN", True)
S_EMPTY, S_ROOT = A("STRING", ""), A("STRING", "/")
EMPTY_STRINGS = A("STRINGS", [])
F_ONE, F_ZERO = A("FLOAT", 1.0), A("FLOAT", 0.0)
ELEMENTWISE_EXTRA = [("Scale_out", F_ONE), ("Scale_x", F_ONE), ("Scale_y", F_ONE),
                     ("mkldnn_data_type", A("STRING", "float32")), ("use_mkldnn", B_FALSE),
                     ("use_quantizer", B_FALSE)]
ACT_EXTRA = [("use_cudnn", B_FALSE), ("use_mkldnn", B_FALSE)]
MKLDNN_EXTRA = [("use_mkldnn", B_FALSE)]
REDUCE_OWN = [("dim", A("INTS", [])), ("in_dtype", A("INT", -1)), ("keep_dim", B_FALSE),
              ("out_dtype", A("INT", -1)), ("reduce_all", B_TRUE)]
LOOKUP_V2_EXTRA = [("epmap", EMPTY_STRINGS), ("height_sections", A("LONGS", [])),
                   ("is_distributed", B_FALSE), ("is_sparse", B_TRUE),
                   ("remote_prefetch", B_TRUE), ("slot", A("INT", 0)),
                   ("table_names", EMPTY_STRINGS), ("trainer_id", A("INT", 0))]
LOOKUP_V1_OWN = [("entry", A("STRING", "none")), ("entry_config", S_EMPTY),
                 ("epmap", EMPTY_STRINGS), ("grad_inplace", B_FALSE),
                 ("height_sections", A("LONGS", [])), ("is_distributed", B_FALSE),
                 ("is_sparse", B_TRUE), ("is_test", B_FALSE), ("padding_idx", A("LONG", -1)),
                 ("remote_prefetch", B_FALSE), ("slot", A("INT", 0)),
                 ("table_class", A("STRING", "none")), ("table_names", EMPTY_STRINGS),
                 ("trainer_id", A("INT", 0))]

# op type -> (extra attrs, in this order, written first; own attrs, sorted with the common ones)
SPECS = {
    "mul": ([("force_fp32_output", B_FALSE), ("scale_out", F_ONE), ("scale_x", F_ONE),
             ("scale_y", A("FLOATS", [1.0])), ("use_mkldnn", B_FALSE)],
            [("x_num_col_dims", A("INT", 1)), ("y_num_col_dims", A("INT", 1))]),
    "elementwise_add": (ELEMENTWISE_EXTRA, [("axis", A("INT", 1))]),
    "elementwise_sub": (ELEMENTWISE_EXTRA, [("axis", A("INT", -1))]),
    "elementwise_pow": (ELEMENTWISE_EXTRA, [("axis", A("INT", -1))]),
    "relu": (ACT_EXTRA, []),
    "square": (ACT_EXTRA, []),
    "floor": (ACT_EXTRA, []),
    "reduce_mean": (MKLDNN_EXTRA, REDUCE_OWN),
    "fill_constant": (MKLDNN_EXTRA, [("dtype", A("INT", FP32)), ("force_cpu", B_FALSE),
                                     ("place_type", A("INT", -1)), ("shape", A("LONGS", [])),
                                     ("str_value", S_EMPTY), ("value", F_ZERO)]),
    "uniform_random": ([], [("diag_num", A("INT", 0)), ("diag_step", A("INT", 0)),
                            ("diag_val", F_ONE), ("dtype", A("INT", FP32)), ("max", F_ONE),
                            ("min", A("FLOAT", -1.0)), ("seed", A("INT", 0)),
                            ("shape", A("LONGS", []))]),
    "lookup_table_v2": (LOOKUP_V2_EXTRA, [("padding_idx", A("LONG", -1))]),
    "lookup_table": ([], LOOKUP_V1_OWN),
    "sequence_pool": ([("is_test", B_FALSE)], [("pad_value", F_ZERO),
                                              ("pooltype", A("STRING", "SUM"))]),
    "concat": ([("mkldnn_data_type", A("STRING", "float32")), ("use_mkldnn", B_FALSE),
                ("use_quantizer", B_FALSE)], [("axis", A("INT", 1))]),
    "softmax_with_cross_entropy": ([], [("axis", A("INT", -1)), ("ignore_index", A("INT", -100)),
                                        ("numeric_stable_mode", B_TRUE), ("soft_label", B_FALSE),
                                        ("use_softmax", B_TRUE)]),
    "increment": ([], [("step", F_ONE)]),
    "cast": ([], [("in_dtype", A("INT", INT64)), ("out_dtype", A("INT", FP32)),
                  ("use_mkldnn", B_FALSE)]),
    "scale": (MKLDNN_EXTRA, [("bias", F_ZERO), ("bias_after_scale", B_TRUE), ("scale", F_ONE)]),
    "sgd": (MKLDNN_EXTRA, [("multi_precision", B_FALSE)]),
    "momentum": ([], [("mu", A("FLOAT", f32(0.9))), ("multi_precision", B_FALSE),
                      ("regularization_coeff", F_ZERO), ("regularization_method", S_EMPTY),
                      ("rescale_grad", F_ONE), ("use_nesterov", B_FALSE)]),
    "adam": ([], [("beta1", A("FLOAT", f32(0.9))), ("beta2", A("FLOAT", f32(0.999))),
                  ("epsilon", A("FLOAT", f32(1e-8))), ("lazy_mode", B_FALSE),
                  ("min_row_size_to_use_multithread", A("LONG", 1000)),
                  ("multi_precision", B_FALSE), ("use_global_beta_pow", B_FALSE)]),
}
COMMON = ("op_callstack", "op_device", "op_namescope", "op_role", "op_role_var",
          "with_quant_attr")
ROLE_ATTRS = {r: A("INT", r) for r in (FORWARD, BACKWARD, OPTIMIZE, LRSCHED, LOSS, LOSS | 1)}
_ORDER: dict = {}


def _order(base: str) -> list:
    """The attr names of an op type in the order Paddle writes them."""
    o = _ORDER.get(base)
    if o is None:
        extra, own = SPECS[base]
        o = [k for k, _ in extra] + sorted({k for k, _ in own} | set(COMMON))
        _ORDER[base] = o
    return o


def make_op(type_: str, inputs: dict, outputs: dict, *, role: int, callstack: Attr,
            role_var=None, namescope: Attr = S_ROOT, attrs: dict | None = None) -> Op:
    """An op with every attr Paddle writes for its type; grad ops take their forward op's."""
    base = type_[:-5] if type_.endswith("_grad") else type_
    extra, own = SPECS[base]
    vals = dict(extra)
    vals.update(own)
    if attrs:
        vals.update(attrs)
    vals["op_callstack"] = callstack
    vals["op_device"] = S_EMPTY
    vals["op_namescope"] = namescope
    vals["op_role"] = ROLE_ATTRS[role]
    vals["op_role_var"] = A("STRINGS", list(role_var)) if role_var else EMPTY_STRINGS
    vals["with_quant_attr"] = B_FALSE
    return Op(type_, {k: inputs[k] for k in sorted(inputs)},
              {k: outputs[k] for k in sorted(outputs)},
              {k: vals[k] for k in _order(base)})


# ---------------------------------------------------------------------------------------------
# op_callstack: a Python traceback like the one Paddle records when an op is appended

SITE = "/usr/local/lib/python3.10/site-packages/"


class Callstacks:
    """Callstack attrs by call site; ops made by the same line share one (as in Paddle)."""

    def __init__(self, kind: str, mode: str, rng: random.Random):
        self.mode = mode
        self.script = "/home/user/models/train_%s.py" % kind
        self.kind = kind
        self.rng = rng
        self.cache: dict = {}
        self.lines = {}

    def _line(self, key) -> int:
        if key not in self.lines:
            self.lines[key] = self.rng.randint(40, 400)
        return self.lines[key]

    def _user(self, site: str, code: str) -> list:
        s = self.script
        net = "net_%s" % self.kind
        return [(s, self._line("main"), "<module>", "sys.exit(main())"),
                (s, self._line("build"), "main", "main_prog, startup_prog, loss = build(args)"),
                (s, self._line("net"), "build", "loss = %s(args)" % net),
                (s, self._line(("site", site)), net if site != "minimize" else "build", code)]

    def get(self, site: str) -> Attr:
        a = self.cache.get(site)
        if a is None:
            a = A("STRINGS", self._render(site) if self.mode != "none" else [])
            self.cache[site] = a
        return a

    def _render(self, site: str) -> list:
        frames = self._frames(site)
        out = []
        for path, line, func, code in frames:
            out.append('  File "%s", line %d, in %s' % (path, line, func))
            out.append("    " + code)
        if self.mode == "short":
            out = out[-6:]
        return out

    def _frames(self, site: str) -> list:
        P = SITE + "paddle/"
        deco = [(SITE + "decorator/__init__.py", 247, "fun",
                 "return caller(func, *(extras + args), **kw)"),
                (P + "base/wrapped_decorator.py", 26, "__impl__",
                 "return wrapped_func(*args, **kwargs)"),
                (P + "base/framework.py", 617, "__impl__", "return func(*args, **kwargs)")]
        op_init = [(P + "base/framework.py", 4467, "append_op", "op = Operator("),
                   (P + "base/framework.py", 3016, "__init__",
                    "for frame in traceback.extract_stack():")]
        tail = [(P + "base/layer_helper.py", 44, "append_op",
                 "return self.main_program.current_block().append_op(*args, **kwargs)")] + op_init
        # optimizer.minimize() down to the pass that adds the optimizer's ops and vars
        minimize = [(P + "optimizer/optimizer.py", 1762, "minimize",
                     "optimize_ops = self._apply_optimize("),
                    (P + "optimizer/optimizer.py", 1527, "_apply_optimize",
                     "optimize_ops = self.apply_gradients(params_grads)"),
                    (P + "optimizer/optimizer.py", 1473, "apply_gradients",
                     "optimize_ops = self._create_optimization_pass(params_grads)")]
        # a parameter created by a layer, down to its initializer
        create_param = [(P + "base/layer_helper_base.py", 431, "create_parameter",
                         "self.startup_program.global_block().create_parameter("),
                        (P + "base/framework.py", 4381, "create_parameter",
                         "initializer(param, self)")]
        init_call = [(P + "nn/initializer/initializer.py", 40, "__call__",
                      "return self.forward(param, block)")]
        fc = [(P + "static/nn/common.py", 239, "fc", "return fc_base(")]
        if site in ("fc.mul", "fc.add", "fc.act", "out.mul", "out.add"):
            user = self._user(site, "h = paddle.static.nn.fc(h, size=%s%s)" % (
                "width" if site.startswith("fc") else "n_out",
                ', activation="relu"' if site.startswith("fc") else ""))
            mid = {"mul": [(P + "static/nn/common.py", 214, "fc_base", "helper.append_op(")],
                   "add": [(P + "static/nn/common.py", 229, "fc_base",
                            "pre_activation = helper.append_bias_op(pre_bias, "
                            "dim_start=num_flatten_dims)"),
                           (P + "base/layer_helper.py", 135, "append_bias_op",
                            "self.append_op(")],
                   "act": [(P + "static/nn/common.py", 231, "fc_base",
                            "return helper.append_activation(pre_activation)"),
                           (P + "base/layer_helper.py", 163, "append_activation",
                            "self.append_op(")]}[site.split(".")[1]]
            return user + deco + fc + mid + tail
        if site == "loss.sub" or site == "loss.square":
            return self._user(site, "cost = paddle.nn.functional.square_error_cost(pred, y)") + [
                (P + "nn/functional/loss.py", 440 if site == "loss.sub" else 446,
                 "square_error_cost", "helper.append_op(")] + tail
        if site.startswith("mean"):
            return self._user(site, "loss = paddle.mean(cost)") + [
                (P + "tensor/stat.py", 113, "mean", "helper.append_op(")] + tail
        if site == "softmax_ce":
            return self._user(site, "cost = paddle.nn.functional.softmax_with_cross_entropy("
                                    "logits, label)") + [
                (P + "nn/functional/loss.py", 2668, "softmax_with_cross_entropy",
                 "return fluid_softmax_with_cross_entropy(")] + [
                (P + "nn/functional/loss.py", 316, "fluid_softmax_with_cross_entropy",
                 "helper.append_op(")] + tail
        if site == "embedding":
            return self._user(site, "emb = paddle.static.nn.embedding(ids, size=[vocab, dim], "
                                    "is_sparse=True, param_attr=name)") + deco + [
                (P + "static/nn/common.py", 3709, "embedding", "helper.append_op(")] + tail
        if site == "sequence_pool":
            return self._user(site, 'pooled = paddle.static.nn.sequence_lod.sequence_pool('
                                    'emb, pool_type="sum")') + [
                (P + "static/nn/sequence_lod.py", 366, "sequence_pool", "helper.append_op(")
            ] + tail
        if site == "concat":
            return self._user(site, "h = paddle.concat(pooled, axis=1)") + [
                (P + "tensor/manipulation.py", 1257, "concat", "helper.append_op(")] + tail
        if site.startswith("opt."):
            name = site[4:]
            return self._user("minimize", "optimizer.minimize(loss)") + deco[:1] + [
                (P + "base/dygraph/base.py", 352, "_decorate_function",
                 "return func(*args, **kwargs)")] + minimize + [
                (P + "optimizer/optimizer.py", 1239, "_create_optimization_pass",
                 "optimize_op = self._append_optimize_op(")] + deco[:1] + [
                (P + "base/dygraph/base.py", 340, "__impl__", "return func(*args, **kwargs)"),
                (P + "optimizer/%s.py" % name, {"sgd": 158, "momentum": 331, "adam": 361}[name],
                 "_append_optimize_op", "%s_op = block.append_op(" % name)] + op_init
        if site.startswith("lr."):
            what = site[3:]
            return self._user("lr", "lr = paddle.optimizer.lr.exponential_decay("
                                    "learning_rate=base_lr, decay_steps=steps, "
                                    "decay_rate=rate, staircase=True)") + [
                (P + "base/layers/learning_rate_scheduler.py", 192, "exponential_decay",
                 "global_step = _decay_step_counter()"
                 if what == "increment" else "div_res = global_step / decay_steps"),
            ] + ([(P + "base/layers/learning_rate_scheduler.py", 48, "_decay_step_counter",
                   "global_step = nn.autoincreased_step_counter("),
                  (P + "base/layers/control_flow.py", 1243, "autoincreased_step_counter",
                   "helper.main_program.global_block()._prepend_op(")]
                 if what == "increment" else
                 [(P + "base/layers/math_op_patch.py", 415, "__impl__",
                   "current_block(self).append_op(")]) + op_init
        if site.startswith("init."):
            what = site[5:]
            if what in ("param", "bias"):
                user = self._user(site, "h = paddle.static.nn.fc(h, size=width)")
                return user + deco + fc + [
                    (P + "static/nn/common.py", 205, "fc_base",
                     "w = helper.create_parameter(" if what == "param" else
                     "pre_activation = helper.append_bias_op(pre_bias)")] + create_param + \
                    init_call + [
                    (P + "nn/initializer/%s.py" % ("xavier" if what == "param" else "constant"),
                     183 if what == "param" else 87, "forward", "op = block.append_op(")
                ] + op_init
            if what == "emb":
                return self._user(site, "emb = paddle.static.nn.embedding(ids, ...)") + deco + [
                    (P + "static/nn/common.py", 3700, "embedding",
                     "w = helper.create_parameter(")] + create_param + init_call + [
                    (P + "nn/initializer/xavier.py", 183, "forward", "op = block.append_op(")
                ] + op_init
            # lr / accumulators / counter: created by the optimizer at minimize()
            return self._user("minimize", "optimizer.minimize(loss)") + deco[:1] + minimize + [
                (P + "optimizer/optimizer.py", 1213 if what == "acc" else 1190,
                 "_create_optimization_pass",
                 "self._create_accumulators(" if what == "acc" else
                 "self._create_global_learning_rate()"),
                (P + "optimizer/optimizer.py", 836 if what == "acc" else 431,
                 "_add_accumulator" if what == "acc" else "_create_global_learning_rate",
                 "self.helper.set_variable_initializer(" if what == "acc" else
                 "self._learning_rate_map[framework.default_main_program()] = "
                 "paddle.static.create_global_var("),
                (P + "base/layer_helper_base.py", 512, "set_variable_initializer",
                 "initializer(var, self.startup_program.global_block())")] + init_call + [
                (P + "nn/initializer/constant.py", 87, "forward", "op = block.append_op(")
            ] + op_init
        raise KeyError(site)


# ---------------------------------------------------------------------------------------------
# vars (flags as Paddle sets them)

def v_param(name, shape):
    return Var.tensor(name, "FP32", shape, lod_level=None, persistable=True, is_parameter=True,
                      stop_gradient=False)


def v_tmp(name, shape, dtype="FP32", lod=0, grad=False, stop_gradient=False):
    return Var.tensor(name, dtype, shape, lod_level=lod, persistable=None if grad else False,
                      stop_gradient=stop_gradient)


def v_feed(name, shape, dtype="FP32", lod=0):
    return Var.tensor(name, dtype, shape, lod_level=lod, persistable=False, need_check_feed=True,
                      stop_gradient=True)


def v_persist(name, shape, dtype="FP32", stop_gradient=False, lod=None):
    return Var.tensor(name, dtype, shape, lod_level=lod, persistable=True,
                      stop_gradient=stop_gradient)


# ---------------------------------------------------------------------------------------------
# the builder

class Builder:
    def __init__(self, kind: str, optimizer: str, lr_decay: bool, seed: int, callstack: str,
                 lr: float):
        self.kind = kind
        self.optimizer = optimizer
        self.lr_decay = lr_decay
        self.rng = random.Random(seed)
        self.cs = Callstacks(kind, callstack, random.Random(seed + 1))
        self.lr = lr
        self.main_vars: dict = {}
        self.start_vars: dict = {}
        self.fwd: list = []          # forward ops
        self.bwd: list = []          # backward ops (in execution order)
        self.params: list = []       # (name, shape, init site, sparse)
        self.start_ops: list = []
        self.lr_name = "learning_rate_0"

    # -- helpers
    def var(self, v: Var) -> str:
        self.main_vars[v.name] = v
        return v.name

    def param(self, name: str, shape, site: str, sparse: bool = False) -> str:
        self.var(v_param(name, shape))
        grad = name + "@GRAD"
        if sparse:
            self.var(Var.tensor(grad, "FP32", shape, kind="SELECTED_ROWS", stop_gradient=False))
        else:
            self.var(v_tmp(grad, shape, grad=True))
        self.params.append((name, tuple(shape), site))
        return name

    def grad_of(self, name: str) -> str:
        v = self.main_vars[name]
        g = name + "@GRAD"
        if g not in self.main_vars:
            self.main_vars[g] = v_tmp(g, v.shape, v.dtype, lod=v.lod_level, grad=True)
        return g

    def fc(self, idx: int, x: str, in_dim: int, out_dim: int, act: bool, last: bool):
        """fc_<idx>: mul + elementwise_add (+ relu). Returns (out name, backward builder)."""
        p = "fc_%d" % idx
        w = self.param(p + ".w_0", (in_dim, out_dim), "init.param")
        b = self.param(p + ".b_0", (out_dim,), "init.bias")
        t0 = self.var(v_tmp(p + ".tmp_0", (-1, out_dim)))
        t1 = self.var(v_tmp(p + ".tmp_1", (-1, out_dim)))
        pre = "out" if last else "fc"
        cs_mul, cs_add = self.cs.get(pre + ".mul"), self.cs.get(pre + ".add")
        self.fwd.append(make_op("mul", {"X": [x], "Y": [w]}, {"Out": [t0]}, role=FORWARD,
                                callstack=cs_mul))
        self.fwd.append(make_op("elementwise_add", {"X": [t0], "Y": [b]}, {"Out": [t1]},
                                role=FORWARD, callstack=cs_add))
        out = t1
        if act:
            t2 = self.var(v_tmp(p + ".tmp_2", (-1, out_dim)))
            self.fwd.append(make_op("relu", {"X": [t1]}, {"Out": [t2]}, role=FORWARD,
                                    callstack=self.cs.get("fc.act")))
            out = t2

        def backward(x_needs_grad: bool):
            ops = []
            if act:
                ops.append(make_op("relu_grad", {"Out": [out], "Out@GRAD": [self.grad_of(out)]},
                                   {"X@GRAD": [self.grad_of(t1)]}, role=BACKWARD,
                                   callstack=self.cs.get("fc.act")))
            ops.append(make_op("elementwise_add_grad",
                               {"Out@GRAD": [self.grad_of(t1)], "X": [t0], "Y": [b]},
                               {"X@GRAD": [self.grad_of(t0)], "Y@GRAD": [b + "@GRAD"]},
                               role=BACKWARD, role_var=(b, b + "@GRAD"), callstack=cs_add))
            outs = {"Y@GRAD": [w + "@GRAD"]}
            if x_needs_grad:
                outs["X@GRAD"] = [self.grad_of(x)]
            ops.append(make_op("mul_grad", {"Out@GRAD": [self.grad_of(t0)], "X": [x], "Y": [w]},
                               outs, role=BACKWARD, role_var=(w, w + "@GRAD"),
                               callstack=cs_mul))
            return ops
        return out, backward

    def mlp_tower(self, x: str, in_dim: int, widths: list, n_out: int, x_needs_grad: bool,
                  first_idx: int = 0):
        """fc+relu for each width, then fc(n_out). Returns (out, backward builders reversed)."""
        backs = []
        h, d = x, in_dim
        for i, w in enumerate(widths):
            h, bk = self.fc(first_idx + i, h, d, w, act=True, last=False)
            backs.append(bk)
            d = w
        h, bk = self.fc(first_idx + len(widths), h, d, n_out, act=False, last=True)
        backs.append(bk)
        return h, backs

    def lr_schedule(self):
        """exponential_decay(lr, decay_steps, decay_rate, staircase=True) on the global step."""
        ctr = "@LR_DECAY_COUNTER@"
        self.main_vars[ctr] = v_persist(ctr, (1,), "INT64", stop_gradient=True, lod=0)
        self.start_vars[ctr] = v_persist(ctr, (1,), "INT64", stop_gradient=True)
        inc = make_op("increment", {"X": [ctr]}, {"Out": [ctr]}, role=LRSCHED,
                      callstack=self.cs.get("lr.increment"))
        cs = self.cs.get("lr.decay")
        sg = dict(stop_gradient=True)
        self.var(v_tmp("cast_0.tmp_0", (1,), **sg))
        self.var(Var.tensor("tmp_0", "FP32", (1,), lod_level=0, stop_gradient=True))
        self.var(v_tmp("floor_0.tmp_0", (1,), **sg))
        self.var(Var.tensor("tmp_1", "FP32", (1,), lod_level=None, stop_gradient=True))
        self.var(Var.tensor("tmp_2", "FP32", (1,), lod_level=0, stop_gradient=True))
        self.var(Var.tensor("tmp_3", "FP32", (1,), lod_level=0, stop_gradient=True))
        decay_steps, decay_rate = 1000, 0.9
        ops = [
            make_op("cast", {"X": [ctr]}, {"Out": ["cast_0.tmp_0"]}, role=LRSCHED, callstack=cs),
            make_op("scale", {"X": ["cast_0.tmp_0"]}, {"Out": ["tmp_0"]}, role=LRSCHED,
                    callstack=cs, attrs={"scale": A("FLOAT", f32(1.0 / decay_steps))}),
            make_op("floor", {"X": ["tmp_0"]}, {"Out": ["floor_0.tmp_0"]}, role=LRSCHED,
                    callstack=cs),
            make_op("fill_constant", {}, {"Out": ["tmp_1"]}, role=LRSCHED, callstack=cs,
                    attrs={"shape": A("LONGS", [1]), "value": A("FLOAT", f32(decay_rate))}),
            make_op("elementwise_pow", {"X": ["tmp_1"], "Y": ["floor_0.tmp_0"]},
                    {"Out": ["tmp_2"]}, role=LRSCHED, callstack=cs),
            make_op("scale", {"X": ["tmp_2"]}, {"Out": ["tmp_3"]}, role=LRSCHED, callstack=cs,
                    attrs={"scale": A("FLOAT", f32(self.lr))}),
        ]
        self.lr_name = "tmp_3"
        return inc, ops

    def optimizer_ops(self) -> list:
        """One optimizer op per parameter, sorted by parameter name; accumulators in both
        programs, their init ops in startup."""
        opt = self.optimizer
        ops = []
        cs = self.cs.get("opt." + opt)
        lr = self.lr_name
        for k, (name, shape, _) in enumerate(sorted(self.params)):
            g = name + "@GRAD"
            ns = A("STRING", "/optimizer/" if k == 0 else "/optimizer_%d/" % k)
            ins = {"Grad": [g], "LearningRate": [lr], "Param": [name]}
            outs = {"ParamOut": [name]}
            if opt == "momentum":
                vel = self._acc(name + "_velocity_0", shape, 0.0)
                ins["Velocity"] = [vel]
                outs["VelocityOut"] = [vel]
            elif opt == "adam":
                m1 = self._acc(name + "_moment1_0", shape, 0.0)
                m2 = self._acc(name + "_moment2_0", shape, 0.0)
                b1 = self._acc(name + "_beta1_pow_acc_0", (1,), 0.9)
                b2 = self._acc(name + "_beta2_pow_acc_0", (1,), 0.999)
                ins.update({"Moment1": [m1], "Moment2": [m2], "Beta1Pow": [b1],
                            "Beta2Pow": [b2]})
                outs.update({"Moment1Out": [m1], "Moment2Out": [m2], "Beta1PowOut": [b1],
                             "Beta2PowOut": [b2]})
            ops.append(make_op(opt, ins, outs, role=OPTIMIZE, role_var=(name, g),
                               callstack=cs, namescope=ns))
        return ops

    def _acc(self, name, shape, value) -> str:
        self.main_vars[name] = v_persist(name, shape)
        self.start_vars[name] = v_persist(name, shape, stop_gradient=True)
        self._acc_inits.append(self._fill(name, shape, value, "init.acc"))
        return name

    def _fill(self, out, shape, value, site, dtype=FP32, force_cpu=False) -> Op:
        attrs = {"shape": A("LONGS", list(shape)), "str_value": A("STRING", str(float(value))),
                 "value": A("FLOAT", f32(value))}
        if dtype != FP32:
            attrs["dtype"] = A("INT", dtype)
        if force_cpu:
            attrs["force_cpu"] = B_TRUE
        return make_op("fill_constant", {}, {"Out": [out]}, role=FORWARD,
                       callstack=self.cs.get(site), attrs=attrs)

    def finish(self, loss_fwd: list, loss_grad_var: str, loss_bwd: list) -> tuple:
        """Assemble main and startup: [increment] forward loss [lr decay] backward optimize."""
        main_ops = []
        inc = lr_ops = None
        if self.lr_decay:
            inc, lr_ops = self.lr_schedule()
            main_ops.append(inc)
        main_ops += self.fwd + loss_fwd
        if lr_ops:
            main_ops += lr_ops
        v = self.main_vars[loss_grad_var[:-5]]
        self.main_vars[loss_grad_var] = Var.tensor(loss_grad_var, "FP32", v.shape,
                                                   lod_level=None, stop_gradient=False)
        main_ops.append(make_op("fill_constant", {}, {"Out": [loss_grad_var]}, role=LOSS | 1,
                                callstack=A("STRINGS", []), namescope=S_EMPTY,
                                attrs={"value": F_ONE}))
        main_ops += loss_bwd + self.bwd
        if not self.lr_decay:
            self.main_vars["learning_rate_0"] = v_persist("learning_rate_0", (),
                                                          stop_gradient=True)
            self.start_vars["learning_rate_0"] = v_persist("learning_rate_0", (),
                                                           stop_gradient=True)
        self._acc_inits = []
        main_ops += self.optimizer_ops()

        # startup: parameter inits in creation order, then the LR (or the step counter), then
        # the accumulators (parameter-name order)
        sops = []
        for name, shape, site in self.params:
            self.start_vars[name] = v_param(name, shape)
            if site == "init.bias":
                sops.append(self._fill(name, shape, 0.0, site))
            else:
                limit = f32(math.sqrt(6.0 / (shape[0] + shape[-1])))
                sops.append(make_op("uniform_random", {"ShapeTensor": [], "ShapeTensorList": []},
                                    {"Out": [name]}, role=FORWARD, callstack=self.cs.get(site),
                                    attrs={"max": A("FLOAT", limit),
                                           "min": A("FLOAT", -limit),
                                           "shape": A("LONGS", list(shape))}))
        if self.lr_decay:
            sops.append(self._fill("@LR_DECAY_COUNTER@", (1,), -1.0, "init.counter",
                                   dtype=INT64, force_cpu=True))
        else:
            sops.append(self._fill("learning_rate_0", (), self.lr, "init.lr"))
        sops += self._acc_inits
        return (self._program(self.main_vars, main_ops),
                self._program(self.start_vars, sops))

    @staticmethod
    def _program(vars_: dict, ops: list) -> Program:
        blk = Block(0, -1, {k: vars_[k] for k in sorted(vars_)}, ops)
        return Program([blk], PADDLE_VERSION, True, list(OP_VERSION_MAP))


# ---------------------------------------------------------------------------------------------
# the two kinds

MLP_FIXED = 7            # sub, square, mean, fill_constant, mean/square/sub grads
MLP_PER_LAYER = 8        # mul add relu, 3 grads, 2 optimizer ops
MLP_LAST = 6             # mul add, 2 grads, 2 optimizer ops
LR_OPS = 7               # increment, cast, scale, floor, fill_constant, elementwise_pow, scale
CTR_FIXED = 7 + 2        # softmax_ce, mean x2, fill_constant, 3 grads; concat + concat_grad
CTR_PER_SLOT = 5         # lookup, pool, 2 grads, 1 optimizer op


def plan_mlp(ops: int, lr_decay: bool) -> int:
    """Hidden layers so that the main program has about `ops` ops."""
    fixed = MLP_FIXED + MLP_LAST + (LR_OPS if lr_decay else 0)
    return max(1, round((ops - fixed) / MLP_PER_LAYER))


def plan_ctr(ops: int, lr_decay: bool, slots: int | None, slot_share: float) -> tuple:
    fixed = CTR_FIXED + MLP_LAST + (LR_OPS if lr_decay else 0)
    if slots is None:
        slots = max(1, round(ops * slot_share / CTR_PER_SLOT))
    layers = max(1, round((ops - fixed - CTR_PER_SLOT * slots) / MLP_PER_LAYER))
    return slots, layers


def build_mlp(args) -> tuple:
    b = Builder("mlp", args.optimizer, args.lr_decay, args.seed, args.callstack, args.lr)
    layers = plan_mlp(args.ops, args.lr_decay)
    w = args.width
    choices = [w, w, w, max(1, w // 2), w * 2]
    widths = [b.rng.choice(choices) for _ in range(layers)]
    x = b.var(v_feed("x", (-1, w)))
    y = b.var(v_feed("y", (-1, 1)))
    pred, backs = b.mlp_tower(x, w, widths, 1, x_needs_grad=False)
    # square_error_cost + mean
    d = b.var(v_tmp("square_error_cost_0.tmp_0", (-1, 1)))
    sq = b.var(v_tmp("square_error_cost_0.tmp_1", (-1, 1)))
    loss = b.var(Var.tensor("mean_0.tmp_0", "FP32", (), lod_level=None, persistable=False,
                            stop_gradient=False))
    cs_sub, cs_sq, cs_mean = b.cs.get("loss.sub"), b.cs.get("loss.square"), b.cs.get("mean")
    fwd = [make_op("elementwise_sub", {"X": [pred], "Y": [y]}, {"Out": [d]}, role=FORWARD,
                   callstack=cs_sub),
           make_op("square", {"X": [d]}, {"Out": [sq]}, role=FORWARD, callstack=cs_sq),
           make_op("reduce_mean", {"X": [sq]}, {"Out": [loss]}, role=LOSS, callstack=cs_mean)]
    lg = loss + "@GRAD"
    bwd = [make_op("reduce_mean_grad", {"Out@GRAD": [lg], "X": [sq]},
                   {"X@GRAD": [b.grad_of(sq)]}, role=BACKWARD, callstack=cs_mean),
           make_op("square_grad", {"Out@GRAD": [b.grad_of(sq)], "X": [d]},
                   {"X@GRAD": [b.grad_of(d)]}, role=BACKWARD, callstack=cs_sq),
           make_op("elementwise_sub_grad", {"Out@GRAD": [b.grad_of(d)], "X": [pred], "Y": [y]},
                   {"X@GRAD": [b.grad_of(pred)]}, role=BACKWARD, callstack=cs_sub)]
    for i, bk in reversed(list(enumerate(backs))):
        b.bwd += bk(x_needs_grad=i > 0)
    info = {"hidden_layers": layers, "width": w}
    return b.finish(fwd, lg, bwd) + (info,)


def build_ctr(args) -> tuple:
    b = Builder("ctr", args.optimizer, args.lr_decay, args.seed, args.callstack, args.lr)
    slots, layers = plan_ctr(args.ops, args.lr_decay, args.slots, args.slot_share)
    dim = args.emb_dim
    vocabs = [b.rng.choice([1000, 10000, 100000, 100000, 1000000]) if args.vocab is None
              else args.vocab for _ in range(slots)]
    table = "lookup_table" if args.table == "v1" else "lookup_table_v2"
    tattrs = {"is_distributed": B_TRUE} if args.distributed else None
    cs_emb, cs_pool = b.cs.get("embedding"), b.cs.get("sequence_pool")
    pools, emb_backs = [], []
    for i in range(slots):
        ids = b.var(v_feed("slot_%d" % i, (-1, 1), "INT64", lod=1))
        w = b.param("emb_%d" % i, (vocabs[i], dim), "init.emb", sparse=True)
        e = b.var(v_tmp("embedding_%d.tmp_0" % i, (-1, 1, dim), lod=1))
        p = b.var(v_tmp("sequence_pool_%d.tmp_0" % i, (-1, 1, dim)))
        mi = b.var(Var.tensor("sequence_pool_%d.tmp_1" % i, "FP32", (), lod_level=None,
                              persistable=False, stop_gradient=False))
        b.fwd.append(make_op(table, {"Ids": [ids], "W": [w]}, {"Out": [e]}, role=FORWARD,
                             callstack=cs_emb, attrs=tattrs))
        b.fwd.append(make_op("sequence_pool", {"X": [e]}, {"MaxIndex": [mi], "Out": [p]},
                             role=FORWARD, callstack=cs_pool))
        pools.append(p)
        emb_backs.append((ids, w, e, p))
    label = b.var(v_feed("label", (-1, 1), "INT64"))
    cat = b.var(v_tmp("concat_0.tmp_0", (-1, slots, dim)))
    cs_cat = b.cs.get("concat")
    b.fwd.append(make_op("concat", {"X": list(pools)}, {"Out": [cat]}, role=FORWARD,
                         callstack=cs_cat))
    hidden = args.width
    choices = [hidden, hidden, max(1, hidden // 2)]
    widths = [b.rng.choice(choices) for _ in range(layers)]
    logits, backs = b.mlp_tower(cat, slots * dim, widths, 2, x_needs_grad=True)
    sm = b.var(v_tmp("softmax_with_cross_entropy_0.tmp_0", (-1, 2)))
    ce = b.var(v_tmp("softmax_with_cross_entropy_0.tmp_1", (-1, 1)))
    m0 = b.var(Var.tensor("mean_0.tmp_0", "FP32", (), lod_level=None, persistable=False,
                          stop_gradient=False))
    m1 = b.var(Var.tensor("mean_1.tmp_0", "FP32", (), lod_level=None, persistable=False,
                          stop_gradient=False))
    cs_ce, cs_m0, cs_m1 = b.cs.get("softmax_ce"), b.cs.get("mean.0"), b.cs.get("mean.1")
    fwd = [make_op("softmax_with_cross_entropy", {"Label": [label], "Logits": [logits]},
                   {"Loss": [ce], "Softmax": [sm]}, role=FORWARD, callstack=cs_ce),
           make_op("reduce_mean", {"X": [ce]}, {"Out": [m0]}, role=FORWARD, callstack=cs_m0),
           make_op("reduce_mean", {"X": [m0]}, {"Out": [m1]}, role=LOSS, callstack=cs_m1)]
    lg = m1 + "@GRAD"
    bwd = [make_op("reduce_mean_grad", {"Out@GRAD": [lg], "X": [m0]},
                   {"X@GRAD": [b.grad_of(m0)]}, role=BACKWARD, callstack=cs_m1),
           make_op("reduce_mean_grad", {"Out@GRAD": [b.grad_of(m0)], "X": [ce]},
                   {"X@GRAD": [b.grad_of(ce)]}, role=BACKWARD, callstack=cs_m0),
           make_op("softmax_with_cross_entropy_grad",
                   {"Label": [label], "Loss@GRAD": [b.grad_of(ce)], "Softmax": [sm]},
                   {"Logits@GRAD": [b.grad_of(logits)]}, role=BACKWARD, callstack=cs_ce)]
    # as Paddle has them: the grad of a scalar mean made by reduce_mean_grad has lod_level 0,
    # the logits grad made by softmax_with_cross_entropy_grad has none
    b.main_vars[m0 + "@GRAD"] = Var.tensor(m0 + "@GRAD", "FP32", (), lod_level=0,
                                           stop_gradient=False)
    lv = b.main_vars[logits + "@GRAD"]
    b.main_vars[logits + "@GRAD"] = Var.tensor(lv.name, "FP32", lv.shape, lod_level=None,
                                               stop_gradient=False)
    for bk in reversed(backs):
        b.bwd += bk(x_needs_grad=True)
    b.bwd.append(make_op("concat_grad", {"Out@GRAD": [b.grad_of(cat)], "X": list(pools)},
                         {"X@GRAD": [b.grad_of(p) for p in pools]}, role=BACKWARD,
                         callstack=cs_cat))
    for ids, w, e, p in reversed(emb_backs):
        b.bwd.append(make_op("sequence_pool_grad", {"Out@GRAD": [b.grad_of(p)], "X": [e]},
                             {"X@GRAD": [b.grad_of(e)]}, role=BACKWARD, callstack=cs_pool))
        b.bwd.append(make_op(table + "_grad",
                             {"Ids": [ids], "Out@GRAD": [b.grad_of(e)], "W": [w]},
                             {"W@GRAD": [w + "@GRAD"]}, role=BACKWARD,
                             role_var=(w, w + "@GRAD"), callstack=cs_emb, attrs=tattrs))
    info = {"slots": slots, "hidden_layers": layers, "width": hidden, "emb_dim": dim,
            "table": table, "is_distributed": bool(args.distributed)}
    return b.finish(fwd, lg, bwd) + (info,)


# ---------------------------------------------------------------------------------------------
# fast encoding

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(field_no: int, payload: bytes) -> bytes:
    """One length-delimited field (an element of a repeated message field)."""
    return _varint(field_no << 3 | 2) + _varint(len(payload)) + payload


def fast_encode(program: Program) -> bytes:
    """Exactly programio.to_bytes(program), several times faster on generated programs.

    The bytes are still made by protobuf (transpile/proto.py's ProgramDesc classes and
    encoders): each var, each op's slots and each distinct attr is serialized by protobuf once,
    and the serialized pieces are concatenated as the wire format allows (repeated fields are
    concatenations of their elements, written in field-number order). Generated programs share
    Attr instances (callstacks, constant attrs), so most attrs are serialized once per program.
    tests/test_bench_gen.py checks the result against programio.to_bytes.
    """
    from transpile.format import proto, protowrite
    prog_cls = proto.ProgramDesc
    block_cls = type(prog_cls().blocks.add())
    op_cls = type(block_cls().ops.add())
    fields = {m: {f.name: f.number for f in m.DESCRIPTOR.fields}
              for m in (prog_cls, block_cls, op_cls)}
    fb, fo = fields[block_cls], fields[op_cls]
    # the concatenation below relies on this field order (true of framework.proto)
    assert fields[prog_cls]["blocks"] < min(fields[prog_cls]["version"],
                                            fields[prog_cls]["op_version_map"])
    assert max(fb["idx"], fb["parent_idx"]) < fb["vars"] < fb["ops"] < fb["forward_block_idx"]
    assert max(fo["inputs"], fo["outputs"], fo["type"]) < fo["attrs"] < fo["is_target"]
    cache: dict = {}
    keep = []

    def attr_chunk(name, attr):
        key = (name, id(attr))
        c = cache.get(key)
        if c is None:
            m = op_cls()
            protowrite._encode_attr(m.attrs.add(), name, attr)
            c = cache[key] = m.SerializePartialToString()
            keep.append(attr)
        return c

    out = []
    for b in program.blocks:
        parts = [block_cls(idx=b.idx, parent_idx=b.parent_idx).SerializePartialToString()]
        for v in b.vars.values():
            m = block_cls()
            protowrite._encode_var(m.vars.add(), v)
            parts.append(m.SerializePartialToString())
        for op in b.ops:
            m = op_cls()
            if op.dup_attrs:
                parts.append(_ld(fb["ops"], protowrite.op_bytes(op)))
                continue
            m.type = op.type
            for slot, args in op.inputs.items():
                m.inputs.add(parameter=slot, arguments=args)
            for slot, args in op.outputs.items():
                m.outputs.add(parameter=slot, arguments=args)
            payload = [m.SerializePartialToString()]
            payload += [attr_chunk(k, a) for k, a in op.attrs.items()]
            if op.is_target is not None:
                payload.append(op_cls(is_target=op.is_target).SerializePartialToString())
            parts.append(_ld(fb["ops"], b"".join(payload)))
        if b.forward_block_idx is not None:
            parts.append(block_cls(forward_block_idx=b.forward_block_idx)
                         .SerializePartialToString())
        out.append(_ld(fields[prog_cls]["blocks"], b"".join(parts)))
    # version and op_version_map, as proto.encode writes them
    out.append(protowrite.encode(Program([], program.version, program.has_version,
                                    program.op_version_map)))
    return b"".join(out)


# ---------------------------------------------------------------------------------------------
# API and CLI

def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        prog="gen.py", description="Generate a large realistic Paddle training program "
        "(main.pb, startup.pb, cluster configs) without Paddle.")
    ap.add_argument("--kind", choices=["mlp", "ctr"], required=True)
    ap.add_argument("--ops", type=int, required=True, help="ops in the main program (about)")
    ap.add_argument("--optimizer", choices=["sgd", "momentum", "adam"], default="sgd")
    ap.add_argument("--lr-decay", action="store_true",
                    help="exponential LR decay on @LR_DECAY_COUNTER@ (op_role LRSched)")
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=None,
                    help="learning rate (default 0.01 sgd/momentum, 0.001 adam)")
    ap.add_argument("--width", type=int, default=None,
                    help="layer width (default 512 mlp, 400 ctr); hidden layers vary around it")
    ap.add_argument("--slots", type=int, default=None, help="ctr: sparse slots (default: "
                    "--slot-share of the ops)")
    ap.add_argument("--slot-share", type=float, default=0.5,
                    help="ctr: share of the ops spent on the sparse slots (default 0.5)")
    ap.add_argument("--emb-dim", type=int, default=16, help="ctr: embedding width")
    ap.add_argument("--vocab", type=int, default=None,
                    help="ctr: rows of every table (default: 1k..1M, chosen by the seed)")
    ap.add_argument("--table", choices=["v1", "v2"], default="v2",
                    help="ctr: lookup_table (v1) or lookup_table_v2 (default)")
    ap.add_argument("--distributed", action="store_true",
                    help="ctr: tables is_distributed=True")
    ap.add_argument("--callstack", choices=["full", "short", "none"], default="full",
                    help="op_callstack: full tracebacks like Paddle (default), the last 3 "
                         "frames, or empty lists")
    ap.add_argument("--no-configs", action="store_true", help="skip the cluster configs")
    args = ap.parse_args(argv)
    if args.ops < 1:
        ap.error("--ops must be >= 1")
    if args.lr is None:
        args.lr = 0.001 if args.optimizer == "adam" else 0.01
    if args.width is None:
        args.width = 512 if args.kind == "mlp" else 400
    return args


def generate(args) -> tuple:
    """(main Program, startup Program, info dict) for parsed args."""
    return build_mlp(args) if args.kind == "mlp" else build_ctr(args)


def generate_programs(kind: str, ops: int, optimizer: str = "sgd", lr_decay: bool = False,
                      seed: int = 0, **kw) -> tuple:
    """Python API: (main, startup, info). Keyword args as the CLI's long options."""
    argv = ["--kind", kind, "--ops", str(ops), "--optimizer", optimizer, "--out", "-",
            "--seed", str(seed)]
    if lr_decay:
        argv.append("--lr-decay")
    for k, v in kw.items():
        opt = "--" + k.replace("_", "-")
        if v is True:
            argv.append(opt)
        elif v not in (None, False):
            argv += [opt, str(v)]
    return generate(parse_args(argv))


PSERVER_COUNTS = (2, 16, 64)
STYLES = ("fleet", "classic")


def cluster_yaml(n: int, style: str, trainers: int = 2) -> str:
    eps = ", ".join('"127.0.0.1:%d"' % (6174 + i) for i in range(n))
    return "pservers: [%s]\ntrainers: %d\nmode: sync\nstyle: %s\n" % (eps, trainers, style)


def write(args, main: Program, startup: Program, info: dict, t0: float) -> dict:
    """Write the programs, the cluster configs and info.json (seconds since t0 included)."""
    os.makedirs(args.out, exist_ok=True)
    mb, sb = fast_encode(main), fast_encode(startup)
    programio.write_atomic(os.path.join(args.out, "main.pb"), mb)
    programio.write_atomic(os.path.join(args.out, "startup.pb"), sb)
    if not args.no_configs:
        for n in PSERVER_COUNTS:
            for style in STYLES:
                with open(os.path.join(args.out, "cluster_p%d_%s.yaml" % (n, style)), "w") as f:
                    f.write(cluster_yaml(n, style))
    types: dict = {}
    for op in main.global_block.ops:
        types[op.type] = types.get(op.type, 0) + 1
    info = dict({"kind": args.kind, "optimizer": args.optimizer, "lr_decay": args.lr_decay,
                 "seed": args.seed, "callstack": args.callstack, "ops_requested": args.ops,
                 "ops_main": len(main.global_block.ops),
                 "ops_startup": len(startup.global_block.ops),
                 "vars_main": len(main.global_block.vars), "params": len(main.parameters()),
                 "bytes_main": len(mb), "bytes_startup": len(sb),
                 "generate_seconds": round(time.perf_counter() - t0, 3),
                 "op_types_main": types},
                **info)
    with open(os.path.join(args.out, "info.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    return info


def main(argv=None) -> int:
    args = parse_args(argv)
    # millions of small, long-lived objects: the cyclic GC would rescan them again and again
    gc.disable()
    t = time.perf_counter()
    main_prog, startup, info = generate(args)
    info = write(args, main_prog, startup, info, t)
    seconds = time.perf_counter() - t
    print("%s: %s, %d ops (%d params), main %.1f MB, startup %.1f MB, %.1fs"
          % (args.out, args.kind, info["ops_main"], info["params"], info["bytes_main"] / 1e6,
             info["bytes_startup"] / 1e6, seconds), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
