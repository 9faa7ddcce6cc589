"""Compare a built model's main.pb / startup.pb with reference copies (run under Paddle's Python).

    PYTHONPATH=/work/paddle/pb425 /work/paddle/venv/bin/python tools/gen/paddlerec_compare.py \\
        OUT/autoint /work/shared/corpus/paddlerec-fleet/autoint_sync [more reference folders]

For each program, three verdicts:
  bytes      the files are byte-identical;
  no-stack   identical once every op's op_callstack attr is dropped from both (the callstack is
             Python's traceback at op creation: it names the generating script, its lines and
             install paths, so two generators never agree on it byte for byte);
  frames     the callstacks agree on the frames that belong to Paddle (paddle/...: file, line,
             function) and to the model's own files (by file name, as model.json lists them in
             paddlerec.files: the reference may have run a copy of the model folder); frames of
             the generating scripts, shims and wrappers are ignored, as is the source text (a
             generator that cannot find the model file records blank lines).  Frames that differ
             only above Optimizer.minimize (the optimizer and backward ops of a reference whose
             minimize was called by fleet's distributed optimizer, not by the model's
             create_optimizer) are counted apart.
Exit 0 when every reference agrees on no-stack and on the frames (from minimize in), else 1.
"""
import json
import os
import sys

from paddle.base.proto import framework_pb2

STACK = "op_callstack"
MINIMIZE = ("paddle/optimizer/optimizer.py", "minimize")


def _load(path):
    p = framework_pb2.ProgramDesc()
    with open(path, "rb") as f:
        p.ParseFromString(f.read())
    return p


def _without_stack(prog):
    p = framework_pb2.ProgramDesc()
    p.CopyFrom(prog)
    for b in p.blocks:
        for op in b.ops:
            keep = [a for a in op.attrs if a.name != STACK]
            del op.attrs[:]
            op.attrs.extend(keep)
    return p.SerializeToString()


def _kept_file(fname, model_files):
    """paddle/... for a Paddle frame, model:<file name> for a frame in one of the model's files
    (model_files: their base names; a reference may have run a copy of the model folder from
    anywhere), None for any other frame."""
    cut = fname.find("site-packages/paddle/")
    if cut >= 0:
        return fname[cut + len("site-packages/"):]
    base = fname.rsplit("/", 1)[-1]
    if base in model_files:
        return "model:" + base
    return None


def _frames(op, model_files):
    """[(kind-relative file, line, function)] of the Paddle and PaddleRec frames."""
    out = []
    for a in op.attrs:
        if a.name != STACK:
            continue
        for line in a.strings:
            s = line.strip()
            if not s.startswith('File "'):
                continue
            fname, rest = s[6:].split('", line ', 1)
            lineno, func = rest.split(", in ", 1)
            rel = _kept_file(fname, model_files)
            if rel is not None:
                out.append((rel, int(lineno), func))
    return out


def _below_minimize(frames):
    """The frames from Optimizer.minimize inwards (all of them if it is not on the stack)."""
    for i, f in enumerate(frames):
        if f[0] == MINIMIZE[0] and f[2] == MINIMIZE[1]:
            return frames[i:]
    return frames


def _frame_diffs(a, b, model_files):
    """([ops whose frames differ], number of those that agree from Optimizer.minimize in)."""
    diffs, caller_only = [], 0
    for bi, (ba, bb) in enumerate(zip(a.blocks, b.blocks)):
        for oi, (oa, ob) in enumerate(zip(ba.ops, bb.ops)):
            fa, fb = _frames(oa, model_files), _frames(ob, model_files)
            if fa != fb:
                diffs.append((bi, oi, oa.type, fa, fb))
                caller_only += _below_minimize(fa) == _below_minimize(fb) != fa
    return diffs, caller_only


def model_files(ours):
    """Base names of the model's Python files (model.json paddlerec.files)."""
    with open(os.path.join(ours, "model.json"), encoding="utf-8") as f:
        files = json.load(f)["paddlerec"]["files"]
    return {os.path.basename(p) for p in files if p.endswith(".py")}


def compare(ours, ref):
    """{program: (bytes equal, no-stack equal, frame diffs)} for main.pb and startup.pb."""
    res = {}
    files = model_files(ours)
    for name in ("main.pb", "startup.pb"):
        with open(f"{ours}/{name}", "rb") as f:
            ba = f.read()
        with open(f"{ref}/{name}", "rb") as f:
            bb = f.read()
        a, b = _load(f"{ours}/{name}"), _load(f"{ref}/{name}")
        res[name] = (ba == bb, _without_stack(a) == _without_stack(b), _frame_diffs(a, b, files))
    return res


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    ours, refs = argv[0], argv[1:]
    ok = True
    for ref in refs:
        for name, (same, nostack, (diffs, caller_only)) in compare(ours, ref).items():
            ok = ok and nostack and len(diffs) == caller_only
            if not diffs:
                frames = "same"
            elif len(diffs) == caller_only:
                frames = (f"same from Optimizer.minimize in ({caller_only} ops: minimize "
                          "called from elsewhere)")
            else:
                frames = f"DIFFER on {len(diffs) - caller_only} ops"
            print(f"{ref}/{name}: bytes {'same' if same else 'differ'}, no-stack "
                  f"{'same' if nostack else 'DIFFER'}, frames {frames}")
            shown = [d for d in diffs if _below_minimize(d[3]) != _below_minimize(d[4])]
            for bi, oi, t, fa, fb in shown[:3]:
                print(f"    block {bi} op {oi} {t}:\n      ours {fa}\n      ref  {fb}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
