"""Rendering a diff (transpile/diff: ProgramDiff / TreeDiff) as text, markdown or JSON."""
from __future__ import annotations

from ..core.gcpause import paused_gc
from ..diff.result import OpChange, ProgramDiff, TreeDiff
from ..core.jsonfmt import dumps_indented


_MARK = {"insert": "+", "delete": "-", "change": "~"}


def _op_where(o: OpChange) -> str:
    if o.kind == "insert":
        return "op %d" % o.b_index
    if o.kind == "delete":
        return "op %d" % o.a_index
    return "op %d" % o.a_index if o.a_index == o.b_index else "op %d->%d" % (o.a_index,
                                                                          o.b_index)


def render_text(d: ProgramDiff) -> str:
    lines = ["--- %s" % d.a, "+++ %s" % d.b]
    lines += ["  %s" % x for x in d.details]
    for b in d.blocks:
        if not b.changed:
            continue
        head = "block %d" % b.idx
        if b.status in ("added", "removed"):
            head += " (%s)" % ("only in B" if b.status == "added" else "only in A")
        lines.append(head + ":")
        lines += ["  %s" % x for x in b.details]
        for o in b.ops:
            lines.append("  %s %s %s" % (_MARK[o.kind], _op_where(o), o.op))
            lines += ["      %s" % x for x in o.details]
        for v in b.vars:
            mark = {"added": "+", "removed": "-", "changed": "~"}[v.kind]
            lines.append("  %s var %s: %s" % (mark, v.name, "; ".join(v.details)))
    lines.append("summary: " + ("no differences" if not d.changed else d.summary()))
    return "\n".join(lines) + "\n"


def _md(s: str) -> str:
    return s.replace("|", "\\|")


def render_markdown(d: ProgramDiff, heading: str = "##") -> str:
    lines = ["%s `%s` vs `%s`" % (heading, d.a, d.b), ""]
    if not d.changed:
        return "\n".join(lines + ["No differences.", ""])
    lines += ["- %s" % x for x in d.details]
    for b in d.blocks:
        if not b.changed:
            continue
        lines += ["", "%s# Block %d%s" % (heading, b.idx,
                                          "" if b.status in ("same", "changed")
                                          else " (%s)" % b.status), ""]
        lines += ["- %s" % x for x in b.details]
        if b.ops:
            lines += ["| | op | change |", "|---|---|---|"]
            for o in b.ops:
                what = "<br>".join(_md(x) for x in o.details) or o.kind
                lines.append("| %s | %s `%s` | %s |" % (_MARK[o.kind], _op_where(o),
                                                       _md(o.op), what))
        if b.vars:
            lines += ["", "| | var | change |", "|---|---|---|"]
            for v in b.vars:
                mark = {"added": "+", "removed": "-", "changed": "~"}[v.kind]
                lines.append("| %s | `%s` | %s |" % (mark, _md(v.name),
                                                    "<br>".join(_md(x) for x in v.details)))
    lines += ["", "**Summary:** " + d.summary(), ""]
    return "\n".join(lines)


def render_json(d) -> str:
    with paused_gc():
        return dumps_indented(d.to_dict()) + "\n"


def render_tree_text(t: TreeDiff) -> str:
    if not t.changed:
        return "no differences between %s and %s\n" % (t.a, t.b)
    out = []
    for f in t.files:
        if f.program is not None:
            out.append("== %s\n" % f.path + render_text(f.program))
        else:
            out.append("== %s: %s\n" % (f.path, f.status) +
                       "".join("  %s\n" % x for x in f.details))
    return "".join(out)


def render_tree_markdown(t: TreeDiff) -> str:
    if not t.changed:
        return "No differences between `%s` and `%s`.\n" % (t.a, t.b)
    out = ["# `%s` vs `%s`\n" % (t.a, t.b)]
    for f in t.files:
        if f.program is not None:
            out.append("## `%s`\n\n" % f.path + render_markdown(f.program, heading="###"))
        else:
            out.append("## `%s`: %s\n\n" % (f.path, f.status) +
                       "".join("- %s\n" % _md(x) for x in f.details))
    return "\n".join(out)


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}
TREE_RENDERERS = {"text": render_tree_text, "markdown": render_tree_markdown,
                  "json": render_json}
