"""Style ps's part of `simulate`'s output: the ps reference against the original as written,
each parameter's differences named (text and JSON)."""
from __future__ import annotations


def _fmt(x) -> str:
    return "nan" if x != x else "%.3e" % x


def render_ps(report, echo) -> None:
    """The second comparison, after the split's verdict (stdout)."""
    echo("")
    echo("the ps reference against the original as written (what the pservers' tables do to "
         "the training%s):" % (", tables started from the program's rows"
                               if report.program_init else ""))
    rows = [("parameter", "max |a-b|", "max rel")]
    for p in report.original:
        rows.append((p.name, _fmt(p.max_abs), _fmt(p.max_rel)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for i, r in enumerate(rows):
        echo("%-*s  %*s  %*s" % (widths[0], r[0], widths[1], r[1], widths[2], r[2]))
        if i == 0:
            continue
        for w in report.why.get(r[0], []):
            size = "" if w.size is None else " [%s when undone]" % _fmt(w.size)
            echo("    %s%s: %s" % (w.id, size, w.detail) if w.detail else
                 "    %s%s" % (w.id, size))
    ids = sorted({w.id for ws in report.why.values() for w in ws})
    if ids:
        echo("ps differences: %s (docs/simulate.md, \"Style ps\")" % ", ".join(ids))


def ps_json(report) -> dict:
    def num(x):
        return None if x is None or x != x else x
    return {
        "program_init": report.program_init,
        "params": [{"name": p.name, "max_abs": num(p.max_abs), "max_rel": num(p.max_rel),
                    "trainable": p.trainable, "changed_in_original": p.changed,
                    "why": [{"id": w.id, "size": num(w.size), "detail": w.detail}
                            for w in report.why.get(p.name, [])]}
                   for p in report.original],
    }
