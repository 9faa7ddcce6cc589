"""Op-registration shim: lets the old parameter-server transpilers of Paddle 2.6.2 (fluid's
DistributeTranspiler, Fleet 2.0's ir passes) run on the 2.6.2 CPU wheel.  Import after paddle,
call install() once per process.

Two things about the wheel would otherwise break or shape the output:

1. Unregistered ops.  The wheel registers no OpProto for some ops the passes emit (recv,
   split_byref, split_selected_rows, prefetch, split_ids, merge_ids, checkpoint_notify,
   lookup_sparse_table*, ...).  install() registers each one still absent with an OpProto that
   declares no slots and no attrs, marks it kernel-less (Python then skips the C++ var-type and
   shape inference it cannot find) and skips its attr check (there is no C++ checker).
2. Narrow protos.  Operator.__init__ copies into the OpDesc only the slots and attrs the
   registered proto declares.  The wheel's pscore protos of send / send_barrier / fetch_barrier /
   listen_and_serv / distributed_lookup_table / distributed_push_sparse lack slots and attrs the
   transpilers set (send's epmap, sections, merge_add; distributed_push_sparse's W and Outputs).
   For every op in WHOLE_OPS (all RPC / communication / sparse-table ops these passes create)
   every slot and every attr the pass passes is kept: what the proto declares is set by Paddle
   itself; the rest is added afterwards, typed by FIXED_TYPES (the type Paddle 2.0's op makers
   declared, where a Python value would say otherwise) or else by the Python value (bool BOOLEAN,
   int INT or LONG beyond int32, float FLOAT, str STRING, lists alike, [] STRINGS).  A later
   op._set_attr of an undeclared attr on such an op is typed the same way.

strip_empty_slots(program) drops the empty dispensable slots the 2.x ops carry (MasterParam,
SkipUpdate, ...) that the old transpilers predate.
"""
from paddle.base import core, framework
from paddle.base.framework import OpProtoHolder
from paddle.base.proto import framework_pb2

# ops the old passes create that a CPU wheel may not register (Paddle 2.0 distributed_ops)
MAYBE_ABSENT = (
    'checkpoint_notify', 'lookup_sparse_table', 'lookup_sparse_table_fuse_adam',
    'lookup_sparse_table_fuse_sgd', 'lookup_sparse_table_grad_split', 'lookup_sparse_table_init',
    'lookup_sparse_table_read', 'lookup_sparse_table_write', 'merge_ids', 'prefetch', 'recv',
    'recv_save', 'ref_by_trainer_id', 'split_byref', 'split_ids', 'split_selected_rows',
)

# every op whose slots and attrs are kept whole
WHOLE_OPS = tuple(sorted(set(MAYBE_ABSENT) | {
    'distributed_lookup_table', 'distributed_push_sparse', 'fake_init', 'fetch_barrier',
    'heter_listen_and_serv', 'listen_and_serv', 'send', 'send_and_recv', 'send_barrier',
}))

_T = core.AttrType
# attrs whose Paddle 2.0 type is not what the Python value would give
FIXED_TYPES = {
    ('send', 'sections'): _T.LONGS,
    ('split_selected_rows', 'height_sections'): _T.LONGS,
    ('distributed_lookup_table', 'height_sections'): _T.LONGS,
    ('prefetch', 'height_sections'): _T.LONGS,
    ('lookup_sparse_table', 'padding_idx'): _T.LONG,
}

STATE = {'installed': False, 'registered': [], 'whole': frozenset(WHOLE_OPS)}
_INT32 = (-(1 << 31), (1 << 31) - 1)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _list_type(vals):
    if not vals or all(isinstance(x, str) for x in vals):
        return _T.STRINGS
    if all(isinstance(x, bool) for x in vals):
        return _T.BOOLS
    if all(_is_int(x) for x in vals):
        small = all(_INT32[0] <= x <= _INT32[1] for x in vals)
        return _T.INTS if small else _T.LONGS
    if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vals):
        return _T.FLOATS
    return None


def value_type(op_type, name, v):
    """The AttrType an undeclared attr value is stored as."""
    fixed = FIXED_TYPES.get((op_type, name))
    if fixed is not None:
        return fixed
    if isinstance(v, bool):
        return _T.BOOL
    if isinstance(v, float):
        return _T.FLOAT
    if isinstance(v, str):
        return _T.STRING
    if isinstance(v, (list, tuple)):
        t = _list_type(list(v))
        if t is not None:
            return t
    elif hasattr(v, '__int__'):          # int, and pybind enums such as OpRole
        return _T.INT if _INT32[0] <= int(v) <= _INT32[1] else _T.LONG
    raise TypeError('shim: cannot type attr %s.%s = %r' % (op_type, name, v))


def set_attr(desc, op_type, name, v):
    """Set an attr the op's proto does not declare, typed by value_type."""
    if isinstance(v, framework.Block):
        desc.set_block_attr(name, v.desc)
        return
    if isinstance(v, (list, tuple)) and v and all(isinstance(b, framework.Block) for b in v):
        desc.set_blocks_attr(name, [b.desc for b in v])
        return
    t = value_type(op_type, name, v)
    seq = list(v) if isinstance(v, (list, tuple)) else None
    setters = {
        _T.BOOL: lambda: desc._set_bool_attr(name, bool(v)),
        _T.INT: lambda: desc._set_int32_attr(name, int(v)),
        _T.LONG: lambda: desc._set_int64_attr(name, int(v)),
        _T.FLOAT: lambda: desc._set_float32_attr(name, float(v)),
        _T.STRING: lambda: desc._set_str_attr(name, v),
        _T.BOOLS: lambda: desc._set_bools_attr(name, [bool(x) for x in seq]),
        _T.INTS: lambda: desc._set_int32s_attr(name, [int(x) for x in seq]),
        _T.LONGS: lambda: desc._set_int64s_attr(name, [int(x) for x in seq]),
        _T.FLOATS: lambda: desc._set_float32s_attr(name, [float(x) for x in seq]),
        _T.STRINGS: lambda: desc._set_strs_attr(name, [str(x) for x in seq]),
    }
    setters[t]()


def _names(args):
    if not isinstance(args, (list, tuple)):
        args = [args]
    out = []
    for a in args:
        if isinstance(a, bytes):
            out.append(a.decode())
        else:
            out.append(a if isinstance(a, str) else a.name)
    return out


def _complete(op, block, inputs, outputs, attrs):
    """Add to op.desc the slots and attrs the registered proto made Paddle drop."""
    d, t = op.desc, op.desc.type()
    have_in, have_out = set(d.input_names()), set(d.output_names())
    for slot, args in (inputs or {}).items():
        if args is not None and slot not in have_in:
            d.set_input(slot, _names(args))
    for slot, args in (outputs or {}).items():
        if args is None or slot in have_out:
            continue
        names = _names(args)
        d.set_output(slot, names)
        for n in names:
            if block.has_var(n) and block.var(n).op is None:
                block.var(n).op = op
    for name, v in attrs.items():
        if v is None or d.has_attr(name):
            continue
        if name == 'op_role_var' and len(v) == 0:
            continue
        set_attr(d, t, name, v)


def _wrap_init(orig):
    def init(self, block, desc, type=None, inputs=None, outputs=None, attrs=None):
        whole = type in STATE['whole']
        if whole and attrs is None:
            attrs = {}       # Paddle adds op_role / op_callstack / op_namescope to this dict
        orig(self, block, desc, type, inputs, outputs, attrs)
        if whole and self.desc.type() == type:
            _complete(self, block, inputs, outputs, attrs)
    return init


def _wrap_plain_attr(orig):
    def update(self, name, val):
        t = self.desc.type()
        declared = name in getattr(self, '_attr_types', {})
        if t in STATE['whole'] and not declared and name not in _extra_attrs(t):
            set_attr(self.desc, t, name, val)
            return
        orig(self, name, val)
    return update


_EXTRA = {}


def _extra_attrs(t):
    if t not in _EXTRA:
        try:
            _EXTRA[t] = frozenset(core.get_op_extra_attrs(t))
        except Exception:  # noqa: BLE001  (an op the C++ registry does not know)
            _EXTRA[t] = frozenset()
    return _EXTRA[t]


def _wrap_check(orig):
    registered = frozenset(STATE['registered'])

    def check(self):
        if self.type() in registered:
            return None
        return orig(self)
    return check


def _empty_proto(op_type):
    p = framework_pb2.OpProto()
    p.type = op_type
    p.comment = 'pstranspile tools/gen shim: slots and attrs are kept as the pass gives them'
    return p


def install():
    """Register the absent ops and keep the WHOLE_OPS whole; idempotent."""
    if STATE['installed']:
        return STATE
    holder = OpProtoHolder.instance()
    for t in MAYBE_ABSENT:
        if t not in holder.op_proto_map:
            holder.op_proto_map[t] = _empty_proto(t)
            framework.Operator.OP_WITHOUT_KERNEL_SET.add(t)
            STATE['registered'].append(t)
    framework.Operator.__init__ = _wrap_init(framework.Operator.__init__)
    framework.Operator._update_desc_plain_attr = _wrap_plain_attr(
        framework.Operator._update_desc_plain_attr)
    core.OpDesc.check_attrs = _wrap_check(core.OpDesc.check_attrs)
    STATE['installed'] = True
    return STATE


def strip_empty_slots(program, keep_required=False):
    """Remove every empty input/output slot of every op.  keep_required keeps the empty slots the
    op's proto does not mark dispensable (the classic transpiler re-creates ops through
    Operator(), which insists on them, e.g. conditional_block's Input)."""
    holder = OpProtoHolder.instance()
    for block in program.blocks:
        for op in block.ops:
            proto = holder.op_proto_map.get(op.type) if keep_required else None
            need_in = {s.name for s in proto.inputs if not s.dispensable} if proto else set()
            need_out = {s.name for s in proto.outputs if not s.dispensable} if proto else set()
            for n in list(op.desc.input_names()):
                if not op.desc.input(n) and n not in need_in:
                    op.desc.remove_input(n)
            for n in list(op.desc.output_names()):
                if not op.desc.output(n) and n not in need_out:
                    op.desc.remove_output(n)
