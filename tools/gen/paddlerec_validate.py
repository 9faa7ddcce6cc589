#!/usr/bin/env python3
"""Compare the built inputs with every reference copy of the same model's programs.

    python3 tools/gen/paddlerec_validate.py [--out /work/gen-out/inputs] [--refs DIR ...]

A reference for model M is a folder holding main.pb + startup.pb named M_<mode> under
<ref>/paddlerec-fleet or <ref>/paddlerec-classic (the shared corpus), or <style>_M_<...> under a
ref folder itself (the project's tests/corpus/paddlerec-gen).  Each comparison runs
paddlerec_compare.py under Paddle's Python; the report goes to stdout and OUT/VALIDATION.md.
Exit 0 when every model with references agrees with all of them (paddlerec_compare's verdict).
"""
import argparse
import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import paddlerec_inputs as inputs  # noqa: E402

DEFAULT_REFS = ("/work/shared/corpus", os.path.join(ROOT, "tests", "corpus", "paddlerec-gen"))


def references(model, refs):
    found = []
    for ref in refs:
        pats = [os.path.join(ref, fam, f"{model}_*") for fam in ("paddlerec-fleet",
                                                                 "paddlerec-classic")]
        pats.append(os.path.join(ref, f"*_{model}_*"))
        for pat in pats:
            found += [d for d in sorted(glob.glob(pat))
                      if os.path.isfile(os.path.join(d, "main.pb"))]
    return found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=inputs.DEFAULT_OUT)
    ap.add_argument("--refs", nargs="*", default=list(DEFAULT_REFS))
    ap.add_argument("--paddle-python", default=inputs.PADDLE_PYTHON)
    ap.add_argument("--pythonpath", default=inputs.PADDLE_PYTHONPATH)
    args = ap.parse_args(argv)
    lines, verdicts = [], {}
    for name in sorted(os.listdir(args.out)):
        ours = os.path.join(args.out, name)
        if not os.path.isfile(os.path.join(ours, "model.json")):
            continue
        refs = references(name, args.refs)
        if not refs:
            continue
        proc = subprocess.run([args.paddle_python, os.path.join(HERE, "paddlerec_compare.py"),
                               ours] + refs, capture_output=True, text=True, check=False,
                              env=inputs.child_env(args.pythonpath))
        verdicts[name] = proc.returncode == 0
        lines += [f"## {name}: {'agrees' if proc.returncode == 0 else 'DIFFERS'}", "", "```"]
        lines += proc.stdout.rstrip().splitlines() + proc.stderr.rstrip().splitlines()
        lines += ["```", ""]
    head = ["# Validation of the PaddleRec inputs against reference copies", "",
            "paddlerec_compare.py per model (bytes / no-stack / frames; see its docstring).", "",
            f"{sum(verdicts.values())} of {len(verdicts)} models agree with every reference: "
            + ", ".join(f"{n} {'ok' if v else 'DIFFERS'}" for n, v in sorted(verdicts.items())),
            ""]
    text = "\n".join(head + lines) + "\n"
    with open(os.path.join(args.out, "VALIDATION.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text, end="")
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
