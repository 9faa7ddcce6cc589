"""The ps-tables set (issue 22): ps cases with PaddleRec table_parameters and the other strategy
settings that reach the descriptors (adam_d2sum, fs_client_param, fleet_desc_configs), each in
sync, async and geo, 2 pservers, 2 trainers.  No Paddle here.

Every accessor class Paddle 2.6.2's PS registers (SparseAccessor, CtrCommonAccessor,
CtrDoubleAccessor, CtrDymfAccessor), every sparse rule (SparseNaiveSGDRule, SparseAdaGradSGDRule,
StdAdaGradSGDRule, SparseAdamSGDRule, SparseSharedAdamSGDRule), both sparse table classes
(MemorySparseTable, SSDSparseTable and its cache settings), shard_num, several tables with other
settings, a distributed (sparse_embedding) table, adam_d2sum on / off / with a dense SGD,
fs_client_param, fleet_desc_configs (DistributedStrategy's sparse_* keys), settings Paddle refuses
or ignores, and PaddleRec's own slot_dnn with its config_online.yaml table block.
CASES: name -> (model, settings, what the case shows).  A model is a registry builder, or
'zoo:<model>' (the zoo input of that PaddleRec model).
"""
import json
import os

MODES = ('sync', 'async', 'geo')
ZOO_INPUTS = ['/work/gen-out/inputs']


def adagrad(lr=0.05, g2sum=3.0, init=0.0001, bounds=(-10.0, 10.0)):
    return {'learning_rate': lr, 'initial_g2sum': g2sum, 'initial_range': init,
            'weight_bounds': list(bounds)}


def rule(name, **params):
    key = {'SparseNaiveSGDRule': 'naive', 'SparseAdaGradSGDRule': 'adagrad',
           'StdAdaGradSGDRule': 'adagrad', 'SparseAdamSGDRule': 'adam',
           'SparseSharedAdamSGDRule': 'adam'}[name]
    return {'name': name, key: params} if params else {'name': name}


CTR_PARAM = {'nonclk_coeff': 0.1, 'click_coeff': 1.0, 'base_threshold': 1.5,
             'delta_threshold': 0.25, 'delta_keep_days': 16.0, 'show_click_decay_rate': 0.98,
             'delete_threshold': 0.8, 'delete_after_unseen_days': 30.0,
             'ssd_unseenday_threshold': 1}


def accessor(cls, fea=None, embedx=None, embed_rule=None, embedx_rule=None, **extra):
    acc = {'accessor_class': cls}
    if fea is not None:
        acc['fea_dim'] = fea
    if embedx is not None:
        acc['embedx_dim'] = embedx
    acc.update(extra)
    if embed_rule is not None:
        acc['embed_sgd_param'] = embed_rule
    if embedx_rule is not None:
        acc['embedx_sgd_param'] = embedx_rule
    return acc


def one(acc, **table):
    """table_parameters for ctr1_emb / ctr1_dist's table SparseFeatFactors (16 wide)."""
    t = dict(table)
    t['accessor'] = acc
    return {'table_parameters': {'SparseFeatFactors': t}}


ADA = rule('SparseAdaGradSGDRule', **adagrad())
CASES = {
    # --- accessor classes (ctr1_emb: SparseFeatFactors 1000001 x 16, Adam dense) --------------
    'acc_sparse_adagrad': ('ctr1_emb', one(accessor(
        'SparseAccessor', 18, 15, ADA, ADA, embedx_threshold=10, ctr_accessor_param=CTR_PARAM),
        table_class='MemorySparseTable', shard_num=10),
        'SparseAccessor with its dims (width + 2, width - 1), adagrad rules, config_online.yaml\'s '
        'ctr_accessor_param'),
    'acc_ctr_common_naive': ('ctr1_emb', one(accessor(
        'CtrCommonAccessor', 16, 13, rule('SparseNaiveSGDRule', learning_rate=0.02,
                                          initial_range=0.001, weight_bounds=[-5.0, 5.0]),
        rule('SparseNaiveSGDRule', learning_rate=0.01), embedx_threshold=5,
        ctr_accessor_param={'nonclk_coeff': 0.3, 'click_coeff': 2.0})),
        'CtrCommonAccessor (dims width, width - 3), naive rules, two ctr_accessor_param values'),
    'acc_ctr_double_adagrad': ('ctr1_emb', one(accessor(
        'CtrDoubleAccessor', 16, 13, ADA, rule('SparseAdaGradSGDRule', learning_rate=0.1)),
        shard_num=20), 'CtrDoubleAccessor with adagrad rules'),
    'acc_ctr_dymf_adam': ('ctr1_emb', one(accessor(
        'CtrDymfAccessor', 16, 13,
        rule('SparseAdamSGDRule', learning_rate=0.005, initial_range=0.01, beta1_decay_rate=0.85,
             beta2_decay_rate=0.99, ada_epsilon=1e-07, weight_bounds=[-3.0, 3.0]),
        rule('SparseAdamSGDRule', weight_bounds=[-1.0, 1.0]))),
        'CtrDymfAccessor with adam rules (every adam field on embed, weight_bounds only on embedx)'),
    'acc_ctr_dymf_nodims': ('ctr1_emb', one({'accessor_class': 'CtrDymfAccessor'}),
                            'CtrDymfAccessor alone: Paddle fills dims and rules'),
    'acc_sparse_rules_only': ('ctr1_emb', one({'embed_sgd_param': rule('SparseAdaGradSGDRule'),
                                               'embedx_sgd_param': rule('StdAdaGradSGDRule')}),
                              'no accessor_class (SparseAccessor by default), rules named only'),
    # --- sparse rules (CtrCommonAccessor) ----------------------------------------------------
    'rule_std_adagrad': ('ctr1_emb', one(accessor(
        'CtrCommonAccessor', 16, 13, rule('StdAdaGradSGDRule', **adagrad(0.1, 5.0, 0.02)),
        rule('StdAdaGradSGDRule', **adagrad(0.1, 5.0, 0.02, (-20.0, 20.0))))),
        'StdAdaGradSGDRule on both parts'),
    'rule_shared_adam': ('ctr1_emb', one(accessor(
        'CtrCommonAccessor', 16, 13,
        rule('SparseSharedAdamSGDRule', learning_rate=0.003, initial_range=0.05,
             beta1_decay_rate=0.8, beta2_decay_rate=0.95, ada_epsilon=1e-06),
        rule('SparseSharedAdamSGDRule', learning_rate=0.004, weight_bounds=[-2.0, 2.0]))),
        'SparseSharedAdamSGDRule on both parts'),
    'rule_adam_defaults': ('ctr1_emb', one(accessor(
        'CtrCommonAccessor', 16, 13, rule('SparseAdamSGDRule'), rule('SparseAdamSGDRule'))),
        'SparseAdamSGDRule named only: Paddle fills learning_rate from the dense optimizer and '
        'initial_range from the table initializer'),
    'rule_naive_defaults': ('ctr1_emb', one(accessor(
        'CtrCommonAccessor', 16, 13, rule('SparseNaiveSGDRule'), rule('SparseNaiveSGDRule'))),
        'SparseNaiveSGDRule named only'),
    'rule_mixed': ('ctr1_emb', one(accessor(
        'CtrCommonAccessor', 16, 13, rule('SparseNaiveSGDRule', learning_rate=0.1), ADA)),
        'embed naive, embedx adagrad'),
    # --- table classes, shards, save params -------------------------------------------------
    'table_ssd_cache': ('ctr1_emb', one(accessor('CtrCommonAccessor', 16, 13),
                                        table_class='SSDSparseTable', shard_num=16,
                                        enable_sparse_table_cache=True,
                                        sparse_table_cache_rate=0.001,
                                        sparse_table_cache_file_num=4, shard_merge_rate=0.5,
                                        enable_revert=False),
                        'SSDSparseTable with the cache settings (cache_file_num 4 > 2 pservers)'),
    'table_shard1': ('ctr1_emb', one(accessor('SparseAccessor', 18, 15), shard_num=1,
                                     table_class='MemorySparseTable'), 'shard_num 1'),
    'table_save_params': ('ctr1_emb', one(accessor(
        'CtrCommonAccessor', 16, 13, table_accessor_save_param={
            'num': 3, 'param': [0, 1, 2], 'converter': 'gzip -c', 'deconverter': 'gzip -dc'}),
        shard_num=10), 'table_accessor_save_param with 3 entries'),
    # --- several tables (ctr2_emb: user_emb 16 wide, item_emb 8 wide) -------------------------
    'two_tables_diff': ('ctr2_emb', {'table_parameters': {
        'user_emb': {'shard_num': 20, 'accessor': accessor(
            'CtrCommonAccessor', 16, 13, ADA, ADA, embedx_threshold=4,
            ctr_accessor_param={'base_threshold': 2.0, 'delta_threshold': 0.5})},
        'item_emb': {'shard_num': 5, 'table_class': 'SSDSparseTable', 'accessor': accessor(
            'SparseAccessor', 10, 7, rule('SparseNaiveSGDRule', learning_rate=0.5),
            rule('SparseNaiveSGDRule', learning_rate=0.5))}}},
        'two tables, each its own class, accessor, rules and shard_num'),
    'two_tables_one_set': ('ctr2_emb', {'table_parameters': {
        'item_emb': {'shard_num': 7, 'accessor': accessor('CtrDoubleAccessor', 8, 5)}}},
        'two tables, only item_emb configured'),
    'dist_table': ('ctr1_dist', one(accessor('CtrCommonAccessor', 16, 13, ADA, ADA), shard_num=10),
                   'table_parameters on a paddle.static.nn.sparse_embedding (is_distributed) table'),
    # --- dense table, fs client ---------------------------------------------------------------
    'd2sum_on': ('ctr1_emb', {'adam_d2sum': True}, 'adam_d2sum on, dense Adam'),
    'd2sum_off': ('ctr1_emb', {'adam_d2sum': False}, 'adam_d2sum off written out, dense Adam'),
    'd2sum_sgd': ('ps_two_tables_sgd', {'adam_d2sum': True}, 'adam_d2sum on with a dense SGD'),
    'fs_client_full': ('ctr1_emb', {'fs_client_param': {
        'uri': 'afs://rec.example.com:9902', 'user': 'rec_user', 'passwd': 'rec_passwd',
        'hadoop_bin': '/opt/hadoop/bin/hadoop'}}, 'fs_client_param with every field'),
    'fs_client_no_uri': ('ctr1_emb', {'fs_client_param': {'user': 'rec_user',
                                                          'passwd': 'rec_passwd'}},
                         'fs_client_param without uri: PaddleRec does not set it'),
    # --- fleet_desc_configs ------------------------------------------------------------------
    'fleet_desc_ctr_double': ('ctr2_emb', {'fleet_desc_configs': {
        'user_emb': {'sparse_accessor_class': 'DownpourCtrDoubleAccessor',
                     'sparse_optimizer': 'adagrad', 'sparse_learning_rate': 0.1,
                     'sparse_shard_num': 20, 'sparse_embedx_dim': 13},
        'item_emb': {'sparse_accessor_class': 'DownpourCtrDymfAccessor',
                     'sparse_optimizer': 'shared_adam', 'sparse_embedx_dim': 5,
                     'sparse_beta1_decay_rate': 0.85}}},
        'fleet_desc_configs: DownpourCtrDoubleAccessor (adagrad), DownpourCtrDymfAccessor '
        '(shared_adam)'),
    'fleet_desc_unit': ('ctr2_emb', {'fleet_desc_configs': {
        'item_emb': {'sparse_accessor_class': 'DownpourUnitAccessor',
                     'sparse_table_class': 'DownpourSparseSSDTable', 'sparse_embedx_dim': 5,
                     'embed_sparse_optimizer': 'naive', 'embed_sparse_learning_rate': 0.2,
                     'embedx_sparse_optimizer': 'std_adagrad',
                     'embedx_sparse_initial_g2sum': 5.0, 'sparse_cache_file_num': 2}}},
        'fleet_desc_configs: DownpourUnitAccessor on an SSD table, naive / std_adagrad'),
    'fleet_desc_adagrad_v2': ('ctr1_emb', {'fleet_desc_configs': {
        'SparseFeatFactors': {'sparse_optimizer': 'adagrad_v2', 'sparse_embedx_dim': 13}}},
        'fleet_desc_configs: sparse_optimizer adagrad_v2 (SparseAdaGradV2SGDRule)'),
    # --- refused or ignored ----------------------------------------------------------------------
    'bad_fea_dim_ctr': ('ctr1_emb', one(accessor('CtrCommonAccessor', 18, 13)),
                        'CtrCommonAccessor with SparseAccessor\'s fea_dim (width + 2)'),
    'bad_embedx_dim_sparse': ('ctr1_emb', one(accessor('SparseAccessor', 18, 13)),
                              'SparseAccessor with CtrCommonAccessor\'s embedx_dim (width - 3)'),
    'bad_value_type': ('ctr1_emb', one(accessor('SparseAccessor', 18, 15, rule(
        'SparseAdaGradSGDRule', learning_rate='fast'))), 'a string where a float goes'),
    'fleet_desc_bad_key': ('ctr1_emb', {'fleet_desc_configs': {
        'SparseFeatFactors': {'sparse_learning_rate': 0.1, 'sparse_momentum': 0.9}}},
        'fleet_desc_configs with a key DistributedStrategy does not support'),
    'fleet_desc_bad_accessor': ('ctr1_emb', {'fleet_desc_configs': {
        'SparseFeatFactors': {'sparse_accessor_class': 'CtrCommonAccessor'}}},
        'fleet_desc_configs with a table_parameters accessor name'),
    'unknown_key': ('ctr1_emb', one(accessor('SparseAccessor', 18, 15, embedx_treshold=4)),
                    'a misspelt accessor key (embedx_treshold): silently ignored'),
    'unknown_table': ('ctr1_emb', {'table_parameters': {'embedding': {
        'shard_num': 10, 'accessor': accessor('SparseAccessor', 11, 8)}}},
        'table_parameters for a table the program does not have (slot_dnn\'s `embedding`)'),
    # --- PaddleRec's own -----------------------------------------------------------------------
    'slot_dnn_online': ('zoo:slot_dnn', {'adam_d2sum': True, 'table_parameters': {
        'embedding': {'table_class': 'MemorySparseTable', 'shard_num': 10, 'accessor': accessor(
            'SparseAccessor', 11, 8, ADA, ADA, embedx_threshold=10,
            ctr_accessor_param=CTR_PARAM)}}},
        'PaddleRec models/rank/slot_dnn (zoo input: `embedding` 1000000 x 9, is_distributed, '
        'looked up by 408 slots) with config_online.yaml\'s table block verbatim and PaddleRec\'s '
        'adam_d2sum default (true)'),
}

PADDLEREC = {'repo': 'https://github.com/PaddlePaddle/PaddleRec',
             'commit': '656326adf3c4117c11ec0eff5e8f61acd8191c2a',
             'files': {'tools/utils/static_ps/program_helper.py':
                       '4d2c11e7f3a121224d1bd8bef04257036ff13eb9',
                       'models/rank/slot_dnn/config_online.yaml':
                       'e4c60ce42f14bb605c08066bd9cc34b48e8a5d28'},
             'how': 'the cluster.yaml keys are what a PaddleRec yaml says (table_parameters top '
                    'level, adam_d2sum = hyper_parameters.adam_d2sum, fs_client_param = '
                    'runner.fs_client); tables.py applies them as program_helper.get_strategy '
                    'does; fleet_desc_configs (not PaddleRec) is assigned as is'}


def model_spec(model):
    if not model.startswith('zoo:'):
        return {'builder': model}
    d = os.path.join(ZOO_INPUTS[0], model[4:])
    with open(os.path.join(d, 'model.json')) as f:
        meta = json.load(f)
    opt = {k: v for k, v in meta['optimizer'].items() if k in ('class', 'args')}
    return {'input': d, 'optimizer': opt, 'loss': meta['loss']}


def spec(name, mode, settings=True):
    model, values, _ = CASES[name]
    return {'name': '%s_%s' % (name, mode), 'style': 'ps', 'mode': mode,
            'pservers': ['127.0.0.1:6174', '127.0.0.1:6175'], 'trainers': 2,
            'emit_trainers': 'all', 'model': model_spec(model),
            'settings': dict(values) if settings else {}}


def bare_key(name, mode):
    return '%s_%s' % (CASES[name][0].replace(':', '-'), mode)


def cases():
    out = []
    for name, (model, _, what) in CASES.items():
        for mode in MODES:
            info = {'description': '%s: %s' % (model, what), 'issue': 22, 'paddlerec': PADDLEREC}
            out.append(('%s_%s' % (name, mode), spec(name, mode), info))
    return out
