"""Run the ops of a block on a scope, one op at a time, checking every output against its
declared shape."""
from __future__ import annotations

import zlib
from typing import Callable, Optional

import numpy as np

from ..ir.program import Program
from .kernels import KERNELS
from .values import NoKernelError, SelectedRows, SimError, SparseTable, Unallocated, shape_of

# Ops a process hands to the message layer (transpile/simulate/cluster.py).
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


def _compatible(declared, actual) -> bool:
    if declared is None:
        return True
    declared, actual = tuple(declared), tuple(actual)
    if declared == ():
        return True     # a 0-d var, or one whose shape Paddle never inferred (MaxIndex ...)
    if declared == (1,) and actual == ():
        return True
    if len(declared) != len(actual):
        return False
    return all(d < 0 or d == a for d, a in zip(declared, actual))


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

    def out_names(self, slot):
        return self.op.output(slot)

    def x(self, slot, i=0):
        names = self.op.input(slot)
        if len(names) <= i:
            raise SimError("input slot %s is empty" % slot)
        return self.ex.read(names[i])

    def xs(self, slot):
        return [self.ex.read(n) for n in self.op.input(slot)]

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

    def set(self, slot, value, idx=0, lod=None, random=False):
        names = self.op.output(slot)
        if len(names) <= idx or not names[idx] or names[idx] == "@EMPTY@":
            return
        name = names[idx]
        if not isinstance(value, (SelectedRows, Unallocated, SparseTable)):
            value = np.asarray(value)
            var = self.ex.program.find_var(name, self.block_idx)
            if var is not None and var.kind == "SELECTED_ROWS" and self.op.type in INIT_OPS \
                    and self.ex.table_origin is not None:
                origin = self.ex.table_origin(name, value)
                self.ex.write(self.block_idx, name, SparseTable(value, origin), lod)
                return
        if random and self.ex.random_hook is not None:
            value = self.ex.random_hook(self.ex, name, value, self.op)
        self.ex.write(self.block_idx, name, value, lod)

    def rng(self):
        out = (self.op.output_names() or ["?"])[0]
        seed = self.attr("seed", 0) or 0
        return np.random.default_rng([self.ex.seed, int(seed) & 0xFFFFFFFF,
                                      zlib.crc32(out.encode())])


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

    def read(self, name):
        v = self.scope.get(name)
        if v is None:
            raise SimError("reads %s, which holds no value (never initialized, computed or "
                           "received)" % name)
        if isinstance(v, Unallocated):
            raise SimError("reads %s, which %s left without memory (Paddle's fake_init only "
                           "sets the shape %s) and nothing received before this read: a real "
                           "process fails here too" % (name, v.by, list(v.shape)))
        self.reads.add(name)
        return v

    def write(self, block_idx, name, value, lod=None):
        var = self.program.find_var(name, block_idx)
        if var is None:
            raise SimError("writes %s, which no block of the program declares" % name)
        shape = var.shape
        if var.kind in ("LOD_TENSOR", "SELECTED_ROWS") and shape is not None \
                and not _compatible(shape, shape_of(value)):
            raise SimError("%s gets shape %s but is declared %s"
                           % (name, list(shape_of(value)), list(shape)))
        if not isinstance(value, (SelectedRows, Unallocated, SparseTable)) \
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

    def run_op(self, block_idx, op_idx, op) -> None:
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
