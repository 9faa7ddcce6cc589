#!/usr/bin/env python
"""Fuzz the command line with mutated inputs; count tracebacks, hangs and partial outputs.

    python tests/fuzz_cli.py [--n 10000] [--seed 0] [--jobs 2] [--timeout 20]

Each input is one mutation (truncation, byte flips, insertions, deletions, splices with another
file) of a reference program (.pb or .json) or cluster config (.yaml) from tests/corpus, run
in-process through `show`, `convert`, `split` and (where it exists) `check`. An outcome is bad
when the command exits with anything but 0/1/2, prints a traceback or more than one error line,
takes longer than --timeout seconds, or leaves an output folder (or a temporary sibling) after
a failed run. Not part of the default test run (it takes minutes); the property tests in
test_robustness.py run a small sample of the same mutations on every `make test`.
"""
from __future__ import annotations

import argparse
import glob
import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

CASES = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(HERE, "corpus", "*", "*",
                                                                  "main.pb")))


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def mutate(data: bytes, rnd: random.Random, other: bytes) -> bytes:
    b = bytearray(data)
    if not b:
        return bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 64)))
    kind = rnd.randrange(6)
    if kind == 0:                                    # truncate
        return bytes(b[:rnd.randrange(len(b))])
    if kind == 1:                                    # flip bytes
        for _ in range(rnd.randint(1, 16)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        return bytes(b)
    if kind == 2:                                    # insert random bytes
        i = rnd.randrange(len(b))
        return bytes(b[:i] + bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 32))) + b[i:])
    if kind == 3:                                    # delete a range
        i, j = sorted(rnd.randrange(len(b)) for _ in range(2))
        return bytes(b[:i] + b[j:])
    if kind == 4:                                    # splice with another file
        i, j = rnd.randrange(len(b)), rnd.randrange(max(1, len(other)))
        return bytes(b[:i]) + other[j:j + rnd.randint(1, 4096)]
    for _ in range(rnd.randint(1, 4)):               # flip single bits (length-delimiter damage)
        i = rnd.randrange(len(b))
        b[i] ^= 1 << rnd.randrange(8)
    return bytes(b)


def mutate_yaml(text: bytes, rnd: random.Random) -> bytes:
    lines = text.decode("utf-8", "replace").splitlines()
    kind = rnd.randrange(5)
    if kind == 0 and lines:
        del lines[rnd.randrange(len(lines))]
    elif kind == 1 and lines:
        i = rnd.randrange(len(lines))
        lines[i] = lines[i].replace(":", rnd.choice([" ", "::", ": [", ": -1", ": 0x"]), 1)
    elif kind == 2:
        lines.append(rnd.choice(["trainers: 0", "trainer_id: 9", "mode: fast", "style: x",
                                 "pservers: []", "pservers: [a:1, a:1]", "min_block_size: -4",
                                 "split_method: random", "trainerz: 2", "geo_push_nums: yes",
                                 "pservers: [127.0.0.1:70000]", "- list", "{", "mode: geo",
                                 "style: classic", "mode: async", "trainer_id: all",
                                 "slice_var_up: false", "split_method: hash_name",
                                 "trainers: 1:30", "trainers: 1000000", "trainer_id: all",
                                 "slice_var_up: yes", "pservers: [\"a\\0b:1\"]",
                                 "pservers: [HOST:1, host:1]", "x: &a [1, *a]",
                                 "trainers: 2\ntrainers: 3"]))
    elif kind == 3:
        return mutate(text, rnd, b"")
    else:
        rnd.shuffle(lines)
    return ("\n".join(lines) + "\n").encode("utf-8", "replace")


def run_one(args):
    index, seed, timeout = args
    from click.testing import CliRunner

    from cli import main
    rnd = random.Random(seed * 1000003 + index)
    case = rnd.choice(CASES)
    other = rnd.choice(CASES)
    work = tempfile.mkdtemp(prefix="fuzz-")
    problems = []
    try:
        main_pb = open(os.path.join(case, "main.pb"), "rb").read()
        startup_pb = open(os.path.join(case, "startup.pb"), "rb").read()
        yaml_text = open(os.path.join(case, "cluster.yaml"), "rb").read()
        target = rnd.randrange(4)
        if target == 0:
            main_pb = mutate(main_pb, rnd, open(os.path.join(other, "main.pb"), "rb").read())
        elif target == 1:
            startup_pb = mutate(startup_pb, rnd, open(os.path.join(other, "startup.pb"),
                                                      "rb").read())
        elif target == 2:
            yaml_text = mutate_yaml(yaml_text, rnd)
        paths = {}
        for name, data in (("main.pb", main_pb), ("startup.pb", startup_pb),
                           ("cluster.yaml", yaml_text)):
            paths[name] = os.path.join(work, name)
            with open(paths[name], "wb") as f:
                f.write(data)
        if target == 3:
            # a JSON program with damage: round-trip through convert first
            from transpile.format import programio, textform
            try:
                text = textform.dumps(programio.load(paths["main.pb"]))
            except Exception:  # noqa: BLE001 - the reference itself must load
                problems.append("reference program failed to load")
                return index, problems
            paths["main.json"] = os.path.join(work, "main.json")
            with open(paths["main.json"], "wb") as f:
                f.write(mutate(text.encode("utf-8"), rnd, b'{"type": 1}'))
            prog_path = paths["main.json"]
        else:
            prog_path = paths["main.pb"]
        out = os.path.join(work, "out")
        commands = [
            ["show", prog_path],
            ["convert", prog_path, os.path.join(work, "conv.json")],
            ["split", prog_path, "--startup", paths["startup.pb"], "--cluster",
             paths["cluster.yaml"], "--out", out, "--quiet"],
        ]
        if "check" in main.commands:
            commands.append(["check", prog_path, "--startup", paths["startup.pb"], "--cluster",
                             paths["cluster.yaml"], os.path.join(case, "expected")])
        runner = CliRunner()
        for cmd in commands:
            signal.signal(signal.SIGALRM, _alarm)
            signal.alarm(timeout)
            t0 = time.time()
            try:
                r = runner.invoke(main, cmd, catch_exceptions=True)
            except Hang:
                problems.append("hang: %s (> %ds)" % (cmd[0], timeout))
                continue
            finally:
                signal.alarm(0)
            if isinstance(r.exception, Hang):
                problems.append("hang: %s (> %ds)" % (cmd[0], timeout))
                continue
            text = r.output or ""
            if r.exit_code not in (0, 1, 2):
                problems.append("traceback: %s exit %s: %s" % (cmd[0], r.exit_code,
                                                                text.strip()[:200]))
            elif "Traceback" in text or (r.exit_code == 2 and len(text.strip().splitlines()) > 1):
                problems.append("traceback: %s printed: %s" % (cmd[0], text.strip()[:200]))
            if cmd[0] == "split":
                leftovers = [n for n in os.listdir(work)
                             if ".tmp-" in n or ".old-" in n or n.endswith(".lock")]
                if r.exit_code != 0 and os.path.exists(out):
                    problems.append("partial output: split exited %d and left %s"
                                    % (r.exit_code, out))
                if leftovers:
                    problems.append("partial output: temporary folders left: %s" % leftovers)
            del t0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return index, problems


def main_(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10000, help="number of mutated inputs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=20, help="seconds per command")
    args = ap.parse_args(argv)
    t0 = time.time()
    counts = {"traceback": 0, "hang": 0, "partial output": 0}
    bad_inputs = 0
    examples = []
    work = [(i, args.seed, args.timeout) for i in range(args.n)]
    with multiprocessing.Pool(args.jobs) as pool:
        for done, (index, problems) in enumerate(pool.imap_unordered(run_one, work, 8), 1):
            if problems:
                bad_inputs += 1
                for p in problems:
                    counts[p.split(":")[0]] = counts.get(p.split(":")[0], 0) + 1
                if len(examples) < 20:
                    examples.append("input %d: %s" % (index, "; ".join(problems)))
            if done % 1000 == 0:
                print("  %d/%d inputs, %d bad, %.0fs" % (done, args.n, bad_inputs,
                                                          time.time() - t0), file=sys.stderr)
    print("fuzzed %d inputs (seed %d) in %.0fs: %d tracebacks, %d hangs, %d partial outputs"
          % (args.n, args.seed, time.time() - t0, counts["traceback"], counts["hang"],
             counts["partial output"]))
    for e in examples:
        print("  " + e)
    return 1 if bad_inputs else 0


if __name__ == "__main__":
    sys.exit(main_())
