"""Sweep issue 41's "Done when" over the user-model corpus (a dev tool: never run by `make test`).

    python tools/usersweep.py OUT.jsonl [ROOT ...] [--only PATTERN] [--jobs N] [--resume]
    python tools/usersweep.py OUT.jsonl --report          the table and violations of OUT.jsonl

A ROOT is a case folder in the corpus layout (main.pb, startup.pb, cluster.yaml, expected/) or a
folder of them; default tests/corpus/usermodels.  For every case, with the installed
`pstranspile` (--pst):

    split      ours by default (the case's cluster.yaml) and with `paddle_faults: fix` added
    check      (--format json) ours (each with its config) and Paddle's expected/ split
    simulate   --expect-equal --steps 3 --format json: ours (both) and Paddle's split

One JSON object per case is appended to OUT.jsonl as it is done (exit codes; the first line of
each message; the fault ids split names, check finds or warns of, simulate names); --resume
skips the cases OUT.jsonl holds.  --jobs (at most 2) cases run at once.  --accept FILE (default
tools/usersweep_accept.txt): per model, parameters whose gradient is zero by construction,
passed to simulate as --accept-unchanged.  Then it prints a table
(one row per case) and the violations of issue 41's "Done when":

  a  a default split (ours, or Paddle's) that simulate finds fails to execute, or differs with no
     Paddle fault named, and that `check` passes (exit 0);
  b  under `paddle_faults: fix`: simulate exits 2 or 3 (or times out), the split fails to
     execute, differs with no fault named, proves nothing (--expect-equal: a parameter did not
     move), or names a fault that neither docs/faults.md nor docs/simulate.md documents; or
     our split is refused where Paddle makes one (a refusal as Paddle refuses is fine).

Simulate's outcome classes: ok (exit 0), fails (the split fails to execute), differs (named:
the faults it names), differs-unnamed, vacuous (--expect-equal: nothing differs, a trainable
parameter did not move), exit2, exit3, timeout; `-` where there was no split to simulate.
"""
from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ROOT = os.path.join(ROOT, "tests", "corpus", "usermodels")
ACCEPT = os.path.join(ROOT, "tools", "usersweep_accept.txt")
# the PaddleRec zoo's (tools/simsweep.py's): for tests/corpus/paddlerec-gen, made of those models
ZOO_ACCEPT = os.path.join(ROOT, "tools", "simsweep_accept.txt")
FAULT_DOCS = ("docs/faults.md", "docs/simulate.md")
_ID = re.compile(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`")


# --- the cases -------------------------------------------------------------------------------
def is_case(d: str) -> bool:
    return all(os.path.isfile(os.path.join(d, f)) for f in ("main.pb", "cluster.yaml"))


def find_cases(roots, only=None) -> list:
    out = []
    for root in roots:
        root = os.path.abspath(root)
        dirs = [root] if is_case(root) else sorted(
            os.path.join(root, d) for d in os.listdir(root) if is_case(os.path.join(root, d)))
        out += dirs
    if only:
        out = [d for d in out if fnmatch.fnmatch(os.path.basename(d), only)
               or only in os.path.basename(d)]
    return out


def style_mode(case: str) -> tuple:
    style = mode = "?"
    with open(os.path.join(case, "cluster.yaml")) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k.strip() == "style":
                style = v.strip().strip("\"'")
            elif k.strip() == "mode":
                mode = v.strip().strip("\"'")
    return style, mode


def documented_ids(root: str = ROOT) -> set:
    """Every fault / difference id docs/faults.md and docs/simulate.md name (in backquotes)."""
    ids = set()
    for rel in FAULT_DOCS:
        with open(os.path.join(root, rel)) as f:
            ids |= set(_ID.findall(f.read()))
    return ids


# --- running the commands --------------------------------------------------------------------
def _run(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return None, "", "timeout after %ss" % timeout


def _first(text: str) -> str:
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return lines[0][:400] if lines else ""


def split(pst, case, cfg, out, timeout) -> dict:
    rc, so, se = _run([pst, "split", case + "/main.pb", "--startup", case + "/startup.pb",
                       "--cluster", cfg, "--out", out], timeout)
    faults = [x.strip() for x in so.splitlines() if "Paddle fault" in x]
    return {"rc": rc, "msg": _first(se or so) if rc != 0 else "; ".join(faults)}


def check(pst, case, cfg, split_dir, timeout) -> dict:
    rc, so, se = _run([pst, "check", case + "/main.pb", "--startup", case + "/startup.pb",
                       "--cluster", cfg, split_dir, "--format", "json"], timeout)
    try:
        rep = json.loads(so)
    except ValueError:
        return {"rc": rc, "msg": _first(se or so)}
    finds, warns = rep.get("findings", []), rep.get("warnings", [])

    def line(f):
        return "%s block %s op %s: %s" % (f.get("program"), f.get("block"), f.get("op"),
                                          f.get("message"))
    return {"rc": rc, "findings": len(finds), "warnings": len(warns),
            "msg": line(finds[0]) if finds else "",
            "finding_faults": sorted({f["fault"] for f in finds if f.get("fault")}),
            "warning_faults": sorted({f["fault"] for f in warns if f.get("fault")})}


def simulate(pst, case, cfg, split_dir, timeout, accept=()) -> dict:
    extra = [a for p in accept for a in ("--accept-unchanged", p)]
    rc, so, se = _run([pst, "simulate", case + "/main.pb", split_dir, "--startup",
                       case + "/startup.pb", "--cluster", cfg, "--steps", "3", "--expect-equal",
                       "--format", "json"] + extra, timeout)
    if rc is None:
        return {"rc": None, "cls": "timeout", "msg": se}
    try:
        res = json.loads(so)
    except ValueError:
        return {"rc": rc, "cls": "exit%d" % rc, "msg": _first(se or so)}
    bad = [p for p in res.get("params", []) if not p.get("ok")]
    why = sorted({w["id"] for p in (res.get("ps_reference_vs_original") or {}).get("params", [])
                  for w in p.get("why", [])})
    out = {"rc": rc, "faults": res.get("paddle_faults", []), "ps_why": why,
           "differ": len(bad), "unchanged": res.get("unchanged_in_original", [])}
    if rc == 0:
        out["cls"] = "ok"
    elif res.get("error"):
        out["cls"], out["msg"] = "fails", res["error"][:400]
    elif bad:
        out["cls"] = "differs" if out["faults"] else "differs-unnamed"
        p = max(bad, key=lambda q: -1 if q.get("max_rel") is None else q["max_rel"])
        out["msg"] = "%d of %d parameters differ, most %s: max rel %.3g%s" % (
            len(bad), len(res["params"]), p["name"], p["max_rel"] if p.get("max_rel") is not None
            else float("nan"), " (%s)" % p["note"] if p.get("note") else "")
    elif rc == 1:
        out["cls"] = "vacuous"
        out["msg"] = "did not move in the original run: " + ", ".join(
            res.get("unchanged_in_original", []) + res.get("unchanged_blocks_in_original", []))
    else:
        out["cls"] = "exit%d" % rc
    return out


def fix_config(case: str, path: str) -> str:
    with open(os.path.join(case, "cluster.yaml")) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.rstrip("\n") + "\npaddle_faults: fix\n")
    return path


def model_of(case: str) -> str:
    """The model of a case named <model>_<style>_<mode> (the user models) or
    <style>_<model>_<mode> (tests/corpus/paddlerec-gen)."""
    name = os.path.basename(case)
    m = re.match(r"^(.*)_(classic|fleet|ps)_(sync|async|half_async|geo)$", name) or \
        re.match(r"^(?:classic|fleet|ps)_(.*)_(sync|async|half_async|geo)$", name)
    return m.group(1) if m else name


def load_accept(*paths) -> dict:
    """{model: [parameter globs]} of accept files (lines `model param...`, # comments)."""
    out: dict = {}
    for path in paths:
        if path and os.path.isfile(path):
            with open(path) as f:
                for line in f:
                    words = line.split("#")[0].split()
                    if words:
                        out.setdefault(words[0], []).extend(words[1:])
    return out


def sweep_case(case: str, pst: str, timeout: int, accept=None) -> dict:
    accept = (accept or {}).get(model_of(case), [])
    style, mode = style_mode(case)
    row = {"case": os.path.basename(case), "path": case, "style": style, "mode": mode,
           "paddle_refuses": os.path.isfile(os.path.join(case, "expected", "error.txt"))}
    cfg = os.path.join(case, "cluster.yaml")
    tmp = tempfile.mkdtemp(prefix="usersweep.")
    try:
        fcfg = fix_config(case, os.path.join(tmp, "fix.yaml"))
        for key, c in (("default", cfg), ("fix", fcfg)):
            out = os.path.join(tmp, key)
            row["split_" + key] = split(pst, case, c, out, timeout)
            if row["split_" + key]["rc"] == 0:
                row["check_" + key] = check(pst, case, c, out, timeout)
                row["sim_" + key] = simulate(pst, case, c, out, timeout, accept)
        if not row["paddle_refuses"]:
            exp = os.path.join(case, "expected")
            row["check_paddle"] = check(pst, case, cfg, exp, timeout)
            row["sim_paddle"] = simulate(pst, case, cfg, exp, timeout, accept)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return row


# --- the verdict -----------------------------------------------------------------------------
def violations(row: dict, documented: set) -> list:
    """[(class, detail)] of issue 41's "Done when" this case breaks."""
    out = []
    for who in ("default", "paddle"):
        sim, chk = row.get("sim_" + who), row.get("check_" + who)
        if sim and chk and chk.get("rc") == 0 and sim["cls"] in ("fails", "differs-unnamed"):
            out.append(("a-%s-%s" % (who, sim["cls"]), sim.get("msg", "")))
    sim = row.get("sim_fix")
    if row["split_fix"]["rc"] != 0:
        if not row["paddle_refuses"]:
            out.append(("b-refused", row["split_fix"]["msg"]))
        return out
    if sim["cls"] in ("fails", "differs-unnamed", "vacuous", "timeout") \
            or sim["cls"].startswith("exit"):
        out.append(("b-" + sim["cls"], sim.get("msg", "")))
    unknown = [f for f in sim.get("faults", []) + sim.get("ps_why", []) if f not in documented]
    if sim["cls"] in ("differs", "fails") and unknown:
        out.append(("b-undocumented", ", ".join(unknown)))
    return out


def notes(row: dict) -> list:
    """[(class, detail)] of what issue 41 asks beyond its "Done when": `fix` refusing ids of a
    shape it is to handle ("fix every id shape a lookup can take", even where Paddle refuses
    too); `check` findings on Paddle's split that name no Paddle fault (a false alarm, or a
    fault without an id); simulate exiting 2 or 3 on a default split."""
    out = []
    msg = row["split_fix"].get("msg", "")
    if row["split_fix"]["rc"] == 2 and "'Ids' tensor must be 2" in msg:
        out.append(("n-fix-refuses-ids", msg))
    chk = row.get("check_paddle") or {}
    if chk.get("findings") and not chk.get("finding_faults"):
        out.append(("n-check-paddle-unnamed-finding", chk.get("msg", "")))
    for who in ("default", "paddle"):
        sim = row.get("sim_" + who) or {}
        if sim.get("cls", "").startswith("exit") or sim.get("cls") == "timeout":
            out.append(("n-%s-%s" % (who, sim["cls"]), sim.get("msg", "")))
    return out


def _cell(d) -> str:
    if not d:
        return "-"
    if "cls" in d:
        names = ",".join(d.get("faults", []))
        return d["cls"] + ("[%s]" % names if names and d["cls"] != "ok" else "")
    if "findings" in d:
        return "%d:%dF/%dW" % (d["rc"], d["findings"], d["warnings"])
    return "rc%s" % d["rc"]


def report(rows, documented, echo=print) -> dict:
    """Print the table and the violations; returns {class: [(case, detail)]}."""
    echo("%-30s %-8s %-10s %-6s %-6s %-13s %-13s %-13s %s" % (
        "case", "style", "mode", "split", "fix", "check def", "check fix", "check paddle",
        "simulate: default | fix | paddle"))
    by_class, by_note = collections.OrderedDict(), collections.OrderedDict()
    for row in sorted(rows, key=lambda r: r["case"]):
        echo("%-30s %-8s %-10s %-6s %-6s %-13s %-13s %-13s %s | %s | %s" % (
            row["case"], row["style"], row["mode"], _cell(row["split_default"]),
            _cell(row["split_fix"]), _cell(row.get("check_default")),
            _cell(row.get("check_fix")),
            "refused" if row["paddle_refuses"] else _cell(row.get("check_paddle")),
            _cell(row.get("sim_default")), _cell(row.get("sim_fix")),
            "refused" if row["paddle_refuses"] else _cell(row.get("sim_paddle"))))
        for cls, detail in violations(row, documented):
            by_class.setdefault(cls, []).append((row["case"], detail))
        for cls, detail in notes(row):
            by_note.setdefault(cls, []).append((row["case"], detail))
    echo("")
    _counts(rows, echo)
    echo("")
    total = sum(len(v) for v in by_class.values())
    echo("violations of issue 41's \"Done when\": %d over %d cases" % (total, len(rows)))
    _classes(by_class, echo)
    if by_note:
        echo("")
        echo("also (issue 41 beyond its \"Done when\"): %d" % sum(len(v) for v in by_note.values()))
        _classes(by_note, echo)
    return by_class


def _counts(rows, echo) -> None:
    """Per split (ours by default, ours under fix, Paddle's): how simulate found it, and how
    many of those `check` passed (exit 0)."""
    for who, label in (("default", "ours, default"), ("fix", "ours, fix"),
                       ("paddle", "Paddle's")):
        counts, passed = collections.Counter(), collections.Counter()
        for row in rows:
            if who == "paddle" and row["paddle_refuses"]:
                cls = "refused (as Paddle)"
            elif who != "paddle" and row["split_" + who]["rc"] != 0:
                cls = "refused (as Paddle)" if row["paddle_refuses"] else \
                    "refused (Paddle splits)"
            else:
                cls = row["sim_" + who]["cls"]
                if row["check_" + who].get("rc") == 0:
                    passed[cls] += 1
            counts[cls] += 1
        echo("%-14s %s" % (label + ":", ", ".join(
            "%s %d%s" % (c, n, " (check 0: %d)" % passed[c] if passed[c] and c != "ok" else "")
            for c, n in sorted(counts.items()))))


def _classes(by_class, echo) -> None:
    for cls in sorted(by_class):
        echo("%s: %d" % (cls, len(by_class[cls])))
        for case, detail in by_class[cls]:
            echo("  %-30s %s" % (case, detail))


def load(path) -> list:
    rows = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    rows[r["case"]] = r
    return list(rows.values())


def run(cases, out_path, pst, jobs, timeout, resume, accept=None, progress=print) -> list:
    done = {r["case"] for r in load(out_path)} if resume else set()
    if not resume and os.path.exists(out_path):
        os.remove(out_path)
    todo = [c for c in cases if os.path.basename(c) not in done]
    lock = threading.Lock()

    def one(case):
        row = sweep_case(case, pst, timeout, accept)
        with lock:
            with open(out_path, "a") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")
            progress("%s: %s | %s | %s" % (row["case"], _cell(row.get("sim_default")),
                                           _cell(row.get("sim_fix")),
                                           _cell(row.get("sim_paddle"))))
        return row
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, 2))) as pool:
        list(pool.map(one, todo))
    wanted = {os.path.basename(c) for c in cases}
    return [r for r in load(out_path) if r["case"] in wanted]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="results, one JSON object a line (appended as cases finish)")
    ap.add_argument("roots", nargs="*", help="case folders or folders of them "
                    "(default: tests/corpus/usermodels)")
    ap.add_argument("--only", help="cases whose name matches this glob or contains it")
    ap.add_argument("--jobs", type=int, default=2, help="cases at once (at most 2)")
    here = os.path.join(os.path.dirname(sys.executable), "pstranspile")
    ap.add_argument("--pst", default=here if os.path.isfile(here) else shutil.which("pstranspile"),
                    help="the pstranspile to run (default: the one beside this python)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per command")
    ap.add_argument("--resume", action="store_true", help="skip the cases OUT holds")
    ap.add_argument("--accept", action="append", default=None,
                    help="lines `model param...`: parameters that cannot move, passed to "
                    "simulate as --accept-unchanged; repeatable (default: %s and %s)"
                    % (os.path.relpath(ACCEPT, ROOT), os.path.relpath(ZOO_ACCEPT, ROOT)))
    ap.add_argument("--report", action="store_true", help="only print OUT's table")
    args = ap.parse_args(argv)
    documented = documented_ids()
    if args.report:
        rows = load(args.out)
        if args.only:
            rows = [r for r in rows if fnmatch.fnmatch(r["case"], args.only)
                    or args.only in r["case"]]
    else:
        cases = find_cases(args.roots or [DEFAULT_ROOT], args.only)
        rows = run(cases, args.out, args.pst, args.jobs, args.timeout, args.resume,
                   load_accept(*(args.accept or (ACCEPT, ZOO_ACCEPT))))
    by_class = report(rows, documented)
    return 1 if by_class else 0


if __name__ == "__main__":
    sys.exit(main())
