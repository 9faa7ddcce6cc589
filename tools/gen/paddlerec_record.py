"""What paddlerec_build.py records about a built model (runs under Paddle's Python).

Recorder: which optimizer's minimize the model called, on which loss, and the arguments every
optimizer / LR scheduler / regularizer / gradient-clip object was constructed with (so a driver
can make the same optimizer again and hand it to fleet.distributed_optimizer).
strip_empty_slots: the corpus's step after minimize.  describe: the build.json facts.
"""
import inspect
import os
import sys
from collections import Counter

# modules whose classes' constructor arguments are recorded: (module path, base class path)
_RECORDED = (
    ("paddle.optimizer", "paddle.optimizer.Optimizer"),
    ("paddle.optimizer.lr", "paddle.optimizer.lr.LRScheduler"),
    ("paddle.regularizer", "paddle.regularizer.WeightDecayRegularizer"),
    ("paddle.nn", "paddle.nn.ClipGradByNorm"),
    ("paddle.nn", "paddle.nn.ClipGradByGlobalNorm"),
    ("paddle.nn", "paddle.nn.ClipGradByValue"),
)
_CTOR = "_paddlerec_inputs_ctor"


def _resolve(paddle, dotted):
    obj = paddle
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


class Recorder:
    """Wraps the public optimizer-side classes' __init__ (their constructor arguments) and
    watches Optimizer.minimize."""

    def __init__(self, paddle):
        self.paddle = paddle
        self.minimize = None        # (optimizer, loss, other minimize arguments)
        self.minimize_calls = 0
        seen = set()
        for mod_path, base_path in _RECORDED:
            mod, base = _resolve(paddle, mod_path), _resolve(paddle, base_path)
            for name in sorted(dir(mod)):
                cls = getattr(mod, name)
                if (isinstance(cls, type) and issubclass(cls, base) and cls not in seen
                        and "__init__" in cls.__dict__):
                    seen.add(cls)
                    self._wrap_init(cls, f"{mod_path}.{name}")

    @staticmethod
    def _wrap_init(cls, public):
        orig = cls.__init__
        sig = inspect.signature(orig)

        def __init__(self, *args, **kwargs):
            if _CTOR not in self.__dict__:
                bound = sig.bind(self, *args, **kwargs)
                given = dict(list(bound.arguments.items())[1:])
                self.__dict__[_CTOR] = (public, given)
            orig(self, *args, **kwargs)

        __init__.__wrapped__ = orig
        cls.__init__ = __init__

    def watch_minimize(self):
        """From now until unwatch(), note the first Optimizer.minimize called (optimizer, loss,
        the other arguments given).  A profile hook, not a wrapper: a wrapper's frame would show
        in the op_callstack of every op minimize creates."""
        func = inspect.unwrap(self.paddle.optimizer.Optimizer.minimize)
        code = func.__code__
        names = code.co_varnames[:code.co_argcount]
        defaults = dict(zip(names[::-1], (func.__defaults__ or ())[::-1]))

        def hook(frame, event, arg):
            if event == "call" and frame.f_code is code:
                self.minimize_calls += 1
                if self.minimize is None:
                    loc = frame.f_locals
                    given = {n: loc[n] for n in names[2:] if loc[n] is not defaults.get(n)}
                    self.minimize = (loc[names[0]], loc[names[1]], given)

        sys.setprofile(hook)

    @staticmethod
    def unwatch():
        sys.setprofile(None)


def encode(paddle, value, depth=0):
    """JSON form of a constructor argument."""
    if depth > 6:
        return {"repr": repr(value)}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, (list, tuple)):
        return [encode(paddle, v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(paddle, v, depth + 1) for k, v in sorted(value.items())}
    ctor = getattr(value, "__dict__", {}).get(_CTOR)
    if ctor is not None:
        return {"class": ctor[0],
                "args": {k: encode(paddle, v, depth + 1) for k, v in ctor[1].items()}}
    if isinstance(value, paddle.static.Variable):
        return {"var": value.name}
    if callable(value):
        return {"callable": getattr(value, "__qualname__", repr(value))}
    return {"repr": repr(value)}


def optimizer_facts(paddle, rec):
    """The model's optimizer: public class, constructor arguments, minimize arguments."""
    opt, loss, given = rec.minimize
    ctor = opt.__dict__.get(_CTOR)
    cls = type(opt)
    facts = {
        "class": ctor[0] if ctor else f"{cls.__module__}.{cls.__qualname__}",
        "args": encode(paddle, ctor[1]) if ctor else None,
        "minimize_args": {k: encode(paddle, v) for k, v in given.items()},
        "minimize_calls": rec.minimize_calls,
        "lr_scheduler": None,
    }
    lr = getattr(opt, "_learning_rate", None)
    if isinstance(lr, paddle.optimizer.lr.LRScheduler):
        facts["lr_scheduler"] = encode(paddle, lr)
    return facts, loss.name


def strip_empty_slots(program):
    """Drop every input/output slot with no arguments from every op of every block (Paddle 2.x
    ops carry empty dispensable slots such as MasterParam / SkipUpdate that older consumers do
    not know).  Returns the slots removed that the op proto marks NON-dispensable, as
    [block, op index, op type, "input"|"output", slot]."""
    from paddle.base.framework import OpProtoHolder
    protos = OpProtoHolder.instance().op_proto_map
    kept_required = []
    for bi, block in enumerate(program.blocks):
        for oi, op in enumerate(block.ops):
            proto = protos.get(op.type)
            need_in = {v.name for v in proto.inputs if not v.dispensable} if proto else set()
            need_out = {v.name for v in proto.outputs if not v.dispensable} if proto else set()
            for slot in list(op.desc.input_names()):
                if not op.desc.input(slot):
                    op.desc.remove_input(slot)
                    if slot in need_in:
                        kept_required.append([bi, oi, op.type, "input", slot])
            for slot in list(op.desc.output_names()):
                if not op.desc.output(slot):
                    op.desc.remove_output(slot)
                    if slot in need_out:
                        kept_required.append([bi, oi, op.type, "output", slot])
    return kept_required


def _op_counts(program):
    counts = Counter()
    for block in program.blocks:
        for op in block.ops:
            counts[op.type] += 1
    return dict(sorted(counts.items()))


def _feeds(feeds):
    items = feeds.values() if isinstance(feeds, dict) else feeds
    out = []
    for v in items:
        out.append({"name": v.name, "shape": list(v.shape),
                    "dtype": str(v.dtype).replace("paddle.", ""),
                    "lod_level": int(getattr(v, "lod_level", 0) or 0)})
    return out


def _lookup_tables(program):
    """Every lookup_table(_v2) op's table: {W: shape, ops, is_sparse, is_distributed,
    padding_idx}."""
    tables = {}
    for block in program.blocks:
        for op in block.ops:
            if op.type not in ("lookup_table", "lookup_table_v2"):
                continue
            w = op.input("W")[0]
            t = tables.setdefault(w, {"ops": 0, "is_sparse": False, "is_distributed": False,
                                      "padding_idx": op.attr("padding_idx")})
            t["ops"] += 1
            t["is_sparse"] = t["is_sparse"] or bool(op.attr("is_sparse"))
            t["is_distributed"] = t["is_distributed"] or bool(op.attr("is_distributed"))
    gb = program.global_block()
    for w, t in tables.items():
        t["shape"] = list(gb.var(w).shape)
    return dict(sorted(tables.items()))


def describe(paddle, main, startup, feeds, rec, stripped):
    """The build.json facts of a built model."""
    opt, loss = optimizer_facts(paddle, rec)
    params = [{"name": p.name, "shape": list(p.shape), "dtype": str(p.dtype).replace(
        "paddle.", ""), "trainable": bool(p.trainable)}
        for p in main.global_block().all_parameters()]
    n_values = 0
    for p in params:
        size = 1
        for d in p["shape"]:
            size *= int(d)
        n_values += size
    return {
        "loss": loss,
        "optimizer": opt,
        "feeds": _feeds(feeds),
        "params": params,
        "param_values": n_values,
        "lookup_tables": _lookup_tables(main),
        "main": {"blocks": len(main.blocks), "ops": sum(len(b.ops) for b in main.blocks),
                 "op_counts": _op_counts(main)},
        "startup": {"blocks": len(startup.blocks),
                    "ops": sum(len(b.ops) for b in startup.blocks),
                    "op_counts": _op_counts(startup)},
        "stripped_required_slots": stripped,
    }


def files_under(tree_rel):
    """Tree-relative paths of the modules loaded from the PaddleRec tree, sorted."""
    out = set()
    for mod in list(sys.modules.values()):
        fn = getattr(mod, "__file__", None)
        if fn and not os.path.isabs(fn) and fn.startswith(tree_rel + os.sep):
            out.add(os.path.relpath(fn, tree_rel))
        elif fn and os.path.isabs(fn):
            rel = os.path.relpath(fn, os.path.abspath(tree_rel))
            if not rel.startswith(".."):
                out.add(rel)
    return sorted(out)
