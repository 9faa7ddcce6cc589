"""report.md: what a split did, readable in a minute.

The original main program against each trainer program as an op-level diff (what was removed,
grouped by why; what was inserted, in place with a few ops of context; vars added, removed,
reshaped), each pserver program block by block, and the placement table from the plan.
Formatting only: everything here is read off the programs and the plan.
"""
from __future__ import annotations

import itertools
from collections import Counter
from operator import attrgetter
from dataclasses import dataclass
from typing import Callable, Optional

from ..core.jsonfmt import column
from ..core.styles import CLASSIC, FLEET, PS
from ..core.stylehooks import REPORT
from ..ir import roles
from ..ir.program import Op, Program
from ..plan.faults import KIND
from ..plan.faults import summary as faults_summary
from ..diff.programs import diff_programs_and_names
from . import fold
from .diagram import diagram_lines
from .show import balance_line, format_op, human_bytes, surplus_line

ENDPOINTS_LISTED = "plan.json's `config.pservers` lists them"

CONTEXT = 2          # ops of context around each change in the trainer listing
_KEY_ATTRS = ("epmap", "endpoint", "Fanin", "sections", "table_name", "send_varnames",
              "recv_varnames", "trainer_id", "scale", "lr_decay_block_id", "distributed_mode")


_op_type = attrgetter("type")


def removed_kind(op: Op) -> str:
    """Why the trainer lost an op: optimizer, LR decay, regularization / clip, or other."""
    r = roles.role(op)
    if r & roles.LRSCHED:
        return "LR decay"
    if r & roles.OPTIMIZE:
        return "optimizer" if "Param" in op.inputs else "regularization / clip"
    return "other"


def _key_attrs(op: Op) -> str:
    parts = []
    for name in _KEY_ATTRS:
        if op.has_attr(name):
            v = op.attr(name)
            if v in ([], "", None):
                continue
            if isinstance(v, list) and len(v) > 6:
                v = v[:6] + ["..."]
            parts.append("%s=%s" % (name, v))
    return ("  " + " ".join(parts)) if parts else ""


def _op_line(op: Op) -> str:
    return format_op(op) + _key_attrs(op)


def _trainer_section(name: str, original: Program, prog: Program) -> list[str]:
    out = ["## %s" % name, ""]
    # (ops and vars are listed by name only: no need for the details of their changes)
    d, _, control = diff_programs_and_names(original, prog, a_name="original", b_name=name,
                                            details=False)
    a_ops = original.global_block.ops
    b_ops = prog.global_block.ops
    b0 = d.blocks[0] if d.blocks else None
    deleted = [c for c in (b0.ops if b0 else []) if c.kind == "delete"]
    inserted = [c for c in (b0.ops if b0 else []) if c.kind == "insert"]
    changed = [c for c in (b0.ops if b0 else []) if c.kind == "change"]
    out.append("%d ops in the original, %d here: %d removed, %d inserted, %d changed."
               % (len(a_ops), len(b_ops), len(deleted), len(inserted), len(changed)))
    out.append("")
    if deleted:
        groups: dict = {}
        for c in deleted:
            groups.setdefault(removed_kind(a_ops[c.a_index]), []).append(a_ops[c.a_index])
        out.append("**Removed**")
        out.append("")
        folded = []
        for kind in ("optimizer", "LR decay", "regularization / clip", "other"):
            ops = groups.get(kind)
            if not ops:
                continue
            types = Counter(o.type for o in ops)
            what = ", ".join("%s x%d" % (t, n) for t, n in sorted(types.items()))
            params = [o.input("Param")[0] for o in ops if o.input("Param")]
            inline, block = fold.names(params, "parameters")
            folded += block
            out.append("- %s (%d): %s%s" % (kind, len(ops), what,
                                            " — parameters: " + inline if params else ""))
        out.append("")
        out += folded
    if inserted or changed:
        out += _in_place(name, b_ops, inserted, changed)
    var_changes = b0.vars if b0 else None      # (a VarNames: the diff without details)
    # the diff names control vars by the op that writes them; show the real names here
    real = {v: k for k, v in control.items()}
    if var_changes:
        added = [real.get(n, n) for n in var_changes.added]
        removed = [real.get(n, n) for n in var_changes.removed]
        reshaped = ["%s (%s)" % (real.get(v.name, v.name), "; ".join(v.details))
                    for v in var_changes.changed]
        out.append("**Vars**")
        out.append("")
        folded = []
        for label, names in (("added", added), ("removed", removed), ("changed", reshaped)):
            if names:
                inline, block = fold.names(names, "vars " + label)
                folded += block
                out.append("- %s (%d): %s" % (label, len(names), inline))
        out.append("")
        out += folded
    return out


def _in_place(name: str, b_ops: list, inserted: list, changed: list) -> list[str]:
    """The trainer's ops inserted and changed, in place with CONTEXT ops around each: a
    listing that formats only the lines it shows."""
    out = ["**Inserted and changed, in place** (`+` inserted, `~` changed, "
           "%d ops of context)" % CONTEXT, ""]
    marks = {}
    for c in inserted:
        marks[c.b_index] = "+"
    for c in changed:
        marks[c.b_index] = "~"
    shown = set()
    for i in sorted(marks):
        for j in range(max(0, i - CONTEXT), min(len(b_ops), i + CONTEXT + 1)):
            shown.add(j)
    rows: list = []         # op indices, None for a "..." line
    last = -1
    for j in sorted(shown):
        if j != last + 1:
            rows.append(None)
        rows.append(j)
        last = j
    if last != len(b_ops) - 1:
        rows.append(None)
    lines = ("     ..." if j is None else
             "%s %4d  %s" % (marks.get(j, " "), j, _op_line(b_ops[j])) for j in rows)
    return out + fold.listing(lines, "the ops inserted or changed, in place",
                              "`pstranspile diff` of the original and %s lists them" % name,
                              count=len(rows))


def _startup_section(name: str, original: Optional[Program], prog: Program) -> list[str]:
    out = ["## %s" % name, ""]
    ops = prog.global_block.ops
    out.append("%d ops:" % len(ops))
    out.append("")

    def line(i, op):
        shape = op.attr("shape")
        return "%4d  %s%s" % (i, _op_line(op) if op.type in ("recv", "fetch_barrier", "concat",
                                                             "fake_init") else format_op(op),
                              "  shape=%s" % shape if shape and op.type not in (
                                  "recv", "fetch_barrier", "concat") else "")
    out += fold.listing(itertools.starmap(line, enumerate(ops)), "the startup ops",
                        "`pstranspile show %s` lists them" % name, count=len(ops))
    del original
    return out


def _sub_block_parents(prog: Program) -> dict:
    """{block idx: the block whose op (other than listen_and_serv) first runs it}."""
    parent: dict = {}
    for b in prog.blocks:
        for op in b.ops:
            if op.type != "listen_and_serv":
                for ref in op.block_refs():
                    parent.setdefault(ref, b.idx)
    return parent


def _block_role(prog: Program, idx: int, listen: Optional[Op], parents: dict,
                lr_block: Optional[int]) -> str:
    """What block `idx` serves; `lr_block`: listen_and_serv's lr_decay_block_id."""
    block = prog.blocks[idx]
    if listen is not None and lr_block == idx:
        return "LR decay (runs once per step)"
    if idx in parents:
        return "sub-block of block %d" % parents[idx]
    updates = [op for op in block.ops if "Param" in op.inputs and roles.role(op)
               & roles.OPTIMIZE]
    if updates:
        return "; ".join("%s of %s" % (op.type, op.input("Param")[0]) for op in updates)
    if not block.ops:
        return "empty (nothing landed on this endpoint)"
    return ", ".join(sorted({op.type for op in block.ops}))


def _pserver_section(name: str, prog: Program) -> list[str]:
    out = ["## %s" % name, ""]
    listen = next((op for op in prog.global_block.ops if op.type == "listen_and_serv"), None)
    if listen is not None:
        out.append("`listen_and_serv` on %s, Fanin %s, optimize blocks %s"
                   % (listen.attr("endpoint"), listen.attr("Fanin"),
                      listen.attr("optimize_blocks")))
        g2b = listen.attr("grad_to_block_id") or []
        folded = []
        if g2b:
            inline, folded = fold.names(["`%s`" % x for x in g2b], "entries")
            out.append("")
            out.append("grad_to_block_id: " + inline)
        out.append("")
        out += folded
    parents = _sub_block_parents(prog)
    lr_block = listen.attr("lr_decay_block_id") if listen is not None else None
    rows = ("| %d | %s | %s |" % (b.idx, _block_role(prog, b.idx, listen, parents, lr_block),
                                  " → ".join(map(_op_type, b.ops)) or "—")
            for b in prog.blocks[1:])
    out += fold.table(["| block | serves | ops |", "|---|---|---|"], rows, "blocks",
                      "`pstranspile show %s` lists them" % name, count=len(prog.blocks) - 1)
    return out


def _pserver_startup_section(name: str, prog: Program) -> list[str]:
    out = ["## %s" % name, ""]
    gvars = prog.global_block.vars
    ops = prog.global_block.ops
    count = sum(len(args) for op in ops for args in op.outputs.values())

    def rows():
        for op in ops:
            for args in op.outputs.values():
                for v in args:
                    var = gvars.get(v)
                    shape = var.shape if var is not None else None
                    yield "| %s | %s | %s |" % (v, op.type,
                                                "?" if shape is None else str(list(shape)))
    if count:
        out += fold.table(["| var | init | shape |", "|---|---|---|"], rows(), "vars initialized",
                          "`pstranspile show %s` lists them" % name, count=count)
    else:
        out += ["(no init ops)", ""]
    return out


def _placement(plan: dict) -> list[str]:
    out = ["## Placement", ""]
    eps = plan.get("endpoints")
    # what each endpoint holds: plan.json's count (blocks and their accumulators), else the
    # parameter blocks' bytes (a block at a time: a split's are made as they are read)
    per_ep: dict = {}
    blocks = 0
    for p in plan.get("params", []) or []:
        held = p.get("blocks", []) or []
        for ep, size in zip(column(held, "endpoint"), column(held, "bytes")):
            n, b = per_ep.get(ep, (0, 0))
            per_ep[ep] = (n + 1, b + int(size or 0))
            blocks += 1
    if isinstance(eps, dict):
        for ep, h in eps.items():
            if isinstance(h, dict) and "bytes" in h:
                per_ep[ep] = (int(h.get("param_blocks", per_ep.get(ep, (0, 0))[0])),
                              int(h["bytes"] or 0))
    if isinstance(eps, list):
        names = [e if isinstance(e, str) else e.get("endpoint") for e in eps]
    elif isinstance(eps, dict):
        names = list(eps)
    else:
        names = sorted(per_ep)
    balance = plan.get("balance") if isinstance(plan.get("balance"), dict) else {}
    method = (plan.get("effective") or {}).get("split_method")
    rr = (balance.get("round_robin") or {}).get("bytes") or {}
    compare = bool(rr) and method not in (None, "round_robin")
    if per_ep:
        top = max(b for _, b in per_ep.values()) or 1
        total = sum(b for _, b in per_ep.values())
        mean = total / max(1, len(names))
        head = "| endpoint | parameter blocks | bytes held | load |"
        rule = "|---|---|---|---|"
        if compare:
            head += " round_robin would hold |"
            rule += "---|"
        rows = []
        for ep in names:
            n, b = per_ep.get(ep, (0, 0))
            row = "| %s | %d | %s | `%s` |" % (ep, n, human_bytes(b),
                                              "█" * round(20 * b / top) or "·")
            if compare:
                row += " %s |" % human_bytes(int(rr.get(ep, 0) or 0))
            rows.append(row)
        out += fold.table([head, rule], rows, "endpoints", ENDPOINTS_LISTED)
        line = surplus_line(plan) if "config" in plan else ""
        if line:
            out += [line[0].upper() + line[1:] + ".", ""]
        imb = plan.get("imbalance")
        if not isinstance(imb, (int, float)):
            imb = (top / mean) if mean else 0.0
        out.append("Imbalance (max / mean bytes): %.2f" % imb)
        out.append("")
        line = balance_line(plan)
        if line:
            out.append(line[0].upper() + line[1:] + ". Bytes held count each parameter "
                       "block and its optimizer accumulators.")
            out.append("")
    if blocks:
        rows = ("| %s | %s | %s | %s | %s |" % (pname, blk.get("name"), blk.get("shape"),
                                                human_bytes(int(blk.get("bytes", 0) or 0)),
                                                blk.get("endpoint"))
                for pname, blk in _param_blocks(plan))
        out += fold.table(["| parameter | block | shape | bytes | endpoint |",
                           "|---|---|---|---|---|"], rows, "parameter blocks",
                          "plan.json's `params` lists them", count=blocks)
    return out


def _param_blocks(plan: dict):
    """(parameter name, block) of every block of plan.json's params, one at a time."""
    for p in plan.get("params", []) or []:
        for blk in p.get("blocks", []) or []:
            yield p.get("name"), blk


def _faults(faults: list) -> list[str]:
    """The Paddle faults the split reproduces or fixes (plan/faults.py), as a table."""
    if not faults:
        return []
    out = ["## Paddle faults", "", faults_summary(faults) or
           "Corrected here as in the reference corpus:", "",
           "| fault | where | this split | in Paddle's split | `paddle_faults: fix` |",
           "|---|---|---|---|---|"]
    for f in faults:
        kind = KIND[f["id"]]
        state = "fixed" if f["fixed"] else (
            "reproduced (not fixable: %s)" % f["note"] if f.get("note") else "reproduced")
        state = "written; Paddle's pipeline raises" if kind.crash else state
        out.append("| `%s` | %s | %s | %s | %s |" % (f["id"], f["where"], state, kind.paddle,
                                                      kind.fix))
    return out + [""]


def program_section(key: str, main: Program, prog: Program) -> list[str]:
    """The report's lines on one program of a split, by its key ("trainer_0/main",
    "pserver_<ep>/startup" ...); `main`: the original main program."""
    if key.startswith("trainer_"):
        if key.endswith("/main"):
            return _trainer_section(key + ".pb", main, prog)
        if key.endswith("/startup"):
            return _startup_section(key + ".pb", None, prog)
    elif key.startswith("pserver_"):
        if key.endswith("/main"):
            return _pserver_section(key + ".pb", prog)
        if key.endswith("/startup"):
            return _pserver_startup_section(key + ".pb", prog)
    return []


def render_report(main: Program, programs: dict, plan: dict, title: str = "split",
                  config=None, sections: Optional[dict] = None) -> str:
    """The report as markdown. `programs` maps "trainer_0/main" etc. to Programs; `sections`
    the same keys to program_section's lines, made before (for programs no longer held)."""
    return "".join(report_chunks(main, programs, plan, title, config, sections))


def report_chunks(main: Program, programs: dict, plan: dict, title: str = "split",
                  config=None, sections: Optional[dict] = None, head: Optional[list] = None):
    """render_report's text in pieces (a line, or a whole program section when `sections`
    holds it as one string), made as they are written: a report of a large split is never
    held as one string. `head`: report_head's lines for this plan, made before."""
    sections = dict(sections or {})
    for key, prog in programs.items():
        sections[key] = program_section(key, main, prog)
    out = head if head is not None else report_head(plan, title, config)

    def lines():
        yield from out
        for prefix in ("trainer_", "pserver_"):
            for key in sorted(k for k in sections if k.startswith(prefix)):
                yield from sections[key]
    return _stripped_lines(lines())


def report_head(plan: dict, title: str = "split", config=None) -> list:
    """The report's lines before the programs' sections: the title, the cluster, who sends
    what to whom, the tables (style ps) or the placement, the faults."""
    out = ["# Split report: %s" % title, ""]
    if config is not None:
        inline, block = fold.names(list(config.pservers), "pservers", ENDPOINTS_LISTED)
        out.append("Style **%s**, mode **%s**, %d trainer(s), %s" % (
            config.style, config.mode, config.trainers,
            inline if block else "%d pserver(s): %s." % (len(config.pservers), inline)))
        out.append("")
        out += block
    if plan:
        out += REPORT.of(plan["style"]).head(plan)
    else:
        out += _PLACEMENT_CONTENTS
    return out


_PLACEMENT_CONTENTS = [
    "Contents: who sends what to whom; placement; each trainer program against the original; "
    "each pserver program block by block.", ""]


@dataclass(frozen=True)
class ReportWay:
    """report.md's head in a style (its REPORT hook, core/stylehooks.py): `head(plan)` its
    lines after the cluster's; `early_ignores`: the plan.json entries the head reads nothing
    of, so that it is made from the entries the plan alone decides while the programs are
    built (None: it reads what the built programs decide)."""
    head: Callable[[dict], list]
    early_ignores: Optional[frozenset] = None


def _tables_head(plan: dict) -> list:
    """Who sends what to whom, the tables of the descriptors, the faults (style ps)."""
    from .psreport import table_lines
    return ["Contents: who sends what to whom; the tables of the descriptors and what each "
            "trainer exchanges with them; each trainer program against the original; each "
            "pserver program.", ""] + \
        diagram_lines(plan) + table_lines(plan) + _faults(plan.get("faults") or [])


def _placement_head(plan: dict) -> list:
    """Who sends what to whom, the placement, the faults (classic and fleet)."""
    return _PLACEMENT_CONTENTS + diagram_lines(plan) + _placement(plan) + \
        _faults(plan.get("faults") or [])


for _traits in (CLASSIC, FLEET):
    REPORT.register(_traits.name, ReportWay(_placement_head))
# a ps head draws nothing of the grads' pserver blocks, which the built programs decide
REPORT.register(PS.name, ReportWay(_tables_head, early_ignores=frozenset({"programs"})))


def early_report_head(early: dict, late, title: str = "split", config=None) -> Optional[list]:
    """report_head made from plan.json's `early` entries (planjson.PlanParts), when the head
    reads none of the `late` ones (the rest of the dict); else None."""
    if not early:
        return None
    ignores = REPORT.of(early["style"]).early_ignores
    if ignores is None or not set(late) <= ignores:
        return None
    return report_head(early, title, config)


def _stripped_lines(lines):
    r""""\n".join(lines).rstrip() + "\n", in pieces: the whitespace at the end of what was
    given so far is held back until more text follows it."""
    pending = ""
    for i, line in enumerate(lines):
        chunk = "\n" + line if i else line
        body = chunk.rstrip()
        if body:
            yield pending + body
            pending = chunk[len(body):]
        else:
            pending += chunk
    yield "\n"
