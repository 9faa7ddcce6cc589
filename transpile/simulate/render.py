"""The result of `simulate` for a person: a table per parameter, then the verdict."""
from __future__ import annotations


def _fmt(x: float) -> str:
    return "nan" if x != x else "%.3e" % x


def render(result, config, echo) -> None:
    """The per-parameter table and the verdict (stdout)."""
    rows = [("parameter", "shape", "max |a-b|", "max rel", "")]
    for p in result.params:
        rows.append((p.name, str(list(p.shape)), _fmt(p.max_abs), _fmt(p.max_rel),
                     "ok" if p.ok else "DIFFERS" + (" (%s)" % p.note if p.note else "")))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        echo(("%-*s  %-*s  %*s  %*s  %s" % (widths[0], r[0], widths[1], r[1], widths[2], r[2],
                                            widths[3], r[3], r[4])).rstrip())
    n_bad = sum(1 for p in result.params if not p.ok)
    if result.error:
        echo("result: the split fails to execute")
    elif n_bad == 0:
        echo("result: all %d parameters equal within rtol %g after %d steps"
             % (len(result.params), result.rtol, result.steps))
    else:
        tail = "" if result.expect_equal else \
            " (%s mode: reported, not failed; --expect-equal to fail)" % result.mode
        echo("result: %d of %d parameters differ beyond rtol %g after %d steps%s"
             % (n_bad, len(result.params), result.rtol, result.steps, tail))
