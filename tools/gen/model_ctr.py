"""CTR nets of the clip set (issue 28) and the ps-tables set (issue 22): sparse id slots looked up in
one or two large-vocabulary tables, made with paddle.nn.Embedding(sparse=True) (lookup_table_v2,
remote_prefetch) or paddle.static.nn.sparse_embedding (lookup_table, is_distributed), concatenated
with a dense input and fed to a dense tower; softmax cross entropy, mean.  The optimizer is the
case's (sets.REGIMES); the builders return Adam(0.001) for a case that names none."""
from models import register

CTR = 'ctr'
USER_VOCAB, ITEM_VOCAB = 1000001, 500001


def _slots(paddle, names):
    return [paddle.static.data(n, [-1, 1], 'int64') for n in names]


def _emb_lookups(paddle, slots, vocab, dim, name):
    emb = paddle.nn.Embedding(vocab, dim, sparse=True, weight_attr=paddle.ParamAttr(name=name))
    return [paddle.reshape(emb(s), [-1, dim]) for s in slots]


def _dist_lookups(paddle, slots, vocab, dim, name):
    out = []
    for s in slots:
        e = paddle.static.nn.sparse_embedding(s, size=[vocab, dim],
                                              param_attr=paddle.ParamAttr(name=name))
        out.append(paddle.reshape(e, [-1, dim]))
    return out


def ctr_net(paddle, features):
    """dense_input[13] and label first, then the features; concat -> Linear ->64 relu ->
    Linear 64->32 relu -> Linear 32->2; softmax cross entropy, mean."""
    nn, F = paddle.nn, paddle.nn.functional
    dense = paddle.static.data('dense_input', [-1, 13], 'float32')
    label = paddle.static.data('label', [-1, 1], 'int64')
    x = paddle.concat(features(paddle) + [dense], axis=1)
    h = F.relu(nn.Linear(x.shape[1], 64)(x))
    h = F.relu(nn.Linear(64, 32)(h))
    return paddle.mean(F.cross_entropy(nn.Linear(32, 2)(h), label))


def _one_emb(paddle):
    return _emb_lookups(paddle, _slots(paddle, ['C1', 'C2', 'C3', 'C4']), USER_VOCAB, 16,
                        'SparseFeatFactors')


def _one_dist(paddle):
    return _dist_lookups(paddle, _slots(paddle, ['C1', 'C2', 'C3', 'C4']), USER_VOCAB, 16,
                         'SparseFeatFactors')


def _two_emb(paddle):
    return (_emb_lookups(paddle, _slots(paddle, ['U1', 'U2']), USER_VOCAB, 16, 'user_emb')
            + _emb_lookups(paddle, _slots(paddle, ['I1', 'I2']), ITEM_VOCAB, 8, 'item_emb'))


def _two_mixed(paddle):
    return (_emb_lookups(paddle, _slots(paddle, ['U1', 'U2']), USER_VOCAB, 16, 'user_emb')
            + _dist_lookups(paddle, _slots(paddle, ['I1', 'I2']), ITEM_VOCAB, 8, 'item_emb'))


def _two_dist(paddle):
    return (_dist_lookups(paddle, _slots(paddle, ['U1', 'U2']), USER_VOCAB, 16, 'user_emb')
            + _dist_lookups(paddle, _slots(paddle, ['I1', 'I2']), ITEM_VOCAB, 8, 'item_emb'))


def _register(name, description, features):
    def builder(paddle):
        return ctr_net(paddle, features), paddle.optimizer.Adam(learning_rate=0.001)
    register(name, description, CTR)(builder)


_TOWER = ('+ dense_input[13], Linear ->64 relu, Linear 64->32 relu, Linear 32->2, cross_entropy '
          '+ mean')
_register('ctr1_emb', 'CTR net, ONE sparse table: slots C1..C4 looked up in '
          'paddle.nn.Embedding(1000001, 16, sparse=True) SparseFeatFactors ' + _TOWER, _one_emb)
_register('ctr1_dist', 'CTR net, ONE distributed table: slots C1..C4 looked up in '
          'paddle.static.nn.sparse_embedding(size=[1000001, 16]) SparseFeatFactors ' + _TOWER,
          _one_dist)
_register('ctr2_emb', 'CTR net, TWO sparse tables: U1, U2 in paddle.nn.Embedding(1000001, 16, '
          'sparse=True) user_emb; I1, I2 in paddle.nn.Embedding(500001, 8, sparse=True) '
          'item_emb ' + _TOWER, _two_emb)
_register('ctr2_mixed', 'CTR net, TWO tables: U1, U2 in paddle.nn.Embedding(1000001, 16, '
          'sparse=True) user_emb; I1, I2 in paddle.static.nn.sparse_embedding(size=[500001, 8]) '
          'item_emb ' + _TOWER, _two_mixed)
_register('ctr2_dist', 'CTR net, TWO distributed tables: U1, U2 in '
          'paddle.static.nn.sparse_embedding(size=[1000001, 16]) user_emb; I1, I2 in '
          'paddle.static.nn.sparse_embedding(size=[500001, 8]) item_emb ' + _TOWER, _two_dist)
