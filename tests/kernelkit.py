"""Helpers for the kernel tests (tests/test_kernels_*.py): run one op through the simulator's
executor, and check a grad op against central differences of its forward op.

No Paddle here: expected values are computed by hand or by finite differences."""
from __future__ import annotations

import numpy as np

from transpile.ir.program import Attr, Block, Op, Program, Var
from transpile.simulate.model.executor import Executor
from transpile.simulate.model.values import SelectedRows, dense


def _dtype_name(a) -> str:
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return "BOOL"
    if a.dtype.kind in "iu":
        return "INT32" if a.dtype == np.int32 else "INT64"
    return "FP64"


def _attr(v):
    if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
        return Attr("SCALARS", v)
    if isinstance(v, float) and (v == float("inf") or v == float("-inf")):
        return Attr("FLOAT", v)
    return Attr.infer(v)


def build(op_type, inputs, outputs, attrs=None):
    """A one-block program with `op_type` reading `inputs` (slot -> array or list of arrays)
    and writing `outputs` (slot -> number of vars). Returns (program, input names, output names),
    names as slot -> list."""
    b = Block(0, -1)
    in_names, out_names = {}, {}
    for slot, v in inputs.items():
        vals = v if isinstance(v, list) else [v]
        names = []
        for i, a in enumerate(vals):
            n = "%s.in%d" % (slot, i)
            b.add_var(Var.tensor(n, None if isinstance(a, SelectedRows) else _dtype_name(a), []))
            names.append(n)
        in_names[slot] = names
    for slot, k in outputs.items():
        names = ["%s.out%d" % (slot, i) for i in range(k)]
        for n in names:
            b.add_var(Var.tensor(n, None, []))
        out_names[slot] = names
    op = Op(op_type, dict(in_names), dict(out_names),
            {k: _attr(v) for k, v in (attrs or {}).items()})
    b.ops = [op]
    return Program([b]), in_names, out_names


def run_op(op_type, inputs, outputs, attrs=None, lods=None, executor=None, full=False):
    """Run one op; returns slot -> value (a list for a slot of several vars). `lods`:
    slot -> LoD (list of offset lists) of its first var. full=True also returns the scope."""
    prog, in_names, out_names = build(op_type, inputs, outputs, attrs)
    ex = executor or Executor("kernel-test", prog)
    lods = lods or {}
    for slot, v in inputs.items():
        vals = v if isinstance(v, list) else [v]
        for i, (n, a) in enumerate(zip(in_names[slot], vals)):
            if not isinstance(a, SelectedRows):
                a = np.asarray(a)
            lod = lods.get(slot) if i == 0 else lods.get((slot, i))
            ex.scope.put(n, a, lod)
    ex.run_block(0)
    res = {}
    for slot, names in out_names.items():
        vals = [ex.scope.get(n) for n in names]
        res[slot] = vals if outputs[slot] > 1 else vals[0]
    if full:
        return res, ex.scope, out_names
    return res


def _floats(v):
    return isinstance(v, np.ndarray) and v.dtype.kind == "f"


def check_grad(op_type, inputs, attrs=None, *, wrt, outs=("Out",), extra_outs=(),
               grad_type=None, grad_inputs=None, lods=None, eps=1e-6, rtol=1e-5, atol=1e-7,
               out_counts=None, seed=0):
    """Check `<op_type>_grad` against central differences of `op_type`.

    The loss is sum(W_o * out_o) over the outputs `outs` (random W_o). The grad op gets the
    forward inputs, the forward outputs (`outs` and `extra_outs`, e.g. XShape, Mask, SavedMean)
    and `<o>@GRAD` = W_o; `grad_inputs`, when given, lists the forward slots it gets (what
    Paddle's grad op maker passes). Returns the analytic grads, slot -> array (or list)."""
    rng = np.random.default_rng(seed)
    counts = dict(out_counts or {})
    fwd_outs = {s: counts.get(s, 1) for s in list(outs) + list(extra_outs)}

    def forward(inp):
        return run_op(op_type, inp, fwd_outs, attrs, lods)

    base = forward(inputs)
    weights = {}
    for o in outs:
        v = base[o]
        if isinstance(v, list):
            weights[o] = [rng.normal(size=np.shape(x)) for x in v]
        else:
            weights[o] = rng.normal(size=np.shape(dense(v)))

    def loss(inp):
        r = forward(inp)
        total = 0.0
        for o in outs:
            vs = r[o] if isinstance(r[o], list) else [r[o]]
            ws = weights[o] if isinstance(weights[o], list) else [weights[o]]
            total += sum(float((np.asarray(dense(v)) * w).sum()) for v, w in zip(vs, ws))
        return total

    ginputs = {}
    for slot, v in inputs.items():
        if grad_inputs is None or slot in grad_inputs:
            ginputs[slot] = v
    for slot in list(outs) + list(extra_outs):
        if grad_inputs is None or slot in grad_inputs:
            ginputs[slot] = base[slot]
    for o in outs:
        ginputs[o + "@GRAD"] = weights[o]
    gouts = {s + "@GRAD": (len(inputs[s]) if isinstance(inputs[s], list) else 1) for s in wrt}
    analytic = run_op(grad_type or op_type + "_grad", ginputs, gouts, attrs, lods)
    result = {}
    for s in wrt:
        vals = inputs[s] if isinstance(inputs[s], list) else [inputs[s]]
        got = analytic[s + "@GRAD"]
        got = got if isinstance(got, list) else [got]
        for i, a in enumerate(vals):
            a = np.asarray(a, dtype=np.float64)
            num = np.zeros_like(a)
            for idx in np.ndindex(*a.shape):
                vals_p = [np.array(x, dtype=np.float64, copy=True) for x in vals]
                vals_m = [np.array(x, dtype=np.float64, copy=True) for x in vals]
                vals_p[i][idx] += eps
                vals_m[i][idx] -= eps
                ip, im = dict(inputs), dict(inputs)
                ip[s] = vals_p if isinstance(inputs[s], list) else vals_p[0]
                im[s] = vals_m if isinstance(inputs[s], list) else vals_m[0]
                num[idx] = (loss(ip) - loss(im)) / (2 * eps)
            g = np.asarray(dense(got[i]))
            assert g.shape == a.shape, "%s@GRAD[%d]: shape %s, input %s" % (s, i, g.shape,
                                                                              a.shape)
            assert np.allclose(g, num, rtol=rtol, atol=atol), \
                "%s: %s@GRAD[%d] differs from central differences by %g\n%s\n%s" % (
                    op_type, s, i, float(np.max(np.abs(g - num))), g, num)
        result[s] = got if isinstance(inputs[s], list) else got[0]
    return result
