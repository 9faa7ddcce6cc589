#!/usr/bin/env python3
"""Benchmark pstranspile as whole processes on generated programs; print a markdown table.

    python bench/run.py [--quick] [--sizes 1000,5000,20000] [--kinds mlp,ctr] [--write-results]

For each kind and size it generates main.pb / startup.pb / cluster configs with bench/gen.py,
then times, as separate processes (wall clock, median of --repeats runs, peak RSS from wait4):

  split            pstranspile split --quiet, styles classic, fleet and ps, to 2, 16 and 64
                   pservers; its output folder is removed (untimed) before each run
  check            pstranspile check of each of those splits (--check-pservers to limit)
  floor_out        run right after each split or check run: bench/run_floor.py, which parses
                   main + startup once with protobuf (upb) and serializes them again and again
                   until it has written the split's .pb bytes (OUT_BYTES). A split or check
                   figure's ×floor_out is the median over the repeats of (its time / the time of
                   the floor_out run right after it)
  floor            a process that only parses the input (main + startup) with protobuf and
                   serializes it twice: the scale for diff and show
  diff             pstranspile diff of the input main.pb against the 16-pserver fleet trainer
  show             pstranspile show of the input main.pb (text, to /dev/null)

The package is byte-compiled before anything is timed (compile_package). A command that does
not exist is reported "n/a", one that exits with an unexpected status
"failed" (with the first line of its stderr), and the bench goes on. The tables give each
figure's median, its ratio to its floor, peak memory and its ratio to the input's bytes, how
time grows with ops (slope of log time over log ops, least squares over the sizes) and with
pservers (time at 64 / time at 2), and whether the targets are met. See bench/README.md.
Running and timing one process is run_measure.py, the floor_out process run_floor.py, the
tables and targets run_report.py.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from run_floor import floor_cmd, pb_bytes
from run_measure import Run, machine, measure
from run_report import report

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "RESULTS.md")

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


class Bench:
    def __init__(self, args):
        self.args = args
        self.pst = pstranspile_cmd()
        self.results = {}     # (kind, size) -> {label: Run}
        self.timed_out = {}   # (kind, label) -> ops at which it timed out: not run at larger sizes
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
            for n in a.check_pservers:
                out.append("check %s p%d" % (style, n))
        out += ["diff", "show"]
        return out

    def diff_split(self):
        """(style, pservers) of the split whose trainer `diff` compares with the input."""
        a = self.args
        style = "fleet" if "fleet" in a.styles else a.styles[0]
        n = 16 if 16 in a.pservers else a.pservers[len(a.pservers) // 2]
        return style, n

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
            configs = all(os.path.exists(os.path.join(d, "cluster_p%d_%s.yaml" % (n, style)))
                          for n in a.pservers for style in a.styles)
            if all(info.get(k) == v for k, v in want.items()) and configs and \
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

    def go(self, res, label, cmd, needs=None, **kw):
        """Measure `cmd` into res[label] (kw: ok_codes, before, paired; see measure). A figure
        that timed out at a smaller size of the same kind is not run again (status timeout)."""
        a = self.args
        if needs is not None and needs not in self.commands:
            res[label] = Run("n/a", note="no `%s` command" % needs, cmd=cmd)
            self.log("  %s: n/a" % label)
            return res[label]
        key = (self.kind, label)
        if key in self.timed_out:
            res[label] = Run("timeout", note="not run: timed out (%ds) at %d ops already"
                             % (a.timeout, self.timed_out[key]), cmd=cmd)
            self.log("  %s: %s" % (label, res[label].note))
            return res[label]
        self.log("  %s" % label)
        res[label] = measure(cmd, a.repeats, a.timeout, cwd=ROOT, log=self.log, **kw)
        if not res[label].ok:
            self.log("    %s %s" % (res[label].status, res[label].note))
        if res[label].status == "timeout":
            self.timed_out[key] = self.size
        return res[label]

    def split_and_check(self, res, d, style, n):
        """Time the split to n pservers (paired with floor_out), then check it (paired with
        the floor_out of the same OUT_BYTES). Returns the split folder."""
        main, startup = os.path.join(d, "main.pb"), os.path.join(d, "startup.pb")
        cluster = os.path.join(d, "cluster_p%d_%s.yaml" % (n, style))
        out = os.path.join(d, "split_%s_p%d" % (style, n))

        def floor_of_split():
            out_bytes = pb_bytes(out)
            return floor_cmd(sys.executable, main, startup, out_bytes), out_bytes

        split = self.go(res, "split %s p%d" % (style, n), self.split_cmd(d, style, n, out),
                        needs="split", before=lambda: shutil.rmtree(out, ignore_errors=True),
                        paired=floor_of_split)
        if n not in self.args.check_pservers:
            return out
        label = "check %s p%d" % (style, n)
        if not split.ok:
            res[label] = Run("n/a", note="no split to check")
            return out
        checked = pb_bytes(out)
        self.go(res, label, self.pst + ["check", main, out, "--startup", startup, "--cluster",
                                        cluster],
                needs="check", ok_codes=(0, 1),
                paired=lambda: (floor_cmd(sys.executable, main, startup, checked), checked))
        return out

    def run_case(self, kind, size):
        a = self.args
        self.kind, self.size = kind, size
        d = self.generate(kind, size)
        main, startup = os.path.join(d, "main.pb"), os.path.join(d, "startup.pb")
        res = {}
        self.results[(kind, size)] = res
        self.log("%s %d ops (%s):" % (kind, size, d))
        self.go(res, "floor", [sys.executable, "-c", FLOOR_CODE, ROOT, main, startup])
        keep = self.diff_split()
        for style in a.styles:
            for n in a.pservers:
                out = self.split_and_check(res, d, style, n)
                if not a.keep and (style, n) != keep:
                    shutil.rmtree(out, ignore_errors=True)
        out = os.path.join(d, "split_%s_p%d" % keep)
        trainer = os.path.join(out, "trainer_0", "main.pb")
        if res.get("split %s p%d" % keep, Run("n/a")).ok and os.path.exists(trainer):
            self.go(res, "diff", self.pst + ["diff", main, trainer], needs="diff",
                    ok_codes=(0, 1))
        else:
            res["diff"] = Run("n/a", note="no trainer program to compare with")
        self.go(res, "show", self.pst + ["--no-color", "show", main], needs="show")
        if not a.keep:
            shutil.rmtree(out, ignore_errors=True)

    def run(self):
        for kind in self.args.kinds:
            for size in self.args.sizes:
                self.run_case(kind, size)

    def input_bytes(self, kind, size):
        info = self.inputs[(kind, size)]
        return info["bytes_main"] + info["bytes_startup"]

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
    ap.add_argument("--styles", default="classic,fleet,ps",
                    help="split styles (default classic,fleet,ps)")
    ap.add_argument("--check-pservers", default="all", metavar="N,N|all",
                    help="the pserver counts whose splits `check` is timed on (default all)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure (median)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per run")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run (~1-2 min): sizes 300,1000, one run each, check on all "
                         "but the largest pserver count")
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
        cp = str(args.check_pservers).strip()
        args.check_pservers = list(args.pservers) if cp == "all" else \
            [int(x) for x in cp.split(",") if x.strip()]
        if args.quick and "--check-pservers" not in " ".join(args.argv):
            args.check_pservers = args.pservers[:-1] or args.pservers
    except ValueError:
        ap.error("--sizes, --pservers and --check-pservers take comma-separated integers "
                 "(--check-pservers also: all)")
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    args.styles = [s.strip() for s in args.styles.split(",") if s.strip()]
    if any(k not in ("mlp", "ctr") for k in args.kinds):
        ap.error("--kinds: mlp and/or ctr")
    if any(s not in ("fleet", "classic", "ps") for s in args.styles):
        ap.error("--styles: fleet, classic and/or ps")
    if not args.sizes or any(s < 50 for s in args.sizes):
        ap.error("--sizes: op counts of at least 50")
    if not args.pservers or any(n not in args.pservers for n in args.check_pservers):
        ap.error("--check-pservers: a subset of --pservers %s, or all"
                 % ",".join(map(str, args.pservers)))
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    return args


def compile_package() -> None:
    """Byte-compile the package once, before anything is timed: an installed package has its
    .pyc files, and a process started with PYTHONDONTWRITEBYTECODE set (some sandboxes and CI
    images set it) would otherwise compile every module it imports on every run (~0.3 s of a
    small split). Reading .pyc files is not affected by that variable."""
    import compileall
    compileall.compile_dir(os.path.join(ROOT, "transpile"), quiet=1)
    compileall.compile_file(os.path.join(ROOT, "cli.py"), quiet=1)


KEPT = "<!-- kept by --write-results: measured by other scripts (run_simulate.py) -->"


def with_kept_tail(text: str, path: str) -> str:
    """`text`, then what the file at `path` holds from the KEPT line on (figures other scripts
    measured and someone recorded by hand: run.py's report replaces only what it makes)."""
    try:
        with open(path) as f:
            old = f.read()
    except OSError:
        return text
    at = old.find(KEPT)
    return text if at < 0 else text.rstrip("\n") + "\n\n" + old[at:]


def main(argv=None) -> int:
    args = parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    compile_package()
    t0 = time.perf_counter()
    bench = Bench(args)
    bench.run()
    text = report(bench, time.perf_counter() - t0)
    sys.stdout.write(text)
    if args.write_results:
        with open(RESULTS, "w") as f:
            f.write(with_kept_tail(text, RESULTS))
        print("wrote %s" % os.path.relpath(RESULTS), file=sys.stderr)
    if args.json:
        raw = {"machine": machine(), "inputs": {"%s_%d" % k: v for k, v in bench.inputs.items()},
               "results": {"%s_%d" % k: {lab: {"status": r.status, "times": r.times,
                                               "rss": r.rss, "note": r.note,
                                               "out_bytes": r.out_bytes,
                                               "floor_out_times": r.floor_times,
                                               "floor_out_rss": r.floor_rss,
                                               "ratios": r.ratios}
                                         for lab, r in res.items()}
                           for k, res in bench.results.items()}}
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
