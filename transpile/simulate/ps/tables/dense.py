"""`MemoryDenseTable` of Paddle 2.6.2 and its rules (`ps/table/memory_dense_table.cc`,
`ps/table/depends/dense.h`, `depends/initializers.h`): one pserver's slice of a dense table.

The values are the descriptor's `common.params` (Param first among them, the rule's state
after), float32, each `dims[i]` long, filled from `initializers[i]`. A push runs the rule in
`TASK_POOL_SIZE` (10) buckets of the slice, calling the rule once per bucket as Paddle's
threads do: DAdam multiplies its beta powers in every call, so 10 times per push (Paddle's
threads race for them; here the buckets run in order 0..9). Sync tables add pushes to a
reservoir that `pour()` (the barrier) averages by the number of pushes and applies, even when
it holds none.
"""
from __future__ import annotations

import numpy as np

from ....core.errors import UserError
from ...model import keyed
from . import PserverRefuses, TableError, TableOptions
from .denserows import ROW_RULES, FlatRows, RowValues, constant_of, fixed_point
from .rules import F32

TASK_POOL_SIZE = 10


def bucket(size: int, buckets: int):
    """Paddle's bucket(): boundaries of `buckets` parts of `size`, the first size % buckets
    one longer (`common/utils.h`)."""
    base, extra = divmod(size, buckets)
    bounds = [0]
    for i in range(buckets):
        bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    return bounds


def init_values(spec: str, dim: int, key: int, where: str):
    """The values an initializer string gives (`fill_constant&v`, `uniform_random&seed&min&max`,
    `gaussian_random&seed&mean&std`, `truncated_gaussian_random&seed&mean&std`)."""
    kind, *args = spec.split("&")
    try:
        nums = [float(a) for a in args]
    except ValueError:
        nums = None
    need = {"fill_constant": 1, "uniform_random": 3, "gaussian_random": 3,
            "truncated_gaussian_random": 3}.get(kind)
    if need is None or nums is None or len(nums) < need:
        raise UserError("%s: initializer %r is not one Paddle's dense table reads" % (where, spec))
    if kind == "fill_constant":
        if F32(nums[0]) == 0 and not np.signbit(nums[0]):
            return np.zeros(dim, dtype=F32)     # mapped only as it is written (kept by rows)
        return np.full(dim, nums[0], dtype=F32)
    rows = np.arange(dim)
    if kind == "uniform_random":
        lo, hi = F32(nums[1]), F32(nums[2])
        return (lo + (hi - lo) * keyed.uniform(key, rows, 1)[:, 0]).astype(F32)
    z = keyed.normal(key, rows, 1, truncated=(kind == "truncated_gaussian_random"))[:, 0]
    return (nums[1] + nums[2] * z).astype(F32)


class DenseRule:
    """A rule bound to the table's values (name -> float32 array)."""

    def __init__(self, values: dict):
        self.v = values

    def update(self, grad, begin: int, end: int):
        raise NotImplementedError


class DSGD(DenseRule):
    """sgd: Param -= (global_lr * LearningRate) * g."""

    def update(self, grad, begin, end):
        lr = F32(1.0) * self.v["LearningRate"][0]
        p = self.v["Param"]
        p[begin:end] = p[begin:end] - grad[begin:end] * lr


class DAdam(DenseRule):
    """adam: betas 0.9 / 0.999 and eps 1e-8 fixed; the powers advance before they are used."""
    beta1, beta2, epsilon = F32(0.9), F32(0.999), F32(1.0e-8)

    def update(self, grad, begin, end):
        v, one = self.v, F32(1)
        g = grad[begin:end]
        m1, m2 = v["Moment1"], v["Moment2"]
        m1[begin:end] = self.beta1 * m1[begin:end] + g * (one - self.beta1)
        m2[begin:end] = self.beta2 * m2[begin:end] + (g * g) * (one - self.beta2)
        v["Beta1Pow"][0] = v["Beta1Pow"][0] * self.beta1
        v["Beta2Pow"][0] = v["Beta2Pow"][0] * self.beta2
        b1p, b2p = v["Beta1Pow"][0], v["Beta2Pow"][0]
        lr = F32(1.0) * v["LearningRate"][0]
        lr = F32(lr * (np.sqrt(one - b2p) / (one - b1p)))
        eps = F32(self.epsilon * np.sqrt(one - b2p))
        tmp = (np.sqrt(m2[begin:end]) + eps)
        tmp = (m1[begin:end] / tmp) * lr
        v["Param"][begin:end] = v["Param"][begin:end] - tmp


class DAdamD2Sum(DenseRule):
    """adam_d2sum: the decayed sums of 1 and g^2 scale a momentum."""

    def update(self, grad, begin, end):
        v = self.v
        g = grad[begin:end]
        ada_decay, eps = v["AdaDecayRate"][0], v["AdaEpsilon"][0]
        d2sum = v["D2Sum"][begin:end] * ada_decay + F32(1)
        g2sum = v["G2Sum"][begin:end] * ada_decay + g * g
        scale = d2sum * eps
        scale = np.sqrt((d2sum + scale) / (g2sum + scale))
        mom = (v["Moment"][begin:end] + g) * v["MomentDecayRate"][0] - g
        v["D2Sum"][begin:end], v["G2Sum"][begin:end], v["Moment"][begin:end] = d2sum, g2sum, mom
        v["Param"][begin:end] = v["Param"][begin:end] + v["LearningRate"][0] * (mom * scale)


class DSummary(DenseRule):
    """summary (data_norm's statistics): Param = Param * 0.999999 + g; SummaryDecayRate unused."""
    decay = F32(0.999999)

    def update(self, grad, begin, end):
        p = self.v["Param"]
        p[begin:end] = p[begin:end] * self.decay + grad[begin:end]


class DSUM(DenseRule):
    """sum (geo): Param += g."""

    def update(self, grad, begin, end):
        p = self.v["Param"]
        p[begin:end] = p[begin:end] + grad[begin:end]


RULES = {"sgd": (DSGD, ("LearningRate",)),
         "adam": (DAdam, ("Moment1", "Moment2", "Beta1Pow", "Beta2Pow", "LearningRate")),
         "adam_d2sum": (DAdamD2Sum, ("D2Sum", "G2Sum", "Moment", "MomentDecayRate",
                                     "AdaDecayRate", "AdaEpsilon", "LearningRate")),
         "summary": (DSummary, ()), "sum": (DSUM, ())}


class MemoryDenseTable:
    """One pserver's slice of a dense table."""
    table_class = "MemoryDenseTable"

    def __init__(self, param, options: TableOptions = TableOptions(), where: str = "table",
                 shard: int = 0):
        common = param.common
        self.table_id = int(param.table_id)
        self.sync = bool(common.sync)
        self.notes: list = []
        self.empty_inits: list = []     # the slots Paddle's CreateInitializer cannot read
        self.values = self._values(common, options, where, shard)
        rule = RULES.get(common.name)
        if rule is None:
            raise UserError("%s.common.name: %r is not a dense rule of Paddle 2.6.2 (one of %s)"
                            % (where, common.name, ", ".join(sorted(RULES))))
        missing = [n for n in rule[1] if n not in self.values]
        if missing:
            raise UserError("%s.common.params: rule %s needs %s" % (where, common.name,
                                                                    ", ".join(missing)))
        self.rule_name = common.name
        self.rule = rule[0](self.values)
        self.param_dim = len(self.values["Param"])
        self.reservoir = np.zeros(self.param_dim, dtype=F32)
        self.count = 0
        # the order Paddle's threads run the buckets in: racing there, 0..9 here
        self.bucket_order = tuple(range(TASK_POOL_SIZE))
        self.rows = None        # RowValues: started from a FlatRows (denserows.py)

    def _values(self, common, options, where, shard):
        names, dims, inits = list(common.params), list(common.dims), list(common.initializers)
        if not (len(names) == len(dims) == len(inits)) or "Param" not in names:
            raise UserError("%s.common: params, dims and initializers must pair up and name "
                            "Param (%d params, %d dims, %d initializers)"
                            % (where, len(names), len(dims), len(inits)))
        out = {}
        self.specs = dict(zip(names, inits))
        for name, dim, spec in zip(names, dims, inits):
            if not spec:
                out[name] = self._empty_initializer(name, int(dim), options, where)
                continue
            key = keyed.key_of(options.seed, "psdense", self.table_id, shard, name)
            out[name] = init_values(spec, int(dim), key, "%s.common.initializers" % where)
        return out

    def _empty_initializer(self, name, dim, options, where):
        """An empty initializer string: Paddle's CreateInitializer throws ("can not be
        supported"); lenient: zeros and a note."""
        what = ("%s: %s has an empty initializer; Paddle's MemoryDenseTable::CreateInitializer "
                "throws on it: the pserver does not start" % (where, name))
        if not options.lenient_initializers:
            raise PserverRefuses(what)
        self.notes.append(what + " (started at 0 here)")
        self.empty_inits.append(name)
        return np.zeros(dim, dtype=F32)

    def pull(self):
        """PullDense: a copy of Param (kept by rows: a FlatRows of views of its arrays, which
        the client copies as it joins the pservers' pulls, ps/denseflat.py)."""
        if self.rows is not None:
            return self.rows.pulled()
        return self.values["Param"].copy()

    def _check(self, values, what):
        if isinstance(values, FlatRows):
            if len(values) < self.param_dim:
                raise TableError("table %d: %s of %d values, the slice holds %d"
                                 % (self.table_id, what, len(values), self.param_dim))
            return values.cut(0, self.param_dim)
        values = np.asarray(values, dtype=F32).reshape(-1)
        if len(values) < self.param_dim:
            raise TableError("table %d: %s of %d values, the slice holds %d"
                             % (self.table_id, what, len(values), self.param_dim))
        return values[:self.param_dim]

    # --- kept by rows (denserows.py) ------------------------------------------------------
    def _vector(self) -> list:
        return [n for n, v in self.values.items() if len(v) == self.param_dim]

    def row_ready(self) -> bool:
        """Whether a start from a FlatRows keeps the table by rows: a rule a zero gradient
        can leave alone, every slot one value or as long as Param, every long one but Param a
        constant."""
        return self.rule_name in ROW_RULES and self.param_dim > 1 and all(
            len(v) in (1, self.param_dim) for v in self.values.values()) and all(
            constant_of(self.specs.get(n, "")) is not None for n in self._vector()
            if n != "Param")

    def _by_rows(self, start: FlatRows):
        vector = self._vector()
        consts = {n: constant_of(self.specs[n]) for n in vector if n != "Param"}
        self.rows = RowValues(self.param_dim, vector, consts, start, self.values)
        for n in vector:
            del self.values[n]
        self.reservoir = np.zeros(0, dtype=F32)

    def _whole(self):
        """Kept by rows no longer: every slot as one array again."""
        rows, self.rows = self.rows, None
        for n in rows.vector:
            self.values[n] = rows.whole(n)
        self.reservoir = rows.whole_reservoir()

    def values_of(self, name) -> np.ndarray:
        """Slot `name` as one array (whole or kept by rows)."""
        if self.rows is not None and name in self.rows.vector:
            return self.rows.whole(name)
        return self.values[name]

    # --- pushes ---------------------------------------------------------------------------
    def push_param(self, values):
        """PushDenseParam: Param becomes the first param_dim values (trainer 0's start); from
        a FlatRows the table is kept by rows where it can be."""
        values = self._check(values, "dense param")
        if isinstance(values, FlatRows):
            if self.rows is not None:
                self._whole()
            if self.row_ready():
                return self._by_rows(values)
            values = values.take(0, self.param_dim)
        if self.rows is not None:
            self._whole()
        self.values["Param"][:] = values

    def push(self, grad):
        """PushDense: sync tables keep the sum and the count for pour(); others apply it."""
        grad = self._check(grad, "dense push")
        if isinstance(grad, FlatRows):
            grad = self.rows.grad(grad) if self.rows is not None \
                else grad.take(0, self.param_dim)
        elif self.rows is not None:
            self._whole()
        if self.sync:
            if self.rows is not None:
                self.rows.reservoir = self.rows.reservoir + grad
            else:
                self.reservoir = self.reservoir + grad
            self.count += 1
        else:
            self.apply(grad)

    def apply(self, grad):
        """_PushDense: the rule once per bucket, the buckets in `bucket_order` (kept by rows:
        on the kept values, where a zero gradient leaves the others alone)."""
        grad = np.asarray(grad, dtype=F32)
        bounds = bucket(self.param_dim, TASK_POOL_SIZE)
        rule = self.rule
        if self.rows is not None:
            consts = self.rows.consts
            if fixed_point(type(self.rule), self.values, self.rows.vector, consts,
                           TASK_POOL_SIZE, self.rows.signed_zero):
                bounds = self.rows.bounds(bounds)
                compact = dict(self.values)
                compact.update(self.rows.cv)
                rule = type(self.rule)(compact)
            else:
                whole = np.zeros(self.param_dim, dtype=F32)
                self.rows.pos.scatter(whole, grad)
                grad = whole
                self._whole()
        with np.errstate(divide="ignore", invalid="ignore"):
            for k in self.bucket_order:
                rule.update(grad, bounds[k], bounds[k + 1])

    def pour(self):
        """Pour (the barrier's): the reservoir's mean over its pushes through the rule, then an
        empty reservoir. With no push it applies zeros (Paddle's avg() returns early, the
        update still runs)."""
        rows = self.rows
        grads = self.reservoir if rows is None else rows.reservoir
        if self.count:
            grads = grads * (F32(1) / F32(self.count))
        self.apply(grads)
        if self.rows is not None:
            self.rows.reservoir = None      # zeros, made as it is written
        else:
            self.reservoir = np.zeros(self.param_dim, dtype=F32)
        self.count = 0
