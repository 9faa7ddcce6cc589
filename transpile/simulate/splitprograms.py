"""The programs of a split by role, as the simulator takes them, and a trainer's programs
derived from another trainer's (a split folder may hold only trainer_0)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..ir.program import Program


@dataclass
class SplitPrograms:
    """The programs of a split, by role, as the simulator needs them."""
    trainers: dict = field(default_factory=dict)     # id -> {"main": Program, "startup": Program}
    pservers: dict = field(default_factory=dict)     # endpoint -> {"main":..., "startup":...}
    runtime: dict = field(default_factory=dict)      # trainer id -> runtime.json dict
    notes: list = field(default_factory=list)


def rename_trainer_program(program: Program, src: int, dst: int) -> Program:
    """A copy of trainer `src`'s program for trainer `dst`: `.trainer_<src>` names and the
    trainer_id attrs changed."""
    pat = re.compile(r"\.trainer_%d(?=$|\.)" % src)
    sub = ".trainer_%d" % dst

    def rn(name):
        return pat.sub(sub, name)

    p = program.copy()
    for b in p.blocks:
        b.vars = {rn(k): v for k, v in b.vars.items()}
        for k, v in b.vars.items():
            v.name = k
        for op in b.ops:
            op.inputs = {s: [rn(a) for a in args] for s, args in op.inputs.items()}
            op.outputs = {s: [rn(a) for a in args] for s, args in op.outputs.items()}
            if "trainer_id" in op.attrs:
                op.set_attr("trainer_id", dst)
            for name in ("op_role_var",):
                if name in op.attrs and isinstance(op.attr(name), list):
                    op.set_attr(name, [rn(a) for a in op.attr(name)])
    return p


def rename_runtime(rt: dict, src: int, dst: int) -> dict:
    import copy
    pat = re.compile(r"\.trainer_%d(?=$|\.)" % src)
    out = copy.deepcopy(rt)
    for key in ("send_ctx", "recv_ctx"):
        for ctx in (out.get(key) or {}).values():
            ctx["split_varnames"] = [pat.sub(".trainer_%d" % dst, n)
                                     for n in ctx.get("split_varnames", [])]
            if "trainer_id" in ctx:
                ctx["trainer_id"] = dst
    if isinstance(out.get("kwargs"), dict) and "trainer_id" in out["kwargs"]:
        out["kwargs"]["trainer_id"] = dst
    return out
