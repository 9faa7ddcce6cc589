"""Readable listings of programs and splits (formatting only; nothing is decided here)."""
from __future__ import annotations

import sys
from typing import Optional

from .program import Op, Program, Var
from .roles import BACKWARD, DIST, FORWARD, LOSS, LRSCHED, OPTIMIZE, RPC

# attrs that are noise in a listing
_DEBUG_ATTRS = {"op_callstack", "op_namescope", "op_device", "with_quant_attr", "op_role",
                "op_role_var"}


def role_name(role: Optional[int]) -> str:
    if role is None:
        return ""
    names = []
    for bit, name in ((BACKWARD, "backward"), (OPTIMIZE, "optimize"), (RPC, "rpc"),
                      (DIST, "dist"), (LRSCHED, "lrsched"), (LOSS, "loss")):
        if role & bit:
            names.append(name)
    if role == FORWARD:
        names.append("forward")
    return "|".join(names) or hex(role)


def _slots(slots: dict) -> str:
    return ", ".join("%s=%s" % (k, v[0] if len(v) == 1 else "[" + ", ".join(v) + "]")
                     for k, v in slots.items() if v)


def _short(value, limit=60) -> str:
    s = repr(value) if not isinstance(value, str) else value
    return s if len(s) <= limit else s[:limit - 3] + "..."


def format_op(op: Op, attrs: bool = False) -> str:
    """`sgd(Param=fc_w, Grad=fc_w@GRAD) -> (ParamOut=fc_w)  op_role=optimize`"""
    s = "%s(%s) -> (%s)" % (op.type, _slots(op.inputs), _slots(op.outputs))
    extras = []
    if "op_role" in op.attrs:
        extras.append("op_role=" + role_name(op.attr("op_role")))
    for name, a in op.attrs.items():
        if a.type == "BLOCK":
            extras.append("%s=block %d" % (name, a.value))
        elif a.type == "BLOCKS":
            extras.append("%s=blocks %s" % (name, a.value))
        elif attrs and name not in _DEBUG_ATTRS:
            extras.append("%s=%s" % (name, _short(a.value)))
    if extras:
        s += "  " + " ".join(extras)
    return s


def format_var(v: Var) -> str:
    shape = "" if v.shape is None else "[" + ", ".join(str(d) for d in v.shape) + "]"
    flags = []
    if v.persistable:
        flags.append("persistable")
    if v.is_parameter:
        flags.append("parameter")
    return "%s: %s %s%s%s" % (v.name, v.kind, v.dtype or "", shape,
                              ("  " + " ".join(flags)) if flags else "")


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024
    return str(n)


def program_lines(prog: Program, block: Optional[int] = None):
    """(style, text) lines of a listing; style is a rich style name or ''."""
    for b in prog.blocks:
        if block is not None and b.idx != block:
            continue
        head = "block %d" % b.idx
        if b.idx:
            head += " (parent %d)" % b.parent_idx
        yield "bold", "%s: %d vars, %d ops" % (head, len(b.vars), len(b.ops))
        yield "bold", "  vars:"
        for v in b.vars.values():
            yield ("cyan" if v.is_parameter else ""), "    " + format_var(v)
        yield "bold", "  ops:"
        for i, op in enumerate(b.ops):
            yield "", "    %3d  %s" % (i, format_op(op))
    params = prog.parameters()
    total = sum(p.nbytes() for p in params)
    yield "bold", ("summary: %d blocks, %d ops, %d vars, %d parameters (%s)"
                   % (len(prog.blocks), sum(len(b.ops) for b in prog.blocks),
                      sum(len(b.vars) for b in prog.blocks), len(params), human_bytes(total)))


def emit(lines, color: bool, file=None) -> None:
    file = file or sys.stdout
    if color:
        from rich.console import Console
        from rich.text import Text
        console = Console(file=file, force_terminal=True, highlight=False, soft_wrap=True)
        for style, text in lines:
            console.print(Text(text, style=style or ""))
    else:
        for _, text in lines:
            file.write(text + "\n")


def print_program(prog: Program, block: Optional[int] = None, color: bool = False) -> None:
    emit(program_lines(prog, block), color)


def split_summary_lines(result, cfg, out_dir: str):
    yield "bold", "split (%s style, %s mode, %d trainers, %d pservers) -> %s" % (
        cfg.style, cfg.mode, cfg.trainers, len(cfg.pservers), out_dir)
    for key in sorted(result.programs):
        prog = result.programs[key]
        yield "", "  %-40s %3d blocks %6d ops" % (key + ".pb", len(prog.blocks),
                                                    sum(len(b.ops) for b in prog.blocks))
    for key in sorted(result.runtime):
        yield "", "  %s/runtime.json" % key


def print_split_summary(result, cfg, out_dir: str, color: bool = False) -> None:
    emit(split_summary_lines(result, cfg, out_dir), color)
