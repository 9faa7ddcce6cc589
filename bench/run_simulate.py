"""Time and peak memory of `pstranspile simulate` on whole models (issue 47's simulate rows).

    python bench/run_simulate.py INPUTS MODEL[,MODEL...] STYLE_MODE[,STYLE_MODE...]
                                 [--pst PATH] [--steps 3] [--timeout 600] [--limit-gb 12]

INPUTS holds one folder per model with main.pb and startup.pb (PaddleRec's zoo inputs, made by
tools/gen's paddlerec input builder: tools/gen/README_inputs.md). STYLE_MODE is e.g. classic_sync,
fleet_geo, ps_async: the split of 2 trainers and 2 pservers with `paddle_faults: fix` that
`simulate` makes itself, `--steps 3 --expect-equal`. Each run is one process, timed with
time.perf_counter, its CPU seconds (user + system) and peak RSS read with os.wait4 for exactly
that child (on a shared machine the CPU seconds are the figure to read: the wall clock there
counts the other processes' turns); a run over --timeout seconds is killed (`timeout`), one
over --limit-gb of address space fails (`memory`).
Prints a markdown table: model, style, mode, exit status, seconds, CPU seconds, peak MiB.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

CONFIG = """style: {style}
pservers: ["127.0.0.1:6174", "127.0.0.1:6175"]
trainers: 2
trainer_id: all
mode: {mode}
paddle_faults: fix
"""


def run_one(pst, model_dir, style, mode, steps, timeout, limit):
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "cluster.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG.format(style=style, mode=mode))
        cmd = [pst, "--quiet", "simulate", os.path.join(model_dir, "main.pb"), "--startup",
               os.path.join(model_dir, "startup.pb"), "--cluster", cfg, "--steps", str(steps),
               "--expect-equal"]

        def cap():
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        t0 = time.perf_counter()
        with open(os.path.join(tmp, "err"), "w+b") as err:
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=cap)
            status, killed = None, False
            while status is None:
                pid, st, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    status = st
                    break
                if time.perf_counter() - t0 > timeout and not killed:
                    p.kill()
                    killed = True
                time.sleep(0.1)
            seconds = time.perf_counter() - t0
            err.seek(0)
            last = (err.read().decode(errors="replace").strip().splitlines() or [""])[-1]
        code = os.waitstatus_to_exitcode(status)
        if killed:
            outcome = "timeout"
        elif "MemoryError" in last or "Cannot allocate" in last:
            outcome = "memory"
        else:
            outcome = "exit %d" % code
        return outcome, seconds, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0, last


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inputs")
    ap.add_argument("models")
    ap.add_argument("combos")
    ap.add_argument("--pst", default=shutil.which("pstranspile"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--limit-gb", type=float, default=12)
    a = ap.parse_args(argv)
    print("| model | style | mode | outcome | s | cpu s | peak MiB |")
    print("|---|---|---|---|---:|---:|---:|")
    for model in a.models.split(","):
        for combo in a.combos.split(","):
            style, mode = combo.split("_", 1)
            outcome, s, cpu, mib, last = run_one(a.pst, os.path.join(a.inputs, model), style, mode,
                                            a.steps, a.timeout, int(a.limit_gb * 2 ** 30))
            print("| %s | %s | %s | %s | %.1f | %.1f | %.0f |"
                  % (model, style, mode, outcome, s, cpu, mib), flush=True)
            if outcome not in ("exit 0", "exit 1"):
                print("<!-- %s -->" % last[:200], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
