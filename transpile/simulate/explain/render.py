"""The result of `simulate` for a person (a table per parameter, then the verdict) or for a
program (JSON)."""
from __future__ import annotations


def _fmt(x: float) -> str:
    return "nan" if x != x else "%.3e" % x


def _status(p, rtol) -> str:
    s = "ok" if p.ok else "DIFFERS" + (" (%s)" % p.note if p.note else "")
    if p.ok and p.note:
        s += " (%s)" % p.note
    elif p.ok and p.max_rel > rtol:
        s += " (within rounding)"
    if p.trainable and p.changed is False:
        s += ", unchanged in the original run: proves nothing"
    elif not p.trainable:
        s += " (no optimizer updates it: the trainers' own, compared with their mean)"
    return s


def render(result, config, echo) -> None:
    """The per-parameter table and the verdict (stdout)."""
    rows = [("parameter", "shape", "max |a-b|", "max rel", "")]
    for p in result.params:
        rows.append((p.name, str(list(p.shape)), _fmt(p.max_abs), _fmt(p.max_rel),
                     _status(p, result.rtol)))
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
        echo("result: %d of %d parameters differ beyond rtol %g after %d steps"
             % (n_bad, len(result.params), result.rtol, result.steps))
    if result.faults and not result.equal:
        from ...plan.faults import KIND
        stuck = all(f in KIND and KIND[f].fix.startswith("not fixable")
                    for f in result.faults)
        echo("why: the split reproduces Paddle fault%s %s (docs/faults.md); %s"
             % ("s" * (len(result.faults) > 1), ", ".join(result.faults),
                "no split can fix %s" % ("it" if len(result.faults) == 1 else "them")
                if stuck else
                "`paddle_faults: fix`, which this split was made with, cannot fix it here"
                if result.fix_tried else "`paddle_faults: fix` in the cluster config writes "
                "one that trains like the original where a split can"))
    if getattr(result, "ps", None) is not None:
        from .psrender import render_ps
        render_ps(result.ps, echo)
    still = result.unchanged
    if still and not result.error:
        echo("vacuous: %d of %d trainable parameters did not change in the original run "
             "(beyond rounding): %s; their equality proves nothing about the split"
             % (len(still), sum(1 for p in result.params if p.trainable), ", ".join(still)))
    partly = result.partly_unchanged
    if partly and not result.error:
        echo("vacuous: pserver blocks of moved parameters that did not move in the original "
             "run: %s; their equality proves nothing about the pservers holding them"
             % ", ".join(partly))
    if (still or partly) and not result.error:
        if result.expect_equal and result.vacuous:
            echo("fails --expect-equal: %s did not move (--accept-unchanged NAME accepts one)"
                 % ", ".join(result.vacuous))


def to_json(result, config) -> dict:
    """The result as a JSON-able dict (`simulate --format json`)."""
    def num(x):
        return None if x != x else x
    out = {
        "mode": result.mode, "trainers": config.trainers, "pservers": list(config.pservers),
        "steps": result.steps, "batch": result.batch, "rtol": result.rtol,
        "exit_code": result.exit_code, "equal": result.equal, "error": result.error,
        "expect_equal": result.expect_equal, "notes": list(result.notes),
        "paddle_faults": list(result.faults),
        "unchanged_in_original": result.unchanged,
        "unchanged_blocks_in_original": result.partly_unchanged,
        "accepted_unchanged": [n for n in result.unchanged + result.partly_unchanged
                               if n not in result.vacuous],
        "reference": result.schedule,
        "params": [{"name": p.name, "shape": list(p.shape), "max_abs": num(p.max_abs),
                    "max_rel": num(p.max_rel), "ok": p.ok, "note": p.note,
                    "trainable": p.trainable, "changed_in_original": p.changed,
                    "unchanged_blocks": list(p.still_blocks)}
                   for p in result.params],
    }
    if getattr(result, "ps", None) is not None:
        from .psrender import ps_json
        out["ps_reference_vs_original"] = ps_json(result.ps)
    return out
