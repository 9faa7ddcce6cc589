"""case.json of a generated case: what model, how Paddle was driven, what was patched, each
role's outcome.  No Paddle here."""
import os

import spec as specmod

PADDLE = {
    'classic': 'paddlepaddle 2.6.2 (CPU wheel): paddle.distributed.transpiler.DistributeTranspiler',
    'fleet': 'paddlepaddle 2.6.2 (CPU wheel): incubate.distributed.fleet.parameter_server '
             '(FleetTranspiler, ir/trainer_pass.py, ir/pserver_pass.py, ir/public.py)',
    'ps': 'paddlepaddle 2.6.2 (CPU wheel): paddle.distributed.fleet with ParameterServerOptimizer, '
          'paddle.distributed.ps.utils.ps_program_builder + paddle.distributed.passes.ps_*_pass, '
          'paddle.distributed.ps.the_one_ps (TheOnePSRuntime, PsDescBuilder)',
}

DRIVER = {
    'classic': 'per role a fresh interpreter: build (or parse) the program, the user optimizer\'s '
               'minimize, then DistributeTranspiler(config).transpile(trainer_id, program=main, '
               'pservers, trainers, sync_mode, startup_program=startup); trainer: '
               'get_trainer_program(wait_port=False) and the transpiled startup; pserver: '
               'get_pserver_program(ep), get_startup_program(ep, pserver_program)',
    'fleet': 'per role a fresh interpreter: fleet.init(role maker); '
             'fleet.distributed_optimizer(opt, strategy).minimize(loss) under program_guard; read '
             'fleet.main_program / fleet.startup_program; trainer: fleet.init_worker() with a '
             'recording Communicator (runtime.json)',
    'ps': 'per role a fresh interpreter: fleet.init(PaddleCloudRoleMaker()); '
          'fleet.distributed_optimizer(opt, strategy).minimize(loss) under program_guard; main = '
          'loss.block.program, startup = default_startup_program() inside the guard; desc = '
          'PsDescBuilder(fleet.fleet._runtime_handle.context).build_worker_desc() (trainer) / '
          'build_server_desc() (pserver)',
}

ENV = {'PYTHONHASHSEED': '0',
       'removed': 'CPU_NUM, FLAGS_communicator_*, FLAGS_rpc_*, PADDLE_*, TRAINING_ROLE, POD_IP',
       'random': 'random.seed(0) at role start (Paddle names control vars '
                 '__control_var@<random.random()>)'}


def _files(case_dir):
    out = []
    for root, dirs, files in os.walk(case_dir):
        dirs.sort()
        for f in sorted(files):
            rel = os.path.relpath(os.path.join(root, f), case_dir)
            if rel != 'case.json':
                out.append(rel.replace(os.sep, '/'))
    return out


def _error(results):
    for role, r in results.items():
        if r['status'] == 'error':
            who = role.replace('_', ' ', 1) if role.startswith('trainer_') else role
            return {'raised_by': who, 'stage': r['stage'], 'type': r['type'],
                    'message': r['message'], 'where': _short_where(r.get('where', ''))}
    return None


def _short_where(w):
    """Paths of the raising frame without the machine's prefix (site-packages/..., tools/gen/...)."""
    for marker in ('site-packages/', 'tools/gen/'):
        if marker in w:
            head, tail = w.split(marker, 1)
            return 'File "' + marker + tail if head.startswith('File "') else w
    return w


def make(spec, results, info, case_dir):
    first = results.get('trainer_0') or next(iter(results.values()))
    case = {'name': spec.get('name', os.path.basename(case_dir)),
            'style': spec['style'], 'mode': spec['mode']}
    case.update(info)
    model = dict(spec['model'])
    if 'input' in model:
        model['input'] = os.path.basename(os.path.normpath(model['input']))
    case['model'] = model
    case['paddle'] = PADDLE[spec['style']]
    case['driver'] = DRIVER[spec['style']]
    case['cluster'] = {'pservers': spec['pservers'], 'trainers': spec['trainers'],
                       'emitted_trainers': specmod.trainer_ids(spec)}
    if spec['settings']:
        case['settings'] = spec['settings']
    env = dict(ENV)
    if spec['style'] in ('fleet', 'ps'):
        env['protobuf'] = '4.25.5 (first on PYTHONPATH)'
    if spec['style'] == 'ps':
        env['FLAGS_LAUNCH_BARRIER'] = '0'
        env['roles'] = {role: specmod.ps_role_env(spec, role) for role in results}
    case['environment'] = env
    case['patched'] = first.get('patched', [])
    for key in sorted(first):
        if key.startswith('note_'):
            case[key[len('note_'):]] = first[key]
    per_role = {}
    for role, r in results.items():
        for key in sorted(r):
            if key.startswith('role_note_'):
                per_role.setdefault(key[len('role_note_'):], {})[role] = r[key]
    case.update(sorted(per_role.items()))
    case['role_outcomes'] = {role: _outcome(r) for role, r in results.items()}
    err = _error(results)
    late = [role for role, r in results.items() if r['status'] == 'timeout']
    if not os.path.isfile(os.path.join(case_dir, 'main.pb')):
        case['unbuildable'] = ('Paddle cannot build the program (no main.pb, no expected/): %s'
                               % (err['message'] if err else 'no trainer ran'))
        if err:
            case['build_error'] = err
    elif late:
        case['incomplete'] = 'no expected/: %s did not finish in time (GEN_ROLE_TIMEOUT)' % (
            ', '.join(late))
    elif err:
        case['expected_error'] = err
    case['files'] = _files(case_dir)
    return case


def _outcome(r):
    if r['status'] == 'ok':
        return 'ok'
    return 'error at %s: %s: %s' % (r['stage'], r['type'], r['message'])
