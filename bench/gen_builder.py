"""bench/gen.py's builder: the main and startup programs of a model, assembled from fc layers,
an MLP tower, the optimizer ops with their accumulators and an optional LR decay, the way
Paddle's minimize() lays them out."""
from __future__ import annotations

import math
import random

from gen_callstacks import Callstacks
from gen_ops import (A, BACKWARD, B_TRUE, F_ONE, FORWARD, FP32, INT64, LOSS, LRSCHED, OPTIMIZE,
                     OP_VERSION_MAP, PADDLE_VERSION, S_EMPTY, f32, make_op, v_param, v_persist,
                     v_tmp)
from transpile.ir.program import Block, Op, Program, Var

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
