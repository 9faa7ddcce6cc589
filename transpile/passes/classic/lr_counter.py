"""The classic style's async LR-decay counter: merged from per-trainer counters on the pservers
(Paddle's DistributeTranspiler does this before building any program; transpile/split.py runs
it first too)."""
from __future__ import annotations

from ...ir import roles
from ...ir.program import Program
from ...plan.classic import DistributionPlan
from ..build import DTYPE_CODES, make_op, tensor_like


def merge_lr_counter(main: Program, startup: Program, plan: DistributionPlan):
    """Async LR decay: the counter's increment becomes a sum of per-trainer counters.

    Each trainer sends `<counter>.trainer_<id>` (starting at 1, merged by addition on the
    pservers) and the pservers' counter, now started at -trainers, is their sum, as Paddle's
    DistributeTranspiler does. Returns new (main, startup); the sum keeps the increment's uid
    (it is the plan's LR-schedule op, rewritten).
    """
    if plan.lr_counter is None:
        return main, startup
    uid, counter = plan.lr_counter
    main, startup = main.copy(), startup.copy()
    block, sblock = main.global_block, startup.global_block
    cvar = block.var(counter)
    names = [plan.counter_name(t) for t in range(plan.trainers)]
    for name in names:
        block.add_var(tensor_like(cvar, name, cvar.shape, cvar.persistable, lod_level=0))
    index = next(i for i, op in enumerate(block.ops) if op.uid == uid)
    block.ops[index] = make_op("sum", {"X": names}, {"Out": [counter]},
                               {roles.ROLE_ATTR: roles.LRSCHED})
    block.ops[index].uid = uid
    for op in sblock.ops:
        if op.type == "fill_constant" and op.output("Out") == [counter]:
            op.set_attr("value", float(0 - plan.trainers))
    for name in names:
        sblock.add_var(tensor_like(cvar, name, cvar.shape, cvar.persistable, lod_level=0))
        sblock.ops.append(make_op("fill_constant", {}, {"Out": [name]}, {
            "shape": list(cvar.shape), "dtype": DTYPE_CODES[cvar.dtype], "value": 1.0,
            "str_value": "1.0", "force_cpu": False, roles.ROLE_ATTR: roles.FORWARD}))
    return main, startup
