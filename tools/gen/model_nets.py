"""Synthetic nets of the shared corpus's ps and fleet families, rebuilt layer for layer (same
layers in the same order, so the same parameter and var names)."""
from models import register

PS = 'shared ps'
FLEET = 'shared fleet'


# --- ps family ------------------------------------------------------------------------------
def ps_mlp(paddle):
    """x[32] -> Linear 32->64, relu -> Linear 64->1; square_error_cost against y[1], mean."""
    nn, F = paddle.nn, paddle.nn.functional
    x = paddle.static.data('x', [-1, 32], 'float32')
    y = paddle.static.data('y', [-1, 1], 'float32')
    hidden = F.relu(nn.Linear(32, 64)(x))
    return paddle.mean(F.square_error_cost(nn.Linear(64, 1)(hidden), y))


def one_table(paddle):
    """Slot C1 looked up once in Embedding(10000, 8, sparse) SparseFeatFactors."""
    c1 = paddle.static.data('C1', [-1, 1], 'int64')
    emb = paddle.nn.Embedding(10000, 8, sparse=True,
                              weight_attr=paddle.ParamAttr(name='SparseFeatFactors'))
    return [paddle.reshape(emb(c1), [-1, 8])]


def two_tables(paddle):
    """emb_a Embedding(10000, 8) looked up by C1 and C2, emb_b Embedding(5000, 4) by C3."""
    slots = [paddle.static.data(n, [-1, 1], 'int64') for n in ('C1', 'C2', 'C3')]
    emb_a = paddle.nn.Embedding(10000, 8, sparse=True, weight_attr=paddle.ParamAttr(name='emb_a'))
    emb_b = paddle.nn.Embedding(5000, 4, sparse=True, weight_attr=paddle.ParamAttr(name='emb_b'))
    return [paddle.reshape(emb_a(slots[0]), [-1, 8]), paddle.reshape(emb_a(slots[1]), [-1, 8]),
            paddle.reshape(emb_b(slots[2]), [-1, 4])]


def dist_table(paddle):
    """is_distributed big_emb [100000, 8] (static.nn.sparse_embedding) looked up by C1, C2."""
    out = []
    for n in ('C1', 'C2'):
        ids = paddle.static.data(n, [-1, 1], 'int64')
        emb = paddle.static.nn.sparse_embedding(ids, size=[100000, 8],
                                                param_attr=paddle.ParamAttr(name='big_emb'))
        out.append(paddle.reshape(emb, [-1, 8]))
    return out


def ctr_tower(paddle, features):
    """dense_input[13] and label made first, then the features; concat(features + dense) ->
    Linear ->16, relu -> Linear 16->2; softmax cross entropy, mean."""
    nn, F = paddle.nn, paddle.nn.functional
    dense = paddle.static.data('dense_input', [-1, 13], 'float32')
    label = paddle.static.data('label', [-1, 1], 'int64')
    x = paddle.concat(features(paddle) + [dense], axis=1)
    hidden = F.relu(nn.Linear(x.shape[1], 16)(x))
    return paddle.mean(F.cross_entropy(nn.Linear(16, 2)(hidden), label))


def _opt(paddle, kind):
    o = paddle.optimizer
    return {
        'sgd': lambda: o.SGD(learning_rate=0.01),
        'adam': lambda: o.Adam(learning_rate=0.001),
        'adam_b': lambda: o.Adam(learning_rate=0.002, beta1=0.8, beta2=0.95, epsilon=1e-06),
        'adagrad': lambda: o.Adagrad(learning_rate=0.01),
        'momentum': lambda: o.Momentum(learning_rate=0.01, momentum=0.9),
        'sgd_exp_decay': lambda: o.SGD(learning_rate=o.lr.ExponentialDecay(0.1, gamma=0.9)),
    }[kind]()


def _ps_model(name, description, net, opt):
    def builder(paddle):
        loss = ps_mlp(paddle) if net is None else ctr_tower(paddle, net)
        return loss, _opt(paddle, opt)
    register(name, description, PS)(builder)


_ps_model('ps_mlp_sgd', 'dense only: x[32] -> Linear 32->64 relu -> Linear 64->1, '
          'square_error_cost + mean, SGD(0.01)', None, 'sgd')
_ps_model('ps_mlp_adam', 'dense only: as ps_mlp_sgd with Adam(0.001)', None, 'adam')
_ps_model('ps_ctr_adam', 'CTR net, ONE sparse table: slot C1 looked up once in '
          'paddle.nn.Embedding(10000, 8, sparse=True) (SparseFeatFactors), reshape, concat with '
          'dense_input[13], Linear 21->16 relu, Linear 16->2, cross_entropy + mean, Adam(0.001)',
          one_table, 'adam')
_ps_model('ps_ctr_adam_b', 'ps_ctr_adam\'s net with Adam(0.002, beta1=0.8, beta2=0.95, '
          'epsilon=1e-06)', one_table, 'adam_b')
_ps_model('ps_ctr_adagrad', 'ps_ctr_adam\'s net with Adagrad(0.01)', one_table, 'adagrad')
_ps_model('ps_ctr_momentum', 'ps_ctr_adam\'s net with Momentum(0.01, momentum=0.9)', one_table,
          'momentum')
_ps_model('ps_lr_exp_sgd', 'ps_ctr_adam\'s net with SGD(ExponentialDecay(0.1, gamma=0.9))',
          one_table, 'sgd_exp_decay')
_ps_model('ps_two_tables_sgd', 'TWO sparse tables: emb_a = Embedding(10000, 8, sparse) looked up '
          'by C1 and C2, emb_b = Embedding(5000, 4, sparse) by C3; concat with dense_input[13] '
          '-> 33, Linear 33->16 relu, Linear 16->2, cross_entropy + mean, SGD(0.01)',
          two_tables, 'sgd')
_ps_model('ps_dist_table_sgd', 'is_distributed table: C1, C2 looked up in '
          'paddle.static.nn.sparse_embedding(size=[100000, 8], big_emb), concat with '
          'dense_input[13] -> 29, Linear 29->16 relu, Linear 16->2, cross_entropy + mean, '
          'SGD(0.01)', dist_table, 'sgd')


# --- fleet family ---------------------------------------------------------------------------
def fleet_mlp(paddle, width=1000, hidden=1000):
    """x[width] -> fc hidden relu -> fc 1; square_error_cost against y[1], mean."""
    x = paddle.static.data('x', [-1, width], 'float32')
    y = paddle.static.data('y', [-1, 1], 'float32')
    h = paddle.static.nn.fc(x, hidden, activation='relu')
    pred = paddle.static.nn.fc(h, 1)
    return paddle.mean(paddle.nn.functional.square_error_cost(pred, y))


def fleet_ctr(paddle, distributed):
    """dense_input[13], C1, C2 looked up in ONE table SparseFeatFactors (16 wide, Uniform(-1, 1)):
    static.nn.embedding (10000 rows) or static.nn.sparse_embedding (100000 rows, is_distributed);
    concat(dense, C1, C2) -> fc 64 relu -> fc 1; binary_cross_entropy_with_logits against a
    float label, mean."""
    dense = paddle.static.data('dense_input', [-1, 13], 'float32')
    ids = [paddle.static.data(n, [-1, 1], 'int64') for n in ('C1', 'C2')]
    label = paddle.static.data('label', [-1, 1], 'float32')
    attr = paddle.ParamAttr(name='SparseFeatFactors', initializer=paddle.nn.initializer.Uniform())
    embs = []
    for i in ids:
        if distributed:
            e = paddle.static.nn.sparse_embedding(i, size=[100000, 16], param_attr=attr)
        else:
            e = paddle.static.nn.embedding(i, size=[10000, 16], is_sparse=True, param_attr=attr)
        embs.append(paddle.reshape(e, [-1, 16]))
    x = paddle.concat([dense] + embs, axis=1)
    h = paddle.static.nn.fc(x, 64, activation='relu')
    logit = paddle.static.nn.fc(h, 1)
    return paddle.mean(paddle.nn.functional.binary_cross_entropy_with_logits(logit, label))


@register('fleet_mlp_sgd', 'fc 1000->1000 (relu) -> fc 1, square_error_cost + mean, SGD(0.01)',
          FLEET)
def fleet_mlp_sgd(paddle):
    return fleet_mlp(paddle), paddle.optimizer.SGD(learning_rate=0.01)


@register('fleet_mlp_adam', 'fc 1000->1000 (relu) -> fc 1, square_error_cost + mean, '
          'Adam(0.001)', FLEET)
def fleet_mlp_adam(paddle):
    return fleet_mlp(paddle), paddle.optimizer.Adam(learning_rate=0.001)


@register('fleet_lrdecay_momentum', 'fleet_mlp with exponential_decay(0.1, decay_steps=1000, '
          'decay_rate=0.9, staircase=True) on the @LR_DECAY_COUNTER@ global step, Momentum(0.9)',
          FLEET)
def fleet_lrdecay_momentum(paddle):
    loss = fleet_mlp(paddle)
    lr = paddle.optimizer.lr.exponential_decay(learning_rate=0.1, decay_steps=1000,
                                               decay_rate=0.9, staircase=True)
    return loss, with_lr_var(paddle, paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.9), lr)


def with_lr_var(paddle, opt, lr_var):
    """Install a fluid-style LR variable (paddle.optimizer.lr.exponential_decay & co.) as the
    optimizer's global learning rate of the current main program: 2.x optimizers take a float or
    an LRScheduler only."""
    opt._learning_rate_map[paddle.static.default_main_program()] = lr_var
    return opt


@register('fleet_l2decay_clip_unsplit', 'mlp_small (fc 64->32 relu -> fc 1: nothing reaches '
          'min_block_size) with SGD(0.01, weight_decay=L2Decay(1e-4), '
          'grad_clip=ClipGradByValue(1.0))', FLEET)
def fleet_l2decay_clip_unsplit(paddle):
    loss = fleet_mlp(paddle, width=64, hidden=32)
    return loss, paddle.optimizer.SGD(learning_rate=0.01,
                                      weight_decay=paddle.regularizer.L2Decay(1e-4),
                                      grad_clip=paddle.nn.ClipGradByValue(1.0))


@register('fleet_ctr_sparse_adam', 'CTR-like: dense_input[13] + C1, C2 looked up in ONE table '
          'SparseFeatFactors [10000, 16] (paddle.static.nn.embedding is_sparse) -> concat -> fc 64 '
          'relu -> fc 1, binary_cross_entropy_with_logits + mean, Adam(0.001)', FLEET)
def fleet_ctr_sparse_adam(paddle):
    return fleet_ctr(paddle, False), paddle.optimizer.Adam(learning_rate=0.001)


@register('fleet_large_scale_adam', 'as fleet_ctr_sparse_adam, the table a large-scale one: '
          'paddle.static.nn.sparse_embedding (is_distributed, [100000, 16]), Adam(0.001)', FLEET)
def fleet_large_scale_adam(paddle):
    return fleet_ctr(paddle, True), paddle.optimizer.Adam(learning_rate=0.001)
