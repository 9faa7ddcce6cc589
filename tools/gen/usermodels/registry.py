"""The user models of tools/gen/usermodels: per script, what it mixes and the optimizer it
minimizes with, as an optimizers.py spec (what tools/gen drives Paddle's pipelines with: the
saved program already holds its backward and optimizer ops; the spec gives the pipelines the
optimizer object, its LR scheduler included).  save.py checks that the spec makes the same
optimizer as the script's own (class, learning rate or scheduler settings, clip,
regularization, the optimizer's settings).  No Paddle here.
"""


def _sched(name, **args):
    return {'scheduler': name, 'args': args}


MODELS = {
    'widedeep': {
        'mixes': 'copied from ../shared/usermodels/widedeep (issue 41): a sparse_embedding user '
                 'table; ONE nn.Embedding(sparse=True) item table looked up for item_id [-1,1] '
                 'and cate_ids [-1,3]; a 1-wide sparse table; fc tower; auc; Adam, '
                 'ExponentialDecay, ClipGradByGlobalNorm over the tables too',
        'optimizer': {'type': 'adam', 'learning_rate': _sched('ExponentialDecay',
                                                              learning_rate=0.001, gamma=0.999),
                      'grad_clip': {'type': 'ClipGradByGlobalNorm', 'clip_norm': 5.0}}},
    'dssm': {
        'mixes': 'two-tower DSSM: ONE nn.Embedding(sparse=True, padding_idx=0) term table '
                 'looked up for query and title terms [-1,n] in both towers, user and item '
                 'tables [-1,1], all need_clip=False; cosine similarity; SGD, '
                 'CosineAnnealingDecay, ClipGradByNorm on the towers',
        'optimizer': {'type': 'sgd', 'learning_rate': _sched('CosineAnnealingDecay',
                                                             learning_rate=0.05, T_max=10000),
                      'grad_clip': {'type': 'ClipGradByNorm', 'clip_norm': 1.0}}},
    'deepfm': {
        'mixes': 'DeepFM: two sparse_embedding tables (1-wide and 8-wide) each looked up for 8 '
                 'slots [-1,1], need_clip=False; fc on 13 dense features; auc; Adam lazy_mode, '
                 'constant LR, ClipGradByGlobalNorm on the dense part',
        'optimizer': {'type': 'adam', 'learning_rate': 0.001, 'kwargs': {'lazy_mode': True},
                      'grad_clip': {'type': 'ClipGradByGlobalNorm', 'clip_norm': 10.0}}},
    'din': {
        'mixes': 'DIN: attention of the target over a 20-long behaviour sequence; item and '
                 'category nn.Embedding(sparse=True, padding_idx=0) tables each looked up for '
                 'the history [-1,n] and the target [-1,1]; masked softmax; auc; Adam, '
                 'PiecewiseDecay, ClipGradByNorm over the tables too',
        'optimizer': {'type': 'adam',
                      'learning_rate': _sched('PiecewiseDecay', boundaries=[1000, 5000],
                                              values=[0.01, 0.005, 0.001]),
                      'grad_clip': {'type': 'ClipGradByNorm', 'clip_norm': 5.0}}},
    'mmoe': {
        'mixes': 'MMoE, two tasks: dense nn.Embedding tables, one per field, ids [-1,1] and '
                 'one field [-1]; batch_norm on the input; 4 experts, 2 gates, dropout in the '
                 'towers; two aucs; Momentum, ExponentialDecay, L2Decay on the optimizer; no '
                 'sparse table',
        'optimizer': {'type': 'momentum', 'learning_rate': _sched('ExponentialDecay',
                                                                  learning_rate=0.01, gamma=0.99),
                      'kwargs': {'momentum': 0.9},
                      'weight_decay': {'type': 'L2Decay', 'coeff': 0.0001}}},
    'esmm': {
        'mixes': 'ESMM (CTR, CTCVR): ONE sparse_embedding table looked up for a padded '
                 'multi-hot slot unsqueezed to [-1,n,1] and for item_id [-1,1]; two towers; '
                 'two aucs; SGD, LinearWarmup, no clip',
        'optimizer': {'type': 'sgd', 'learning_rate': _sched('LinearWarmup', learning_rate=0.1,
                                                             warmup_steps=100, start_lr=0.01,
                                                             end_lr=0.1)}},
    'wdl_dense': {
        'mixes': 'wide&deep with dense nn.Embedding tables on 1-D ids [-1], L2Decay in each '
                 'table\'s ParamAttr, L1Decay in the wide fc\'s ParamAttr; data_norm on the '
                 'dense features; auc; Adagrad, constant LR, ClipGradByNorm; no sparse table',
        'optimizer': {'type': 'adagrad', 'learning_rate': 0.01,
                      'kwargs': {'initial_accumulator_value': 0.1},
                      'grad_clip': {'type': 'ClipGradByNorm', 'clip_norm': 5.0}}},
    'session': {
        'mixes': 'session-based ranking: ONE nn.Embedding(sparse=True) item table looked up for '
                 'sessions [-1,3,5] ([-1,a,b]) and the target [-1,1]; a user table with '
                 'need_clip=False; auc; RMSProp, PiecewiseDecay, ClipGradByGlobalNorm over the '
                 'item table and the dense part',
        'optimizer': {'type': 'rmsprop', 'learning_rate': _sched('PiecewiseDecay',
                                                                 boundaries=[2000],
                                                                 values=[0.001, 0.0005]),
                      'kwargs': {'rho': 0.95},
                      'grad_clip': {'type': 'ClipGradByGlobalNorm', 'clip_norm': 1.0}}},
    'youtube': {
        'mixes': 'YouTube-DNN ranking: ids sliced out of one feed (slice to [-1,1], a column '
                 'to [-1]); ONE sparse_embedding video table for the history reshaped to '
                 '[-1,10,1] and the candidate [-1,1]; nn.Embedding(sparse=True) user table; '
                 'dense author ([-1] ids) and city tables; Adam lazy_mode, LinearWarmup over '
                 'CosineAnnealingDecay, ClipGradByNorm with the sparse tables need_clip=False',
        'optimizer': {'type': 'adam',
                      'learning_rate': _sched('LinearWarmup',
                                              learning_rate=_sched('CosineAnnealingDecay',
                                                                   learning_rate=0.002,
                                                                   T_max=20000),
                                              warmup_steps=500, start_lr=0.0002, end_lr=0.002),
                      'kwargs': {'lazy_mode': True},
                      'grad_clip': {'type': 'ClipGradByNorm', 'clip_norm': 2.0}}},
    'dcn': {
        'mixes': 'Deep & Cross: ONE nn.Embedding(sparse=True) table for 10 slots [-1,1] with '
                 'L2Decay in its ParamAttr; cross layers of create_parameter weights; '
                 'batch_norm in the deep part; auc; Momentum, constant LR, L1Decay on the '
                 'optimizer, no clip',
        'optimizer': {'type': 'momentum', 'learning_rate': 0.01, 'kwargs': {'momentum': 0.9},
                      'weight_decay': {'type': 'L1Decay', 'coeff': 1e-06}}},
    'fm': {
        'mixes': 'FM: two padded multi-hot slots unsqueezed (unsqueeze2) to [-1,n,1], each '
                 'looked up in the same two sparse_embedding tables (1-wide, 10-wide), '
                 'need_clip=False; SGD, ExponentialDecay, ClipGradByValue on the dense part',
        'optimizer': {'type': 'sgd', 'learning_rate': _sched('ExponentialDecay',
                                                             learning_rate=0.1, gamma=0.9999),
                      'grad_clip': {'type': 'ClipGradByValue', 'max': 0.5, 'min': -0.5}}},
    'bst': {
        'mixes': 'BST-like self-attention over a 10-long sequence: ONE sparse_embedding item '
                 'table for the sequence unsqueezed to [-1,n,1] and a 1-D target unsqueezed to '
                 '[-1,1], need_clip=False; position parameter, layer_norm, dropout; Adam, '
                 'LinearWarmup, ClipGradByGlobalNorm on the dense part',
        'optimizer': {'type': 'adam', 'learning_rate': _sched('LinearWarmup', learning_rate=0.001,
                                                              warmup_steps=1000, start_lr=1e-05,
                                                              end_lr=0.001),
                      'grad_clip': {'type': 'ClipGradByGlobalNorm', 'clip_norm': 1.0}}},
    'ncf': {
        'mixes': 'NeuMF: two nn.Embedding(sparse=True) user tables looked up by 1-D ids [-1]; '
                 'dense item tables [-1,1]; Adagrad, constant LR, ClipGradByGlobalNorm over '
                 'everything',
        'optimizer': {'type': 'adagrad', 'learning_rate': 0.05,
                      'grad_clip': {'type': 'ClipGradByGlobalNorm', 'clip_norm': 5.0}}},
    'shared_bottom': {
        'mixes': 'shared-bottom multi-task: user and item nn.Embedding(sparse=True) tables '
                 '[-1,1]; a context feed reshaped (reshape2) to [-1,3,2] for its table; two '
                 'aucs; RMSProp centered, constant LR, ClipGradByValue over the tables too, '
                 'L2Decay on the optimizer',
        'optimizer': {'type': 'rmsprop', 'learning_rate': 0.001, 'kwargs': {'centered': True},
                      'grad_clip': {'type': 'ClipGradByValue', 'max': 1.0},
                      'weight_decay': {'type': 'L2Decay', 'coeff': 1e-05}}},
}
