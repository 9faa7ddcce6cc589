"""Folding what report.md holds too much of to read whole: long lists become a count with the
first few items, the full list (up to a cap) under a `<details>` block that markdown viewers
show closed; past the cap, a line says how many more there are and which command lists them.
A report stays readable, and its size grows with the program only up to the caps."""
from __future__ import annotations

import itertools

INLINE = 8          # a list of more names than this is folded
SHOWN = 3           # names kept inline before the count of a folded list
ROWS = 40           # table rows or listing lines shown open; more are folded
CAP = 100           # rows, lines or names in a folded block; past it only their number


def _escaped(text: str) -> str:
    """Text for HTML between tags (html.escape without quotes; that module is not needed)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _more(n: int, where: str) -> str:
    return "… and %d more%s" % (n, (": " + where) if where else "")


def details(summary: str, lines: list, where: str = "", cap: int = CAP,
            left: int | None = None) -> list:
    """`lines` (markdown: a table, a list, a fenced listing) in a closed `<details>` block;
    past `cap` lines, one line says how many are left out and `where` to find them. `left`:
    how many lines past `cap` there are, when `lines` holds only the first `cap`."""
    out = ["<details><summary>%s</summary>" % _escaped(summary), ""]
    out += lines[:cap]
    if left is None:
        left = len(lines) - cap
    if left > 0:
        fence = lines[0].startswith("```")
        if fence:                               # keep the fence closed
            out.append("```")
        out += ["", _more(left - (1 if fence else 0), where)]
    out += ["", "</details>", ""]
    return out


def names(items: list, what: str, where: str = "", sep: str = ", ") -> tuple:
    """(inline text, folded lines) of a list of names: short lists inline whole (no block);
    long ones as `26 ids: C1, C2, C3, …` with the whole list in a block."""
    items = list(items)
    if len(items) <= INLINE:
        return sep.join(items), []
    inline = "%d %s: %s%s…" % (len(items), what, sep.join(items[:SHOWN]), sep)
    body = [sep.join(items[:CAP])]
    if len(items) > CAP:
        body += ["", _more(len(items) - CAP, where)]
    return inline, details("the %d %s" % (len(items), what), body, cap=len(body))


def table(head: list, rows, what: str, where: str = "", count: int | None = None) -> list:
    """A markdown table: open when it has at most ROWS rows, else folded (first CAP rows).
    With `count` (the number of rows), `rows` may be an iterator: only the rows shown are
    taken from it (a table of thousands of rows costs no more than its first CAP)."""
    if count is None:
        rows = list(rows)
        count = len(rows)
    else:
        rows = list(itertools.islice(rows, CAP))
    if count <= ROWS:
        return head + rows + [""]
    return details("%d %s" % (count, what), head + rows, where, cap=CAP + len(head),
                   left=count - CAP)


def listing(lines, what: str, where: str = "", count: int | None = None) -> list:
    """A fenced listing: open when short, else folded (first CAP lines). With `count` (the
    number of lines), `lines` may be an iterator: only the lines shown are taken from it (a
    listing of thousands of ops formats no more than its first CAP)."""
    if count is None:
        lines = list(lines)
        count = len(lines)
    else:
        lines = list(itertools.islice(lines, CAP))
    fenced = ["```"] + lines + ["```"]
    if count <= ROWS:
        return fenced + [""]
    return details("%d lines: %s" % (count, what), fenced, where, cap=CAP + 1,
                   left=count - CAP + 1)


def head(rows: list, what: str, where: str = "", indent: str = "  ") -> list:
    """Lines of a terminal listing: whole when it has at most ROWS of them, else its first
    INLINE and a line saying how many `what` more there are and `where` to find them."""
    if len(rows) <= ROWS:
        return list(rows)
    return list(rows[:INLINE]) + [indent + _more(len(rows) - INLINE, where).replace(
        "more", "more " + what, 1)]
