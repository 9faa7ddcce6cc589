"""ps style: Paddle 2.1+'s parameter-server pipeline as Paddle 2.6.2 ships it, unpatched.

    fleet.init(PaddleCloudRoleMaker())          the role from the environment (runner.role_env)
    strategy = fleet.DistributedStrategy(); a_sync = mode != sync; geo: k_steps = geo_push_nums
    + the table settings (tables.apply: PaddleRec's table_parameters, adam_d2sum, fs_client_param,
      fleet_desc_configs)
    fleet.distributed_optimizer(opt, strategy).minimize(loss)   under program_guard
    main = loss.block.program; startup = default_startup_program() (inside the guard)
    desc = PsDescBuilder(fleet.fleet._runtime_handle.context).build_worker_desc() (trainer) /
           .build_server_desc() (pserver)
"""
import load
import outputs
import tables


def _check_protobuf():
    import google.protobuf
    if not google.protobuf.__version__.startswith('4.'):
        raise RuntimeError('protobuf %s imported: the 2.1+ fleet API needs protobuf 4.x first on '
                           'PYTHONPATH (DistributedStrategy reads FieldDescriptor.label)'
                           % google.protobuf.__version__)


def make_strategy(fleet, spec, result):
    strategy = fleet.DistributedStrategy()
    strategy.a_sync = spec['mode'] != 'sync'
    text = 'fleet.DistributedStrategy(); a_sync = %s' % strategy.a_sync
    if spec['mode'] == 'geo':
        k = int(spec['settings'].get('geo_push_nums', 400))
        strategy.a_sync_configs = {'k_steps': k}
        text += '; a_sync_configs = {"k_steps": %d}' % k
    assigned = tables.apply(strategy, spec['settings'])
    for key in assigned:
        text += '; %s = <%s>' % (key, key)
    result['note_strategy'] = text
    result['note_a_sync_configs'] = dict(strategy.a_sync_configs)
    if assigned:
        result['note_strategy_assigned'] = assigned
        result['note_strategy_after'] = tables.strategy_after(strategy)
    return strategy


def run(paddle, spec, role, case_dir, result):
    _check_protobuf()
    from paddle.distributed import fleet
    from paddle.distributed.ps.the_one_ps import PsDescBuilder
    result['patched'] = []
    result['stage'] = 'model'
    model = load.Model(paddle, spec)
    with model.guard():
        loss, opt = model.build()
        fleet.init(fleet.PaddleCloudRoleMaker())
        strategy = make_strategy(fleet, spec, result)
        before = {}

        def keep_input():
            before['main'] = model.main.desc.serialize_to_string()
            if role == 'trainer_0':
                model.save_input(case_dir)
        model.after_minimize.append(keep_input)
        result['stage'] = 'minimize'
        fleet.distributed_optimizer(opt, strategy).minimize(loss)
        main = loss.block.program
        startup = paddle.static.default_startup_program()
        result['note_origin_program_mutated_by_pipeline'] = (
            model.main.desc.serialize_to_string() != before.get('main'))
        result['stage'] = 'ps desc'
        builder = PsDescBuilder(fleet.fleet._runtime_handle.context)
        is_trainer = role.startswith('trainer_')
        desc = builder.build_worker_desc() if is_trainer else builder.build_server_desc()
        if is_trainer:
            result['role_note_fleet_opt'] = dict(main._fleet_opt or {})
    result['stage'] = 'write'
    outputs.write_program(case_dir, role, 'main', main)
    outputs.write_program(case_dir, role, 'startup', startup)
    outputs.write_text(case_dir, role, 'worker_desc.txt' if is_trainer else 'server_desc.txt', desc)
