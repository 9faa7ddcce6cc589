"""Classic style, pserver side: one main and one startup program per endpoint.

The pserver main holds, in block 0, the vars of its parameter blocks and a `listen_and_serv`
op; the LR schedule runs in its own block (with its conditional sub-blocks cloned), then one
optimize block per parameter block: merge the trainers' grads (sync), the clip /
regularization ops, the optimizer update on the block with its accumulators sliced to match.
The startup program initialises exactly the vars this endpoint holds, at their sliced shapes.

Where an endpoint holds two blocks of one parameter (hash_name can do that), each block gets its own optimize block and its
block-local vars (accumulators, clip temporaries) a ".block<i>" suffix so they do not collide.
"""
from __future__ import annotations

from typing import Optional

from ...ir import roles
from ...ir.initializers import INITIALIZER_ATTRS
from ...ir.optimizers import is_optimizer_update
from ...ir.program import Attr, Block, Op, Program, Var, VarType, tensor_type
from ...ir.tables import LOOKUP_TABLE_TYPES
from ...plan.classic import DistributionPlan, ParamPlan, VarBlock
from ...plan.slicing import trainer_copy_name
from ..build import (RPC_THREADS, TRAINER_STARTUP_OPS, OpTemplate, assigned_block, clone_var,
                     inferred_out_shape, make_op, new_block, refuse_unequal_sum,
                     require_held_inputs, tensor_like)


# What append_update does with each input slot of an optimizer update (ClassicPserverIndex.slots).
_GRAD, _PARAM, _LR, _STATE = "grad", "param", "lr", "state"


class ClassicPserverIndex:
    """What every endpoint's pass looks up in the origin program and the plan, made once per
    split (transpile_classic passes it to each endpoint's build_pserver_main) so that building
    one more pserver costs what it holds, not another walk over every optimize op and
    parameter."""

    def __init__(self, main: Program, plan: DistributionPlan, trainer_id: int):
        self.trainer_id = trainer_id
        self.ovars = main.global_block.vars
        self.plan = plan
        # the origin ops by uid (what the plan names them by)
        self.op_of = {op.uid: op for op in main.global_block.ops}
        wanted = set(plan.optimize_ops).union(*(p.ops for p in plan.params))
        # the optimizer updates (their uids), and the param each one updates in program order
        self.updates = frozenset(u for u in wanted if is_optimizer_update(self.op_of[u]))
        self.update_params = [self.op_of[u].input("Param")[0] for u in plan.optimize_ops
                              if u in self.updates]
        self.lr_ops = frozenset(plan.lr_ops)
        # Paddle renamed the trainer's unsliced grads in the origin program before cloning the
        # optimize ops, so their op_role_var names the transpiling trainer's copy.
        self.role_var_rename = {p.grad: plan.sent_grad_name(p.grad, trainer_id)
                                for p in plan.params if not p.sliced}
        self._slots: dict = {}

    def slots(self, op: Op, p: ParamPlan) -> list:
        """[(slot, what, origin name, origin var, shape, (kind, dtype, persistable))] for the
        inputs of an update of `p`, in slot order: what append_update does with each (_GRAD,
        _PARAM, _LR, _STATE); a state's shape is None when it is sliced with the block. Made
        on first use, as append_update looked the vars up (a missing one fails the same way)."""
        out = self._slots.get(op.uid)
        if out is None:
            out = []
            states = p.state_by_slot
            for slot, args in op.inputs.items():
                if not args or slot in ("Beta1Tensor", "Beta2Tensor"):
                    continue
                name = args[0]
                what = {"Grad": _GRAD, "Param": _PARAM, "LearningRate": _LR}.get(slot, _STATE)
                v = self.ovars.get(name) if what in (_LR, _STATE) else None
                shape = make = None
                if what is _STATE:
                    s = states.get(slot)
                    if s is None or not s.sliced:
                        shape = tuple(v.shape)
                    if v is not None:
                        make = (v.kind, v.dtype, v.persistable)
                out.append((slot, what, name, v, shape, make))
            self._slots[op.uid] = out
        return out


class PserverBuild:
    """One endpoint's main program while its passes build it (pserver_passes.py): made with
    its block vars declared, then given its blocks and listen_and_serv step by step."""

    def __init__(self, main: Program, plan: DistributionPlan, endpoint: str,
                 trainer_id: int = 0, index: Optional[ClassicPserverIndex] = None):
        self.origin = main
        self.ob = main.global_block
        self.plan = plan
        self.ep = endpoint
        self.index = index or ClassicPserverIndex(main, plan, trainer_id)
        self.prog = Program([Block(0, -1)], main.version, main.has_version,
                            None if main.op_version_map is None else list(main.op_version_map))
        self.gb = self.prog.global_block
        self.gvars = self.gb.vars
        self.local = plan.blocks_on(endpoint)
        self.local_params = {p.name for p, _ in self.local}
        self.local_blocks: dict[str, list] = {}
        for p, b in self.local:
            self.local_blocks.setdefault(p.name, []).append((p, b))
        self.grad_to_block_id: list[str] = []
        self.sparse_grad_to_param: list[str] = []
        # per origin var: the pserver vars it became, with their shapes (for the startup)
        self.aliases: dict[str, list[tuple[str, tuple]]] = {}
        # param / grad name -> its first block on this endpoint (Paddle's lookup for ops that
        # reference a param outside its own optimize block)
        self.first_block: dict[str, str] = {}
        self.role_var_rename = self.index.role_var_rename
        # merged grad block -> the trainers' copies of it (sync)
        self.trainer_copies: dict[str, list[str]] = {}
        self._merge_templates: Optional[tuple] = None
        # what the steps build: listen_and_serv's inputs, blocks and attrs
        self.recv_inputs = self.declare_block_vars()
        self.optimize_blocks: list = []
        self.lr_block_id = -1
        self.pre = 0
        self.prefetch: list = []
        self.attrs_extra: dict = {}

    # -- vars ------------------------------------------------------------------------------
    def _alias(self, origin: str, name: str, shape) -> None:
        lst = self.aliases.get(origin)
        if lst is None:
            self.aliases[origin] = [(name, tuple(shape))]
        elif all(n != name for n, _ in lst):
            lst.append((name, tuple(shape)))

    def declare_block_vars(self) -> list[str]:
        """Param blocks, merged grads and the per-trainer grads; returns listen_and_serv's X."""
        recv_inputs = []
        gvars, ovars = self.gvars, self.ob.vars
        for p, b in self.local:
            gvars[b.name] = tensor_like(ovars.get(p.name), b.name, b.shape, True, lod_level=0)
            self._alias(p.name, b.name, b.shape)
            self.first_block.setdefault(p.name, b.name)
        trainers = range(self.plan.trainers) if self.plan.sync else None
        for p, b in self.local:
            gvar = ovars.get(p.grad)
            merged = p.grad_blocks[b.index]
            # the merged grad and the trainers' copies: one VarType (tensor_like's)
            vt = tensor_type(gvar.kind, gvar.dtype, b.shape, None)
            gvars[merged] = Var(merged, vt, True)
            self.first_block.setdefault(p.grad, merged)
            if trainers is None:
                recv_inputs.append(merged)
                continue
            names = self.trainer_copies[merged] = [trainer_copy_name(merged, t) for t in trainers]
            for name in names:
                gvars[name] = Var(name, vt, False)
            recv_inputs += names
        return recv_inputs

    def _pserver_var(self, name: str, block: Block, rename: dict, shape_map: dict) -> str:
        """The pserver name of an origin var used by a cloned op, cloning it if needed."""
        local = rename.get(name)
        if local is None and name in self.first_block:
            return self.first_block[name]
        local = local or name
        if self.gb.var(local) is None:
            v = self.origin.find_var(name, 0)
            if v is None:
                return local
            shape = shape_map.get(tuple(v.shape or ()))
            self.gb.add_var(clone_var(v, name=local, shape=shape))
        return local

    # -- ops ---------------------------------------------------------------------------------
    def _copy_op(self, op: Op, inputs: Optional[dict] = None,
                 outputs: Optional[dict] = None) -> Op:
        """A copy of an origin op (with these slots when given) whose op_role_var names the
        grads the pserver's trainer copy of the program would."""
        new = op.copy(inputs, outputs)
        rv = new.attr(roles.ROLE_VAR_ATTR)
        if rv:
            renamed = [self.role_var_rename.get(a, a) for a in rv]
            if renamed != rv:
                a = new.find_attr(roles.ROLE_VAR_ATTR)
                new.replace_attr(roles.ROLE_VAR_ATTR, Attr(a.type, renamed, a.extra))
        return new

    def clone_op(self, op: Op, block: Block, rename: Optional[dict] = None) -> Op:
        """Clone a non-optimizer op (LR schedule, clip, regularization) into `block`, its vars
        into the global block. Outputs of ops that read a sliced param / grad take the slice's
        shape where they had the whole var's shape (Paddle gets that from shape inference)."""
        rename = rename or {}
        shape_map = {}
        for a in op.input_names():
            new = rename.get(a) or self.first_block.get(a) or a
            ov, nv = self.ob.var(a), self.gb.var(new)
            if ov is not None and nv is not None and tuple(ov.shape or ()) != tuple(nv.shape or ()):
                shape_map[tuple(ov.shape or ())] = tuple(nv.shape)
        new_op = self._copy_op(op)
        for slots in (new_op.inputs, new_op.outputs):
            for slot, args in slots.items():
                slots[slot] = [self._pserver_var(a, block, rename, shape_map) for a in args]
        self._infer_out_shape(new_op)
        for origin, name in rename.items():
            v = self.gb.var(name)
            if v is not None and origin not in self.local_params:
                self._alias(origin, name, v.shape)
        block.ops.append(new_op)
        return new_op

    def _infer_out_shape(self, op: Op) -> None:
        """Paddle appends the op, whose InferShape re-declares its Out with the shape of its
        input as the pserver declares it: a merged grad block written by a clip of the whole
        grad gets the whole grad's shape."""
        def shape_of(name):
            v = self.gb.var(name)
            return None if v is None or v.shape is None else v.shape
        if op.type == "sum":
            refuse_unequal_sum(op, shape_of)
        shape = inferred_out_shape(op, shape_of)
        for name in op.output("Out") if shape is not None else ():
            v = self.gb.var(name)
            if v is not None and v.shape is not None and tuple(v.shape) != shape:
                self.gb.vars[name] = v.with_shape(shape)

    def clone_sub_block(self, op: Op, parent: Block) -> None:
        """Clone the sub_block of an LR op (piecewise decay's conditional_block) under
        `parent`, vars and ops, and point the op at the copy."""
        a = op.find_attr("sub_block")
        if a is None:
            return
        src = self.origin.block(a.value)
        sub = new_block(self.prog, parent.idx)
        for v in src.vars.values():
            sub.add_var(clone_var(v))
        for sop in src.ops:
            cop = sop.copy()
            for name in cop.input_names() + cop.output_names():
                v = self.origin.find_var(name, src.idx)
                if v is not None and sub.var(name) is None:
                    sub.add_var(clone_var(v))
            sub.ops.append(cop)
            self.clone_sub_block(cop, sub)
        op.replace_attr("sub_block", Attr(a.type, sub.idx, a.extra))

    def append_update(self, op: Op, block: Block, p: ParamPlan, b: VarBlock, merged: str,
                      rename: dict) -> None:
        """The optimizer update on the param block, its accumulators sliced to the block."""
        gvars = self.gvars
        new_in = {}
        for slot, what, name, v, shape, make in self.index.slots(op, p):
            if what is _GRAD:
                # The update reads the merged grad, or the clip/regularization chain's output
                # when that chain was cloned into this block (Paddle wired the merged grad
                # here, dropping the chain: see the l2decay corrections).
                local = rename.get(name, name)
                new_in[slot] = [local if name != p.grad and local in gvars else merged]
            elif what is _PARAM:
                new_in[slot] = [b.name]
            elif what is _LR:
                if name not in gvars:
                    gvars[name] = tensor_like(v, name, v.shape, v.persistable)
                new_in[slot] = [name]
            else:
                if shape is None:
                    shape = b.shape
                local = rename.get(name)
                if local is None:
                    local = rename[name] = self.plan.state_name(p, name, b)
                if local not in gvars:
                    # tensor_like(v, local, shape, v.persistable), its lookups made once
                    gvars[local] = tensor_like(v, local, shape, v.persistable) if make is None \
                        else Var(local, tensor_type(make[0], make[1], shape, None), make[2])
                self._alias(name, local, shape)
                new_in[slot] = [local]
        new_out = {slot: [b.name] if slot == "ParamOut" else [rename.get(a, a) for a in args]
                   for slot, args in op.outputs.items()}
        block.ops.append(self._copy_op(op, new_in, new_out))
        if gvars.get(new_in["Grad"][0]).kind == "SELECTED_ROWS":
            self.sparse_grad_to_param.append("%s:%s" % (new_in["Grad"][0], b.name))

    def merge_grads(self, block: Block, merged: str) -> None:
        """Average the trainers' copies of a grad block (sync mode only)."""
        self.grad_to_block_id.append("%s:%d" % (merged, block.idx))
        if not self.plan.sync:
            return
        n = self.plan.trainers
        if self._merge_templates is None:
            self._merge_templates = (
                OpTemplate("sum", {"use_mkldnn": False, roles.ROLE_ATTR: roles.FORWARD}),
                OpTemplate("scale", {"scale": 1.0 / float(n), roles.ROLE_ATTR: roles.FORWARD}))
        sum_op, scale_op = self._merge_templates
        block.ops.append(sum_op.make({"X": list(self.trainer_copies[merged])},
                                     {"Out": [merged]}))
        block.ops.append(scale_op.make({"X": [merged]}, {"Out": [merged]}))

    # -- the program, step by step (the passes of pserver_passes.py) -----------------------------
    def add_lr_decay_block(self) -> None:
        """The LR-schedule ops (and their sub-blocks) in a block of their own."""
        plan = self.plan
        if plan.lr_ops:
            lr_block = new_block(self.prog, len(self.prog.blocks) - 1)
            self.optimize_blocks.append(lr_block.idx)
            for uid in plan.lr_ops:
                cop = self.clone_op(self.index.op_of[uid], lr_block)
                self.clone_sub_block(cop, lr_block)
            self.lr_block_id = lr_block.idx
        self.pre = len(self.prog.blocks) - 1

    def add_param_blocks(self) -> None:
        """An optimize block per parameter block held here: merge the trainers' grads, then the
        optimizer update and the ops that come with it (clip, regularization)."""
        plan, pre, index = self.plan, self.pre, self.index
        for pname in index.update_params:
            for p, b in self.local_blocks.get(pname, ()):
                block = new_block(self.prog, pre)
                self.optimize_blocks.append(block.idx)
                merged = p.grad_blocks[b.index]
                self.merge_grads(block, merged)
                # param and grad resolve to this block's slices; other block-local vars get a
                # suffix when this endpoint holds several blocks of the param
                rename = {p.name: b.name, p.grad: merged}
                for uid in p.ops:
                    op = index.op_of[uid]
                    if uid in index.updates:
                        self.append_update(op, block, p, b, merged, rename)
                    elif uid not in index.lr_ops:
                        if plan.several_blocks_on(p, self.ep):
                            for a in op.output_names():
                                if a not in rename and self.gb.var(a) is None:
                                    rename[a] = plan.state_name(p, a, b)
                        self.clone_op(op, block, rename)

    def add_table_blocks(self) -> None:
        """The distributed table's optimize block and its prefetch / checkpoint blocks."""
        if self.plan.distributed_table is not None:
            table_block = self.table_blocks(self.pre)
            self.optimize_blocks.append(table_block.idx)
            self.prefetch, self.attrs_extra["checkpint_block_id"] = \
                self.prefetch_blocks(table_block)

    def add_listen_and_serv(self) -> None:
        """listen_and_serv, serving the blocks built (an empty one when there are none)."""
        plan = self.plan
        optimize_blocks, prefetch = self.optimize_blocks, self.prefetch
        if not optimize_blocks:
            optimize_blocks.append(new_block(self.prog, len(self.prog.blocks) - 1).idx)

        attrs = {
            "optimize_blocks": None, "endpoint": self.ep,
            "pserver_id": list(plan.endpoints).index(self.ep), "Fanin": plan.trainers,
            "distributed_mode": plan.distributed_mode,
            "grad_to_block_id": self.grad_to_block_id,
            "sparse_grad_to_param": self.sparse_grad_to_param,
            "lr_decay_block_id": self.lr_block_id,
            "rpc_get_thread_num": RPC_THREADS, "rpc_send_thread_num": RPC_THREADS,
            "rpc_prefetch_thread_num": RPC_THREADS, **self.attrs_extra,
            roles.ROLE_ATTR: roles.FORWARD}
        if prefetch:
            attrs["prefetch_var_name_to_block_id"] = prefetch
        op = make_op("listen_and_serv", {"X": self.recv_inputs}, {},
                     {k: v for k, v in attrs.items() if k != "optimize_blocks"})
        op.attrs = {"optimize_blocks": Attr("BLOCKS", optimize_blocks), **op.attrs}
        self.gb.ops.append(op)

    # -- the distributed lookup table -------------------------------------------------------------
    def table_blocks(self, pre: int) -> Block:
        """The table's optimize block: its rows of the table, merged grads, sgd (Paddle
        supports only sgd for a distributed table, whatever the program's optimizer)."""
        plan, t = self.plan, self.plan.distributed_table
        index = list(plan.endpoints).index(self.ep)
        block = new_block(self.prog, pre)
        shape = (t.rows_per_pserver,) + tuple(t.shape[1:])
        self.gb.add_var(Var.tensor(t.name, t.dtype, shape, kind="SELECTED_ROWS",
                                   persistable=True))
        gvar = self.ob.var(t.grad)
        self.gb.add_var(clone_var(gvar))
        upd = self.index.op_of[t.optimizer_op]
        lr = upd.input("LearningRate")[0]
        if self.gb.var(lr) is None:
            self.gb.add_var(clone_var(self.ob.var(lr)))
        grad = t.grad
        if plan.sync:
            names = [plan.table_sent_name(index, k) for k in range(plan.trainers)]
            for n in names:
                self.gb.add_var(tensor_like(gvar, n, gvar.shape, None))
            block.ops.append(make_op("sum", {"X": names}, {"Out": [grad]},
                                     {"use_mkldnn": False, roles.ROLE_ATTR: roles.FORWARD}))
        else:
            grad = plan.table_merged_name(index)
            v = self.gb.vars.pop(t.grad).copy()
            v.name = grad
            self.gb.add_var(v)
        block.ops.append(make_op("sgd", {"Param": [t.name], "Grad": [grad], "LearningRate": [lr]},
                                 {"ParamOut": [t.name]}, {roles.ROLE_ATTR: roles.FORWARD}))
        self.grad_to_block_id.append("%s:%d" % (grad, block.idx))
        return block

    def prefetch_blocks(self, table_block: Block) -> tuple[list, int]:
        """The block answering the trainers' prefetch of table rows, and the checkpoint block
        that saves the table."""
        plan, t = self.plan, self.plan.distributed_table
        index = list(plan.endpoints).index(self.ep)
        ids_var = out_var = None
        for op in self.ob.ops:
            if op.type in LOOKUP_TABLE_TYPES and op.input("W") == [t.name]:
                ids_var = self.ob.var(op.input("Ids")[0])
                out_var = self.ob.var(op.output("Out")[0])
                break
        pin, pout = "prefetch_compress_in_tmp_%d" % index, "prefetch_compress_out_tmp_%d" % index
        self.gb.add_var(tensor_like(ids_var, pin, ids_var.shape, None))
        self.gb.add_var(tensor_like(out_var, pout, out_var.shape, None))
        block = new_block(self.prog, table_block.idx)
        block.ops.append(make_op("lookup_sparse_table", {"Ids": [pin], "W": [t.name]},
                                 {"Out": [pout]},
                                 {"is_sparse": True, "is_distributed": True, "padding_idx": -1,
                                  roles.ROLE_ATTR: roles.FORWARD}))
        self.gb.add_var(Var("kLookupTablePath", VarType("RAW", {}), persistable=True))
        ckpt = new_block(self.prog, table_block.idx)
        ckpt.ops.append(make_op("save", {"X": [t.name]}, {},
                                {"file_path": "none", roles.ROLE_ATTR: roles.FORWARD}))
        return ["%s:%d" % (pin, block.idx)], ckpt.idx


def startup_writers(startup: Program) -> dict:
    """var name -> indices of the startup ops whose output slots start with it (in order)."""
    writers: dict = {}
    for i, op in enumerate(startup.global_block.ops):
        for args in op.outputs.values():
            if args:
                writers.setdefault(args[0], []).append(i)
    return writers


def build_pserver_startup(startup: Program, pserver_main: Program, aliases: dict,
                          writers: Optional[dict] = None, endpoint: str = "",
                          blocks: Optional[dict] = None, fix_assign: bool = False) -> Program:
    """Initialise exactly the vars the pserver holds: each init op of the origin startup whose
    output lives here, renamed to the block and reshaped to it (once per local block).
    `writers`: startup_writers(startup), built once and shared by every endpoint; `endpoint`
    names the pserver in a refusal; `blocks`: the VarBlock of each parameter block held here,
    by name, whose assign_value is assigned_block's (`fix_assign`: the fault fixed)."""
    gvars = pserver_main.global_block.vars
    prog = Program([Block(0, -1)], startup.version, startup.has_version,
                   None if startup.op_version_map is None else list(startup.op_version_map))
    block = prog.global_block
    block.vars = {v.name: clone_var(v) for v in gvars.values()}
    if writers is None:
        writers = startup_writers(startup)
    ops = startup.global_block.ops
    for i in _startup_candidates(writers, gvars, aliases):
        op = ops[i]
        if op.type in TRAINER_STARTUP_OPS:
            continue
        targets = _startup_targets(op, gvars, aliases)
        if targets is None:
            continue
        slot, names = targets
        require_held_inputs(op, i, gvars, endpoint)
        reshape = op.type in INITIALIZER_ATTRS
        for name in names:
            new = op.copy({k: [a for a in args if a in gvars] for k, args in op.inputs.items()},
                          {slot: [name]})
            if reshape:
                new.set_attr("shape", list(gvars.get(name).shape))
            held = (blocks or {}).get(name)
            if new.type == "assign_value" and held is not None and held.name != held.origin:
                new = assigned_block(new, held, block.vars, fix_assign)
            block.ops.append(new)
    return prog


def _startup_candidates(writers: dict, gvars: dict, aliases: dict) -> list:
    """Indices (in program order) of the startup ops that can init a var held here: those
    writing a var of the pserver, or a var that has blocks here."""
    get = writers.get
    found = [i for name in gvars if (ops := get(name)) for i in ops]
    found += [i for name in aliases if (ops := get(name)) for i in ops]
    return sorted(set(found))


def _startup_targets(op: Op, gvars: dict, aliases: dict) -> Optional[tuple]:
    """(slot, pserver vars) a startup op initialises here: the pserver names of the first
    output slot's var that has any (its blocks, or itself when held whole), else None."""
    for slot, args in op.outputs.items():
        if not args:
            continue
        first = args[0]
        names = [n for n, _ in aliases.get(first, ()) if n != first or n in gvars]
        if not names and first in gvars:
            names = [first]
        if names:
            return slot, names
    return None
