"""Run the roles of a case, each in a fresh Paddle interpreter, and assemble the case folder:

    CASE/main.pb, startup.pb        the program fed to Paddle's pipeline (written by trainer_0)
    CASE/cluster.yaml               the project's config for the same split
    CASE/case.json                  what was driven, how, what was patched, each role's outcome
    CASE/expected/<role>/...        Paddle's outputs; or expected/error.txt alone (one line) when
                                    a role fails: Paddle refuses the case

No Paddle here: the orchestrator runs under any python with PyYAML-free stdlib.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import spec as specmod

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REMOVED_ENV_PREFIXES = ('FLAGS_communicator_', 'FLAGS_rpc_', 'PADDLE_', 'TRAINING_ROLE',
                        'POD_IP', 'CPU_NUM', 'FLAGS_LAUNCH_BARRIER', 'PSERVER_DEBUG',
                        'PYTHONPATH', 'PYTHONHASHSEED')
KEEP_ENV = ('PATH', 'HOME', 'LANG', 'LC_ALL', 'TMPDIR', 'USER')
ROLE_TIMEOUT = int(os.environ.get('GEN_ROLE_TIMEOUT', '1800'))


class Paddle:
    """Where Paddle 2.6.2 is: its venv's python, and protobuf 4.25.5 to put first on the path."""

    def __init__(self, python, protobuf):
        self.python, self.protobuf = python, protobuf


def role_env(paddle, spec, role):
    env = {k: v for k, v in os.environ.items() if k in KEEP_ENV}
    env['PYTHONHASHSEED'] = '0'
    env['PYTHONPATH'] = os.pathsep.join(p for p in (paddle.protobuf, HERE) if p)
    env['PYTHONDONTWRITEBYTECODE'] = '1'
    env['OMP_NUM_THREADS'] = '1'
    if spec['style'] == 'ps':
        env['FLAGS_LAUNCH_BARRIER'] = '0'
        env.update(specmod.ps_role_env(spec, role))
    return env


def run_role(paddle, spec_path, spec, role, case_dir, scratch):
    result_path = os.path.join(scratch, role + '.json')
    cmd = [paddle.python, os.path.join(HERE, 'role.py'), spec_path, role, case_dir, result_path]
    log_path = os.path.join(scratch, role + '.log')
    with open(log_path, 'w') as log:
        try:
            proc = subprocess.run(cmd, env=role_env(paddle, spec, role), stdout=log,
                                  stderr=subprocess.STDOUT, cwd=REPO, timeout=ROLE_TIMEOUT)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            return {'role': role, 'status': 'timeout', 'stage': 'process', 'type': 'Timeout',
                    'message': 'did not finish in %d s' % ROLE_TIMEOUT, 'where': ''}
    if os.path.isfile(result_path):
        with open(result_path) as f:
            return json.load(f)
    with open(log_path, errors='replace') as f:
        tail = [ln.strip() for ln in f.read().splitlines() if ln.strip()][-1:] or ['']
    return {'role': role, 'status': 'error', 'stage': 'process', 'type': 'Crash',
            'message': 'the role process died (exit %s): %s' % (rc, tail[0][:300]), 'where': ''}


def _clean(case_dir):
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)
    os.makedirs(case_dir)


def run_case(paddle, spec, case_dir, info=None, only_roles=None):
    """Drive every role of `spec` into case_dir; returns the case.json dict."""
    spec = specmod.check(spec)
    case_dir = os.path.abspath(case_dir)
    _clean(case_dir)
    results = {}
    with tempfile.TemporaryDirectory(prefix='gen-') as scratch:
        spec_path = os.path.join(scratch, 'spec.json')
        with open(spec_path, 'w') as f:
            json.dump(spec, f)
        for role in specmod.roles(spec):
            if only_roles and role not in only_roles:
                continue
            results[role] = run_role(paddle, spec_path, spec, role, case_dir, scratch)
            if role == 'trainer_0' and results[role]['status'] != 'ok' \
                    and results[role]['stage'] in ('import', 'model', 'process'):
                break       # no program to drive: the other roles would fail the same way
    _restore_input(spec, case_dir)
    failed = [r for r in results.values() if r['status'] == 'error']
    if not os.path.isfile(os.path.join(case_dir, 'main.pb')):
        # the user's own minimize failed: no program, so no split to compare with
        shutil.rmtree(os.path.join(case_dir, 'expected'), ignore_errors=True)
    elif any(r['status'] == 'timeout' for r in results.values()):
        # not Paddle refusing the case: the case is incomplete (no expected/)
        shutil.rmtree(os.path.join(case_dir, 'expected'), ignore_errors=True)
    elif failed:
        shutil.rmtree(os.path.join(case_dir, 'expected'), ignore_errors=True)
        os.makedirs(os.path.join(case_dir, 'expected'))
        with open(os.path.join(case_dir, 'expected', 'error.txt'), 'w') as f:
            f.write(failed[0]['message'] + '\n')
    _drop_unemitted(spec, case_dir)
    with open(os.path.join(case_dir, 'cluster.yaml'), 'w') as f:
        f.write(specmod.cluster_yaml(spec))
    import casejson
    case = casejson.make(spec, results, info or {}, case_dir)
    with open(os.path.join(case_dir, 'case.json'), 'w') as f:
        json.dump(case, f, indent=1)
        f.write('\n')
    return case


def _restore_input(spec, case_dir):
    """An input model whose trainer_0 died before writing main.pb: the case keeps the input."""
    src = spec['model'].get('input')
    for name in ('main.pb', 'startup.pb'):
        if src and not os.path.isfile(os.path.join(case_dir, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(case_dir, name))


def _drop_unemitted(spec, case_dir):
    """trainer_0 always runs (it writes the input); drop its outputs when it is not emitted."""
    if 0 not in specmod.trainer_ids(spec):
        shutil.rmtree(os.path.join(case_dir, 'expected', 'trainer_0'), ignore_errors=True)


def default_paddle():
    return Paddle(os.environ.get('GEN_PADDLE_PYTHON', '/work/paddle/venv/bin/python'),
                  os.environ.get('GEN_PROTOBUF', '/work/paddle/pb425'))


if __name__ == '__main__':
    with open(sys.argv[1]) as f:
        s = json.load(f)
    print(json.dumps(run_case(default_paddle(), s, sys.argv[2]), indent=1))
