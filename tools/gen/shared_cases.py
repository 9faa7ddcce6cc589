"""The shared corpus's cases as the generator rebuilds them: which registered builder makes each
case's model, and the optimizer an input-mode run drives with where it matters (an LR scheduler:
the ps and fleet pipelines read Program.lr_scheduler).  No Paddle here."""
import glob
import os

SHARED = ['/work/shared']
FAMILIES = ('classic', 'paddlerec-classic', 'fleet', 'paddlerec-fleet', 'ps', 'ps-tables')

REBUILD = {'classic/' + c: 'suite_' + m for c, m in (
    ('basic', 'basic'), ('large_block_size', 'basic'), ('no_slice_var', 'basic'),
    ('rmsprop', 'rmsprop'), ('load_slice_var', 'rmsprop'), ('decayed_adagrad', 'decayed_adagrad'),
    ('empty_pserver_block', 'empty_pserver_block'), ('l2decay', 'l2decay'),
    ('l2decay_piecewise', 'l2decay_piecewise'), ('lr_decay', 'lr_decay'),
    ('lr_decay_conditional', 'lr_decay_conditional'), ('local_lookup_table', 'local_lookup_table'),
    ('async_local_lookup_table', 'local_lookup_table'), ('dist_lookup_table', 'dist_lookup_table'),
    ('remote_prefetch_lookup_table', 'remote_prefetch_lookup_table'), ('fake_init', 'fake_init'),
    ('async_mlp_adam', 'mlp_adam'), ('half_async_mlp', 'mlp_adam'),
    ('embedding_v2', 'embedding_v2'))}
_PS = {'mlp_sgd': 'ps_mlp_sgd', 'mlp_adam': 'ps_mlp_adam', 'ctr_adam': 'ps_ctr_adam',
       'ctr_adagrad': 'ps_ctr_adagrad', 'ctr_momentum': 'ps_ctr_momentum',
       'lr_exp_sgd': 'ps_lr_exp_sgd', 'two_tables_sgd': 'ps_two_tables_sgd',
       'dist_table_sgd': 'ps_dist_table_sgd'}
for _case, _model in _PS.items():
    for _mode in ('sync', 'async', 'geo'):
        REBUILD['ps/%s_%s' % (_case, _mode)] = _model
_TABLES = {'adam_rule_sync': 'ps_ctr_adam_b', 'fleet_desc_async': 'ps_two_tables_sgd',
           'two_tables_mixed_async': 'ps_two_tables_sgd'}
for _case in ('bad_embedx_dim_async', 'bad_fea_dim_sync', 'ctr_common_async', 'ctr_common_geo',
              'd2sum_off_async', 'd2sum_sync', 'fs_client_sync', 'shared_adam_ssd_async',
              'sparse_naive_sync', 'std_adagrad_sync'):
    _TABLES[_case] = 'ps_ctr_adam'
for _case, _model in _TABLES.items():
    REBUILD['ps-tables/' + _case] = _model

_FLEET = {'mlp_sgd': ('sync', 'async', 'half_async', 'geo'),
          'mlp_adam': ('sync', 'async', 'half_async'),
          'lrdecay_momentum': ('sync', 'async', 'half_async'),
          'l2decay_clip_unsplit': ('sync', 'async'),
          'ctr_sparse_adam': ('sync', 'async', 'half_async', 'geo'),
          'large_scale_adam': ('sync', 'async', 'half_async', 'geo')}
for _case, _modes in _FLEET.items():
    for _mode in _modes:
        REBUILD['fleet/%s_%s' % (_case, _mode)] = 'fleet_' + _case

_EXP_DECAY = {'type': 'sgd', 'learning_rate': {'scheduler': 'ExponentialDecay',
                                               'args': {'learning_rate': 0.1, 'gamma': 0.9}}}
INPUT_OPTIMIZER = {'ps/lr_exp_sgd_%s' % m: _EXP_DECAY for m in ('sync', 'async', 'geo')}
INPUT_OPTIMIZER.update({   # the project's tests/corpus (families made by other generators)
    'ps-gen/ctr_adam_expdecay_sync': {'type': 'adam', 'learning_rate': {
        'scheduler': 'ExponentialDecay', 'args': {'learning_rate': 0.01, 'gamma': 0.95}}},
    'ps-gen/ctr_sgd_piecewise_sync': {'type': 'sgd', 'learning_rate': {
        'scheduler': 'PiecewiseDecay', 'args': {'boundaries': [100, 200],
                                                'values': [0.1, 0.05, 0.01]}}},
    'paddlerec-gen/fleet_deepfm_lrdecay_sync': {'type': 'adam', 'kwargs': {'lazy_mode': True},
                                                'learning_rate': {
        'scheduler': 'ExponentialDecay', 'args': {'learning_rate': 0.001, 'gamma': 0.9}}},
})
INPUT_OPTIMIZER['paddlerec-gen/fleet_deepfm_lrdecay_async'] = INPUT_OPTIMIZER[
    'paddlerec-gen/fleet_deepfm_lrdecay_sync']


def tool(name):
    return os.path.join(SHARED[0], 'tools', name)


def cases(corpus, families=None, names=None):
    """(family, case dir) of a corpus root, families in FAMILIES order, cases sorted."""
    out = []
    for fam in families or FAMILIES:
        for d in sorted(glob.glob(os.path.join(corpus, fam, '*', 'case.json'))):
            d = os.path.dirname(d)
            if not names or os.path.basename(d) in names or '%s/%s' % (fam, os.path.basename(d)) in names:
                out.append((fam, d))
    return out
