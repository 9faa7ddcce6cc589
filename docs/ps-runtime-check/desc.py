"""The descriptors of a check scenario: one MemorySparseTable (SparseAccessor, embedx_dim 2,
initial_range 0 so that Paddle's clock-seeded draws are all 0), one async dense adam table of
12 values, a barrier table; the scenario names the rules and embedx_threshold."""
ADAM = ('adam { learning_rate: 0.1 initial_range: 0.0 beta1_decay_rate: 0.5 '
        'beta2_decay_rate: 0.75 ada_epsilon: 1e-08 weight_bounds: -10.0 weight_bounds: 10.0 }')
ADAGRAD = ('adagrad { learning_rate: 0.1 initial_g2sum: 3 initial_range: 0.0 '
           'weight_bounds: -10.0 weight_bounds: 10.0 }')
RULES = {'SparseAdamSGDRule': ADAM, 'SparseSharedAdamSGDRule': ADAM,
         'SparseAdaGradSGDRule': ADAGRAD, 'StdAdaGradSGDRule': ADAGRAD,
         'SparseNaiveSGDRule': ('naive { learning_rate: 0.1 initial_range: 0.0 '
                                'weight_bounds: -0.25 weight_bounds: 0.25 }')}
TABLES = '''
downpour_table_param { table_id: 0 table_class: "MemorySparseTable" shard_num: 10
  accessor { accessor_class: "SparseAccessor" fea_dim: 5 embedx_dim: 2 embedx_threshold: %d
    ctr_accessor_param { nonclk_coeff: 0.1 click_coeff: 1.0 base_threshold: 0 delta_threshold: 0
      delta_keep_days: 16 show_click_decay_rate: 1 delete_threshold: 0 delete_after_unseen_days: 30
      ssd_unseenday_threshold: 1 }
    embed_sgd_param { name: "%s" %s } embedx_sgd_param { name: "%s" %s } }
  common { name: "adam" table_name: "emb" trainer_num: 1 sync: false }
  type: PS_SPARSE_TABLE }
downpour_table_param { table_id: 1 table_class: "MemoryDenseTable" shard_num: 256
  accessor { accessor_class: "CommMergeAccessor" fea_dim: 12 embedx_dim: 1 }
  common { name: "adam" table_name: "MergedDense" params: "Param" params: "Moment1" params: "Moment2"
    params: "Beta1Pow" params: "Beta2Pow" params: "LearningRate" dims: 12 dims: 12 dims: 12 dims: 1
    dims: 1 dims: 1 initializers: "fill_constant&0.0" initializers: "fill_constant&0.0"
    initializers: "fill_constant&0.0" initializers: "fill_constant&0.9"
    initializers: "fill_constant&0.999" initializers: "fill_constant&0.1" trainer_num: 1 sync: false }
  type: PS_DENSE_TABLE }
downpour_table_param { table_id: 2 table_class: "BarrierTable" shard_num: 256
  accessor { accessor_class: "CommMergeAccessor" fea_dim: 0 embedx_dim: 0 }
  common { name: "" table_name: "barrier_table" trainer_num: 1 sync: false }
  type: PS_OTHER_TABLE }
'''
SERVICE = ('service_param { server_class: "BrpcPsServer" client_class: "BrpcPsClient" '
           'service_class: "BrpcPsService" start_server_port: 0 server_thread_num: 12 }')


def tables(sc):
    e, x = sc['embed_rule'], sc['embedx_rule']
    return TABLES % (sc['embedx_threshold'], e, RULES[e], x, RULES[x])


def server_text(sc):
    return 'server_param { downpour_server_param { %s %s } }' % (tables(sc), SERVICE)


def worker_text(sc):
    return 'worker_param { downpour_worker_param { %s } } %s' % (tables(sc), server_text(sc))
