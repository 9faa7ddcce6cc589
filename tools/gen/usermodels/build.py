"""Build the user models' programs: each script of registry.py run by Paddle 2.6.2 as its author
runs it (save.py), then trained a few steps by Paddle's own single-process executor
(run_original.py).  No Paddle here: each step is a fresh Paddle interpreter.

    python tools/gen/usermodels/build.py OUT [--only NAME ...]

writes OUT/<model>/main.pb, startup.pb and model.json (the script, what it mixes, the optimizer
spec tools/gen drives Paddle's pipelines with, the sha256 of the programs, and how Paddle's
single-process executor fares with the original: "trains" with its losses, "fails" with
Paddle's reason, or "crashes" with the line the aborting process printed).  Then
`python tools/gen/gen.py set usermodels CASES --inputs OUT` makes the corpus cases.
Paddle: $GEN_PADDLE_PYTHON (default /work/paddle/venv/bin/python).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import registry  # noqa: E402

PADDLE = os.environ.get('GEN_PADDLE_PYTHON', '/work/paddle/venv/bin/python')
STEPS = 3


def _env():
    env = {k: v for k, v in os.environ.items() if k in ('PATH', 'HOME', 'LANG', 'TMPDIR', 'USER')}
    env.update(PYTHONHASHSEED='0', OMP_NUM_THREADS='1', PYTHONDONTWRITEBYTECODE='1')
    return env


def _sha(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def _crash_line(text):
    """What a process Paddle aborted said: its `what():` line, else its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith('what():'):
            return ln[len('what():'):].strip()[:300]
    return (lines[-1] if lines else '?')[:300]


def save(name, out, scratch):
    spec_path = os.path.join(scratch, name + '.spec.json')
    rec_path = os.path.join(scratch, name + '.record.json')
    with open(spec_path, 'w') as f:
        json.dump(registry.MODELS[name]['optimizer'], f)
    p = subprocess.run([PADDLE, os.path.join(HERE, 'save.py'), os.path.join(HERE, name + '.py'),
                        out, spec_path, rec_path], env=_env(), capture_output=True, text=True)
    if p.returncode != 0 or not os.path.isfile(rec_path):
        raise SystemExit('%s: the script failed: %s' % (name, _crash_line(p.stderr)))
    with open(rec_path) as f:
        rec = json.load(f)
    if not rec['agree']:
        raise SystemExit('%s: registry.py\'s optimizer spec makes %s, the script has %s' % (
            name, json.dumps(rec['spec_optimizer'], sort_keys=True),
            json.dumps(rec['script_optimizer'], sort_keys=True)))
    return rec['script_optimizer']


def run_original(name, out, scratch):
    res_path = os.path.join(scratch, name + '.original.json')
    try:
        p = subprocess.run([PADDLE, os.path.join(HERE, 'run_original.py'), out, str(STEPS),
                            res_path], env=_env(), capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {'status': 'hangs', 'error': 'no result in 600 s'}
    if p.returncode != 0 or not os.path.isfile(res_path):
        return {'status': 'crashes', 'error': _crash_line(p.stderr), 'exit': p.returncode}
    with open(res_path) as f:
        res = json.load(f)
    if 'losses' in res:
        res['losses'] = [float('%.6g' % x) for x in res['losses']]
    return res


def build(name, root):
    out = os.path.join(root, name)
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix='usermodels-') as scratch:
        optimizer = save(name, out, scratch)
        original = run_original(name, out, scratch)
    entry = registry.MODELS[name]
    meta = {'model': name, 'script': 'tools/gen/usermodels/%s.py' % name,
            'mixes': entry['mixes'], 'optimizer': entry['optimizer'],
            'script_optimizer': optimizer,
            'main': {'sha256': _sha(os.path.join(out, 'main.pb'))},
            'startup': {'sha256': _sha(os.path.join(out, 'startup.pb'))},
            'paddle_single_process': dict(original, steps=STEPS, batch=8,
                                          feeds='int64 in {0, 1}, float uniform [0, 1), seed 0')}
    with open(os.path.join(out, 'model.json'), 'w') as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write('\n')
    return meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('out')
    ap.add_argument('--only', action='append')
    args = ap.parse_args(argv)
    for name in registry.MODELS:
        if args.only and name not in args.only:
            continue
        meta = build(name, args.out)
        orig = meta['paddle_single_process']
        print('%-14s %s  Paddle single-process: %s%s' % (
            name, meta['main']['sha256'][:12], orig['status'],
            ': ' + orig['error'][:120] if 'error' in orig else ''), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
