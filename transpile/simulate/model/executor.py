"""Run the ops of a block on a scope, one op at a time, checking every output against its
declared shape."""
from __future__ import annotations

import sys
import zlib
from typing import Callable, Optional

import numpy as np

from ...ir.dataflow import EMPTY_ROWS_OK
from ...ir.program import Program
from .kernels import KERNELS
from .kernels.registry import SHARES_LOD
from .values import (LazyTable, NoKernelError, SelectedRows, SimError, SparseTable, Unallocated,
                     shape_of)

# Ops a process hands to the message layer (transpile/simulate/runs/cluster.py).
RPC_OPS = frozenset({
    "send", "recv", "send_barrier", "fetch_barrier", "listen_and_serv", "prefetch",
    "distributed_lookup_table", "distributed_push_sparse",
    "lookup_sparse_table_init", "lookup_sparse_table_read", "lookup_sparse_table_write",
    "lookup_sparse_table_fuse_adam", "lookup_sparse_table_fuse_sgd",
    "lookup_sparse_table_grad_split", "fake_init", "checkpoint_notify", "recv_save",
    "send_and_recv"})
# Initializers: writing a SELECTED_ROWS var, they make a pserver's auto-grown table.
INIT_OPS = frozenset({"uniform_random", "gaussian_random", "truncated_gaussian_random",
                      "fill_constant"})
# Ops with no effect on training values.
NOOP_OPS = frozenset({"feed", "fetch", "save", "print", "barrier"})
# Tables of at least this many rows are kept lazily (values.LazyTable): only the rows a run
# touches exist. Ops that read them row by row get them as they are; any other op gets the
# whole table materialized (Executor.densify).
LAZY_ROWS = 100_000
LAZY_AWARE_OPS = frozenset({
    "lookup_table", "lookup_table_v2", "lookup_table_grad", "lookup_table_v2_grad",
    "sgd", "adam", "momentum", "adagrad", "decayed_adagrad", "rmsprop", "adamax",
    "assign", "share_data", "memcpy", "sum", "concat"})


class Scope:
    """name -> value (numpy array or SelectedRows), with the LoD of the tensors that have one."""

    def __init__(self):
        self.vars: dict = {}
        self.lods: dict = {}

    def get(self, name):
        return self.vars.get(name)

    def __contains__(self, name):
        return name in self.vars

    def put(self, name, value, lod=None):
        self.vars[name] = value
        if lod:
            self.lods[name] = lod
        else:
            self.lods.pop(name, None)

    def drop(self, name):
        self.vars.pop(name, None)
        self.lods.pop(name, None)

    def keep_only(self, names) -> None:
        """Drop every var but `names` (a finished run keeps what is compared)."""
        for name in [n for n in self.vars if n not in names]:
            self.drop(name)


def _compatible(declared, actual, temporary=False) -> bool:
    """Whether a value of shape `actual` may sit in a var declared `declared`. A temporary
    (not persistable) takes any size where it is declared 1: Paddle infers a broadcast of a
    batch dim (-1) against 1 as 1 (tisas: matmul_v2 of [-1, 50, 50] and [1, 50, 50] declared
    [1, 50, 50]) and never holds a run to it."""
    if declared is None:
        return True
    declared, actual = tuple(declared), tuple(actual)
    if declared == ():
        return True     # a 0-d var, or one whose shape Paddle never inferred (MaxIndex ...)
    if declared == (1,) and actual == ():
        return True
    if len(declared) != len(actual):
        # a fully known shape holding as many values (a metric's [1, 1] stat var that a
        # reduce_sum writes as [1]: Paddle does not hold a run to the declared shape)
        return all(d > 0 for d in declared) and int(np.prod(declared)) == int(np.prod(actual))
    return all(d < 0 or d == a or (temporary and d == 1) for d, a in zip(declared, actual))


def default_lazy_policy(name, shape) -> bool:
    return len(shape) >= 2 and shape[0] >= LAZY_ROWS


class OpCtx:
    """What a kernel sees: its op's inputs, attrs, and a way to write outputs."""

    def __init__(self, ex: "Executor", block_idx: int, op):
        self.ex = ex
        self.block_idx = block_idx
        self.op = op
        self.fdt = ex.float_dtype

    def attr(self, name, default=None):
        return self.op.attr(name, default)

    def has(self, slot) -> bool:
        return bool(self.op.input(slot))

    def wants(self, slot) -> bool:
        return any(n and n != "@EMPTY@" for n in self.op.output(slot))

    def owned(self, slot, out_slot, held: int = 1) -> bool:
        """Whether the op may write its output `out_slot` into input `slot`'s array in place
        (copy-on-write: an update of a big table makes no new array): the output is the same
        var, and its array is held by this scope alone (no snapshot of the initial values, no
        other role's scope, no view, no second name holds it: its reference count is the
        scope's, the caller's `held` ones and this call's), writeable and owning its data."""
        names, outs = self.op.input(slot), self.op.output(out_slot)
        if len(names) != 1 or outs != names:
            return False
        v = self.ex.scope.vars.get(names[0])
        if not isinstance(v, np.ndarray) or v.base is not None or not v.flags.writeable \
                or not v.flags.owndata:
            return False
        # the scope's dict, `v` here, getrefcount's argument, and the caller's
        return sys.getrefcount(v) <= 3 + held

    def set_each(self, slot: str, values: list, lod_of: str = "") -> None:
        """Set output `slot`'s i-th var to values[i], for each var the op names (with the LoD
        of input `lod_of`'s i-th var, when given)."""
        for i, name in enumerate(self.out_names(slot)):
            if name and name != "@EMPTY@":
                self.set(slot, values[i], idx=i, lod=self.lod(lod_of, i) if lod_of else None)

    def set_wanted(self, values: dict) -> None:
        """Set each {slot: value} whose output the op names (a grad op often asks only some
        of its grads)."""
        for slot, value in values.items():
            if self.wants(slot):
                self.set(slot, value)

    def out_names(self, slot):
        return self.op.output(slot)

    def x(self, slot, i=0):
        names = self.op.input(slot)
        if len(names) <= i:
            raise SimError("input slot %s is empty" % slot)
        return self._value(names[i])

    def xs(self, slot):
        return [self._value(n) for n in self.op.input(slot)]

    def raw(self, slot, i=0):
        """An input as the scope holds it (a LazyTable stays lazy)."""
        names = self.op.input(slot)
        if len(names) <= i:
            raise SimError("input slot %s is empty" % slot)
        return self.ex.read(names[i], self.op.type)

    def _value(self, name):
        v = self.ex.read(name, self.op.type)
        if isinstance(v, LazyTable) and self.op.type not in LAZY_AWARE_OPS:
            return self.ex.densify(name, v, self.op.type)
        return v

    def lazy(self, shape) -> bool:
        """Whether an initializer's output of `shape` is kept as a LazyTable."""
        names = self.op.output_names()
        return bool(names) and self.ex.lazy_policy(names[0], tuple(shape))

    def shape(self, slot, i=0):
        """The shape of an input, which may be one fake_init left without memory (Paddle's
        grad kernels read only the dims of W)."""
        names = self.op.input(slot)
        if len(names) <= i:
            raise SimError("input slot %s is empty" % slot)
        v = self.ex.scope.get(names[i])
        if v is None:
            raise SimError("reads %s, which holds no value" % names[i])
        return tuple(shape_of(v))

    def lod(self, slot, i=0):
        names = self.op.input(slot)
        return self.ex.scope.lods.get(names[i]) if len(names) > i else None

    def set(self, slot, value, idx=0, lod=None, random=False, rows=False, unchecked=False):
        """Write output `slot`[idx]. `rows`: the value holds some rows of what the var is
        declared as (a SelectedRows' value block in a var declared with the table's height);
        `unchecked`: a value Paddle's program declares with another shape it never holds."""
        names = self.op.output(slot)
        if len(names) <= idx or not names[idx] or names[idx] == "@EMPTY@":
            return
        name = names[idx]
        if not isinstance(value, (SelectedRows, Unallocated, SparseTable)):
            if not isinstance(value, LazyTable):
                value = np.asarray(value)
            var = self.ex.program.find_var(name, self.block_idx)
            if var is not None and var.kind == "SELECTED_ROWS" and self.op.type in INIT_OPS \
                    and self.ex.table_origin is not None:
                # (a pserver's block of a table the original keeps lazily: its pool whole)
                pool = value.to_dense() if isinstance(value, LazyTable) else value
                origin = self.ex.table_origin(name, pool)
                self.ex.write(self.block_idx, name, SparseTable(pool, origin), lod)
                return
        if random and self.ex.random_hook is not None:
            value = self.ex.random_hook(self.ex, name, value, self.op)
        if unchecked:
            self.ex.scope.put(name, value, lod)
            return
        self.ex.write(self.block_idx, name, value, lod, rows=rows)

    def rng(self):
        out = (self.op.output_names() or ["?"])[0]
        seed = self.attr("seed", 0) or 0
        return np.random.default_rng([self.ex.seed, int(seed) & 0xFFFFFFFF,
                                      zlib.crc32(out.encode())])

    def keyed_uniform(self, shape, seed=0, fixed=False, salt=""):
        """Uniforms in [0, 1) for this op's output of `shape`, the same in every process that
        runs the op on the same samples (keyed.py): keyed by the executor's and the op's seed,
        the output's name and (unless `fixed`) the step and how often the op ran in it; where
        dim 0 is a whole number of rows per sample of this process's batch, row i is keyed by
        its global row, so a trainer's shard draws the original's rows."""
        from . import keyed
        shape = tuple(int(d) for d in shape)
        out = (self.op.output_names() or ["?"])[0]
        runs = self.ex.draw_counts
        n = runs.get((self.block_idx, out, salt), 0)
        runs[(self.block_idx, out, salt)] = n + 1
        key = keyed.key_of(self.ex.seed, int(seed), out, salt,
                           0 if fixed else self.ex.step, 0 if fixed else n)
        if not shape:
            return keyed.uniform(key, [0], 1).reshape(())
        rows = shape[0]
        width = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        samples, offset = self.ex.samples, self.ex.sample_offset
        if samples and rows and rows % samples == 0:
            per = rows // samples
            first = offset * per
        else:
            first = 0
        return keyed.uniform(key, np.arange(first, first + rows), width).reshape(shape)


class Executor:
    """One process's program and scope (the original program, a trainer or a pserver)."""

    def __init__(self, label: str, program: Program, scope: Optional[Scope] = None, *,
                 float_dtype=np.float64, seed: int = 0, rpc: Optional[Callable] = None,
                 random_hook: Optional[Callable] = None):
        self.label = label
        self.program = program
        self.scope = scope if scope is not None else Scope()
        self.float_dtype = float_dtype
        self.seed = seed
        self.rpc = rpc
        self.random_hook = random_hook
        self.table_origin: Optional[Callable] = None   # (name, pool) -> original's table
        self.reads: set = set()
        self.blocks_run: set = set()
        # the samples this process trains on: `samples` rows of the global batch from
        # `sample_offset` on (0: not a training step); random ops of a main program key their
        # draws by global row (OpCtx.keyed_uniform)
        self.samples = 0
        self.sample_offset = 0
        self.step = 0
        self.draw_counts: dict = {}
        self._written = None          # the names some op writes (True: a pserver)
        # which initializer outputs become LazyTables: (name, shape) -> bool
        self.lazy_policy: Callable = default_lazy_policy
        self.densified: dict = {}      # LazyTables an op needed whole: name -> op type
        self.free_after: Optional[dict] = None      # op index -> temporaries to drop after it
        self.after_op: Optional[Callable] = None     # (executor, op): what watches the run
        # Paddle 2.6.2's sparse optimizer kernels as they run, row misses and all
        # (kernels/optim_ops.py): run --local's prediction of the runtime sets it
        self.paddle_sparse_kernels = False

    def densify(self, name, table, op_type):
        """A LazyTable materialized whole for an op that reads it as a tensor; the scope
        keeps the dense value from then on."""
        v = table.to_dense()
        self.scope.put(name, v, self.scope.lods.get(name))
        self.densified.setdefault(name, op_type)
        return v

    def begin_step(self, step: int, samples: int, offset: int):
        """A training step on `samples` rows of the global batch from row `offset` on."""
        self.step, self.samples, self.sample_offset = step, samples, offset
        self.draw_counts = {}

    def _written_somewhere(self, name) -> bool:
        """Whether some op of the program writes `name` (or, on a pserver, whose inputs arrive
        by message, whether it may be received: always)."""
        if self._written is None:
            ops = [op for _, _, op in self.program.ops()]
            self._written = {n for op in ops for n in op.output_names()}
            if any(op.type == "listen_and_serv" for op in ops):
                self._written = True
        return self._written is True or name in self._written

    def read(self, name, op_type=None):
        """The value of `name` for an op of `op_type` (None: a reader that needs its value)."""
        v = self.scope.get(name)
        if v is None:
            var = self.program.find_var(name)
            if var is not None and var.kind == "SELECTED_ROWS":
                v = SelectedRows.unwritten(var.shape, self.float_dtype)
        if isinstance(v, SelectedRows) and v.no_memory:
            if op_type in EMPTY_ROWS_OK:
                return v
            raise SimError("reads %s, an empty SelectedRows (no op of %s writes its rows): a "
                           "Paddle process fails here too (\"Tensor holds no memory\")"
                           % (name, self.label))
        if v is None:
            if not self._written_somewhere(name) and not (var is not None and var.is_persistable):
                raise SimError("reads %s, which no op of %s writes (nor is it fed, sent or "
                               "initialized): a Paddle process fails here too"
                               % (name, self.label))
            raise SimError("reads %s, which holds no value (never initialized, computed or "
                           "received)" % name)
        if isinstance(v, Unallocated):
            raise SimError("reads %s, which %s left without memory (Paddle's fake_init only "
                           "sets the shape %s) and nothing received before this read: a real "
                           "process fails here too" % (name, v.by, list(v.shape)))
        self.reads.add(name)
        return v

    def write(self, block_idx, name, value, lod=None, rows=False):
        var = self.program.find_var(name, block_idx)
        if var is None:
            raise SimError("writes %s, which no block of the program declares" % name)
        shape = var.shape
        if rows and shape and len(shape) == len(shape_of(value)) \
                and (shape[0] < 0 or shape_of(value)[0] <= shape[0]):
            shape = (-1,) + tuple(shape[1:])
        if var.kind in ("LOD_TENSOR", "SELECTED_ROWS") and shape is not None \
                and not _compatible(shape, shape_of(value), not var.is_persistable):
            raise SimError("%s gets shape %s but is declared %s"
                           % (name, list(shape_of(value)), list(shape)))
        if not isinstance(value, (SelectedRows, Unallocated, SparseTable, LazyTable)) \
                and var.dtype is not None \
                and value.dtype.kind == "f" \
                and value.dtype != self.float_dtype:
            value = value.astype(self.float_dtype)
        self.scope.put(name, value, lod)

    def where(self, block_idx, op_idx, op) -> str:
        return "%s block %d op %d (%s)" % (self.label, block_idx, op_idx, op.type)

    def run_block(self, block_idx: int, start: int = 0, stop: Optional[int] = None) -> None:
        if not 0 <= block_idx < len(self.program.blocks):
            raise SimError("%s: block %d does not exist" % (self.label, block_idx))
        self.blocks_run.add(block_idx)
        ops = self.program.blocks[block_idx].ops
        for i in range(start, len(ops) if stop is None else stop):
            self.run_op(block_idx, i, ops[i])

    def free_temporaries(self, blocks=(0,), keep=()):
        """From now on, drop each temporary of `blocks` after the last op of its block that
        uses it (as Paddle's eager deletion does): a program whose backward keeps a thousand
        partial grads ([rows, width] each, summed at the end) needs them only until that sum;
        a pserver's merged and scaled gradients only until its optimizer reads them. A
        temporary is a var of one block, not in `keep`, not persistable; in a block other
        than 0 (a pserver's optimize block), also a persistable one the block writes before
        any op reads it (Fleet declares a merged gradient persistable: it is made anew each
        round)."""
        uses: dict = {}
        for b in self.program.blocks:
            for op in b.ops:
                for n in op.input_names() + op.output_names():
                    uses.setdefault(n, set()).add(b.idx)
        self.free_after = {}
        for b in blocks:
            block = self.program.blocks[b]
            last: dict = {}
            made: set = set()       # written by an op before any op of the block reads them
            for i, op in enumerate(block.ops):
                ins = op.input_names()
                for n in ins:
                    last[n] = i
                for n in op.output_names():
                    if n not in last and n not in ins:
                        made.add(n)
                    last[n] = i
            for n, i in last.items():
                v = block.var(n) if b == 0 else self.program.find_var(n, b)
                if uses.get(n) != {b} or v is None or n in keep \
                        or (v.is_persistable and (b == 0 or n not in made)):
                    continue
                self.free_after.setdefault((b, i), []).append(n)

    def run_op(self, block_idx, op_idx, op) -> None:
        self._run_op(block_idx, op_idx, op)
        if self.after_op is not None:
            self.after_op(self, op)
        if self.free_after is not None:
            for n in self.free_after.get((block_idx, op_idx), ()):
                self.scope.drop(n)

    def _run_op(self, block_idx, op_idx, op) -> None:
        try:
            if op.type in ("conditional_block", "conditional_block_infer"):
                self._conditional(op)
            elif op.type == "while":
                self._while(op)
            elif op.type in RPC_OPS:
                if self.rpc is None:
                    raise NoKernelError("%s: %s is a communication op, and this program runs "
                                        "alone" % (self.where(block_idx, op_idx, op), op.type))
                self.rpc(self, block_idx, op)
            elif op.type in NOOP_OPS:
                pass
            else:
                fn = KERNELS.get(op.type)
                if fn is None:
                    raise NoKernelError("%s: no kernel for op %s"
                                        % (self.where(block_idx, op_idx, op), op.type))
                with np.errstate(all="ignore"):
                    fn(OpCtx(self, block_idx, op))
                if op.type in SHARES_LOD:
                    self._share_lod(op, *SHARES_LOD[op.type])
        except (SimError, NoKernelError) as e:
            if getattr(e, "located", False):
                raise
            msg = str(e)
            if not msg.startswith(self.label):
                msg = "%s: %s" % (self.where(block_idx, op_idx, op), msg)
            err = type(e)(msg)
            err.located = True
            raise err from None
        except (ValueError, IndexError, TypeError, ZeroDivisionError) as e:
            err = SimError("%s: %s" % (self.where(block_idx, op_idx, op), e))
            err.located = True
            raise err from None

    def _share_lod(self, op, src_slot, out_slots) -> None:
        """Give the outputs in `out_slots` the LoD of input `src_slot`'s first var where the
        kernel set none and the rows agree (registry.SHARES_LOD)."""
        src = op.input(src_slot)
        lod = self.scope.lods.get(src[0]) if src else None
        if not lod:
            return
        rows = lod[-1][-1]
        for slot in out_slots:
            for n in op.output(slot):
                v = self.scope.get(n)
                if n not in self.scope.lods and isinstance(v, np.ndarray) and v.ndim \
                        and v.shape[0] == rows:
                    self.scope.lods[n] = lod

    def _conditional(self, op):
        conds = [self.read(n) for n in op.input("Cond")]
        if op.attr("is_scalar_condition", False):
            if len(conds) != 1 or np.asarray(conds[0]).size != 1:
                raise SimError("conditional_block: the scalar condition has %d values"
                               % sum(np.asarray(c).size for c in conds))
            run = bool(np.asarray(conds[0]).reshape(-1)[0])
        else:
            run = all(np.asarray(c).size > 0 for c in conds)
        if run:
            self.run_block(op.attr("sub_block"))

    def _while(self, op):
        cond = op.input("Condition")[0]
        n = 0
        while bool(np.asarray(self.read(cond)).reshape(-1)[0]):
            self.run_block(op.attr("sub_block"))
            n += 1
            if n > 100000:
                raise SimError("while: more than 100000 iterations")
