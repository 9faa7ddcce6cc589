"""Nets of the lod family (issue 47): programs whose inputs are LoD tensors (`lod_level` > 0),
shaped after Paddle's own parameter-server test nets and PGL's GraphSAGE, built here (not
copied): each reads its ids as sequences and pools, convolves, expands or normalizes them with
the sequence ops those nets use.

- lod_ctr: dist_fleet_ctr.py's CTR net (dnn and lr slots of LoD ids, nn.embedding tables with
  padding_idx 0, sum pools over the [-1, 1, width] lookups, a relu tower, softmax, accuracy,
  auc, cross entropy);
- lod_ctr_dist: dist_fleet_sparse_embedding_ctr.py's (sparse_embedding tables with a
  ShowClickEntry, pooled straight from the [-1, width] lookups);
- simnet_dense: dist_simnet_bow's net with a dense table gradient (is_sparse False);
- textcls: dist_text_classification.py's conv net (a sequence_conv over the words, tanh,
  max pool, fc, softmax) on a table of dense gradient;
- sage: a PGL-like two-hop GraphSAGE, neighbours sampled as LoD: a node's neighbours one LoD
  level, their neighbours two, mean-pooled level by level (sequence_pool on a 2-level LoD),
  the layers' weights shared between the node and its neighbours, l2-normalized;
- sage_att: a graph attention layer over LoD neighbours (sequence_expand of the node to its
  neighbours, sequence_softmax of their scores, weighted sum pool) on sparse_embedding.
Weights are drawn at random where the tests use Constant(0.01) throughout (every unit of a
layer alike), so that each parameter's gradient depends on the data; dims kept small.
"""
from models import register

LOD = 'lod'


def _ids(paddle, name, lod_level=1, shape=None):
    return paddle.static.data(name=name, shape=shape or [-1, 1], dtype='int64',
                              lod_level=lod_level)


def _uniform(paddle, name=None, scale=0.1, lr=1.0):
    return paddle.ParamAttr(name=name, learning_rate=lr,
                            initializer=paddle.nn.initializer.Uniform(-scale, scale))


def _fc(paddle, x, size, act=None, name=None):
    return paddle.static.nn.fc(x=x, size=size, activation=act, weight_attr=_uniform(paddle, name))


# --- dist_fleet_ctr.py ---------------------------------------------------------------------
def _ctr_head(paddle, deep, wide, label):
    """The tower of the CTR nets: fc relu 32, 16, 8 over the deep pool, concat the wide pool,
    fc 2 softmax; accuracy, auc; cross entropy (on the softmax), mean."""
    out = deep
    for dim in (32, 16, 8):
        out = _fc(paddle, out, dim, 'relu')
    predict = _fc(paddle, paddle.concat([out, wide], axis=1), 2, 'softmax')
    paddle.static.accuracy(input=predict, label=label)
    paddle.static.auc(input=predict, label=label)
    cost = paddle.nn.functional.cross_entropy(input=predict, label=label, reduction='none',
                                              use_softmax=False)
    return paddle.mean(x=cost)


@register('lod_ctr', 'dist_fleet_ctr.py-like: dnn_data / lr_data LoD ids (lod_level 1) in '
          'static.nn.embedding tables deep_embedding [100000, 32] and wide_embedding '
          '[100000, 1] (is_sparse, padding_idx 0), sum pools of the [-1, 1, w] lookups, fc relu '
          '32/16/8, concat, fc 2 softmax, accuracy, auc, cross_entropy + mean; SGD(0.01)', LOD)
def lod_ctr(paddle):
    dnn, lr = _ids(paddle, 'dnn_data'), _ids(paddle, 'lr_data')
    label = paddle.static.data(name='click', shape=[-1, 1], dtype='int64')
    emb = paddle.static.nn.embedding

    def pooled(ids, width, name):
        e = emb(input=ids, size=[100000, width], is_sparse=True, padding_idx=0,
                param_attr=_uniform(paddle, name))
        return paddle.static.nn.sequence_lod.sequence_pool(input=e, pool_type='sum')
    deep = paddle.reshape(pooled(dnn, 32, 'deep_embedding'), [-1, 32])
    wide = paddle.reshape(pooled(lr, 1, 'wide_embedding'), [-1, 1])
    return _ctr_head(paddle, deep, wide, label), paddle.optimizer.SGD(learning_rate=0.01)


@register('lod_ctr_dist', 'dist_fleet_sparse_embedding_ctr.py-like: dnn_data / lr_data LoD ids '
          'in static.nn.sparse_embedding tables deep_embedding [10, 32] and wide_embedding '
          '[10, 1] (entry ShowClickEntry(show, click): a show feed, the label), sum pools, the '
          'lod_ctr tower; SGD(0.01)', LOD)
def lod_ctr_dist(paddle):
    dnn, lr = _ids(paddle, 'dnn_data'), _ids(paddle, 'lr_data')
    label = paddle.static.data(name='click', shape=[-1, 1], dtype='int64')
    paddle.static.data(name='show', shape=[-1, 1], dtype='int64')
    entry = paddle.distributed.ShowClickEntry('show', 'click')

    def pooled(ids, width, name):
        e = paddle.static.nn.sparse_embedding(input=ids, size=[10, width], entry=entry,
                                              param_attr=_uniform(paddle, name))
        return paddle.static.nn.sequence_lod.sequence_pool(input=e, pool_type='sum')
    deep, wide = pooled(dnn, 32, 'deep_embedding'), pooled(lr, 1, 'wide_embedding')
    return _ctr_head(paddle, deep, wide, label), paddle.optimizer.SGD(learning_rate=0.01)


# --- dist_simnet_bow.py, dense table gradient ----------------------------------------------
@register('simnet_dense', 'dist_simnet_bow-like: query / pos / neg title LoD ids in ONE table '
          '__emb__ [1500, 16] of dense gradient (static.nn.embedding, is_sparse False, '
          'learning_rate 0.6), reshape, sum pool, softsign, fc 16, cosine hinge loss (margin '
          '0.1), mean; SGD(0.2)', LOD)
def simnet_dense(paddle):
    def side(feed, fc_w, fc_b):
        e = paddle.static.nn.embedding(_ids(paddle, feed), size=[1500, 16], is_sparse=False,
                                       param_attr=_uniform(paddle, '__emb__', lr=0.6))
        pooled = paddle.static.nn.sequence_lod.sequence_pool(
            input=paddle.reshape(e, [-1, 16]), pool_type='sum')
        return paddle.static.nn.fc(x=paddle.nn.functional.softsign(pooled), size=16,
                                   weight_attr=_uniform(paddle, fc_w),
                                   bias_attr=paddle.ParamAttr(name=fc_b) if fc_b else None)
    q = side('query_ids', '__q_fc__', None)
    pt = side('pos_title_ids', '__fc__', '__fc_b__')
    nt = side('neg_title_ids', '__fc__', '__fc_b__')
    F = paddle.nn.functional
    cos_pt, cos_nt = F.cosine_similarity(q, pt), F.cosine_similarity(q, nt)
    hinge = paddle.maximum(cos_nt - cos_pt + 0.1, paddle.zeros_like(cos_pt))
    return paddle.mean(hinge), paddle.optimizer.SGD(learning_rate=0.2)


# --- dist_text_classification.py -----------------------------------------------------------
@register('textcls', 'dist_text_classification.py-like: words LoD ids [-1] in a table '
          '[5000, 16] of dense gradient, sequence_conv (filter 3, 16 filters) tanh, max pool, '
          'fc 12, fc 2 softmax, cross_entropy + mean, accuracy; SGD(0.05)', LOD)
def textcls(paddle):
    words = _ids(paddle, 'words', shape=[-1])
    label = paddle.static.data(name='label', shape=[-1, 1], dtype='int64')
    emb = paddle.static.nn.embedding(words, size=[5000, 16], is_sparse=False,
                                     param_attr=_uniform(paddle))
    seq = paddle.static.nn.sequence_lod
    conv = seq.sequence_conv(input=emb, num_filters=16, filter_size=3, act='tanh',
                             param_attr=_uniform(paddle))
    pooled = seq.sequence_pool(input=conv, pool_type='max')
    predict = _fc(paddle, _fc(paddle, pooled, 12), 2, 'softmax')
    cost = paddle.nn.functional.cross_entropy(input=predict, label=label, reduction='none',
                                              use_softmax=False)
    paddle.static.accuracy(input=predict, label=label)
    return paddle.mean(x=cost), paddle.optimizer.SGD(learning_rate=0.05)


# --- PGL-like graph nets: neighbours sampled as LoD ------------------------------------------
NODES, NODE_DIM, HID, CLASSES = 20000, 16, 16, 4


def _sage_layer(paddle, self_h, nbr_h, name):
    """GraphSAGE-mean: concat(self, mean of the neighbours) -> fc (weights `name`, shared by
    every node this layer computes) relu -> l2_normalize."""
    agg = paddle.static.nn.sequence_lod.sequence_pool(input=nbr_h, pool_type='average')
    h = paddle.static.nn.fc(x=paddle.concat([self_h, agg], axis=1), size=HID,
                            activation='relu', weight_attr=_uniform(paddle, name + '.w'),
                            bias_attr=paddle.ParamAttr(name=name + '.b'))
    return paddle.nn.functional.normalize(h, axis=1)


@register('sage', 'PGL-like 2-hop GraphSAGE: nodes [-1, 1], their sampled neighbours nbr1 '
          '(LoD 1) and the neighbours\' neighbours nbr2 (LoD 2) in ONE sparse nn.Embedding '
          'node_emb [20000, 16]; layer 1 (sage1, shared) on the nodes and on nbr1 (nbr2 mean '
          'pooled at its last level), layer 2 (sage2) on the nodes; concat + fc relu + '
          'l2_normalize per layer, fc 4, softmax_with_cross_entropy + mean; Adam(0.01)', LOD)
def sage(paddle):
    nodes = _ids(paddle, 'nodes', lod_level=0)
    nbr1, nbr2 = _ids(paddle, 'nbr1', 1), _ids(paddle, 'nbr2', 2)
    label = paddle.static.data(name='label', shape=[-1, 1], dtype='int64')
    table = paddle.nn.Embedding(NODES, NODE_DIM, sparse=True,
                                weight_attr=_uniform(paddle, 'node_emb'))

    def emb(ids):
        return paddle.reshape(table(ids), [-1, NODE_DIM])
    h_nodes, h_nbr1, h_nbr2 = emb(nodes), emb(nbr1), emb(nbr2)
    h1_nbr1 = _sage_layer(paddle, h_nbr1, h_nbr2, 'sage1')       # one row per nbr1 (LoD 1)
    h1_nodes = _sage_layer(paddle, h_nodes, h_nbr1, 'sage1')
    h2 = _sage_layer(paddle, h1_nodes, h1_nbr1, 'sage2')
    logits = _fc(paddle, h2, CLASSES, name='sage_out.w')
    loss = paddle.nn.functional.softmax_with_cross_entropy(logits, label)
    return paddle.mean(loss), paddle.optimizer.Adam(learning_rate=0.01)


@register('sage_att', 'PGL-like graph attention over LoD neighbours: nodes [-1, 1], nbrs '
          '(LoD 1) in static.nn.sparse_embedding node_emb [20000, 16]; fc 16 of each; the '
          'node\'s row sequence_expand-ed to its neighbours, their scores fc 1 of the concat '
          '(neighbour first), '
          'leaky_relu, sequence_softmax, weighted sum pool, fc 4, softmax_with_cross_entropy + '
          'mean; SGD(0.1)', LOD)
def sage_att(paddle):
    nodes, nbrs = _ids(paddle, 'nodes', lod_level=0), _ids(paddle, 'nbrs', 1)
    label = paddle.static.data(name='label', shape=[-1, 1], dtype='int64')
    seq = paddle.static.nn.sequence_lod

    def emb(ids):
        return paddle.static.nn.sparse_embedding(ids, size=[NODES, NODE_DIM],
                                                 param_attr=_uniform(paddle, 'node_emb'))
    h_self = _fc(paddle, emb(nodes), HID, name='att_proj.w')
    h_nbr = _fc(paddle, emb(nbrs), HID, name='att_proj.w')
    # (the neighbours first: concat's output takes its first input's LoD, and the expanded
    # node rows have none, as sequence_expand of a tensor without LoD gives in Paddle)
    expanded = seq.sequence_expand(x=h_self, y=h_nbr)
    score = paddle.nn.functional.leaky_relu(
        _fc(paddle, paddle.concat([h_nbr, expanded], axis=1), 1, name='att_score.w'), 0.2)
    alpha = seq.sequence_softmax(score)
    agg = seq.sequence_pool(input=paddle.multiply(h_nbr, alpha), pool_type='sum')
    logits = _fc(paddle, paddle.add(agg, h_self), CLASSES, name='att_out.w')
    loss = paddle.nn.functional.softmax_with_cross_entropy(logits, label)
    return paddle.mean(loss), paddle.optimizer.SGD(learning_rate=0.1)
