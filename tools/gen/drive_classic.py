"""Classic style: fluid's DistributeTranspiler of Paddle 2.6.2 (paddle.distributed.transpiler),
one role per process.

    config = DistributeTranspilerConfig(); wait_port = False; + mode and settings
    t.transpile(trainer_id, program=main, pservers=..., trainers=N, sync_mode=..., startup_program=startup)
    trainer: t.get_trainer_program(wait_port=False), t.startup_program (transpiled in place)
    pserver: t.get_pserver_program(ep), t.get_startup_program(ep, pserver_program)

Modes, as fleet's strategies configure the transpiler: sync (default config,
transpile(sync_mode=True)); async (config sync_mode=False, runtime_split_send_recv=True;
transpile(sync_mode=False)); half_async (as async plus half_async=True).
"""
import load
import outputs
import shim
import spec as specmod

PATCHES = [
    'shim.py: OpProtos for the RPC ops the CPU wheel lacks (recv, split_byref, split_selected_rows, '
    'prefetch, split_ids, merge_ids, checkpoint_notify, lookup_sparse_table...: no slots declared, '
    'kernel-less, no attr check) and, for every RPC / communication / sparse-table op the transpiler '
    'creates, every input/output slot and attr it passes kept (typed as the Paddle 2.0 op makers '
    'declared them, else by the Python value): the wheel\'s pscore protos of send / send_barrier / '
    'fetch_barrier / distributed_lookup_table / listen_and_serv would drop e.g. send\'s epmap and '
    'sections',
    'the input program\'s empty slots that the op protos mark dispensable are removed before '
    'transpile (strip_empty_slots(main, keep_required=True)): the transpiler predates the 2.x '
    'ops\' MasterParam / SkipUpdate... slots',
    'lookup_table_type: distribute_transpiler.LOOKUP_TABLE_TYPE (2.x: the list [lookup_table, '
    'lookup_table_v2]) replaced by a list subclass that compares equal to either name: '
    '_replace_lookup_table_op_with_prefetch tests op.type == LOOKUP_TABLE_TYPE, never true for a '
    'list, so a program with an is_distributed table found no lookup op (IndexError); no effect '
    'without such a table',
]


class _LookupTypes(list):
    """LOOKUP_TABLE_TYPE that `op.type == LOOKUP_TABLE_TYPE` matches for either name."""

    def __eq__(self, other):
        if isinstance(other, str):
            return other in list(self)
        return list.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None


def _patch_lookup_type(dt):
    if not isinstance(dt.LOOKUP_TABLE_TYPE, _LookupTypes):
        dt.LOOKUP_TABLE_TYPE = _LookupTypes(dt.LOOKUP_TABLE_TYPE)


def make_config(transpiler, spec):
    config = transpiler.DistributeTranspilerConfig()
    config.wait_port = False
    settings = spec['settings']
    if 'slice_var_up' in settings:
        config.slice_var_up = bool(settings['slice_var_up'])
    if 'min_block_size' in settings:
        config.min_block_size = int(settings['min_block_size'])
    if settings.get('split_method') == 'hash_name':
        from paddle.incubate.distributed.fleet.parameter_server.ir.ps_dispatcher import HashName
        config.split_method = HashName
    if spec['mode'] in ('async', 'half_async'):
        config.sync_mode = False
        config.runtime_split_send_recv = True
    if spec['mode'] == 'half_async':
        config.half_async = True
    return config


def run(paddle, spec, role, case_dir, result):
    from paddle.distributed import transpiler
    from paddle.distributed.transpiler import distribute_transpiler as dt
    shim.install()
    _patch_lookup_type(dt)
    result['patched'] = PATCHES
    result['stage'] = 'model'
    model = load.Model(paddle, spec)
    with model.guard():
        loss, opt = model.build()
        result['stage'] = 'minimize'
        opt.minimize(loss)
        shim.strip_empty_slots(model.main, keep_required=True)
        if role == 'trainer_0':
            model.save_input(case_dir)
        result['stage'] = 'transpile'
        t = transpiler.DistributeTranspiler(config=make_config(transpiler, spec))
        tid = int(role.split('_')[1]) if role.startswith('trainer_') else 0
        t.transpile(tid, program=model.main, pservers=','.join(spec['pservers']),
                    trainers=spec['trainers'], sync_mode=spec['mode'] == 'sync',
                    startup_program=model.startup)
        if role.startswith('trainer_'):
            main = t.get_trainer_program(wait_port=False)
            startup = t.startup_program
        else:
            ep = spec['pservers'][[specmod.pserver_role(e) for e in spec['pservers']].index(role)]
            main = t.get_pserver_program(ep)
            startup = t.get_startup_program(ep, main)
    result['stage'] = 'write'
    outputs.write_program(case_dir, role, 'main', main)
    outputs.write_program(case_dir, role, 'startup', startup)
