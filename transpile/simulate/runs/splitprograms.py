"""The programs of a split by role, as the simulator takes them, and a trainer's programs
derived from another trainer's (a split folder may hold only trainer_0)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...core.errors import UserError
from ...ir.program import Program


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


def split_programs_from(programs: dict, runtime: dict, config) -> SplitPrograms:
    """SplitResult-style dicts ("trainer_0/main" -> Program, "trainer_0" -> runtime) by role;
    trainers the split lacks are derived from the lowest trainer present."""
    from ...output.result import endpoint_dir

    sp = SplitPrograms()
    dirs = {endpoint_dir(ep): ep for ep in config.pservers}
    trainers: dict = {}
    for key, prog in programs.items():
        folder, _, kind = key.rpartition("/")
        if kind not in ("main", "startup"):
            continue
        m = re.fullmatch(r"trainer_(\d+)", folder)
        if m:
            trainers.setdefault(int(m.group(1)), {})[kind] = prog
        elif folder in dirs:
            sp.pservers.setdefault(dirs[folder], {})[kind] = prog
        elif folder.startswith("pserver_"):
            raise UserError("the split has %s/, which is no endpoint of the cluster config (%s)"
                            % (folder, ", ".join(config.pservers)))
    for ep in config.pservers:
        if "main" not in sp.pservers.get(ep, {}):
            raise UserError("the split has no %s/main program for pserver %s"
                            % (endpoint_dir(ep), ep))
        sp.pservers[ep].setdefault("startup", Program.empty())
    if not trainers:
        raise UserError("the split has no trainer_<id>/main program")
    for tid, p in trainers.items():
        if "main" not in p:
            raise UserError("the split has trainer_%d/startup but no trainer_%d/main" % (tid, tid))
        p.setdefault("startup", Program.empty())
    rts = {}
    for key, rt in (runtime or {}).items():
        m = re.fullmatch(r"trainer_(\d+)", key)
        if m:
            rts[int(m.group(1))] = rt
    src = min(trainers)
    derived = []
    for tid in range(config.trainers):
        if tid in trainers:
            sp.trainers[tid] = trainers[tid]
            if tid in rts:
                sp.runtime[tid] = rts[tid]
            continue
        sp.trainers[tid] = {k: rename_trainer_program(v, src, tid)
                            for k, v in trainers[src].items()}
        if src in rts:
            sp.runtime[tid] = rename_runtime(rts[src], src, tid)
        derived.append(tid)
    if derived:
        sp.notes.append("%s derived from trainer_%d by renaming its .trainer_%d vars"
                        % (", ".join("trainer_%d" % t for t in derived), src, src))
    if config.traits.runtime_json:
        for tid in sp.trainers:
            if tid not in sp.runtime:
                sp.notes.append("trainer_%d has no runtime.json: its sends go by epmap" % tid)
    return sp
