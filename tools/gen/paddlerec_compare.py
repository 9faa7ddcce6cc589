"""Compare a built model's main.pb / startup.pb with reference copies (run under Paddle's Python).

    PYTHONPATH=/work/paddle/pb425 /work/paddle/venv/bin/python tools/gen/paddlerec_compare.py \\
        OUT/autoint /work/shared/corpus/paddlerec-fleet/autoint_sync [more reference folders]

For each program, three verdicts:
  bytes      the files are byte-identical;
  no-stack   identical once every op's op_callstack attr is dropped from both (the callstack is
             Python's traceback at op creation: it names the generating script, its lines and
             install paths, so two generators never agree on it byte for byte);
  frames     the callstacks agree on the frames that belong to Paddle (paddle/...: file, line,
             function) and to the PaddleRec model (models/...: file, line, function); frames of
             the generating scripts, shims and wrappers are ignored, as is the source text (a
             generator that cannot find the model file records blank lines).  Frames that differ
             only above Optimizer.minimize (the optimizer and backward ops of a reference whose
             minimize was called by fleet's distributed optimizer, not by the model's
             create_optimizer) are counted apart.
Exit 0 when every reference agrees on no-stack and on the frames (from minimize in), else 1.
"""
import re
import sys

from paddle.base.proto import framework_pb2

STACK = "op_callstack"
# a PaddleRec model file: models/<category>/<...>/<file>.py (not a script right in models/)
MINIMIZE = ("paddle/optimizer/optimizer.py", "minimize")
MODEL_FILE = re.compile(r"(?:^|/)(models/[^/]+/.+\.py)$")


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


def _kept_file(fname):
    """paddle/... for a Paddle frame, models/<category>/.../x.py for a PaddleRec model frame,
    None for any other frame."""
    cut = fname.find("site-packages/paddle/")
    if cut >= 0:
        return fname[cut + len("site-packages/"):]
    m = MODEL_FILE.search(fname)
    return m.group(1) if m else None


def _frames(op):
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
            rel = _kept_file(fname)
            if rel is not None:
                out.append((rel, int(lineno), func))
    return out


def _below_minimize(frames):
    """The frames from Optimizer.minimize inwards (all of them if it is not on the stack)."""
    for i, f in enumerate(frames):
        if f[0] == MINIMIZE[0] and f[2] == MINIMIZE[1]:
            return frames[i:]
    return frames


def _frame_diffs(a, b):
    """([ops whose frames differ], number of those that agree from Optimizer.minimize in)."""
    diffs, caller_only = [], 0
    for bi, (ba, bb) in enumerate(zip(a.blocks, b.blocks)):
        for oi, (oa, ob) in enumerate(zip(ba.ops, bb.ops)):
            fa, fb = _frames(oa), _frames(ob)
            if fa != fb:
                diffs.append((bi, oi, oa.type, fa, fb))
                caller_only += _below_minimize(fa) == _below_minimize(fb) != fa
    return diffs, caller_only


def compare(ours, ref):
    """{program: (bytes equal, no-stack equal, frame diffs)} for main.pb and startup.pb."""
    res = {}
    for name in ("main.pb", "startup.pb"):
        with open(f"{ours}/{name}", "rb") as f:
            ba = f.read()
        with open(f"{ref}/{name}", "rb") as f:
            bb = f.read()
        a, b = _load(f"{ours}/{name}"), _load(f"{ref}/{name}")
        res[name] = (ba == bb, _without_stack(a) == _without_stack(b), _frame_diffs(a, b))
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
