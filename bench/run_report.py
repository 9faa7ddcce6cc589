"""bench/run.py's report: the markdown tables of a finished Bench (inputs; split and check times
with the median of their ratios to the paired floor_out runs; diff and show against the
parse-only floor; peak memory over the input's bytes; slopes; growth with pservers) and whether
the targets are met."""
from __future__ import annotations

import datetime
import math

from run_measure import machine

# targets (issue #26): split and check must stay within these, every style and pserver count
T_FLOOR, T_FLOOR_FROM = 3.0, 5000     # split, check <= 3x floor_out at every size >= 5k ops
T_SLOPE = 1.1                         # split: log time / log ops
T_PSERVERS = 1.5                      # split: t(64 pservers) / t(2 pservers)
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
    L = ["# pstranspile benchmark", "",
         "Generated %s by `python bench/run.py %s` in %.0f s."
         % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), " ".join(a.argv), elapsed), "",
         "**Machine:** %s, %d cores (%d usable)%s; %s %s on %s; protobuf %s."
         % (m["cpu"], m["cores"], m["usable_cores"],
            ", %.0f GiB RAM" % (m["memory"] / 2 ** 30) if m["memory"] else "",
            m["implementation"], m["python"], m["os"], m["protobuf"]), "",
         "Each time is the median wall time of %d run%s of a whole process; peak memory is the "
         "largest max RSS of those runs (wait4); ×input: peak memory over main.pb + startup.pb "
         "bytes. **×floor_out** (split, check): each run is followed at once by a floor_out "
         "process (parse main+startup once with protobuf upb, serialize them over and over until "
         "it has written the split's .pb bytes, OUT_BYTES); the figure is the median over the "
         "runs of (run time / its floor_out's time). **×floor** (diff, show): median time over "
         "the parse-only floor's (parse main+startup, serialize twice). A split's output folder "
         "is removed, untimed, before each run. Optimizer: %s%s, 2 trainers, sync."
         % (a.repeats, "" if a.repeats == 1 else "s", a.optimizer,
            " with LR decay" if a.lr_decay else ""), ""]
    L += inputs_table(bench)
    L += ["## Split and check (ratios to the paired floor_out)"]
    for kind in a.kinds:
        L += ["", "### %s" % kind, ""]
        L += times_table(bench, kind, [lab for lab in bench.labels()
                                       if lab.split()[0] in ("split", "check")], paired=True)
    L += ["", "## Reading commands (ratios to the parse-only floor)"]
    for kind in a.kinds:
        L += ["", "### %s" % kind, ""]
        L += times_table(bench, kind, ["floor", "diff", "show"], paired=False)
    L += not_measured(bench)
    L += growth_table(bench)
    L += [""] + targets(bench)
    return "\n".join(L) + "\n"


def inputs_table(bench) -> list:
    a = bench.args
    L = ["## Inputs", "", "| kind | ops | params | main.pb | startup.pb | generated in |",
         "|---|---:|---:|---:|---:|---:|"]
    for kind in a.kinds:
        for size in a.sizes:
            i = bench.inputs.get((kind, size))
            if i:
                L.append("| %s | %d | %d | %s | %s | %.1f s |"
                         % (kind, i["ops_main"], i["params"], fmt_bytes(i["bytes_main"]),
                            fmt_bytes(i["bytes_startup"]), i["generate_seconds"]))
    return L + [""]


def times_table(bench, kind, labels, paired) -> list:
    """One row per label: per size the median s, (paired: floor_out s, OUT_BYTES), the ratio,
    MiB, ×input; then the slope over the sizes."""
    a = bench.args
    cols = (" %d ops: s | floor_out s | out MB | ×floor_out | MiB | ×input |" if paired
            else " %d ops: s | ×floor | MiB | ×input |")
    L = ["| command |" + "".join(cols % bench.inputs[(kind, s)]["ops_main"] for s in a.sizes)
         + " slope |",
         "|---|" + ("---:|" * (6 if paired else 4)) * len(a.sizes) + "---:|"]
    for label in labels:
        row, pts = "| %s |" % ("floor (parse only)" if label == "floor" else label), []
        for size in a.sizes:
            r = bench.results[(kind, size)].get(label)
            if r is None or not r.ok:
                row += " %s |" % ("n/a" if r is None else r.status) + " |" * (5 if paired else 3)
                continue
            mem = " %s | %s |" % (fmt_mib(r.peak), fmt_x(r.peak / bench.input_bytes(kind, size)))
            if paired:
                row += " %s | %s | %s | %s |" % (fmt_s(r.median), fmt_s(r.floor_median),
                                                 "%.1f" % (r.out_bytes / 1e6)
                                                 if r.out_bytes is not None else "—",
                                                 fmt_x(r.ratio)) + mem
            else:
                fl = bench.results[(kind, size)].get("floor")
                ratio = r.median / fl.median if fl and fl.ok and label != "floor" else None
                row += " %s | %s |" % (fmt_s(r.median), fmt_x(ratio)) + mem
            pts.append((bench.inputs[(kind, size)]["ops_main"], r.median))
        s = slope(pts) if len(pts) == len(a.sizes) else None
        L.append(row + " %s |" % ("—" if s is None else "%.2f" % s))
    return L


def not_measured(bench) -> list:
    a = bench.args
    notes = ["- %s %d ops, %s: %s — %s" % (kind, size, label, r.status, r.note)
             for kind in a.kinds for size in a.sizes
             for label, r in bench.results[(kind, size)].items() if not r.ok and r.note]
    if not notes:
        return []
    more = ["- … and %d more" % (len(notes) - 40)] if len(notes) > 40 else []
    return ["", "Not measured:", ""] + notes[:40] + more


def growth_table(bench) -> list:
    """Split time at the most pservers over the time at the fewest, and the same for bytes."""
    a = bench.args
    lo, hi = min(a.pservers), max(a.pservers)
    L = ["", "## Growth with pservers (split time at %d / at %d pservers)" % (hi, lo), "",
         "Each cell: the time ratio, then in brackets the ratio of the .pb bytes the two "
         "splits wrote (what Paddle's split holds grows with pservers where parameters "
         "are sliced into a block per pserver; floor_out grows with it).", "",
         "| kind | style |" + "".join(" %s ops |" % s for s in a.sizes),
         "|---|---|" + "---:|" * len(a.sizes)]
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
    return L


def worst(bench, labels, value, from_ops=0, per_size=True, timeouts=False):
    """(largest value(kind, size, label, run), "where") over the ok runs of `labels` at sizes
    of at least from_ops ops; (None, "") when there are none. per_size=False: the value is
    of the kind and label, not of a size (the where names no size). timeouts: a run that timed
    out counts as infinitely slow."""
    a = bench.args
    best, where = None, ""
    for k in a.kinds:
        for s in a.sizes:
            if bench.inputs[(k, s)]["ops_main"] < from_ops * 0.95:
                continue
            for lab in labels:
                r = bench.results[(k, s)].get(lab)
                x = value(k, s, lab, r) if r is not None and r.ok else None
                if timeouts and r is not None and r.status == "timeout":
                    x = math.inf
                if x is not None and (best is None or x > best):
                    best, where = x, ("%s %d ops, %s" % (k, s, lab) if per_size
                                      else "%s, %s" % (k, lab))
    return best, where


def targets(bench) -> list:
    """The targets table: each target, met or not, and its worst case."""
    a = bench.args
    L = ["## Targets (issue #26; every style and pserver count)", "",
         "| target | met? | worst case |", "|---|---|---|"]
    splits = [lab for lab in bench.labels() if lab.startswith("split")]
    checks = [lab for lab in bench.labels() if lab.startswith("check")]
    missing = any(not bench.results[(k, s)][lab].ok
                  for k in a.kinds for s in a.sizes for lab in splits + checks)
    big = "no size ≥ %dk ops" % (T_FLOOR_FROM // 1000)

    def row(text, limit, found, fmt, strict=False, none=big):
        w, where = found
        if w is None:
            L.append("| %s | not measured | %s |" % (text, none))
            return
        ok = w < limit if strict else w <= limit
        verdict = ("met so far (some runs failed)" if missing else "met") if ok else "**not met**"
        shown = "timed out (> %d s)" % a.timeout if w == math.inf else fmt(w)
        L.append("| %s | %s | %s (%s) |" % (text, verdict, shown, where))

    def ratio(k, s, lab, r):
        return r.ratio

    def memory(k, s, lab, r):
        return r.peak / bench.input_bytes(k, s)

    from5k = "at every size from %dk ops" % (T_FLOOR_FROM // 1000)
    row("split ≤ %.0f× floor_out %s" % (T_FLOOR, from5k), T_FLOOR,
        worst(bench, splits, ratio, T_FLOOR_FROM, timeouts=True), fmt_x)
    row("check ≤ %.0f× floor_out of the checked split %s" % (T_FLOOR, from5k), T_FLOOR,
        worst(bench, checks, ratio, T_FLOOR_FROM, timeouts=True), fmt_x)
    row("check peak memory ≤ %.0f× the input's bytes (from %dk ops)"
        % (T_MEMORY, T_FLOOR_FROM // 1000), T_MEMORY,
        worst(bench, checks, memory, T_FLOOR_FROM), fmt_x)
    row("split peak memory < %.0f× the input's bytes (from %dk ops)"
        % (T_MEMORY, T_FLOOR_FROM // 1000), T_MEMORY,
        worst(bench, splits, memory, T_FLOOR_FROM), fmt_x, strict=True)

    def split_slope(k, s, lab, r):
        if s != a.sizes[-1]:
            return None
        pts = [(bench.inputs[(k, z)]["ops_main"], bench.results[(k, z)][lab].median)
               for z in a.sizes if bench.results[(k, z)][lab].ok]
        return slope(pts) if len(pts) == len(a.sizes) else None
    row("split time grows with ops: slope of log t / log ops ≤ %.1f" % T_SLOPE, T_SLOPE,
        worst(bench, splits, split_slope, per_size=False), lambda x: "%.2f" % x,
        none="needs 2+ sizes")
    lo, hi = min(a.pservers), max(a.pservers)

    def growth(k, s, lab, r):
        x = bench.results[(k, s)].get(lab.replace(" p%d" % hi, " p%d" % lo))
        return r.median / x.median if lab.endswith(" p%d" % hi) and x and x.ok else None
    row("split to %d pservers ≤ %.1f× the time of %d" % (hi, T_PSERVERS, lo), T_PSERVERS,
        worst(bench, splits if lo != hi else [], growth), fmt_x, none="—")
    floors = [bench.results[(k, s)]["floor"] for k in a.kinds for s in a.sizes]
    base = min((r.peak for r in floors if r.ok), default=None)
    if base:
        L += ["", "For scale: the smallest parse-only floor process peaks at %s MiB (the "
              "interpreter and protobuf)." % fmt_mib(base)]
    return L
