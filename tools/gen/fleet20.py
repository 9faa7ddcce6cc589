"""What it takes to run Fleet 2.0's parameter-server passes (the incubate FleetTranspiler, as
Paddle 2.6.2 still ships them) with Paddle 2.0's behaviour.  Runs inside a role process;
install() patches the modules of this process only.  PATCHES says what each patch does and why
(case.json "patched").
"""
import json

from paddle import framework
from paddle.base import core
from paddle.incubate.distributed.fleet import role_maker as incubate_roles
from paddle.incubate.distributed.fleet.parameter_server.ir import public, trainer_pass

STEP_COUNTER = '@PS_STEP_COUNTER@'
ROLE_ATTR = core.op_proto_and_checker_maker.kOpRoleAttrName()
RPC = core.op_proto_and_checker_maker.OpRole.RPC
MODE_NAMES = {0: 'SYNC', 1: 'ASYNC', 2: 'HALF_ASYNC', 3: 'GEO'}

PATCHES = [
    'role maker: a UserDefinedRoleMaker subclass adding _is_first_worker() / _is_worker() '
    '(= is_first_worker() / is_worker()): public.get_the_one_send_context (called by '
    'distributed_ops_pass) calls role_maker._is_worker(), which the incubate UserDefinedRoleMaker '
    'lacks',
    'trainer_pass.delet_extra_optimizes_pass = trainer_pass.delete_extra_optimizes_pass '
    '(FleetTranspiler._build_trainer_programs calls the misspelt name, which does not exist)',
    'trainer_pass.append_send_ops_pass replaced by Paddle 2.0\'s behaviour: 2.6\'s version sends '
    'get_the_one_trainer_send_context (one \'Dense@Grad\' send of all dense grads), which matches '
    'none of the queues init_worker gives the communicator (runtime.json send_ctx). Now, for each '
    '(name, ctx) of config.get_trainer_send_context() in order (non-geo: dense grads, sparse '
    'grads, then @PS_STEP_COUNTER@ in async; geo: one ctx per sparse table named after the '
    'param, origin vars = its grad, then @PS_STEP_COUNTER@), sparse contexts skipped outside geo '
    '(2.6\'s distributed_ops_pass already pushes them with distributed_push_sparse): one send, X = '
    'the ctx\'s origin var names (none for @PS_STEP_COUNTER@), Out = a new control var in SYNC / '
    'HALF_ASYNC (none in ASYNC / GEO), attrs send_varnames=[name], merge_add=True, '
    'use_send_handler=False, endpoints=<all pserver endpoints>, op_role=RPC; then in SYNC / '
    'HALF_ASYNC one send_barrier, X = those control vars, attrs endpoints, trainer_id, '
    'half_async=True, op_role=RPC. Geo with no sparse parameter keeps 2.6\'s refusal '
    '\'GeoSGD require sparse parameters in your net.\' (raised here; 2.0 had no such check)',
    'trainer_pass.init_from_server_pass replaced by Paddle 2.0\'s behaviour (FleetTranspiler calls '
    'it on the trainer startup in sync / async / half_async): on EVERY trainer (2.6: only '
    'non-first trainers, and only a fetch_barrier) append a recv (no inputs / outputs; attrs '
    'recv_varnames = the origin var names of every get_communicator_recv_context(recv_type=1) '
    'context, in order, trainer_id, op_role=RPC) and then a fetch_barrier (no inputs; Out = a '
    'new control var; attrs endpoints, trainer_id, op_role=RPC)',
    'paddle.distributed.communicator.Communicator replaced by a recorder (keeps mode, kwargs, '
    'envs, send / recv contexts: runtime.json; is_running() -> False; start() does nothing): '
    'the 2.6 Communicator has another signature (init_with_ctx needs proto_txt, hosts; kwargs '
    'needs \'trainers\', \'barrier_table_id\') and would fail',
    'public.core.CommContext completed: CompileTimeStrategy.build_ctx and geo\'s '
    'get_trainer_send_context call it with 10 args (..., is_distributed, []) but the 2.6 '
    'binding takes 14; the 10-arg form becomes (..., is_distributed, table_id=-1, '
    'is_tensor_table=False, is_datanorm_table=False, program_id=-1, remote_sparse_ids=[])',
]


class RoleMaker(incubate_roles.UserDefinedRoleMaker):
    """The incubate UserDefinedRoleMaker with the underscored names 2.6's passes call."""

    def _is_first_worker(self):
        return self.is_first_worker()

    def _is_worker(self):
        return self.is_worker()


def _rpc_attrs(**attrs):
    attrs[ROLE_ATTR] = RPC
    return attrs


def append_send_ops_pass(program, config):
    """Paddle 2.0's trainer send ops: one send per communicator queue, then a send_barrier."""
    mode = config.get_distributed_mode()
    block = program.global_block()
    endpoints = config.get_ps_endpoints()
    sends = config.get_trainer_send_context()
    geo = config.is_geo_mode()
    if geo and not any(ctx.is_sparse() for ctx in sends.values()):
        raise ValueError('GeoSGD require sparse parameters in your net.')
    barrier_mode = mode in (public.DistributedMode.SYNC, public.DistributedMode.HALF_ASYNC)
    dummies = []
    for name, ctx in sends.items():
        if ctx.is_sparse() and not geo:
            continue
        inputs = [] if name == STEP_COUNTER else [block.vars[v] for v in ctx.origin_varnames()]
        out = []
        if barrier_mode:
            out = block.create_var(name=framework.generate_control_dev_var_name())
            dummies.append(out)
        block.append_op(type='send', inputs={'X': inputs}, outputs={'Out': out},
                        attrs=_rpc_attrs(send_varnames=[name], merge_add=True,
                                         use_send_handler=False, endpoints=endpoints))
    if barrier_mode:
        block.append_op(type='send_barrier', inputs={'X': dummies}, outputs={'Out': []},
                        attrs=_rpc_attrs(endpoints=endpoints, trainer_id=config.get_role_id(),
                                         half_async=True))
    return program


def init_from_server_pass(program, config):
    """Paddle 2.0's trainer startup tail: recv every dense param, then a fetch_barrier."""
    block = program.global_block()
    recv_ctx = config.get_communicator_recv_context(recv_type=1)
    names = [v for ctx in recv_ctx.values() for v in ctx.origin_varnames()]
    block.append_op(type='recv', inputs={}, outputs={},
                    attrs=_rpc_attrs(recv_varnames=names, trainer_id=config.get_role_id()))
    out = block.create_var(name=framework.generate_control_dev_var_name())
    block.append_op(type='fetch_barrier', inputs={}, outputs={'Out': out},
                    attrs=_rpc_attrs(endpoints=config.get_ps_endpoints(),
                                     trainer_id=config.get_role_id()))
    return program


class _CoreWithOldCommContext:
    """paddle.base.core for public.py, with CommContext accepting the 10-arg form."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def CommContext(self, *args):  # noqa: N802  (the name public.py calls)
        if len(args) == 10:
            args = tuple(args[:9]) + (-1, False, False, -1, list(args[9]))
        return self._real.CommContext(*args)


RECORDED = []


class RecordingCommunicator:
    """Stands in for paddle.distributed.communicator.Communicator: records what init_worker
    hands it."""

    def __init__(self, mode, kwargs=None, envs=None):
        self.record = {'mode': MODE_NAMES[int(mode)], 'mode_id': int(mode),
                       'kwargs': kwargs, 'envs': envs}
        RECORDED.append(self.record)

    def init_with_ctx(self, send_ctx, recv_ctx, *rest, **kw):
        self.record['send_ctx'] = {k: context_dict(v) for k, v in send_ctx.items()}
        self.record['recv_type'] = 4 if self.record['mode'] == 'GEO' else 1
        self.record['recv_ctx'] = {k: context_dict(v) for k, v in recv_ctx.items()}

    def is_running(self):
        return False

    def start(self):
        return None

    def stop(self):
        return None


def context_dict(ctx):
    return {'var_name': ctx.var_name(), 'split_varnames': list(ctx.split_varnames()),
            'split_endpoints': list(ctx.split_endpoints()), 'sections': list(ctx.sections()),
            'origin_varnames': list(ctx.origin_varnames()), 'trainer_id': ctx.trainer_id(),
            'aggregate': ctx.aggregate(), 'is_sparse': ctx.is_sparse(),
            'is_distributed': ctx.is_distributed(), 'table_id': ctx.table_id(),
            'is_tensor_table': ctx.is_tensor_table(),
            'is_datanorm_table': ctx.is_datanorm_table(), 'program_id': ctx.program_id(),
            'remote_sparse_ids': list(ctx.remote_sparse_ids())}


def runtime_json():
    """The last recorded communicator, as runtime.json text."""
    return json.dumps(RECORDED[-1], indent=1) + '\n'


def install():
    import paddle.distributed.communicator as communicator
    trainer_pass.delet_extra_optimizes_pass = trainer_pass.delete_extra_optimizes_pass
    trainer_pass.append_send_ops_pass = append_send_ops_pass
    trainer_pass.init_from_server_pass = init_from_server_pass
    communicator.Communicator = RecordingCommunicator
    if not isinstance(public.core, _CoreWithOldCommContext):
        public.core = _CoreWithOldCommContext(public.core)
    return PATCHES
