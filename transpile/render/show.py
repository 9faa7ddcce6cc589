"""Readable listings of programs and splits (formatting only; nothing is decided here)."""
from __future__ import annotations

import sys
from typing import Optional

from ..ir.program import Op, Program, Var
from ..ir.roles import BACKWARD, DIST, FORWARD, LOSS, LRSCHED, OPTIMIZE, RPC
from ..plan.faults import summary as faults_summary
from . import fold

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
    if op.has_attr("op_role"):
        extras.append("op_role=" + role_name(op.attr("op_role")))
    for name in (op.attr_names() if attrs else op.block_attr_names()):
        a = op.find_attr(name)
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


# --- the split summary -----------------------------------------------------------------------
BAR_WIDTH = 30


def load_bar(value: int, top: int, width: int = BAR_WIDTH) -> str:
    """`█` characters proportional to value / top, padded with `·` to `width`."""
    n = int(round(width * value / float(top))) if top else 0
    return "█" * n + "·" * (width - n)


def _ratio(x) -> str:
    return "-" if x is None else "%.2f" % x


def balance_line(plan: dict) -> str:
    """`placement balanced: best possible 1.00; round_robin would give 1.98`, from plan.json's
    `effective` and `balance` ('' for a plan without them)."""
    bal = plan.get("balance")
    if not bal:
        return ""
    method = (plan.get("effective") or {}).get("split_method", "?")
    best = _ratio(bal.get("best_imbalance"))
    if not bal.get("best_exact", True):
        best = "at least " + best
    out = "placement %s: best possible %s" % (method, best)
    rr = bal.get("round_robin") or {}
    if method != "round_robin":
        out += "; round_robin would give %s" % _ratio(rr.get("imbalance"))
    return out


ENDPOINTS_WHERE = "plan.json's `endpoints` lists them"


def program_rows(plan: dict):
    """(style, text) lines of the summary's programs: ops, removed, inserted; each role's
    long list folded."""
    yield "bold", "  %-40s %7s %8s %8s" % ("program", "ops", "removed", "inserted")
    progs = sorted(plan["programs"].items())
    for role in ("pserver", "trainer"):
        rows = ["  %-40s %7d %8d %8d" % (key + ".pb", p["ops"], p["removed"], p["inserted"])
                for key, p in progs if key.startswith(role + "_")]
        for line in fold.head(rows, "%s programs" % role,
                              "report.md and plan.json's `programs` list them"):
            yield "", line


def _elements(shape) -> int:
    n = 1
    for d in shape or ():
        n *= max(int(d), 1)
    return n


def surplus_line(plan: dict) -> str:
    """A warning when the pservers outnumber the blocks of min_block_size elements the
    parameters make (a pserver then holds a sliver); "" otherwise, and where a table has no
    row count (style ps's unbounded ones)."""
    cfg = plan["config"]
    n, size = len(cfg["pservers"]), int(cfg.get("min_block_size") or 8192)
    if "tables" in plan:
        tables = [t for t in plan["tables"] if t.get("kind") != "barrier"]
        if any(t.get("kind") == "sparse" and not t.get("rows") for t in tables):
            return ""
        values = sum(int(t.get("rows") or 0) * int(t.get("dim") or 1) for t in tables)
    else:
        values = sum(_elements(p.get("shape")) for p in plan.get("params") or [])
    worth = sum(1 for _ in range(0, values, size)) if values else 0
    if n <= max(worth, 1):
        return ""
    return ("warning: %d pservers for %d block%s worth placing (%d parameter values, in "
            "blocks of min_block_size %d): each holds %s on average; fewer pservers would "
            "hold the same" % (n, worth, "s" * (worth != 1), values, size,
                               human_bytes(int(plan.get("total_bytes") or 0) // n)))


def split_summary_lines(plan: dict, out_dir: str):
    """(style, text) lines of the split summary, read from the plan.json dict."""
    cfg = plan["config"]
    eps = cfg["pservers"]
    yield "bold", "split (%s style, %s mode, %d trainers, %d pservers) -> %s" % (
        plan["style"], plan["mode"], cfg["trainers"], len(eps), out_dir)
    held = plan["endpoints"]
    top = max([held[ep]["bytes"] for ep in eps] or [0])
    yield "bold", "  %-22s %6s %10s  load" % ("endpoint", "blocks", "held")
    for line in fold.head(["  %-22s %6d %10s  %s" % (
            ep, held[ep]["param_blocks"], human_bytes(held[ep]["bytes"]),
            load_bar(held[ep]["bytes"], top)) for ep in eps], "endpoints", ENDPOINTS_WHERE):
        yield "", line
    line = surplus_line(plan)
    if line:
        yield "yellow", "  " + line
    imb = plan["imbalance"]
    style = "" if imb is None or imb < 1.25 else "yellow"
    yield style, "  imbalance (max/mean bytes): %s   total %s" % (
        "-" if imb is None else "%.2f" % imb, human_bytes(plan["total_bytes"]))
    line = balance_line(plan)
    if line:
        yield "", "  " + line
    yield from program_rows(plan)
    line = faults_summary(plan.get("faults") or [])
    if line:
        yield "yellow" if "reproduced" in line else "", "  " + line


def print_split_summary(plan: dict, out_dir: str, color: bool = False) -> None:
    emit(split_summary_lines(plan, out_dir), color)
