"""bench/gen.py's vocabulary: the ops and vars Paddle 2.6.2 writes, as the generator makes them
(op types, their attrs in Paddle's order with Paddle's values, op roles; vars with Paddle's
flags), and the program version and op_version_map Paddle stamps on every program.
Imported by gen.py, which puts the project and bench/ on sys.path."""
from __future__ import annotations

import struct

from transpile.ir.program import Attr, Op, Var

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
