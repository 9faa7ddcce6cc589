"""Assemble REPORT-gen.md from validate.py and ours.py results (their --json files).

    python tools/gen/report.py OUT.md --validate V.json [...] --ours SET=O.json [...]
                               [--intro TEXT_FILE]

The validation tally per family, then per set: how many cases pstranspile splits exactly like
Paddle, the cases it refuses or fails on grouped by message, and a table of every differing
case with each differing file and its first difference.
"""
import argparse
import json
import re
import sys


def _load(path):
    with open(path) as f:
        return json.load(f)


def validation_section(paths):
    lines = ['## Shared corpus regenerated', '',
             '| family | reproduced | differ | rebuilt from the registry | driven from the case input |',
             '|---|---|---|---|---|']
    for path in paths:
        data = _load(path)
        per = {}
        for key, r in data['cases'].items():
            fam = key.split('/')[0]
            p = per.setdefault(fam, {'same': 0, 'differ': 0, 'rebuild': 0, 'input': 0})
            p['same' if not r['diffs'] else 'differ'] += 1
            p[r['how']] += 1
        for fam, p in per.items():
            lines.append('| %s | %d | %d | %d | %d |' % (fam, p['same'], p['differ'],
                                                        p['rebuild'], p['input']))
        for key, r in sorted(data['cases'].items()):
            if r['diffs']:
                lines.append('')
                lines.append('- %s: %s' % (key, '; '.join(r['diffs'])[:400]))
    return '\n'.join(lines) + '\n'


def _norm(msg):
    """An error message with its case-specific paths and names blurred, for grouping."""
    msg = re.sub(r'/\S+/cluster\.yaml', 'cluster.yaml', msg)
    msg = re.sub(r'/\S+\.pb', 'X.pb', msg)
    return msg


def ours_section(name, path):
    results = _load(path)
    counts = {}
    for r in results.values():
        counts[r['status']] = counts.get(r['status'], 0) + 1
    lines = ['## %s: pstranspile against Paddle' % name, '',
             '%d cases: %s.' % (len(results), ', '.join('%d %s' % (n, s)
                                                        for s, n in sorted(counts.items())))]
    errors = {}
    for key, r in sorted(results.items()):
        if r['status'] == 'error':
            errors.setdefault('exit %s: %s' % (r['exit'], _norm(r['message'])), []).append(key)
    if errors:
        lines += ['', 'pstranspile fails (not a refusal Paddle shares), grouped by message:', '']
        for msg, keys in sorted(errors.items(), key=lambda kv: -len(kv[1])):
            shown = ', '.join(k.split('/', 1)[1] for k in keys[:8])
            more = ' and %d more' % (len(keys) - 8) if len(keys) > 8 else ''
            lines.append('- %d: `%s` (%s%s)' % (len(keys), msg[:300], shown, more))
    rows = [(k, f, d) for k, r in sorted(results.items()) if r['status'] == 'differ'
            for f, d in sorted(r['files'].items())]
    if rows:
        lines += ['', '| case | file | first difference |', '|---|---|---|']
        lines += ['| %s | %s | %s |' % (k.split('/', 1)[1], f,
                                        d.replace('|', '\\|')[:300]) for k, f, d in rows]
    return '\n'.join(lines) + '\n'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('out')
    ap.add_argument('--validate', action='append', default=[])
    ap.add_argument('--ours', action='append', default=[], help='SET=results.json')
    ap.add_argument('--intro')
    args = ap.parse_args(argv)
    parts = ['# REPORT-gen: reference cases made by Paddle 2.6.2 (tools/gen)\n']
    if args.intro:
        with open(args.intro) as f:
            parts.append(f.read())
    if args.validate:
        parts.append(validation_section(args.validate))
    for spec in args.ours:
        name, path = spec.split('=', 1)
        parts.append(ours_section(name, path))
    with open(args.out, 'w') as f:
        f.write('\n'.join(parts))
    return 0


if __name__ == '__main__':
    sys.exit(main())
