"""fleet style: Fleet 2.0's parameter-server passes (the incubate FleetTranspiler that Paddle
2.6.2 still ships), with the Paddle 2.0 behaviour restored by fleet20.py and the shim.

    fleet.init(fleet20.RoleMaker(current_id, role, worker_num, server_endpoints))
    strategy = StrategyFactory.create_{sync,async,half_async}_strategy() / create_geo_strategy(n)
    fleet.distributed_optimizer(opt, strategy).minimize(loss)      under program_guard
    main, startup = fleet.main_program, fleet.startup_program
    trainer: fleet.init_worker() -> the recording communicator -> runtime.json
"""
import fleet20
import load
import outputs
import shim
import spec as specmod

SHIM_PATCH = (
    'shim.py: OpProtos for the RPC / large-scale ops the CPU wheel lacks (no slots declared, '
    'kernel-less, no attr check, so no default attrs filled in) and, for every RPC / '
    'communication / sparse-table op the passes create, every input/output slot and attr the '
    'pass passes kept (typed as the Paddle 2.0 op makers declared them, else by the Python '
    'value): the wheel\'s pscore protos would drop e.g. distributed_push_sparse\'s W and Outputs')
STRIP_PATCH = ('the user optimizer\'s minimize is wrapped: after it runs, strip_empty_slots(main) '
               'and main.pb / startup.pb are written (before the FleetTranspiler clones them)')


def make_strategy(factory, spec):
    mode = spec['mode']
    if mode == 'geo':
        n = int(spec['settings'].get('geo_push_nums', 400))
        return factory.create_geo_strategy(n), 'StrategyFactory.create_geo_strategy(%d)' % n
    name = 'create_%s_strategy' % mode
    return getattr(factory, name)(), 'StrategyFactory.%s()' % name


def make_role_maker(spec, role):
    from paddle.incubate.distributed.fleet.role_maker import Role
    eps = list(spec['pservers'])
    if role.startswith('trainer_'):
        kind, idx = Role.WORKER, int(role.split('_')[1])
    else:
        kind, idx = Role.SERVER, [specmod.pserver_role(e) for e in eps].index(role)
    rm = fleet20.RoleMaker(current_id=idx, role=kind, worker_num=spec['trainers'],
                           server_endpoints=eps)
    desc = {'role_maker': 'UserDefinedRoleMaker', 'role': str(kind), 'current_id': idx,
            'worker_num': spec['trainers'], 'server_endpoints': eps}
    return rm, desc


def program_config(strategy):
    c = strategy.get_program_config()
    keys = ('sync_mode', 'runtime_split_send_recv', 'half_async', 'completely_not_async',
            'geo_sgd_mode', 'geo_sgd_need_push_nums')
    return {k: getattr(c, k) for k in keys}


def run(paddle, spec, role, case_dir, result):
    from paddle.incubate.distributed.fleet.parameter_server.distribute_transpiler import (
        StrategyFactory, fleet)
    shim.install()
    result['patched'] = [SHIM_PATCH, STRIP_PATCH] + fleet20.install()
    result['stage'] = 'model'
    model = load.Model(paddle, spec)
    with model.guard():
        loss, opt = model.build()

        def strip_and_keep():
            shim.strip_empty_slots(model.main)
            if role == 'trainer_0':
                model.save_input(case_dir)
        model.after_minimize.append(strip_and_keep)
        role_maker, rm_desc = make_role_maker(spec, role)
        result['role_note_role_maker'] = rm_desc
        fleet.init(role_maker)
        strategy, text = make_strategy(StrategyFactory, spec)
        result['note_strategy'] = text
        result['note_program_config'] = program_config(strategy)
        result['note_trainer_runtime_mode'] = int(strategy.get_trainer_runtime_config().mode)
        result['stage'] = 'fleet passes'
        fleet.distributed_optimizer(opt, strategy).minimize(loss)
        main, startup = fleet.main_program, fleet.startup_program
        runtime = None
        if role.startswith('trainer_'):
            result['stage'] = 'init_worker'
            fleet.init_worker()
            runtime = fleet20.runtime_json()
    result['stage'] = 'write'
    outputs.write_program(case_dir, role, 'main', main)
    outputs.write_program(case_dir, role, 'startup', startup)
    if runtime is not None:
        outputs.write_text(case_dir, role, 'runtime.json', runtime)
