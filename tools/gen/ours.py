"""Split every generated case with the project's own `pstranspile` and compare with Paddle's:

    python tools/gen/ours.py ROOT [ROOT ...] [--pstranspile PATH] [--check-dir PATH]
                             [--json OUT.json] [--md OUT.md] [--title TEXT]

For each case folder under each ROOT (a folder with case.json and expected/):
    pstranspile split main.pb --startup startup.pb --cluster cluster.yaml --out TMP --force -q
then check_dir.py CASE TMP --exit-code RC (a case Paddle refuses passes iff pstranspile exits 2
and writes nothing).  Records per case: same / differ (each failing file and its first
difference) / error (pstranspile's own failure: exit code and its one-line message).  --md writes
the table of the cases that differ.  Needs the project's venv (pstranspile) and protobuf.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

DEFAULT_CHECK = '/work/shared/tools/check_dir.py'


def case_dirs(root):
    out = []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if name.startswith('_') or not os.path.isfile(os.path.join(d, 'case.json')):
            continue
        out.append(d)
    return out


def first_diffs(text):
    """{file: first difference} from check_dir.py's output."""
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith('FAIL '):
            current = line[5:].strip()
            out[current] = ''
        elif current and line.startswith('    ') and not out[current]:
            out[current] = line.strip()
    return out


def split(pst, case, out):
    cmd = [pst, 'split', os.path.join(case, 'main.pb'), '--startup',
           os.path.join(case, 'startup.pb'), '--cluster', os.path.join(case, 'cluster.yaml'),
           '--out', out, '--force', '--quiet']
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    msg = (p.stderr.strip().splitlines() or [''])[-1]
    return p.returncode, msg


def check_case(pst, check, case):
    if not os.path.isdir(os.path.join(case, 'expected')):
        return {'status': 'skipped', 'message': 'no expected/ (unbuildable or incomplete case)'}
    with tempfile.TemporaryDirectory(prefix='ours-') as tmp:
        out = os.path.join(tmp, 'split')
        rc, msg = split(pst, case, out)
        refused = os.path.isfile(os.path.join(case, 'expected', 'error.txt'))
        if rc not in (0, 2) or (rc == 2 and not refused):
            return {'status': 'error', 'exit': rc, 'message': msg}
        if not os.path.isdir(out):
            os.makedirs(out)
        p = subprocess.run([sys.executable, check, case, out, '--exit-code', str(rc)],
                           capture_output=True, text=True)
        if p.returncode == 0:
            return {'status': 'same'}
        diffs = first_diffs(p.stdout)
        if rc == 0 and refused:
            diffs = {'error.txt': 'Paddle refuses (%s); pstranspile split it' % open(
                os.path.join(case, 'expected', 'error.txt')).read().strip()[:150]}
        return {'status': 'differ', 'exit': rc, 'files': diffs}


def markdown(title, results):
    lines = ['## %s' % title, '']
    counts = {}
    for r in results.values():
        counts[r['status']] = counts.get(r['status'], 0) + 1
    lines.append('%d cases: %s.' % (len(results), ', '.join(
        '%d %s' % (n, s) for s, n in sorted(counts.items()))))
    lines += ['', '| case | file | first difference |', '|---|---|---|']
    for name, r in sorted(results.items()):
        if r['status'] == 'error':
            lines.append('| %s | (split) | exit %s: %s |' % (name, r['exit'], _cell(r['message'])))
        elif r['status'] == 'differ':
            for f, d in sorted(r['files'].items()):
                lines.append('| %s | %s | %s |' % (name, f, _cell(d)))
    return '\n'.join(lines) + '\n'


def _cell(text):
    return text.replace('|', '\\|').replace('\n', ' ')[:300]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('roots', nargs='+')
    ap.add_argument('--pstranspile', default=shutil.which('pstranspile') or 'pstranspile')
    ap.add_argument('--check-dir', default=DEFAULT_CHECK)
    ap.add_argument('--json')
    ap.add_argument('--md')
    ap.add_argument('--title', default='pstranspile against Paddle')
    args = ap.parse_args(argv)
    results = {}
    for root in args.roots:
        for case in case_dirs(root):
            key = '%s/%s' % (os.path.basename(os.path.normpath(root)), os.path.basename(case))
            results[key] = check_case(args.pstranspile, args.check_dir, case)
            r = results[key]
            detail = r.get('message') or next(iter(r.get('files', {}).items()), ('', ''))
            print('%-7s %s %s' % (r['status'], key, '' if r['status'] == 'same' else
                                  str(detail)[:160]), flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1, sort_keys=True)
    if args.md:
        with open(args.md, 'w') as f:
            f.write(markdown(args.title, results))
    return 0


if __name__ == '__main__':
    sys.exit(main())
