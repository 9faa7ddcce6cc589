"""One trainer of Paddle 2.6.2 (DistFleetWrapper) running a scenario against the pserver:
distributed_lookup_table, distributed_push_sparse (the ops the ps split's trainers run) with
fed ids and gradients, a dense `send`, then the table dumped by save_one_model. Writes
OUT.json: the scenario, the server descriptor, what the lookups returned, the gradients the
push op scaled in place, the dense values pulled, and every sparse row as Paddle saved it."""
import glob
import gzip
import json
import os
import sys
import tempfile
import time

import numpy as np
import paddle
from paddle.base import core

from desc import server_text, worker_text

paddle.enable_static()
scenario, port, out_path = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
w = core.DistFleetWrapper()
w.init_worker(worker_text(scenario), [core.PSHost('127.0.0.1', port, 0).serialize_to_string()], 0)
place = paddle.CPUPlace()
scope = paddle.static.global_scope()
exe = paddle.static.Executor(place)


def build(prog, kind):
    b = prog.global_block()
    ids = paddle.static.data('ids', [-1, 1], 'int64')
    if kind == 'lookup':
        table = b.create_var(name='W', shape=[100, 3], dtype='float32', persistable=True)
        out = b.create_var(name='out', shape=[-1, 3], dtype='float32')
        b.append_op(type='distributed_lookup_table', inputs={'Ids': [ids], 'W': [table]},
                    outputs={'Outputs': [out]},
                    attrs={'table_id': 0, 'is_distributed': False, 'is_test': False,
                           'lookup_table_version': 'lookup_table', 'padding_idx': -1,
                           'dtype': 5})
    elif kind == 'push':
        g = paddle.static.data('out@GRAD', [-1, 3], 'float32')
        show = paddle.static.data('show', [1], 'float32')
        clk = paddle.static.data('clk', [1], 'float32')
        b.append_op(type='distributed_push_sparse',
                    inputs={'Ids': [ids], 'Shows': [show], 'Clicks': [clk]},
                    outputs={'Outputs': [g]},
                    attrs={'table_id': 0, 'size': 3, 'padding_idx': -1, 'is_distributed': False,
                           'is_test': False, 'push_sparse_version': 'push_sparse',
                           'use_cvm_op': False, 'slots': [7], 'dtype': 5})
    else:
        dg = paddle.static.data('dg', [12], 'float32')
        ctl = b.create_var(name='ctl', shape=[1], dtype='float32')
        b.append_op(type='send', inputs={'X': [dg]}, outputs={'Out': [ctl]},
                    attrs={'table_id': 1, 'is_sparse': 0, 'send_varnames': ['Dense@GRAD']})
    return prog


def program(kind):
    prog = paddle.static.Program()
    with paddle.static.program_guard(prog, paddle.static.Program()):
        return build(prog, kind)


LOOK, PUSH, SEND = program('lookup'), program('push'), program('send')
scope.var('W').get_tensor().set(np.zeros((100, 3), np.float32), place)


def lookup(ids):
    out, = exe.run(LOOK, feed={'ids': np.asarray(ids, np.int64).reshape(-1, 1)},
                   fetch_list=['out'], scope=scope)
    return np.asarray(out).tolist()


def push(ids, grad, show, clk):
    g, = exe.run(PUSH, fetch_list=['out@GRAD'], scope=scope,
                 feed={'ids': np.asarray(ids, np.int64).reshape(-1, 1),
                       'out@GRAD': np.asarray(grad, np.float32),
                       'show': np.asarray([show], np.float32),
                       'clk': np.asarray([clk], np.float32)})
    w.client_flush()
    time.sleep(0.3)
    return np.asarray(g).tolist()


def saved_rows():
    rows = {}
    with tempfile.TemporaryDirectory() as save:
        w.save_one_model(0, save, 0)
        time.sleep(0.5)
        for f in sorted(glob.glob(os.path.join(save, '**', 'part-*'), recursive=True)):
            with (gzip.open if f.endswith('.gz') else open)(f, 'rt') as lines:
                for line in lines:
                    parts = line.split()
                    if parts:
                        rows[parts[0]] = [float(x) for x in parts[1:]]
    return rows


res = {'scenario': scenario, 'server_desc': server_text(scenario), 'lookups': [],
       'scaled_grads': []}
for st in scenario['sparse']:
    res['lookups'].append(lookup(st['lookup']))
    res['scaled_grads'].append(push(st['ids'], st['grad'], st['show'], st['clk']))
res['lookups'].append(lookup(scenario['final_lookup']))
for g in scenario['dense']:
    exe.run(SEND, feed={'dg': np.asarray(g, np.float32)}, scope=scope)
    w.client_flush()
    time.sleep(0.3)
scope.var('dp').get_tensor().set(np.zeros(12, np.float32), place)
w.pull_dense_params(scope, 1, ['dp'])
res['dense'] = np.array(scope.find_var('dp').get_tensor()).tolist()
res['rows'] = saved_rows()
with open(out_path, 'w') as f:
    json.dump(res, f, indent=1, sort_keys=True)
print('worker done', flush=True)
w.stop_server()
w.stop_worker()
