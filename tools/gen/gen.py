"""Reference-case generator: drive Paddle 2.6.2's own parameter-server pipelines and write cases
in the corpus layout.  A dev tool (never run by `make test`); see tools/gen/README.md.

    python tools/gen/gen.py case SPEC.json OUT_DIR          one case from a spec (spec.py)
    python tools/gen/gen.py set zoo|clip|ps-tables|parity|lod|usermodels OUT_ROOT [--only NAME ...] [--force]
                            [--inputs DIR]  (zoo: /work/gen-out/inputs; usermodels:
                                             /work/gen-out/usermodels, usermodels/build.py's OUT)
    python tools/gen/gen.py list zoo|clip|ps-tables|parity|lod|usermodels   the case names of a set
    python tools/gen/gen.py models                           the model registry

A set writes OUT_ROOT/<case>/ per case and skips a case whose case.json records the same spec
(rerun with --force).  Each case's input programs are hard-linked to the input they equal (an
input-mode case's main.pb is the zoo input's bytes), so a set costs no extra disk for inputs.
Paddle: $GEN_PADDLE_PYTHON (default /work/paddle/venv/bin/python) with protobuf 4.25.5 from
$GEN_PROTOBUF (default /work/paddle/pb425) first on its path.
"""
import argparse
import hashlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runner  # noqa: E402
import sets  # noqa: E402
import spec as specmod  # noqa: E402


def spec_digest(spec):
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def up_to_date(case_dir, digest):
    p = os.path.join(case_dir, 'case.json')
    if not os.path.isfile(p):
        return False
    with open(p) as f:
        return json.load(f).get('spec_digest') == digest


def link_inputs(spec, case_dir):
    """Replace the case's main.pb / startup.pb by a hard link to the input they equal."""
    src = spec['model'].get('input')
    if not src:
        return
    for name in ('main.pb', 'startup.pb'):
        a, b = os.path.join(case_dir, name), os.path.join(src, name)
        if os.path.isfile(a) and os.path.isfile(b) and not os.path.samefile(a, b):
            with open(a, 'rb') as fa, open(b, 'rb') as fb:
                same = fa.read() == fb.read()
            if same:
                os.unlink(a)
                try:
                    os.link(b, a)
                except OSError:          # another file system: keep a copy
                    with open(a, 'wb') as fa, open(b, 'rb') as fb:
                        fa.write(fb.read())


def make_case(paddle, spec, case_dir, info, force=False):
    spec = specmod.check(spec)
    digest = spec_digest(spec)
    if not force and up_to_date(case_dir, digest):
        return None
    info = dict(info)
    info['spec_digest'] = digest
    case = runner.run_case(paddle, spec, case_dir, info)
    link_inputs(spec, case_dir)
    return case


def add_knobs(paddle, case_name, spec, case_dir, out_root, force):
    """ps-tables: run the case bare (once per model and mode, OUT_ROOT/_bare/) and record in
    case.json what each setting did to the descs (knobs.py)."""
    import ps_tables
    import subprocess
    import tempfile
    with open(os.path.join(case_dir, 'case.json')) as f:
        case = json.load(f)
    if case.get('expected_error') or not spec['settings'] or 'knobs' in case:
        return
    base = case_name.rsplit('_', 1)[0]
    bare_dir = os.path.join(out_root, '_bare', ps_tables.bare_key(base, spec['mode']))
    bare = dict(ps_tables.spec(base, spec['mode'], settings=False))
    make_case(paddle, bare, bare_dir, {'description': 'bare run of the ps-tables cases of '
                                       + bare['name']}, force)
    with tempfile.NamedTemporaryFile('w', suffix='.json', delete=False) as f:
        json.dump(spec['settings'], f)
    env = runner.role_env(paddle, {'style': 'knobs'}, 'trainer_0')
    p = subprocess.run([paddle.python, os.path.join(HERE, 'knobs.py'), bare_dir, case_dir,
                        f.name], env=env, capture_output=True, text=True)
    os.unlink(f.name)
    case['knobs'] = json.loads(p.stdout) if p.returncode == 0 else {
        'error': (p.stderr.strip().splitlines() or ['?'])[-1]}
    with open(os.path.join(case_dir, 'case.json'), 'w') as f:
        json.dump(case, f, indent=1)
        f.write('\n')


def run_set(name, out_root, only=None, force=False, inputs=None):
    paddle = runner.default_paddle()
    if inputs and name != 'usermodels':
        import ps_tables
        ps_tables.ZOO_INPUTS[0] = inputs
    cases = sets.make(name, inputs)
    if only:
        cases = [c for c in cases if c[0] in only or any(o in c[0] for o in only)]
    for i, (case_name, spec, info) in enumerate(cases):
        t0 = time.time()
        case_dir = os.path.join(out_root, case_name)
        case = make_case(paddle, spec, case_dir, info, force)
        if name == 'ps-tables':
            add_knobs(paddle, case_name, spec, case_dir, out_root, force)
        if case is None:
            print('[%d/%d] %s: up to date' % (i + 1, len(cases), case_name), flush=True)
            continue
        err = case.get('expected_error')
        what = 'refused: %s' % err['message'][:100] if err else 'ok'
        what = 'INCOMPLETE: %s' % case['incomplete'] if case.get('incomplete') else what
        what = 'UNBUILDABLE: %s' % case['unbuildable'] if case.get('unbuildable') else what
        print('[%d/%d] %s: %s (%.0fs)' % (i + 1, len(cases), case_name, what, time.time() - t0),
              flush=True)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    c = sub.add_parser('case')
    c.add_argument('spec')
    c.add_argument('out')
    s = sub.add_parser('set')
    s.add_argument('name', choices=sorted(sets.SETS))
    s.add_argument('out')
    s.add_argument('--only', action='append')
    s.add_argument('--force', action='store_true')
    s.add_argument('--inputs')
    ls = sub.add_parser('list')
    ls.add_argument('name', choices=sorted(sets.SETS))
    ls.add_argument('--inputs')
    sub.add_parser('models')
    args = ap.parse_args(argv)
    if args.cmd == 'case':
        with open(args.spec) as f:
            spec = json.load(f)
        case = make_case(runner.default_paddle(), spec, args.out, {}, force=True)
        print(json.dumps(case.get('role_outcomes'), indent=1))
        return 0
    if args.cmd == 'set':
        return run_set(args.name, args.out, args.only, args.force, args.inputs)
    if args.cmd == 'list':
        cases = sets.make(args.name, args.inputs)
        print('\n'.join(c[0] for c in cases))
        return 0
    import models
    for name, entry in sorted(models.load_all().items()):
        print('%-28s %-14s %s' % (name, entry.family, entry.description))
    return 0


if __name__ == '__main__':
    sys.exit(main())
