"""Regenerate the shared corpus's cases and compare them with Paddle's saved outputs.

    python tools/gen/validate.py [--shared /work/shared] [--out /tmp/gen-validate]
                                 [--family classic ...] [--case NAME ...]
                                 [--how rebuild|input]

Each shared case CORPUS/<family>/<case> becomes a spec (style from the family, mode / pservers /
trainers / settings from its cluster.yaml, emitted trainers from trainer_id) and is driven into
OUT/<family>/<case>:
  - rebuild (default where shared_cases.REBUILD names a builder): the model is rebuilt by the
    registry; its main.pb / startup.pb must equal the case's (canon.py --compare);
  - input: the case's own main.pb / startup.pb are driven (the optimizer's minimize intercepted).
Then Paddle's outputs are compared with the case's expected/ by the shared check_dir.py, without
the case's corrections.json (Paddle's raw output is what is reproduced; a case Paddle refuses:
the error.txt lines must be equal).  Prints one line per case and a tally per
family; exit 0 when everything matched.  Needs PyYAML and protobuf (the project's .venv python).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runner  # noqa: E402
import shared_cases  # noqa: E402

STYLE = {'classic': 'classic', 'paddlerec-classic': 'classic', 'fleet': 'fleet',
         'paddlerec-fleet': 'fleet', 'ps': 'ps', 'ps-tables': 'ps', 'paddlerec-ps': 'ps',
         'ps-gen': 'ps'}


def style_of(family, name):
    """The style of a case: by family, or (paddlerec-gen) by its name's prefix."""
    if family in STYLE:
        return STYLE[family]
    return name.split('_', 1)[0]
PS_KEYS = ('adam_d2sum', 'table_parameters', 'fs_client_param', 'fleet_desc_configs')


def spec_for(case_dir, family, how):
    with open(os.path.join(case_dir, 'cluster.yaml')) as f:
        cfg = yaml.safe_load(f)
    name = os.path.basename(case_dir)
    style = style_of(family, name)
    spec = {'name': name, 'style': style, 'mode': cfg.get('mode', 'sync'),
            'pservers': list(cfg['pservers']), 'trainers': cfg.get('trainers', 1)}
    tid = cfg.get('trainer_id', 0)
    spec['emit_trainers'] = 'all' if tid == 'all' else [int(tid)]
    settings = {}
    keys = {'classic': ('slice_var_up', 'min_block_size', 'split_method'),
            'fleet': (), 'ps': PS_KEYS}[style]
    for k in keys:
        if k in cfg:
            settings[k] = cfg[k]
    if spec['mode'] == 'geo' and 'geo_push_nums' in cfg:
        settings['geo_push_nums'] = cfg['geo_push_nums']
    spec['settings'] = settings
    key = '%s/%s' % (family, name)
    builder = shared_cases.REBUILD.get(key)
    if how == 'rebuild' and builder:
        spec['model'] = {'builder': builder}
    else:
        spec['model'] = {'input': case_dir,
                         'optimizer': shared_cases.INPUT_OPTIMIZER.get(key, {'type': 'sgd'})}
    return spec


def compare_inputs(shared_dir, gen_dir):
    diffs = []
    for name in ('main.pb', 'startup.pb'):
        p = subprocess.run([sys.executable, shared_cases.tool('canon.py'), '--compare',
                            os.path.join(shared_dir, name), os.path.join(gen_dir, name)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            diffs.append('%s: %s' % (name, (p.stdout or p.stderr).strip().splitlines()[0][:300]))
    return diffs


def compare_outputs(shared_dir, gen_dir):
    err_e = os.path.join(shared_dir, 'expected', 'error.txt')
    err_g = os.path.join(gen_dir, 'expected', 'error.txt')
    if os.path.isfile(err_e) or os.path.isfile(err_g):
        e = open(err_e).read().strip() if os.path.isfile(err_e) else '(programs)'
        g = open(err_g).read().strip() if os.path.isfile(err_g) else '(programs)'
        return [] if e == g else ['error.txt: expected %r, got %r' % (e[:200], g[:200])]
    with tempfile.TemporaryDirectory(prefix='gen-raw-') as raw:
        # Paddle's raw output is the target: the case without its corrections.json
        os.symlink(os.path.join(shared_dir, 'expected'), os.path.join(raw, 'expected'))
        p = subprocess.run([sys.executable, shared_cases.tool('check_dir.py'), raw,
                            os.path.join(gen_dir, 'expected')], capture_output=True, text=True)
    if p.returncode == 0:
        return []
    return [ln for ln in p.stdout.splitlines() if not ln.startswith('ok ')][:12]


def validate_case(paddle, shared_dir, family, out, how, inputs_only=False):
    spec = spec_for(shared_dir, family, how)
    gen_dir = os.path.join(out, family, spec['name'])
    if inputs_only and 'builder' not in spec['model']:
        return 'input', []
    runner.run_case(paddle, spec, gen_dir, {'validates': '%s/%s' % (family, spec['name'])},
                    only_roles=['trainer_0'] if inputs_only else None)
    diffs = []
    if 'builder' in spec['model']:
        diffs += compare_inputs(shared_dir, gen_dir)
    if not inputs_only:
        diffs += compare_outputs(shared_dir, gen_dir)
    return ('rebuild' if 'builder' in spec['model'] else 'input'), diffs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--shared', default='/work/shared')
    ap.add_argument('--corpus', help='a corpus root other than SHARED/corpus (e.g. the '
                    'project\'s tests/corpus: families paddlerec-ps, paddlerec-gen, ps-gen)')
    ap.add_argument('--out', default='/tmp/gen-validate')
    ap.add_argument('--family', action='append')
    ap.add_argument('--case', action='append')
    ap.add_argument('--how', choices=('rebuild', 'input'), default='rebuild')
    ap.add_argument('--json', help='write the results here')
    ap.add_argument('--inputs-only', action='store_true',
                    help='rebuild the models and compare main.pb / startup.pb only (trainer_0)')
    args = ap.parse_args(argv)
    shared_cases.SHARED[0] = args.shared
    paddle = runner.default_paddle()
    tally, results = {}, {}
    root = args.corpus or os.path.join(args.shared, 'corpus')
    for family, case_dir in shared_cases.cases(root, args.family, args.case):
        how, diffs = validate_case(paddle, case_dir, family, args.out, args.how,
                                   args.inputs_only)
        key = '%s/%s' % (family, os.path.basename(case_dir))
        results[key] = {'how': how, 'diffs': diffs}
        t = tally.setdefault(family, {'same': 0, 'differ': 0})
        t['same' if not diffs else 'differ'] += 1
        print('%-6s %-7s %s' % ('same' if not diffs else 'DIFFER', how, key), flush=True)
        for d in diffs:
            print('        ' + d)
    for family, t in sorted(tally.items()):
        print('%-20s %d same, %d differ' % (family, t['same'], t['differ']))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'tally': tally, 'cases': results}, f, indent=1)
    return 0 if all(t['differ'] == 0 for t in tally.values()) else 1


if __name__ == '__main__':
    sys.exit(main())
