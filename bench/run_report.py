"""bench/run.py's report: the markdown tables of a finished Bench (inputs, times with their
ratios to the floor and to the input's bytes, slopes, growth with pservers) and whether the
targets are met."""
from __future__ import annotations

import datetime
import math

from run_measure import machine

# targets (see the issue): the split must stay within these
T_FLOOR, T_FLOOR_FROM = 3.0, 5000     # split <= 3x floor at every size >= 5k ops
T_SLOPE = 1.1                         # log time / log ops
T_PSERVERS = 1.5                      # t(64 pservers) / t(2 pservers)
T_MEMORY = 5.0                        # peak RSS / input bytes (main.pb + startup.pb)


def fmt_s(x):
    return "—" if x is None else ("%.2f" % x if x < 100 else "%.0f" % x)


def fmt_x(x):
    return "—" if x is None else ("%.2f×" % x if x < 10 else "%.1f×" % x)


def fmt_mib(b):
    return "—" if b is None else "%.0f" % (b / 2 ** 20)


def fmt_bytes(b):
    return "%.1f MB" % (b / 1e6)


def slope(points):
    """Least-squares slope of log(t) over log(ops); None with fewer than 2 points."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x and y]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def report(bench, elapsed) -> str:
    """The markdown report of a finished Bench (RESULTS.md)."""
    a = bench.args
    m = machine()
    L = []
    L.append("# pstranspile benchmark")
    L.append("")
    L.append("Generated %s by `python bench/run.py %s` in %.0f s."
             % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                " ".join(a.argv), elapsed))
    L.append("")
    L.append("**Machine:** %s, %d cores (%d usable)%s; %s %s on %s; protobuf %s."
             % (m["cpu"], m["cores"], m["usable_cores"],
                ", %.0f GiB RAM" % (m["memory"] / 2 ** 30) if m["memory"] else "",
                m["implementation"], m["python"], m["os"], m["protobuf"]))
    L.append("")
    L.append("Each figure is the median wall time of %d run%s of a whole process, peak "
             "memory is the largest max RSS of those runs (wait4). ×floor: time over the "
             "floor's (parse main+startup with protobuf, serialize twice); ×input: peak "
             "memory over main.pb + startup.pb bytes. Optimizer: %s%s, 2 trainers, sync."
             % (a.repeats, "" if a.repeats == 1 else "s", a.optimizer,
                " with LR decay" if a.lr_decay else ""))
    L.append("")
    L.append("## Inputs")
    L.append("")
    L.append("| kind | ops | params | main.pb | startup.pb | generated in |")
    L.append("|---|---:|---:|---:|---:|---:|")
    for kind in a.kinds:
        for size in a.sizes:
            i = bench.inputs.get((kind, size))
            if i:
                L.append("| %s | %d | %d | %s | %s | %.1f s |"
                         % (kind, i["ops_main"], i["params"], fmt_bytes(i["bytes_main"]),
                            fmt_bytes(i["bytes_startup"]), i["generate_seconds"]))
    L.append("")
    L.append("## Times")
    for kind in a.kinds:
        L.append("")
        L.append("### %s" % kind)
        L.append("")
        head = "| command |" + "".join(" %d ops: s | ×floor | MiB | ×input |"
                                       % bench.inputs[(kind, s)]["ops_main"]
                                       for s in a.sizes) + " slope |"
        L.append(head)
        L.append("|---|" + "---:|---:|---:|---:|" * len(a.sizes) + "---:|")
        for label in bench.labels():
            row = "| %s |" % label
            pts = []
            for size in a.sizes:
                r = bench.results[(kind, size)].get(label)
                fl = bench.results[(kind, size)].get("floor")
                if r is None or not r.ok:
                    st = "n/a" if r is None else r.status
                    row += " %s | | | |" % st
                    continue
                ratio = r.median / fl.median if fl and fl.ok and label != "floor" else None
                mem_x = r.peak / bench.input_bytes(kind, size)
                row += " %s | %s | %s | %s |" % (fmt_s(r.median), fmt_x(ratio),
                                                fmt_mib(r.peak), fmt_x(mem_x))
                pts.append((bench.inputs[(kind, size)]["ops_main"], r.median))
            s = slope(pts) if len(pts) == len(a.sizes) else None
            row += " %s |" % ("—" if s is None else "%.2f" % s)
            L.append(row)
    notes = []
    for kind in a.kinds:
        for size in a.sizes:
            for label, r in bench.results[(kind, size)].items():
                if not r.ok and r.note:
                    notes.append("- %s %d ops, %s: %s — %s"
                                 % (kind, size, label, r.status, r.note))
    if notes:
        L.append("")
        L.append("Not measured:")
        L.append("")
        L += notes[:40]
        if len(notes) > 40:
            L.append("- … and %d more" % (len(notes) - 40))
    # growth with pservers
    L.append("")
    lo, hi = min(a.pservers), max(a.pservers)
    L.append("## Growth with pservers (split time at %d / at %d pservers)" % (hi, lo))
    L.append("")
    L.append("Each cell: the time ratio, then in brackets the ratio of the bytes the two "
             "splits wrote (what Paddle's split holds grows with pservers where parameters "
             "are sliced into a block per pserver).")
    L.append("")
    L.append("| kind | style |" + "".join(" %s ops |" % s for s in a.sizes))
    L.append("|---|---|" + "---:|" * len(a.sizes))
    for kind in a.kinds:
        for style in a.styles:
            row = "| %s | %s |" % (kind, style)
            for size in a.sizes:
                r = bench.results[(kind, size)]
                x, y = r.get("split %s p%d" % (style, lo)), r.get("split %s p%d" % (style, hi))
                if x and y and x.ok and y.ok and lo != hi:
                    cell = fmt_x(y.median / x.median)
                    if x.out_bytes and y.out_bytes:
                        cell += " (%s)" % fmt_x(y.out_bytes / x.out_bytes)
                else:
                    cell = "—"
                row += " %s |" % cell
            L.append(row)
    L.append("")
    L += targets(bench)
    return "\n".join(L) + "\n"

def targets(bench) -> list:
    """The targets table: each target, met or not, and its worst case."""
    a = bench.args
    L = ["## Targets (for `split`, every style and pserver count)", "",
         "| target | met? | worst case |", "|---|---|---|"]
    splits = [lab for lab in bench.labels() if lab.startswith("split")]
    missing = any(not bench.results[(k, s)][lab].ok
                  for k in a.kinds for s in a.sizes for lab in splits)

    def verdict(ok, have_data):
        if not have_data:
            return "not measured"
        if missing:
            return ("met so far (some splits failed)" if ok else "**not met**")
        return "met" if ok else "**not met**"

    # 1. within 3x floor from 5k ops up
    worst, where = None, ""
    for k in a.kinds:
        for s in a.sizes:
            if bench.inputs[(k, s)]["ops_main"] < T_FLOOR_FROM * 0.95:
                continue
            fl = bench.results[(k, s)]["floor"]
            for lab in splits:
                r = bench.results[(k, s)][lab]
                if r.ok and fl.ok:
                    x = r.median / fl.median
                    if worst is None or x > worst:
                        worst, where = x, "%s %d ops, %s" % (k, s, lab)
    L.append("| split ≤ %.0f× the floor at every size from %dk ops | %s | %s |"
             % (T_FLOOR, T_FLOOR_FROM // 1000,
                verdict(worst is not None and worst <= T_FLOOR, worst is not None),
                "%s (%s)" % (fmt_x(worst), where) if worst is not None else
                "no size ≥ %dk ops" % (T_FLOOR_FROM // 1000)))
    # 2. slope
    worst, where = None, ""
    for k in a.kinds:
        for lab in splits:
            pts = [(bench.inputs[(k, s)]["ops_main"], bench.results[(k, s)][lab].median)
                   for s in a.sizes if bench.results[(k, s)][lab].ok]
            if len(pts) == len(a.sizes):
                sl = slope(pts)
                if sl is not None and (worst is None or sl > worst):
                    worst, where = sl, "%s, %s" % (k, lab)
    L.append("| time grows with ops: slope of log t / log ops ≤ %.1f | %s | %s |"
             % (T_SLOPE, verdict(worst is not None and worst <= T_SLOPE, worst is not None),
                "%.2f (%s)" % (worst, where) if worst is not None else "needs 2+ sizes"))
    # 3. pservers
    worst, where = None, ""
    lo, hi = min(a.pservers), max(a.pservers)
    for k in a.kinds:
        for s in a.sizes:
            for style in a.styles:
                r = bench.results[(k, s)]
                x, y = r.get("split %s p%d" % (style, lo)), r.get("split %s p%d" % (style, hi))
                if x and y and x.ok and y.ok and lo != hi:
                    q = y.median / x.median
                    if worst is None or q > worst:
                        worst, where = q, "%s %d ops, %s" % (k, s, style)
    L.append("| %d pservers ≤ %.1f× the time of %d | %s | %s |"
             % (hi, T_PSERVERS, lo,
                verdict(worst is not None and worst <= T_PSERVERS, worst is not None),
                "%s (%s)" % (fmt_x(worst), where) if worst is not None else "—"))
    # 4. memory (from 5k ops up: below, the interpreter's own RSS dominates)
    worst, where = None, ""
    for k in a.kinds:
        for s in a.sizes:
            if bench.inputs[(k, s)]["ops_main"] < T_FLOOR_FROM * 0.95:
                continue
            for lab in splits:
                r = bench.results[(k, s)][lab]
                if r.ok:
                    x = r.peak / bench.input_bytes(k, s)
                    if worst is None or x > worst:
                        worst, where = x, "%s %d ops, %s: %s MiB" % (k, s, lab,
                                                                      fmt_mib(r.peak))
    L.append("| peak memory < %.0f× the input's bytes (from %dk ops) | %s | %s |"
             % (T_MEMORY, T_FLOOR_FROM // 1000,
                verdict(worst is not None and worst < T_MEMORY, worst is not None),
                "%s (%s)" % (fmt_x(worst), where) if worst is not None else
                "no size ≥ %dk ops" % (T_FLOOR_FROM // 1000)))
    floors = [bench.results[(k, s)]["floor"] for k in a.kinds for s in a.sizes]
    base = min((r.peak for r in floors if r.ok), default=None)
    if base:
        L.append("")
        L.append("For scale: the smallest floor process peaks at %s MiB (the interpreter "
                 "and protobuf)." % fmt_mib(base))
    return L
