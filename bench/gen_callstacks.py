"""bench/gen.py's op_callstack attrs: Python tracebacks like those Paddle records when an op is
appended, by call site (ops appended from the same line share one, as in Paddle)."""
from __future__ import annotations

import random

from gen_ops import A, Attr

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
