"""Classic transpiler suite nets (the shared corpus's classic family: Paddle's
test_dist_transpiler.py models, and its "Extra" nets), rebuilt layer for layer."""
from models import register

SUITE = 'classic suite'


def _basic_net(paddle, bias=True):
    """x[1000] -> fc 1000 (fc_w, fc_b), square_error_cost against y[1], mean."""
    x = paddle.static.data(name='x', shape=[-1, 1000], dtype='float32')
    bias_attr = paddle.ParamAttr(name='fc_b') if bias else False
    y_predict = paddle.static.nn.fc(x, size=1000, weight_attr=paddle.ParamAttr(name='fc_w'),
                                    bias_attr=bias_attr)
    y = paddle.static.data(name='y', shape=[-1, 1], dtype='float32')
    cost = paddle.nn.functional.square_error_cost(input=y_predict, label=y)
    return paddle.mean(cost)


@register('suite_basic', 'TestBasicModel: fc 1000x1000 (fc_w/fc_b), square_error_cost, mean, '
          'SGD 0.1', SUITE)
def basic(paddle):
    return _basic_net(paddle), paddle.optimizer.SGD(learning_rate=0.1)


def _lr_var(paddle, opt, lr_var):
    """Install a fluid-style LR variable as the optimizer's global learning rate of the current
    main program (2.x optimizers take a float or an LRScheduler only)."""
    opt._learning_rate_map[paddle.static.default_main_program()] = lr_var
    return opt


@register('suite_rmsprop', 'TestRMSPropOptimizer / TestLoadSliceVar: basic model, RMSProp(0.1)',
          SUITE)
def rmsprop(paddle):
    return _basic_net(paddle), paddle.optimizer.RMSProp(learning_rate=0.1)


@register('suite_empty_pserver_block', 'TestEmptyPserverOptimizeBlocks: fc without bias (one '
          'param), SGD 1.0', SUITE)
def empty_pserver_block(paddle):
    return _basic_net(paddle, bias=False), paddle.optimizer.SGD(learning_rate=1.0)


@register('suite_lr_decay', 'TestLRDecay: basic model, SGD with exponential_decay(1.0, 2100, 0.1, '
          'staircase) (a fluid-style LR variable installed as the global LR)', SUITE)
def lr_decay(paddle):
    loss = _basic_net(paddle)
    lr = paddle.optimizer.lr.exponential_decay(learning_rate=1.0, decay_steps=2100,
                                               decay_rate=0.1, staircase=True)
    return loss, _lr_var(paddle, paddle.optimizer.SGD(learning_rate=1.0), lr)


@register('suite_lr_decay_conditional', 'TestLRDecayConditional: basic model, SGD with '
          'piecewise_decay([10000, 20000], [1.0, 0.5, 1.0]) (Switch / conditional_block)', SUITE)
def lr_decay_conditional(paddle):
    loss = _basic_net(paddle)
    lr = paddle.optimizer.lr.piecewise_decay([10000, 20000], [1.0, 0.5, 1.0])
    return loss, _lr_var(paddle, paddle.optimizer.SGD(learning_rate=1.0), lr)


@register('suite_l2decay_piecewise', 'TestL2DecayWithPiecewise: basic model, Momentum(0.9) with '
          'piecewise_decay([1, 10, 20, 30], [1.0, 0.1, 0.01, 0.001, 0.0001]) and weight_decay '
          'L2Decay(1e-4)', SUITE)
def l2decay_piecewise(paddle):
    loss = _basic_net(paddle)
    lr = paddle.optimizer.lr.piecewise_decay([1, 10, 20, 30], [1.0 * 0.1 ** i for i in range(5)])
    opt = paddle.optimizer.Momentum(learning_rate=1.0, momentum=0.9,
                                    weight_decay=paddle.regularizer.L2Decay(1e-4))
    return loss, _lr_var(paddle, opt, lr)


def _clip_fc_w_sgd(paddle):
    """SGD(0.1) whose minimize clips fc_w's gradient by value 0.1 as fluid's ParamAttr
    gradient_clip did: a clip op under _optimized_guard([fc_w, fc_w@GRAD]) between backward and
    apply_gradients (2.6's own grad_clip argument makes ops the classic transpiler cannot
    place)."""
    class ClipFcWSGD(paddle.optimizer.SGD):
        def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
            params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
            program = loss.block.program
            clipped = []
            for p, g in params_grads:
                if p.name == 'fc_w':
                    with program._optimized_guard([p, g]):
                        g = paddle.clip(g, min=-0.1, max=0.1)
                clipped.append((p, g))
            return self.apply_gradients(clipped), clipped
    return ClipFcWSGD(learning_rate=0.1)


@register('suite_l2decay', 'TestL2Decay: basic model, fc_w with an L2Decay() regularizer and its '
          'grad clipped by value 0.1, SGD 0.1 (clip under _optimized_guard, then '
          'apply_gradients)', SUITE)
def l2decay(paddle):
    x = paddle.static.data(name='x', shape=[-1, 1000], dtype='float32')
    w_attr = paddle.ParamAttr(name='fc_w', regularizer=paddle.regularizer.L2Decay())
    y_predict = paddle.static.nn.fc(x, size=1000, weight_attr=w_attr,
                                    bias_attr=paddle.ParamAttr(name='fc_b'))
    y = paddle.static.data(name='y', shape=[-1, 1], dtype='float32')
    loss = paddle.mean(paddle.nn.functional.square_error_cost(input=y_predict, label=y))
    return loss, _clip_fc_w_sgd(paddle)


def _decayed_adagrad(paddle, learning_rate, decay=0.95, epsilon=1e-6):
    """fluid's DecayedAdagradOptimizer as a small Optimizer subclass (2.6 has no such class):
    one "moment" accumulator per parameter, a decayed_adagrad op per parameter."""
    class DecayedAdagrad(paddle.optimizer.Optimizer):
        type = 'decayed_adagrad'

        def _create_accumulators(self, block, parameters):
            for p in parameters:
                self._add_accumulator('moment', p)

        def _append_optimize_op(self, block, param_and_grad):
            p, g = param_and_grad
            moment = self._get_accumulator('moment', p)
            return block.append_op(
                type='decayed_adagrad',
                inputs={'Param': p, 'Grad': g, 'Moment': moment,
                        'LearningRate': self._create_param_lr(param_and_grad)},
                outputs={'ParamOut': p, 'MomentOut': moment},
                attrs={'decay': decay, 'epsilon': epsilon}, stop_gradient=True)
    return DecayedAdagrad(learning_rate=learning_rate)


@register('suite_decayed_adagrad', 'TestDecayedAdagrad: basic model, decayed_adagrad op (fluid\'s '
          'DecayedAdagradOptimizer as a small Optimizer subclass)', SUITE)
def decayed_adagrad(paddle):
    return _basic_net(paddle), _decayed_adagrad(paddle, 0.1)


def fluid_embedding(paddle, ids, size, name, is_distributed=False, remote_prefetch=False,
                    initializer=None, attr=None):
    """A lookup_table (v1) op as fluid 1.x's layers.embedding made it (is_sparse); `attr`: a
    ParamAttr of the caller's (else one named `name` with `initializer`)."""
    from paddle.base.layer_helper import LayerHelper
    attr = attr or paddle.ParamAttr(name=name, initializer=initializer)
    helper = LayerHelper('embedding', param_attr=attr)
    w = helper.create_parameter(attr=helper.param_attr, shape=size, dtype='float32',
                                is_bias=False)
    out = helper.create_variable_for_type_inference('float32')
    helper.append_op(type='lookup_table', inputs={'Ids': ids, 'W': w}, outputs={'Out': out},
                     attrs={'is_sparse': True, 'is_distributed': is_distributed,
                            'remote_prefetch': remote_prefetch, 'padding_idx': -1})
    return out


def _lookup_net(paddle, is_distributed, remote_prefetch, profile=False):
    """The 2018 suite net: title_ids and brand_ids (lod_level 1) looked up in shared_w [1000, 64]
    (+ profile_ids in profile_emb), average sequence_pool, concat, fc 2 (fc_w, fc_b), softmax
    cross entropy, mean; Adam(0.003)."""
    slots = [('title_ids', 'shared_w'), ('brand_ids', 'shared_w')]
    if profile:
        slots.append(('profile_ids', 'profile_emb'))
    pooled = []
    for feed, table in slots:
        ids = paddle.static.data(name=feed, shape=[-1, 1], dtype='int64', lod_level=1)
        emb = fluid_embedding(paddle, ids, [1000, 64], table, is_distributed, remote_prefetch)
        pooled.append(paddle.static.nn.sequence_pool(emb, pool_type='average'))
    label = paddle.static.data(name='label', shape=[-1, 1], dtype='int64')
    predict = paddle.static.nn.fc(paddle.concat(pooled, axis=1), size=2,
                                  weight_attr=paddle.ParamAttr(name='fc_w'),
                                  bias_attr=paddle.ParamAttr(name='fc_b'))
    loss = paddle.nn.functional.cross_entropy(predict, label, use_softmax=False)
    return loss, paddle.optimizer.Adam(learning_rate=0.003)


@register('suite_local_lookup_table', 'TestLocalLookupTable (2018 net): two lookup_table (v1) '
          'ops sharing shared_w [1000, 64], is_sparse, not distributed, no remote_prefetch; '
          'sequence_pool, concat, fc 2, cross_entropy, Adam 0.003', SUITE)
def local_lookup_table(paddle):
    return _lookup_net(paddle, False, False)


@register('suite_dist_lookup_table', 'TestDistLookupTable (2018 net): as suite_local_lookup_table '
          'with shared_w is_distributed', SUITE)
def dist_lookup_table(paddle):
    return _lookup_net(paddle, True, False)


@register('suite_remote_prefetch_lookup_table', 'TestRemoteLookupTable: lookups on shared_w (x2) '
          'and profile_emb, is_sparse with remote_prefetch', SUITE)
def remote_prefetch_lookup_table(paddle):
    return _lookup_net(paddle, False, True, profile=True)


@register('suite_fake_init', 'TestFakeInit: word2vec-like net, three sparse tables (emb, emb_w, '
          'emb_b) with remote_prefetch, nce-style loss, SGD with exponential_decay(1.0, 2100, 0.1, '
          'staircase)', SUITE)
def fake_init(paddle):
    dict_size, dim, neg_num = 10000, 8, 5
    word, true_word, neg_word = [paddle.static.data(name=n, shape=[-1, 1], dtype='int64',
                                                    lod_level=1)
                                 for n in ('input_word', 'true_label', 'neg_label')]
    init = paddle.nn.initializer

    def emb(ids, size, name, initializer=None):
        return fluid_embedding(paddle, ids, size, name, remote_prefetch=True,
                                initializer=initializer)
    input_emb = emb(word, [dict_size, dim], 'emb', init.Uniform(-0.5 / dim, 0.5 / dim))
    true_emb_w = emb(true_word, [dict_size, dim], 'emb_w', init.Constant(0.0))
    true_emb_b = emb(true_word, [dict_size, 1], 'emb_b', init.Constant(0.0))
    neg_reshape = paddle.reshape(neg_word, shape=[-1, 1])
    neg_reshape.stop_gradient = True
    neg_emb_w = paddle.reshape(emb(neg_reshape, [dict_size, dim], 'emb_w'), [-1, neg_num, dim])
    neg_emb_b = paddle.reshape(emb(neg_reshape, [dict_size, 1], 'emb_b'), [-1, neg_num])
    true_logits = paddle.add(paddle.sum(paddle.multiply(input_emb, true_emb_w), axis=1,
                                        keepdim=True), true_emb_b)
    neg_matmul = paddle.matmul(paddle.reshape(input_emb, [-1, 1, dim]), neg_emb_w,
                               transpose_y=True)
    neg_logits = paddle.add(paddle.reshape(neg_matmul, [-1, neg_num]), neg_emb_b)
    F = paddle.nn.functional
    ones = paddle.full_like(true_logits, 1.0)
    zeros = paddle.full_like(neg_logits, 0.0)
    true_xent = F.binary_cross_entropy_with_logits(true_logits, ones, reduction='none')
    neg_xent = F.binary_cross_entropy_with_logits(neg_logits, zeros, reduction='none')
    loss = paddle.mean(paddle.add(paddle.sum(true_xent, axis=1), paddle.sum(neg_xent, axis=1)))
    lr = paddle.optimizer.lr.exponential_decay(learning_rate=1.0, decay_steps=2100,
                                               decay_rate=0.1, staircase=True)
    return loss, _lr_var(paddle, paddle.optimizer.SGD(learning_rate=1.0), lr)


@register('suite_mlp_adam', 'Extra: MLP 64-128-64-10 (fc, relu), cross_entropy + mean, '
          'Adam(0.001)', SUITE)
def mlp_adam(paddle):
    x = paddle.static.data(name='x', shape=[-1, 64], dtype='float32')
    label = paddle.static.data(name='label', shape=[-1, 1], dtype='int64')
    h = paddle.static.nn.fc(x, 128, activation='relu')
    h = paddle.static.nn.fc(h, 64, activation='relu')
    logits = paddle.static.nn.fc(h, 10)
    loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
    return loss, paddle.optimizer.Adam(learning_rate=0.001)


@register('suite_embedding_v2', 'Extra: paddle.nn.Embedding(sparse=True) tables: '
          'SparseFeatFactors [1000, 8] read by three slots, user_emb [500, 4] by one, '
          'dense_input[4], Linear 32-16-2, softmax + cross_entropy, Adam(0.001)', SUITE)
def embedding_v2(paddle):
    nn, F = paddle.nn, paddle.nn.functional
    slots = [paddle.static.data('slot_%d' % i, [-1, 1], 'int64') for i in range(4)]
    dense = paddle.static.data('dense_input', [-1, 4], 'float32')
    label = paddle.static.data('label', [-1, 1], 'int64')
    init = paddle.nn.initializer.Uniform(-0.1, 0.1)
    shared = nn.Embedding(1000, 8, sparse=True,
                          weight_attr=paddle.ParamAttr(name='SparseFeatFactors', initializer=init))
    user = nn.Embedding(500, 4, sparse=True, weight_attr=paddle.ParamAttr(name='user_emb'))
    feats = [paddle.reshape(shared(s), [-1, 8]) for s in slots[:3]]
    feats.append(paddle.reshape(user(slots[3]), [-1, 4]))
    x = paddle.concat(feats + [dense], axis=1)
    h = F.relu(nn.Linear(32, 16)(x))
    probs = F.softmax(nn.Linear(16, 2)(h))
    loss = F.cross_entropy(probs, label, use_softmax=False)
    return loss, paddle.optimizer.Adam(learning_rate=0.001)
