"""Fleet pserver passes (ir/pserver_pass.py): one main and one startup program per endpoint.

Main: listen_and_serv, then the optimize blocks Fleet's add_optimizer_pass builds:
  - an LR-decay block with the LR-schedule ops (the global-step increment stays on the trainers);
  - per parameter block held here: merge of the trainers' grads (sum + scale 1/trainers in sync
    mode), then the optimizer op and the ops connected to it (clip, regularization);
  - an empty block when nothing landed on this endpoint.
  Large-scale (is_distributed) tables get lookup_sparse_table_* ops in their block.
Geo: one block per parameter slice, `param = sum(param, param.delta)`.
Startup: the inits of what this endpoint holds, sliced to its blocks, plus
lookup_sparse_table_init with the large-scale table metas.
"""
from __future__ import annotations

from typing import Optional

from ...core.errors import UserError
from ...ir.optimizers import (FLEET_SLICED_STATE_SLOTS, FLEET_UNSLICED_SLOTS,
                              fleet_sliced_state_slots, is_optimizer_update)
from ...ir.program import Attr, Block, Op, Program, Var, select, tensor_type
from ...ir.tables import is_distributed_lookup
from ...plan.faults import (FLEET_CLIP_BEFORE_MERGE, FLEET_SPARSE_CLIP_DROPPED,
                              FLEET_SPARSE_DECAY_WHOLE_TABLE, FLEET_DECAY_WHOLE_PARAM)
from ...plan.fleet import FleetPlan, delta_name
from ...plan.slicing import BLOCK_SUFFIX, VarBlock, origin_varname, trainer_copy_name
from ..build import (INITIALIZER_ATTRS, RPC_THREADS, TRAINER_STARTUP_OPS, OpTemplate,
                     add_n_shape, initializer_signature, make_op, new_block, new_tensor,
                     persistable_copy, role_attrs)

# The values a large-scale table row holds per optimizer: the param and its sliced state.
TABLE_VALUES = {k: ("Param",) + v for k, v in FLEET_SLICED_STATE_SLOTS.items()}


class FleetPserverIndex:
    """What every endpoint's pass looks up in the origin programs, indexed once per split so
    that building one more pserver costs what it holds, not another walk over the program."""

    def __init__(self, main: Program, startup: Program, plan: FleetPlan):
        ops = main.global_block.ops
        # the optimize ops naming a (param, grad), grouped by param, in program order
        self.opt_ops = [op for op in select(ops, plan.optimize_ops) if op.attr("op_role_var")]
        self.by_target: dict[str, list[Op]] = {}
        for op in self.opt_ops:
            self.by_target.setdefault(op.attr("op_role_var")[0], []).append(op)
        self.updates = [op for op in self.opt_ops if is_optimizer_update(op)]
        # (update op, the param it names): every endpoint picks the ones it holds
        self.update_params = [(op, op.input("Param")[0]) for op in self.updates]
        self._origin_names: dict[str, str] = {}
        self._update_slots: dict[int, tuple] = {}
        self.merge_templates: Optional[tuple] = None
        # the trainer's clip op of each clipped gradient (by the var it writes)
        self.clip_of = {op.output("Out")[0]: op for op in select(ops, plan.clip_ops)
                        if op.output("Out")}
        # ... and by the gradient it reads (a remote table's, pushed unclipped)
        self.clip_of_raw = {op.input("X")[0]: op for op in select(ops, plan.clip_ops)
                            if op.type in ("clip", "clip_by_norm") and op.input("X")}
        # startup op indices by the first argument of each of their output slots
        self.startup_writers: dict[str, list[int]] = {}
        self.initializer: dict[str, Op] = {}
        # per startup op: None for the trainers' own, else ([(slot, its first argument, its
        # arguments)] of the output slots that have any, whether it is an initializer whose
        # shape attr follows the var)
        self.startup_outputs: list = []
        for i, op in enumerate(startup.global_block.ops):
            for args in op.outputs.values():
                if args:
                    self.startup_writers.setdefault(args[0], []).append(i)
            self.startup_outputs.append(
                None if op.type in TRAINER_STARTUP_OPS else
                ([(slot, args[0], args) for slot, args in op.outputs.items() if args],
                 op.type in INITIALIZER_ATTRS and op.has_attr("shape")))
            if op.type in INITIALIZER_ATTRS and op.output("Out"):
                self.initializer.setdefault(op.output("Out")[0], op)
        self.entry: dict[str, object] = {}
        if plan.distributed_tables:
            for op in ops:
                if is_distributed_lookup(op) and op.input("W"):
                    self.entry.setdefault(op.input("W")[0], op.attr("entry"))

    def origin_name(self, name: str) -> str:
        """origin_varname(name), worked out once per name for every endpoint."""
        origin = self._origin_names.get(name)
        if origin is None:
            origin = self._origin_names[name] = origin_varname(name)
        return origin

    def update_slots(self, s: "ServerBuild", op: Op) -> tuple:
        """What _append_optimizer_op declares for an update, worked out once per op: ([(slot,
        origin var or None for Grad / Param)] of the Grad, Param and LearningRate inputs,
        [(slot, origin var, sliced, dtype, persistable)] of its state). Made on first use as
        the pass looked them up, so an undeclared var or an unsupported optimizer fails the
        same way."""
        out = self._update_slots.get(id(op))
        if out is None:
            firsts, states = [], []
            for slot, args in op.inputs.items():
                if args and slot in ("Grad", "Param"):
                    firsts.append((slot, None))
                elif args and slot == "LearningRate":
                    firsts.append((slot, s.origin_var(args[0])))
            for slot, args in op.inputs.items():
                if not args or slot in FLEET_UNSLICED_SLOTS:
                    continue
                if op.type not in FLEET_SLICED_STATE_SLOTS:
                    raise UserError("optimizer %s is not supported for distributed training"
                                    % op.type)
                v = s.origin_var(args[0])
                # a remote table's block gets every state sliced, rmsprop's MeanGrad too (as
                # Paddle 2.6.2's Fleet writes it: tools/gen, an rmsprop table); a dense
                # parameter's MeanGrad keeps the whole shape (_get_optimizer_input_shape)
                table = bool(op.input("Param")) and op.input("Param")[0] in s.sparse_params
                sliced = slot in fleet_sliced_state_slots(op.type, table)
                states.append((slot, v, sliced, v.dtype or "FP32", v.is_persistable))
            out = self._update_slots[id(op)] = (firsts, states)
        return out


# the suffix of the new grad var Paddle's regularizer makes for a sparse grad (kNewGradSuffix)
NEW_GRAD_SUFFIX = "@NEWGRAD@"


def _block_keys(name: str):
    """The names `name` is a block of (is_block_of): itself and each prefix before `.block`."""
    yield name
    i = name.find(BLOCK_SUFFIX)
    while i >= 0:
        yield name[:i]
        i = name.find(BLOCK_SUFFIX, i + 1)


class ServerBuild:
    """The pserver main program of one endpoint while its blocks are being built."""

    def __init__(self, main: Program, plan: FleetPlan, endpoint: str, index: FleetPserverIndex):
        self.origin = main
        self.index = index
        self.plan = plan
        self.endpoint = endpoint
        self.prog = Program([Block(0, -1)])
        self.gvars = self.prog.global_block.vars
        self.grad_to_block_id: list[str] = []
        self.sparse_grad_to_param: list[str] = []
        self.params = plan.ep_params[endpoint]
        self.grads = plan.ep_grads[endpoint]
        # the first param block held here that is_block_of a name / a strict block of it
        self.param_block: dict[str, VarBlock] = {}
        self.sliced_block: dict[str, VarBlock] = {}
        for p in self.params:
            for key in _block_keys(p.name):
                self.param_block.setdefault(key, p)
                if key != p.name:
                    self.sliced_block.setdefault(key, p)
        self.sparse_params = {p.param for p in plan.sparse_pairs}
        self.grad_by_origin: dict[str, VarBlock] = {}
        for g in self.grads:
            self.grad_by_origin.setdefault(index.origin_name(g.name), g)

    def new_block(self, parent: int) -> Block:
        return new_block(self.prog, parent)

    def ensure(self, var: Var) -> str:
        """Declare var unless a var of that name is there already (create_var semantics)."""
        if var.name not in self.gvars:
            self.gvars[var.name] = var
        return var.name

    def clone_origin(self, name: str) -> str:
        """The origin var, made persistable (Paddle's _clone_variable)."""
        if name in self.gvars:
            return name
        v = self.origin.global_block.vars.get(name)
        if v is None:
            raise UserError("optimizer op input %s is not declared in the program" % name)
        self.gvars[name] = persistable_copy(v)
        return name

    def origin_var(self, name: str) -> Var:
        v = self.origin.global_block.vars.get(name)
        if v is None:
            raise UserError("optimizer op input %s is not declared in the program" % name)
        return v


def listen_and_serv(plan: FleetPlan, endpoint: str) -> Op:
    """The endpoint's listen_and_serv, its blocks and grad maps still empty."""
    return make_op("listen_and_serv", {}, {}, {
        "Fanin": Attr("INT", plan.trainers), "checkpint_block_id": Attr("INT", -1),
        "dc_asgd": Attr("BOOLEAN", False), "distributed_mode": Attr("INT", plan.mode_id),
        "endpoint": Attr("STRING", endpoint), "grad_to_block_id": Attr("STRINGS", []),
        "lr_decay_block_id": Attr("INT", -1), "optimize_blocks": Attr("BLOCKS", []),
        "prefetch_var_name_to_block_id": Attr("STRINGS", []),
        "pserver_id": Attr("INT", list(plan.endpoints).index(endpoint)),
        "rpc_get_thread_num": Attr("INT", RPC_THREADS),
        "rpc_prefetch_thread_num": Attr("INT", RPC_THREADS),
        "rpc_send_thread_num": Attr("INT", RPC_THREADS),
        "sparse_grad_to_param": Attr("STRINGS", []), **role_attrs(0)})


# --- optimize blocks (sync / async / half_async) ---------------------------------------------
def _clone_non_opt_op(s: ServerBuild, block: Block, op: Op, rename: dict = None) -> None:
    """Clip / regularization / LR ops run as they are, on origin-named vars made persistable
    (fixing fleet-sparse-decay-whole-table, a sliced table's decay reads the pserver's block
    of the table and of its grad: `rename`, from _decay_names)."""
    if rename:
        new = op.copy({k: [rename.get(a, a) for a in v] for k, v in op.inputs.items()},
                      {k: [rename.get(a, a) for a in v] for k, v in op.outputs.items()})
        whole, part = rename[_WHOLE]
        for name in new.input_names() + new.output_names():
            if name not in s.gvars and name not in rename.values():
                v = s.origin_var(name)
                s.gvars[name] = persistable_copy(v) if tuple(v.shape or ()) != whole else \
                    persistable_copy(v).with_shape(part)
        block.ops.append(new)
        return
    new = op.copy()
    for name in op.input_names() + op.output_names():
        s.clone_origin(name)
    block.ops.append(new)


_WHOLE = "@shapes"      # rename's entry holding (the table's shape, its block's shape)


def _decay_names(s: ServerBuild, target: str, merged, clip=None) -> dict:
    """Fixing fleet-sparse-decay-whole-table / fleet-decay-whole-param for `target` (a sliced
    remote table / dense parameter): {the param: its block here, its grad and the grad the
    update reads (a clip's output, when a clip makes one): the merged grad block (the decay's
    sum writes it in place), _WHOLE: (whole shape, block shape)}, or {} when nothing is
    renamed."""
    fix = FLEET_SPARSE_DECAY_WHOLE_TABLE if target in s.sparse_params else \
        FLEET_DECAY_WHOLE_PARAM
    if fix not in s.plan.fixes:
        return {}
    p = _param_block(s, target)
    if p is None or len(s.plan.param_slices.get(target, ())) < 2:
        return {}
    whole = tuple(s.origin.global_block.vars[target].shape)
    # the grad the update reads: <target>@GRAD, or a clip's output (fleet-clip-before-merge);
    # a clip this pserver runs in place on the merged block (`clip`) wrote it there
    out = {target: p.name, target + "@GRAD": merged.name,
           s.index.origin_name(merged.name): merged.name, _WHOLE: (whole, tuple(p.shape))}
    if clip is not None and clip.output("Out"):
        out[clip.output("Out")[0]] = merged.name
    return out


def _merge_grad(s: ServerBuild, block: Block, grad_name: str):
    """The merged grad var this endpoint optimizes with (sum + scale over the trainers' copies in
    sync mode), or None when this endpoint holds no block of that grad."""
    g = s.grad_by_origin.get(s.index.origin_name(grad_name))
    if g is None:
        return None
    plan = s.plan
    gvars = s.gvars
    # the merged grad and the trainers' copies share new_tensor's VarType
    vt = tensor_type(g.kind, g.dtype or "FP32", g.shape, None)
    if g.name not in gvars:
        gvars[g.name] = Var(g.name, vt, True)
    s.grad_to_block_id.append("%s:%d" % (g.name, block.idx))
    if plan.is_sync and plan.trainers > 1:
        per_trainer = [trainer_copy_name(g.name, i) for i in range(plan.trainers)]
        for name in per_trainer:
            if name not in gvars:
                gvars[name] = Var(name, vt, False)
        # Paddle's sum re-declares the merged grad by its InferShape: with no dims when the
        # block holds no rows (a table with fewer rows than pservers)
        merged_shape = add_n_shape([g.shape] * plan.trainers, [g.kind] * plan.trainers)
        if tuple(gvars[g.name].shape or ()) != merged_shape:
            gvars[g.name] = gvars[g.name].with_shape(merged_shape)
        sum_op, scale_op = _merge_templates(s)
        block.ops.append(sum_op.make({"X": per_trainer}, {"Out": [g.name]}))
        block.ops.append(scale_op.make({"X": [g.name]}, {"Out": [g.name]}))
    return g


def _merge_templates(s: ServerBuild) -> tuple:
    """The sum and scale ops averaging the trainers' grads, typed once per split."""
    index = s.index
    if index.merge_templates is None:
        index.merge_templates = (
            OpTemplate("sum", {"use_mkldnn": Attr("BOOLEAN", False), **role_attrs(0)}),
            OpTemplate("scale", {
                "bias": Attr("FLOAT", 0.0), "bias_after_scale": Attr("BOOLEAN", True),
                "scale": Attr("FLOAT", 1.0 / float(s.plan.trainers)), **role_attrs(0)}))
    return index.merge_templates


def _param_block(s: ServerBuild, param: str):
    return s.param_block.get(param)


def _append_optimizer_op(s: ServerBuild, block: Block, op: Op, merged: VarBlock) -> None:
    """The optimizer op on the param block held here, its state shaped like that block."""
    p = _param_block(s, op.input("Param")[0])
    if p is None:
        return
    gvars = s.gvars
    firsts, states = s.index.update_slots(s, op)
    inputs = {}
    grad = merged
    for slot, v in firsts:
        if slot == "Grad":
            # a regularized sparse grad: Paddle's decay writes a new var (`<grad>@NEWGRAD@`,
            # made by the pserver's copy of the chain), which the update reads when declared
            g = op.input("Grad")[0]
            if NEW_GRAD_SUFFIX in g and g in gvars:
                grad = gvars[g]
            inputs[slot] = [grad.name]
        elif slot == "Param":
            if p.name not in gvars:
                gvars[p.name] = new_tensor(p.name, p.shape, p.dtype, persistable=True)
            inputs[slot] = [p.name]
        else:
            if v.name not in gvars:
                gvars[v.name] = new_tensor(v.name, v.shape or (), v.dtype,
                                           persistable=v.is_persistable)
            inputs[slot] = [v.name]
    for slot, v, sliced, dtype, persistable in states:
        name = v.name
        if name not in gvars:       # s.ensure(new_tensor(...)), its lookups made once
            vt = tensor_type("LOD_TENSOR", dtype, p.shape if sliced else (v.shape or ()), None)
            gvars[name] = Var(name, vt, persistable)
        inputs[slot] = [name]
    outputs = {k: list(v) for k, v in op.outputs.items()}
    outputs["ParamOut"] = [p.name]
    new = op.copy({k: inputs[k] for k in op.inputs if k in inputs}, outputs)
    block.ops.append(new)
    if grad.kind == "SELECTED_ROWS":
        s.sparse_grad_to_param.append("%s:%s" % (grad.name, p.name))


def _lr_decay_block(s: ServerBuild) -> int:
    """The LR-schedule ops on the pserver; the counter increment stays with the trainers."""
    plan = s.plan
    if not plan.lr_ops:
        return -1
    ops = select(s.origin.global_block.ops, plan.pserver_lr_ops)
    block = s.new_block(len(s.prog.blocks) - 1)
    for op in ops:
        _clone_non_opt_op(s, block, op)
    return block.idx


def build_optimize_blocks(s: ServerBuild) -> tuple:
    """(optimize block indices, lr_decay_block_id) of add_optimizer_pass."""
    held = {s.index.origin_name(p.name) for p in s.params}
    on_here = [op for op, param in s.index.update_params if param in held]
    blocks = []
    lr_block = _lr_decay_block(s)
    if lr_block >= 0:
        blocks.append(lr_block)
    parent = len(s.prog.blocks) - 1
    for opt in on_here:
        target = opt.attr("op_role_var")[0]
        block = s.new_block(parent)
        blocks.append(block.idx)
        group = s.index.by_target[target]
        merged = None
        for op in group:
            merged = _merge_grad(s, block, op.attr("op_role_var")[1])
            if merged:
                break
        if merged is None:
            continue
        origin = s.index.origin_name(merged.name)
        clip = s.index.clip_of.get(origin) if FLEET_CLIP_BEFORE_MERGE in s.plan.fixes else None
        if clip is None and FLEET_SPARSE_CLIP_DROPPED in s.plan.fixes and \
                target in s.sparse_params:
            clip = s.index.clip_of_raw.get(origin)     # the clip whose result is never pushed
        if clip is not None:
            # the clip the trainer no longer runs, on the averaged gradient
            block.ops.append(clip.copy({"X": [merged.name]}, {"Out": [merged.name]}))
        decay = _decay_names(s, target, merged, clip)
        for op in group:
            if is_optimizer_update(op):
                _append_optimizer_op(s, block, op, merged)
            else:
                _clone_non_opt_op(s, block, op, decay)
    if not blocks:
        blocks.append(s.new_block(len(s.prog.blocks) - 1).idx)
    return blocks, lr_block


def build_geo_blocks(s: ServerBuild) -> list:
    """Geo: the trainers push deltas; each block adds one delta into its param slice."""
    sparse = set(s.plan.sparse_tables)
    for p in s.params:
        s.ensure(new_tensor(p.name, p.shape, p.dtype, kind=p.kind, persistable=True,
                            lod_level=p.lod_level))
    blocks = []
    for p in s.params:
        block = s.new_block(0)
        blocks.append(block.idx)
        delta = delta_name(p.name)
        if s.index.origin_name(p.name) in sparse:
            s.sparse_grad_to_param.append("%s:%s" % (delta, p.name))
        s.ensure(new_tensor(delta, p.shape, p.dtype, kind=p.kind, persistable=False))
        block.ops.append(make_op("sum", {"X": [p.name, delta]}, {"Out": [p.name]}, {
            "use_mkldnn": Attr("BOOLEAN", False), **role_attrs(0)}))
        s.grad_to_block_id.append("%s:%d" % (delta, block.idx))
    return blocks


# --- large-scale tables ----------------------------------------------------------------------
def _table_params(s: ServerBuild) -> list:
    """(param block, grad, block idx) of the large-scale tables optimized here."""
    sparse = set(s.plan.sparse_tables)
    block_of = dict(e.rsplit(":", 1) for e in s.grad_to_block_id)
    out = []
    for entry in s.sparse_grad_to_param:
        grad, param = entry.split(":")
        if s.index.origin_name(param) in sparse:
            continue
        out.append((param, grad, int(block_of[grad])))
    return out


def _table_values(s: ServerBuild, block: Block):
    for i, op in enumerate(block.ops):
        if op.type not in TABLE_VALUES:
            continue
        names, dims, actual = [], [], []
        for value in TABLE_VALUES[op.type]:
            v = s.gvars.get(op.input(value)[0])
            if v is None or len(v.shape or ()) != 2:
                raise UserError("large-scale table %s: %s must be a 2-D var"
                                % (op.input("Param")[0], value))
            names.append(value)
            dims.append(int(v.shape[1]))
            actual.append(v.name)
        return i, op, names, dims, actual
    return None


def _entry(s: ServerBuild, param: str):
    return s.index.entry.get(s.index.origin_name(param))


def _init_attrs(s: ServerBuild, names: list) -> str:
    out = []
    for name in names:
        op = s.index.initializer.get(s.index.origin_name(name))
        if op is not None:
            out.append(initializer_signature(op))
    return ",".join(out)


def large_scale_tables(s: ServerBuild, startup: Program) -> list:
    """Rewrite the blocks of large-scale tables to lookup_sparse_table_* ops; return the table
    metas for lookup_sparse_table_init. sgd / adam become one fused op; other optimizers read
    the rows, run, and write them back."""
    metas = []
    for param, grad, bid in _table_params(s):
        block = s.prog.blocks[bid]
        found = _table_values(s, block)
        if found is None:
            continue
        i, op, names, dims, actual = found
        entry = _entry(s, param)
        is_entry = entry != "none"
        grad_name = op.input("Grad")[0]
        common = {"is_entry": Attr("BOOLEAN", is_entry), "tablename": Attr("STRING", param),
                  "value_names": Attr("STRINGS", names), "op_role": Attr("INT", 0)}
        if op.type == "sgd":
            block.ops[i] = make_op("lookup_sparse_table_fuse_sgd",
                                   {"Grad": [grad_name], "LearningRate": op.input("LearningRate")},
                                   {}, common)
        elif op.type == "adam":
            block.ops[i] = make_op(
                "lookup_sparse_table_fuse_adam",
                {"Grad": [grad_name], "LearningRate": op.input("LearningRate"),
                 "Beta1Pow": op.input("Beta1Pow"), "Beta2Pow": op.input("Beta2Pow")},
                {"Beta1PowOut": op.output("Beta1PowOut"), "Beta2PowOut": op.output("Beta2PowOut")},
                {"beta1": op.find_attr("beta1"), "beta2": op.find_attr("beta2"),
                 "epsilon": op.find_attr("epsilon"), **common})
        else:
            ids = "kSparseIDs@%s" % param
            s.ensure(Var.tensor(ids, "INT64", (1, 1), lod_level=0, persistable=False))
            block.ops.insert(i, make_op("lookup_sparse_table_grad_split", {"Grad": [grad_name]},
                                        {"Row": [ids], "Value": [grad_name]}, {
                                            "tablename": Attr("STRING", param),
                                            "is_entry": Attr("BOOLEAN", is_entry),
                                            "op_role": Attr("INT", 0)}))
            block.ops.insert(i + 1, make_op("lookup_sparse_table_read", {"Ids": [ids]},
                                            {"Out": actual}, {
                                                "tablename": Attr("STRING", param),
                                                "value_names": Attr("STRINGS", names),
                                                "op_role": Attr("INT", 0)}))
            block.ops.append(make_op("lookup_sparse_table_write", {"Ids": [ids], "In": actual},
                                     {}, {"tablename": Attr("STRING", param),
                                          "value_names": Attr("STRINGS", names),
                                          "op_role": Attr("INT", 0)}))
        meta = [param, ",".join(names), ",".join(str(d) for d in dims), "0",
                s.gvars[grad_name].name if grad_name in s.gvars else grad_name,
                ",".join(actual + ["kSparseIDs@%s" % param]), _init_attrs(s, actual),
                str(entry)]
        metas.append(":".join(meta))
    return metas
