#!/usr/bin/env python3
"""Benchmark pstranspile as whole processes on generated programs; print a markdown table.

    python bench/run.py [--quick] [--sizes 1000,5000,20000] [--kinds mlp,ctr] [--write-results]

For each kind and size it generates main.pb / startup.pb / cluster configs with bench/gen.py,
then times, as separate processes (wall clock, median of --repeats runs, peak RSS from wait4):

  floor            a process that only parses the input (main + startup) with protobuf and
                   serializes it twice: what any tool that reads and writes these bytes pays
  split            pstranspile split --quiet to 2, 16 and 64 pservers, fleet and classic style
  check            pstranspile check of the 16-pserver split (both styles)
  diff             pstranspile diff of the input main.pb against the 16-pserver fleet trainer
  show             pstranspile show of the input main.pb (text, to /dev/null)

A command that does not exist is reported "n/a", one that exits with an unexpected status
"failed" (with the first line of its stderr), and the bench goes on. The table gives each
figure's median, its ratio to the floor, peak memory and its ratio to the input's bytes, how
time grows with ops (slope of log time over log ops, least squares over the sizes) and with
pservers (time at 64 / time at 2), and whether the targets are met. See bench/README.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "RESULTS.md")

# targets (see the issue): the split must stay within these
T_FLOOR, T_FLOOR_FROM = 3.0, 5000     # split <= 3x floor at every size >= 5k ops
T_SLOPE = 1.1                         # log time / log ops
T_PSERVERS = 1.5                      # t(64 pservers) / t(2 pservers)
T_MEMORY = 5.0                        # peak RSS / input bytes (main.pb + startup.pb)

FLOOR_CODE = r"""
import sys
sys.path.insert(0, sys.argv[1])
from transpile.format.proto import ProgramDesc
for path in sys.argv[2:]:
    with open(path, "rb") as f:
        data = f.read()
    msg = ProgramDesc()
    msg.ParseFromString(data)
    for _ in range(2):
        out = msg.SerializeToString(deterministic=True)
    assert len(out) == len(data)
"""


# ---------------------------------------------------------------------------------------------
# running one process

class Run:
    """Outcome of timing one command: status ok / failed / n/a / timeout, times, peak RSS."""

    def __init__(self, status, times=(), rss=(), note="", cmd=None):
        self.status = status
        self.times = list(times)
        self.rss = list(rss)          # bytes
        self.note = note
        self.cmd = cmd
        self.out_bytes = None         # split: the bytes it wrote

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def median(self):
        return statistics.median(self.times) if self.ok and self.times else None

    @property
    def peak(self):
        return max(self.rss) if self.ok and self.rss else None


def run_once(cmd, timeout, cwd=None):
    """(wall seconds, max RSS bytes, exit code or None on timeout, stderr text)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                             cwd=cwd)
        killed = []

        def kill():
            killed.append(True)
            try:
                p.kill()
            except OSError:
                pass
        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    rss = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    return wall, rss, (None if killed else p.returncode), text


def measure(cmd, repeats, timeout, ok_codes=(0,), cwd=None, log=None) -> Run:
    times, rss = [], []
    for _ in range(repeats):
        wall, peak, rc, err = run_once(cmd, timeout, cwd)
        if rc is None:
            return Run("timeout", note="killed after %ds" % timeout, cmd=cmd)
        if rc not in ok_codes:
            line = next((ln for ln in reversed(err.strip().splitlines()) if ln.strip()), "")
            if "No such command" in err:
                return Run("n/a", note="no such command", cmd=cmd)
            return Run("failed", note="exit %d: %s" % (rc, line[:160]), cmd=cmd)
        times.append(wall)
        rss.append(peak)
        if log:
            log("    %.2fs %.0f MiB" % (wall, peak / 2 ** 20))
    return Run("ok", times, rss, cmd=cmd)


# ---------------------------------------------------------------------------------------------
# the machine

def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        import google.protobuf as pb
        from google.protobuf.internal import api_implementation
        protobuf = "%s (%s)" % (pb.__version__, api_implementation.Type())
    except Exception:  # noqa: BLE001
        protobuf = "?"
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": usable, "memory": mem,
            "python": platform.python_version(), "implementation": platform.python_implementation(),
            "os": "%s %s" % (platform.system(), platform.release()), "protobuf": protobuf}


# ---------------------------------------------------------------------------------------------
# the bench

def pstranspile_cmd() -> list:
    exe = os.path.join(os.path.dirname(sys.executable), "pstranspile")
    if os.path.exists(exe):
        return [exe]
    return [sys.executable, "-c", "import sys; sys.path.insert(0, %r); import cli; cli.run()"
            % ROOT]


def help_text(pst, *args) -> str:
    try:
        r = subprocess.run(pst + list(args) + ["--help"], capture_output=True, text=True,
                           timeout=60)
        return r.stdout if r.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def fmt_s(x):
    return "—" if x is None else ("%.2f" % x if x < 100 else "%.0f" % x)


def fmt_x(x):
    return "—" if x is None else ("%.2f×" % x if x < 10 else "%.1f×" % x)


def fmt_mib(b):
    return "—" if b is None else "%.0f" % (b / 2 ** 20)


def fmt_bytes(b):
    return "%.1f MB" % (b / 1e6)


def tree_bytes(path) -> int:
    """Bytes of the files under `path`."""
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


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


class Bench:
    def __init__(self, args):
        self.args = args
        self.pst = pstranspile_cmd()
        self.results = {}     # (kind, size) -> {label: Run}
        self.inputs = {}      # (kind, size) -> info.json of the generated program
        self.log = (lambda *a: None) if args.silent else (
            lambda msg: print(msg, file=sys.stderr, flush=True))
        top = help_text(self.pst)
        self.commands = set()
        in_cmds = False
        for line in top.splitlines():
            if line.strip().lower().startswith("commands:"):
                in_cmds = True
                continue
            if in_cmds and line.startswith("  ") and line.strip():
                self.commands.add(line.split()[0])
        split_help = help_text(self.pst, "split") if "split" in self.commands else ""
        self.split_quiet_local = "--quiet" in split_help

    # -- labels of the figures, in table order
    def labels(self):
        a = self.args
        out = ["floor"]
        for style in a.styles:
            for n in a.pservers:
                out.append("split %s p%d" % (style, n))
        for style in a.styles:
            out.append("check %s p%d" % (style, a.check_pservers))
        out += ["diff", "show"]
        return out

    def generate(self, kind, size) -> str:
        a = self.args
        d = os.path.join(a.workdir, "%s_%d_%s%s" % (kind, size, a.optimizer,
                                                    "_lrdecay" if a.lr_decay else ""))
        info_path = os.path.join(d, "info.json")
        want = {"kind": kind, "ops_requested": size, "optimizer": a.optimizer,
                "lr_decay": a.lr_decay, "seed": a.seed}
        if os.path.exists(info_path) and not a.regenerate:
            with open(info_path) as f:
                info = json.load(f)
            if all(info.get(k) == v for k, v in want.items()) and \
                    (a.width is None or info.get("width") == a.width):
                self.inputs[(kind, size)] = info
                return d
        cmd = [sys.executable, os.path.join(HERE, "gen.py"), "--kind", kind, "--ops", str(size),
               "--optimizer", a.optimizer, "--seed", str(a.seed), "--out", d]
        if a.lr_decay:
            cmd.append("--lr-decay")
        if a.width:
            cmd += ["--width", str(a.width)]
        self.log("generate: %s" % " ".join(cmd[1:]))
        subprocess.run(cmd, check=True)
        with open(info_path) as f:
            self.inputs[(kind, size)] = json.load(f)
        return d

    def split_cmd(self, d, style, n, out):
        q = ["--quiet"]
        pre = self.pst + ([] if self.split_quiet_local else q) + ["split"]
        return pre + [os.path.join(d, "main.pb"), "--startup", os.path.join(d, "startup.pb"),
                      "--cluster", os.path.join(d, "cluster_p%d_%s.yaml" % (n, style)),
                      "--out", out, "--force"] + (q if self.split_quiet_local else [])

    def run_case(self, kind, size):
        a = self.args
        d = self.generate(kind, size)
        main, startup = os.path.join(d, "main.pb"), os.path.join(d, "startup.pb")
        res = {}
        self.results[(kind, size)] = res
        reps, to = a.repeats, a.timeout

        def go(label, cmd, ok_codes=(0,), needs=None):
            if needs is not None and needs not in self.commands:
                res[label] = Run("n/a", note="no `%s` command" % needs, cmd=cmd)
                self.log("  %s: n/a" % label)
                return
            self.log("  %s" % label)
            res[label] = measure(cmd, reps, to, ok_codes, cwd=ROOT, log=self.log)
            if not res[label].ok:
                self.log("    %s %s" % (res[label].status, res[label].note))

        self.log("%s %d ops (%s):" % (kind, size, d))
        go("floor", [sys.executable, "-c", FLOOR_CODE, ROOT, main, startup])
        outs = {}
        for style in a.styles:
            for n in a.pservers:
                out = os.path.join(d, "split_%s_p%d" % (style, n))
                outs[(style, n)] = out
                label = "split %s p%d" % (style, n)
                go(label, self.split_cmd(d, style, n, out), needs="split")
                if res[label].ok:
                    res[label].out_bytes = tree_bytes(out)
        for style in a.styles:
            label = "check %s p%d" % (style, a.check_pservers)
            out = outs.get((style, a.check_pservers))
            if out is None or not res.get("split %s p%d" % (style, a.check_pservers),
                                          Run("n/a")).ok:
                res[label] = Run("n/a", note="no split to check")
                continue
            go(label, self.pst + ["check", main, out, "--startup", startup, "--cluster",
                                  os.path.join(d, "cluster_p%d_%s.yaml" % (a.check_pservers,
                                                                            style))],
               ok_codes=(0, 1), needs="check")
        diff_style = a.styles[0]
        out = outs.get((diff_style, a.check_pservers))
        trainer = os.path.join(out, "trainer_0", "main.pb") if out else None
        if trainer and os.path.exists(trainer):
            go("diff", self.pst + ["diff", main, trainer], ok_codes=(0, 1), needs="diff")
        else:
            res["diff"] = Run("n/a", note="no trainer program to compare with")
        go("show", self.pst + ["--no-color", "show", main], needs="show")
        if not a.keep:
            for out in outs.values():
                shutil.rmtree(out, ignore_errors=True)

    def run(self):
        for kind in self.args.kinds:
            for size in self.args.sizes:
                self.run_case(kind, size)

    # -- the report
    def input_bytes(self, kind, size):
        info = self.inputs[(kind, size)]
        return info["bytes_main"] + info["bytes_startup"]

    def report(self, elapsed) -> str:
        a = self.args
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
                i = self.inputs.get((kind, size))
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
                                           % self.inputs[(kind, s)]["ops_main"]
                                           for s in a.sizes) + " slope |"
            L.append(head)
            L.append("|---|" + "---:|---:|---:|---:|" * len(a.sizes) + "---:|")
            for label in self.labels():
                row = "| %s |" % label
                pts = []
                for size in a.sizes:
                    r = self.results[(kind, size)].get(label)
                    fl = self.results[(kind, size)].get("floor")
                    if r is None or not r.ok:
                        st = "n/a" if r is None else r.status
                        row += " %s | | | |" % st
                        continue
                    ratio = r.median / fl.median if fl and fl.ok and label != "floor" else None
                    mem_x = r.peak / self.input_bytes(kind, size)
                    row += " %s | %s | %s | %s |" % (fmt_s(r.median), fmt_x(ratio),
                                                    fmt_mib(r.peak), fmt_x(mem_x))
                    pts.append((self.inputs[(kind, size)]["ops_main"], r.median))
                s = slope(pts) if len(pts) == len(a.sizes) else None
                row += " %s |" % ("—" if s is None else "%.2f" % s)
                L.append(row)
        notes = []
        for kind in a.kinds:
            for size in a.sizes:
                for label, r in self.results[(kind, size)].items():
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
                    r = self.results[(kind, size)]
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
        L += self.targets()
        return "\n".join(L) + "\n"

    def targets(self):
        a = self.args
        L = ["## Targets (for `split`, every style and pserver count)", "",
             "| target | met? | worst case |", "|---|---|---|"]
        splits = [lab for lab in self.labels() if lab.startswith("split")]
        missing = any(not self.results[(k, s)][lab].ok
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
                if self.inputs[(k, s)]["ops_main"] < T_FLOOR_FROM * 0.95:
                    continue
                fl = self.results[(k, s)]["floor"]
                for lab in splits:
                    r = self.results[(k, s)][lab]
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
                pts = [(self.inputs[(k, s)]["ops_main"], self.results[(k, s)][lab].median)
                       for s in a.sizes if self.results[(k, s)][lab].ok]
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
                    r = self.results[(k, s)]
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
                if self.inputs[(k, s)]["ops_main"] < T_FLOOR_FROM * 0.95:
                    continue
                for lab in splits:
                    r = self.results[(k, s)][lab]
                    if r.ok:
                        x = r.peak / self.input_bytes(k, s)
                        if worst is None or x > worst:
                            worst, where = x, "%s %d ops, %s: %s MiB" % (k, s, lab,
                                                                          fmt_mib(r.peak))
        L.append("| peak memory < %.0f× the input's bytes (from %dk ops) | %s | %s |"
                 % (T_MEMORY, T_FLOOR_FROM // 1000,
                    verdict(worst is not None and worst < T_MEMORY, worst is not None),
                    "%s (%s)" % (fmt_x(worst), where) if worst is not None else
                    "no size ≥ %dk ops" % (T_FLOOR_FROM // 1000)))
        floors = [self.results[(k, s)]["floor"] for k in a.kinds for s in a.sizes]
        base = min((r.peak for r in floors if r.ok), default=None)
        if base:
            L.append("")
            L.append("For scale: the smallest floor process peaks at %s MiB (the interpreter "
                     "and protobuf)." % fmt_mib(base))
        return L


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,5000,20000",
                    help="main-program op counts (default 1000,5000,20000)")
    ap.add_argument("--kinds", default="mlp,ctr", help="program kinds (default mlp,ctr)")
    ap.add_argument("--optimizer", choices=["sgd", "momentum", "adam"], default="adam")
    ap.add_argument("--lr-decay", action="store_true", help="generate with LR decay ops")
    ap.add_argument("--width", type=int, default=None, help="layer width for bench/gen.py")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pservers", default="2,16,64", help="pserver counts (default 2,16,64)")
    ap.add_argument("--styles", default="fleet,classic")
    ap.add_argument("--check-pservers", type=int, default=16,
                    help="which split `check` and `diff` look at (default 16)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure (median)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per run")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run (~1 min): sizes 300,1000, one run each")
    ap.add_argument("--workdir", default=os.path.join(HERE, "out"),
                    help="where the generated inputs go (default bench/out, reused)")
    ap.add_argument("--regenerate", action="store_true", help="regenerate cached inputs")
    ap.add_argument("--keep", action="store_true", help="keep the split outputs")
    ap.add_argument("--write-results", action="store_true",
                    help="also write the table to bench/RESULTS.md")
    ap.add_argument("--json", metavar="FILE", help="also write the raw figures as JSON")
    ap.add_argument("--silent", action="store_true", help="no progress on stderr")
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.quick:
        if "--sizes" not in " ".join(args.argv):
            args.sizes = "300,1000"
        if "--repeats" not in " ".join(args.argv):
            args.repeats = 1
    try:
        args.sizes = [int(x) for x in str(args.sizes).split(",") if x.strip()]
        args.pservers = [int(x) for x in str(args.pservers).split(",") if x.strip()]
    except ValueError:
        ap.error("--sizes and --pservers take comma-separated integers")
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    args.styles = [s.strip() for s in args.styles.split(",") if s.strip()]
    if any(k not in ("mlp", "ctr") for k in args.kinds):
        ap.error("--kinds: mlp and/or ctr")
    if any(s not in ("fleet", "classic") for s in args.styles):
        ap.error("--styles: fleet and/or classic")
    if not args.sizes or any(s < 50 for s in args.sizes):
        ap.error("--sizes: op counts of at least 50")
    if args.check_pservers not in args.pservers:
        args.check_pservers = args.pservers[len(args.pservers) // 2]
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    t0 = time.perf_counter()
    bench = Bench(args)
    bench.run()
    text = bench.report(time.perf_counter() - t0)
    sys.stdout.write(text)
    if args.write_results:
        with open(RESULTS, "w") as f:
            f.write(text)
        print("wrote %s" % os.path.relpath(RESULTS), file=sys.stderr)
    if args.json:
        raw = {"machine": machine(), "inputs": {"%s_%d" % k: v for k, v in bench.inputs.items()},
               "results": {"%s_%d" % k: {lab: {"status": r.status, "times": r.times,
                                               "rss": r.rss, "note": r.note,
                                               "out_bytes": r.out_bytes}
                                         for lab, r in res.items()}
                           for k, res in bench.results.items()}}
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
