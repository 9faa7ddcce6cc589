"""simulate's prediction (predict.py) against Paddle's runtime (run.py).

    compare.py OUT RUN_DIR [RUN_DIR2] [--tol X] [--json]

Per parameter (each trainer's dense params, the sparse tables' rows): the largest absolute
difference between the prediction and the run, and, with RUN_DIR2, between the two runs (the
runtime's own run-to-run spread). Prints a line per parameter and the verdict: EXACT (every value
equal), CLOSE (within --tol times the largest value, default 1e-6: float32 rounding of a few
steps; or within the runs' own spread), DIFFERENT. Exit 0 / 0 / 1; 2 when a run has no results.
"""
import argparse
import json
import os
import sys

import numpy as np


def values(pred, run):
    """{param: (predicted, run)} of every compared value."""
    out = {}
    for tr, dense in pred["dense"].items():
        got = run["trainers"].get(tr, {}).get("dense", {})
        for name, v in dense.items():
            out["%s %s" % (tr, name)] = (np.asarray(v), np.asarray(got.get(name, [np.nan])))
    got0 = run["trainers"].get("trainer_0", {}).get("sparse", {})
    for tid, t in pred["sparse"].items():
        if t["keys"]:
            out["sparse table %s (%d rows)" % (tid, len(t["keys"]))] = (
                np.asarray(t["rows"]), np.asarray(got0.get(tid, [[np.nan]])))
    return out


def largest(a, b):
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    pred = json.load(open(os.path.join(a.out, "prediction.json")))
    runs = []
    for r in a.runs:
        f = os.path.join(r, "runtime.json")
        run = json.load(open(f)) if os.path.exists(f) else None
        if not run or not run.get("trainers"):
            print("compare: %s has no results (read its logs)" % r)
            sys.exit(2)
        runs.append(run)
    rows, worst, spread, scale = [], 0.0, 0.0, 0.0
    for name, (p, g) in values(pred, runs[0]).items():
        d = largest(p, g)
        s = largest(g, values(pred, runs[1])[name][1]) if len(runs) > 1 else None
        worst, scale = max(worst, d), max(scale, float(np.max(np.abs(p))) if p.size else 0.0)
        spread = max(spread, s or 0.0)
        rows.append((name, d, s))
    close = worst <= a.tol * max(1.0, scale) or (len(runs) > 1 and worst <= spread)
    verdict = "EXACT" if worst == 0 else ("CLOSE" if close else "DIFFERENT")
    if a.json:
        print(json.dumps({"case": pred["case"], "mode": pred["mode"], "largest": worst,
                          "spread": spread if len(runs) > 1 else None, "verdict": verdict,
                          "params": len(rows)}))
    else:
        for name, d, s in rows:
            print("%-40s %.3e%s" % (name, d, "" if s is None else "   runs differ by %.3e" % s))
        print("%s: %s %s, largest difference %.3e (largest value %.3g)%s" % (
            verdict, pred["case"], pred["mode"], worst, scale,
            "" if len(runs) < 2 else "; the runtime's own spread %.3e" % spread))
    sys.exit(1 if verdict == "DIFFERENT" else 0)


if __name__ == "__main__":
    main()
