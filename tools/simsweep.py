"""Sweep `simulate --expect-equal` over a zoo of programs (a dev tool: never run by `make test`).

    python tools/simsweep.py OUT.tsv [MODEL ...] [--inputs DIR] [--accept FILE] [--resume]

For each model folder INPUTS/<model>/{main.pb,startup.pb}, each style (classic, fleet) and each
mode (sync, async, half_async, geo): split with `paddle_faults: fix` for 2 pservers and 2
trainers, run `simulate --expect-equal --steps 3`, and when that exits 0, break the split twice
(drop_opt_op: the first pserver loses the first optimizer update of its optimize blocks;
drop_send: trainer_0's main loses its first `send` of a gradient, or where it sends only
sparse tables its first `distributed_push_sparse`) and simulate each broken copy, which must
exit 1 (Fleet's `send` of @PS_STEP_COUNTER@ alone is skipped: with a constant learning rate
nothing reads it, so deleting it rightly changes nothing). One TSV row per (model, style,
mode), appended as it is made:

    model  style  mode  result  seconds  mutations  last lines of simulate's output

result: exitN (simulate's exit code), split-refused (the split's one-line error follows), or
timeout. mutations: `drop_opt_op:R drop_send:R` (R = simulate's exit code on the broken split,
n/a when the split has no such op: a geo pserver has no optimizer update). --accept FILE: lines `model param...` passed as
`--accept-unchanged param` (parameters that cannot move whatever the feeds). --resume skips the
(model, style, mode) rows OUT.tsv already holds. `--summary OUT.tsv` prints the counts.
"""
from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from transpile.format import programio  # noqa: E402
from transpile.ir.optimizers import is_optimizer_update  # noqa: E402

STYLES = ("classic", "fleet")
STEP_COUNTER = "@PS_STEP_COUNTER@"
MODES = ("sync", "async", "half_async", "geo")
CLUSTER = ("pservers: [127.0.0.1:6174, 127.0.0.1:6175]\ntrainers: 2\nmode: %s\nstyle: %s\n"
           "geo_push_nums: 100\npaddle_faults: fix\n")


def _drop_first(path, blocks_from, want) -> bool:
    prog = programio.load(path)
    for block in prog.blocks[blocks_from:]:
        for i, op in enumerate(block.ops):
            if want(op):
                del block.ops[i]
                programio.save(prog, path)
                return True
    return False


def _sends_a_grad(op) -> bool:
    """A `send` of something besides Fleet's step counter (which only an LR decay on the
    pservers reads: deleting it changes nothing when the rate is constant)."""
    return op.type == "send" and (op.attr("send_varnames") or []) != [STEP_COUNTER]


def mutate(src: str, dst: str, kind: str) -> bool:
    """Copy the split `src` to `dst` (programs and runtime.json only) and break it; False when
    the split has nothing to break that way."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    for root, _, files in os.walk(dst):
        for f in files:
            if f.endswith(".json") and f != "runtime.json":
                os.remove(os.path.join(root, f))
    if kind == "drop_send":
        path = os.path.join(dst, "trainer_0", "main.pb")
        return _drop_first(path, 0, _sends_a_grad) or \
            _drop_first(path, 0, lambda op: op.type == "distributed_push_sparse")
    pservers = sorted(d for d in os.listdir(dst) if d.startswith("pserver_"))
    if not pservers:
        return False
    return _drop_first(os.path.join(dst, pservers[0], "main.pb"), 1, is_optimizer_update)


def _last_lines(text: str, n: int) -> str:
    lines = [x for x in text.splitlines() if x.strip() and not x.startswith("note")]
    return " ".join(lines[-n:])[:300]


def _run(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return None, "timeout after %ss" % timeout


def one(args, model, style, mode, tmp, accept) -> list:
    inp = os.path.join(args.inputs, model)
    cfg = os.path.join(tmp, "c.yaml")
    with open(cfg, "w") as f:
        f.write(CLUSTER % (mode, style))
    split = os.path.join(tmp, "s")
    shutil.rmtree(split, ignore_errors=True)
    base = [inp + "/main.pb", "--startup", inp + "/startup.pb", "--cluster", cfg]
    rc, out = _run([args.pst, "split"] + base + ["--out", split], args.timeout)
    if rc != 0:
        return [model, style, mode, "split-refused", _last_lines(out, 1)[:200]]
    extra = ["--steps", str(args.steps), "--expect-equal"]
    for p in accept.get(model, ()):
        extra += ["--accept-unchanged", p]

    def sim(folder):
        return _run([args.pst, "simulate", inp + "/main.pb", folder] + base[1:] + extra,
                    args.timeout)
    t0 = time.monotonic()
    rc, out = sim(split)
    dt = int(time.monotonic() - t0)
    muts = []
    if rc == 0:
        for kind in ("drop_opt_op", "drop_send"):
            broken = os.path.join(tmp, "m")
            if not mutate(split, broken, kind):
                muts.append(kind + ":n/a")
                continue
            r, _ = sim(broken)
            muts.append("%s:%s" % (kind, "timeout" if r is None else r))
    res = "timeout" if rc is None else "exit%d" % rc
    return [model, style, mode, res, "%ds" % dt, " ".join(muts), _last_lines(out, 2)]


# why a split is refused, in short (the split's own message otherwise)
REFUSALS = (("has no geo mode", "classic has no geo mode"),
            ("needs a sparse parameter", "geo without a sparse table (Paddle: GeoSGD require "
                                         "sparse parameters)"),
            ("large-scale", "geo with a large-scale table (Paddle refuses it too)"),
            ("coalesce_tensor", "coalesced RNN weights a pserver does not hold (Paddle: "
                                "KeyError in its pserver startup)"),
            ("something wrong with distribute_transpiler", "a distributed lookup whose ids are "
                                                           "computed after its output is used "
                                                           "(Paddle's message)"))


def _refusal(text: str) -> str:
    for key, short in REFUSALS:
        if key in text:
            return short
    return text[:80]


def summary(path) -> None:
    """Counts per style and mode: exit0 with both mutations caught, other exits, refusals."""
    counts = collections.Counter()
    with open(path) as f:
        for line in f:
            row = line.rstrip("\n").split("\t")
            res = row[3]
            if res == "exit0":
                muts = [m for m in row[5].split() if not m.endswith(":n/a")]
                res = "exit0+caught" if muts and all(m.endswith(":1") for m in muts) \
                    else "exit0, mutation missed: " + row[5]
            elif res == "split-refused":
                res = "refused: " + _refusal(row[4])
            counts[(row[1], row[2], res)] += 1
    for (style, mode, res), n in sorted(counts.items()):
        print("%-8s %-11s %3d  %s" % (style, mode, n, res))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("models", nargs="*")
    ap.add_argument("--inputs", default="/work/gen-out/inputs")
    ap.add_argument("--accept", help="file of lines `model param...`")
    ap.add_argument("--pst", default=os.path.join(os.path.dirname(sys.executable), "pstranspile"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--styles", default=",".join(STYLES), help="comma-separated")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated")
    ap.add_argument("--summary", action="store_true", help="print OUT.tsv's counts and stop")
    args = ap.parse_args()
    if args.summary:
        return summary(args.out)
    models = [m for m in args.models or sorted(os.listdir(args.inputs))
              if os.path.isfile(os.path.join(args.inputs, m, "main.pb"))]
    accept = {}
    if args.accept:
        with open(args.accept) as f:
            for line in f:
                words = line.split("#")[0].split()
                if words:
                    accept[words[0]] = words[1:]
    done = set()
    if args.resume and os.path.exists(args.out):
        with open(args.out) as f:
            done = {tuple(line.split("\t")[:3]) for line in f}
    tmp = tempfile.mkdtemp(prefix="simsweep.")
    try:
        with open(args.out, "a" if args.resume else "w") as out:
            for model in models:
                for style in args.styles.split(","):
                    for mode in args.modes.split(","):
                        if (model, style, mode) in done:
                            continue
                        row = one(args, model, style, mode, tmp, accept)
                        out.write("\t".join(row) + "\n")
                        out.flush()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
