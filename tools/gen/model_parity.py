"""Nets of the parity family (issue 45): Paddle's own parameter-server test nets
(test_dist_fleet_ps*.py's bow net), PGL-like graph nets and variants of ours, each chosen for a
class of difference none of the other families shows: per-parameter learning rates under an LR
scheduler, tables initialized from values (Assign), sparse gradient blocks of tables looked up
through reshapes that paddle.shape drives, distributed tables looked up with LoD inputs."""
import numpy as np

from model_suite import fluid_embedding
from models import register

PARITY = 'parity'

# test_dist_fleet_ps.py's constants
BASE_LR = 0.2
EMB_LR = BASE_LR * 3
DICT_DIM, EMB_DIM, HID_DIM, MARGIN = 1500, 16, 16, 0.1


def _bow_side(paddle, feed, lookup, fc_name, fc_bias):
    """One side of the bow net: LoD ids -> table -> reshape -> sum pool -> softsign -> fc."""
    ids = paddle.static.data(name=feed, shape=[-1, 1], dtype='int64', lod_level=1)
    emb = paddle.reshape(lookup(ids), [-1, EMB_DIM])
    pooled = paddle.static.nn.sequence_lod.sequence_pool(input=emb, pool_type='sum')
    return paddle.static.nn.fc(
        x=paddle.nn.functional.softsign(pooled), size=HID_DIM,
        weight_attr=paddle.ParamAttr(name=fc_name, learning_rate=BASE_LR),
        bias_attr=paddle.ParamAttr(name=fc_bias) if fc_bias else None)


def bow_net(paddle, lookup):
    """test_dist_fleet_ps.py's TestPSPassWithBow net (query, pos title, neg title, each LoD ids
    looked up in ONE table __emb__, sum-pooled, softsign, fc with learning_rate 0.2; cosine
    similarities; margin hinge loss, mean), dims made small and the weights drawn at random
    (the test's Constant(0.01) everywhere makes both titles score alike: no gradient)."""
    q = _bow_side(paddle, 'query_ids', lookup, '__q_fc__', None)
    paddle.static.data(name='label', shape=[-1, 1], dtype='int64')
    pt = _bow_side(paddle, 'pos_title_ids', lookup, '__fc__', '__fc_b__')
    nt = _bow_side(paddle, 'neg_title_ids', lookup, '__fc__', '__fc_b__')
    F = paddle.nn.functional
    cos_pt, cos_nt = F.cosine_similarity(q, pt), F.cosine_similarity(q, nt)
    margin = paddle.full_like(cos_pt, MARGIN)
    hinge = paddle.maximum(paddle.add(paddle.subtract(margin, cos_pt), cos_nt),
                           paddle.zeros_like(cos_pt))
    return paddle.mean(hinge)


def _emb_attr(paddle):
    return paddle.ParamAttr(initializer=paddle.nn.initializer.Uniform(-0.1, 0.1),
                            name='__emb__', learning_rate=EMB_LR)


def _static_lookup(paddle):
    """paddle.static.nn.embedding(is_sparse) on __emb__ (learning_rate 0.6), as the test's
    fluid.layers.embedding."""
    def lookup(ids):
        return paddle.static.nn.embedding(ids, size=[DICT_DIM, EMB_DIM], is_sparse=True,
                                          param_attr=_emb_attr(paddle))
    return lookup


def _dist_lookup(paddle):
    """paddle.static.nn.sparse_embedding on __emb__ (is_distributed lookup_table)."""
    def lookup(ids):
        return paddle.static.nn.sparse_embedding(ids, size=[DICT_DIM, EMB_DIM],
                                                 param_attr=_emb_attr(paddle))
    return lookup


def _fluid_dist_lookup(paddle):
    """fluid's layers.embedding(is_distributed=True) on __emb__ (lookup_table v1)."""
    def lookup(ids):
        return fluid_embedding(paddle, ids, [DICT_DIM, EMB_DIM], None, True,
                               attr=_emb_attr(paddle))
    return lookup


def _sgd_exp(paddle):
    return paddle.optimizer.SGD(
        learning_rate=paddle.optimizer.lr.ExponentialDecay(learning_rate=BASE_LR, gamma=0.9))


@register('bow_paramlr_sched', 'test_dist_fleet_ps.py bow net: query / pos / neg title LoD ids in '
          'ONE table __emb__ [1500, 16] (static.nn.embedding is_sparse, ParamAttr learning_rate '
          '0.6), sum pool, softsign, fc 16 (learning_rate 0.2), cosine hinge loss; '
          'SGD(ExponentialDecay(0.2, gamma=0.9))', PARITY)
def bow_paramlr_sched(paddle):
    return bow_net(paddle, _static_lookup(paddle)), _sgd_exp(paddle)


@register('bow_paramlr_const', 'bow_paramlr_sched\'s net with a constant SGD(0.2)', PARITY)
def bow_paramlr_const(paddle):
    return bow_net(paddle, _static_lookup(paddle)), paddle.optimizer.SGD(learning_rate=BASE_LR)


@register('bow_dist', 'bow_paramlr_sched\'s net, __emb__ looked up through '
          'static.nn.sparse_embedding (is_distributed) with LoD ids; SGD(0.2)', PARITY)
def bow_dist(paddle):
    return bow_net(paddle, _dist_lookup(paddle)), paddle.optimizer.SGD(learning_rate=BASE_LR)


@register('bow_fluid_dist', 'bow_paramlr_sched\'s net, __emb__ looked up through fluid\'s '
          'layers.embedding(is_distributed=True) (lookup_table v1) with LoD ids; SGD(0.2)',
          PARITY)
def bow_fluid_dist(paddle):
    return bow_net(paddle, _fluid_dist_lookup(paddle)), paddle.optimizer.SGD(learning_rate=BASE_LR)


# --- CTR with per-parameter learning rates ---------------------------------------------------
def paramlr_ctr(paddle):
    """C1, C2 in nn.Embedding(10000, 8, sparse) `emb` (ParamAttr learning_rate 0.6), dense_input
    [13]; concat -> Linear 29->16 relu (weight learning_rate 0.5) -> Linear 16->2; cross entropy,
    mean."""
    nn, F = paddle.nn, paddle.nn.functional
    dense = paddle.static.data('dense_input', [-1, 13], 'float32')
    label = paddle.static.data('label', [-1, 1], 'int64')
    ids = [paddle.static.data(n, [-1, 1], 'int64') for n in ('C1', 'C2')]
    emb = nn.Embedding(10000, 8, sparse=True,
                       weight_attr=paddle.ParamAttr(name='emb', learning_rate=0.6))
    x = paddle.concat([paddle.reshape(emb(i), [-1, 8]) for i in ids] + [dense], axis=1)
    h = F.relu(nn.Linear(29, 16, weight_attr=paddle.ParamAttr(learning_rate=0.5))(x))
    return paddle.mean(F.cross_entropy(nn.Linear(16, 2)(h), label))


@register('ctr_paramlr_sched', 'CTR: C1, C2 in nn.Embedding(10000, 8, sparse) emb (learning_rate '
          '0.6), concat dense_input[13], Linear 29->16 relu (learning_rate 0.5), Linear 16->2, '
          'cross_entropy + mean; SGD(ExponentialDecay(0.1, gamma=0.9))', PARITY)
def ctr_paramlr_sched(paddle):
    lr = paddle.optimizer.lr.ExponentialDecay(learning_rate=0.1, gamma=0.9)
    return paramlr_ctr(paddle), paddle.optimizer.SGD(learning_rate=lr)


@register('ctr_paramlr_adam_sched', 'ctr_paramlr_sched\'s net, Adam(PiecewiseDecay([3, 6], '
          '[0.01, 0.005, 0.001]))', PARITY)
def ctr_paramlr_adam_sched(paddle):
    lr = paddle.optimizer.lr.PiecewiseDecay([3, 6], [0.01, 0.005, 0.001])
    return paramlr_ctr(paddle), paddle.optimizer.Adam(learning_rate=lr)


# --- tables initialized from values ----------------------------------------------------------
def _assign_values(rows, dim, seed):
    return np.random.RandomState(seed).uniform(-0.1, 0.1, (rows, dim)).astype('float32')


@register('ctr_assign_table', 'CTR: C1 in nn.Embedding(2100, 8, sparse) emb initialized by '
          'nn.initializer.Assign(a [2100, 8] numpy array), dense_input[13], Linear 21->16 relu, '
          'Linear 16->2, cross_entropy + mean; SGD(0.01)', PARITY)
def ctr_assign_table(paddle):
    nn, F = paddle.nn, paddle.nn.functional
    dense = paddle.static.data('dense_input', [-1, 13], 'float32')
    label = paddle.static.data('label', [-1, 1], 'int64')
    c1 = paddle.static.data('C1', [-1, 1], 'int64')
    init = nn.initializer.Assign(_assign_values(2100, 8, 1))
    emb = nn.Embedding(2100, 8, sparse=True,
                       weight_attr=paddle.ParamAttr(name='emb', initializer=init))
    x = paddle.concat([paddle.reshape(emb(c1), [-1, 8]), dense], axis=1)
    h = F.relu(nn.Linear(21, 16)(x))
    return paddle.mean(F.cross_entropy(nn.Linear(16, 2)(h), label)), \
        paddle.optimizer.SGD(learning_rate=0.01)


@register('mlp_assign_fc', 'x[96] -> fc 96->200 (weight fc_w initialized by Assign(a [96, 200] '
          'numpy array), relu) -> fc 200->1; square_error_cost + mean; SGD(0.01)', PARITY)
def mlp_assign_fc(paddle):
    x = paddle.static.data('x', [-1, 96], 'float32')
    y = paddle.static.data('y', [-1, 1], 'float32')
    init = paddle.nn.initializer.Assign(_assign_values(96, 200, 2))
    h = paddle.static.nn.fc(x, 200, activation='relu',
                            weight_attr=paddle.ParamAttr(name='fc_w', initializer=init))
    pred = paddle.static.nn.fc(h, 1)
    return paddle.mean(paddle.nn.functional.square_error_cost(pred, y)), \
        paddle.optimizer.SGD(learning_rate=0.01)


# --- graph nets: tables behind reshapes that paddle.shape drives -----------------------------
def graph_net(paddle):
    """PGL-like: node ids [-1, 1] and their neighbours [-1, 4] in sparse_embedding `node_emb`
    [10000, 16], edge types [-1, 4] (two kinds) in sparse_embedding `etype_emb` [2, 16]; the neighbour
    rows reshaped to [paddle.shape(nodes)[0], 4, 16] and mean-pooled, added to the node's row,
    fc 16 relu, fc 1 against a float label; binary cross entropy with logits, mean."""
    nodes = paddle.static.data('nodes', [-1, 1], 'int64')
    nbrs = paddle.static.data('nbrs', [-1, 4], 'int64')
    etypes = paddle.static.data('etypes', [-1, 4], 'int64')
    label = paddle.static.data('label', [-1, 1], 'float32')
    sparse = paddle.static.nn.sparse_embedding
    node_attr = paddle.ParamAttr(name='node_emb')
    n = paddle.shape(nodes)[0]
    self_emb = paddle.reshape(sparse(nodes, size=[10000, 16], param_attr=node_attr), [n, 16])
    nbr_flat = paddle.reshape(nbrs, [-1, 1])
    nbr_emb = paddle.reshape(sparse(nbr_flat, size=[10000, 16], param_attr=node_attr),
                             [n, 4, 16])
    et_flat = paddle.reshape(etypes, [-1, 1])
    et_emb = paddle.reshape(sparse(et_flat, size=[2, 16],
                                   param_attr=paddle.ParamAttr(name='etype_emb')), [n, 4, 16])
    agg = paddle.mean(paddle.multiply(nbr_emb, et_emb), axis=1)
    h = paddle.static.nn.fc(paddle.add(self_emb, agg), 16, activation='relu')
    logit = paddle.static.nn.fc(h, 1)
    F = paddle.nn.functional
    return paddle.mean(F.binary_cross_entropy_with_logits(logit, label))


@register('graph_two_dist', 'PGL-like graph net: nodes [-1, 1], nbrs [-1, 4], etypes [-1, 4]; '
          'sparse_embedding node_emb [10000, 16] and etype_emb [2, 16], reshaped to '
          '[paddle.shape(nodes)[0], 4, 16], neighbour mean, fc 16 relu, fc 1, '
          'binary_cross_entropy_with_logits + mean; SGD(0.01)', PARITY)
def graph_two_dist(paddle):
    return graph_net(paddle), paddle.optimizer.SGD(learning_rate=0.01)

