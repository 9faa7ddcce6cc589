"""ps-style table settings -> fleet.DistributedStrategy, the way PaddleRec's static ps trainer
(tools/utils/static_ps/program_helper.py get_strategy, at PaddleRec 656326ad) sets them from its
yaml config.  Runs inside a role process.

The settings are the cluster.yaml keys, named as a PaddleRec yaml names them:
  table_parameters  (top level, as in models/rank/slot_dnn/config_online.yaml): flattened into
                    dotted keys "table_parameters.<table>.<a>.<b>" (YamlHelper's flattening: maps
                    nest, every other value is a leaf) and grouped by table into
                    strategy.sparse_table_configs = {table: {dotted key: value}};
  adam_d2sum        (PaddleRec: hyper_parameters.adam_d2sum) -> strategy.adam_d2sum;
  fs_client_param   (PaddleRec: runner.fs_client) -> strategy.fs_client_param = {uri, user,
                    passwd, hadoop_bin}, set only when uri is given (user / passwd default "",
                    hadoop_bin "hadoop");
  fleet_desc_configs (not PaddleRec) -> strategy.fleet_desc_configs, as given.
Unlike PaddleRec (which always assigns adam_d2sum, default True, and sparse_table_configs), a key
the case does not set is not assigned: the case shows Paddle's own defaults.
"""


def flatten(value, prefix):
    """{dotted key: leaf} of a nested mapping, in its order."""
    out = {}
    for k, v in value.items():
        key = '%s.%s' % (prefix, k)
        if isinstance(v, dict):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def sparse_table_configs(table_parameters):
    configs = {}
    for key, v in flatten(table_parameters, 'table_parameters').items():
        configs.setdefault(key.split('.')[1], {})[key] = v
    return configs


def fs_client(param):
    if param.get('uri') is None:
        return None
    return {'uri': param.get('uri', ''), 'user': param.get('user', ''),
            'passwd': param.get('passwd', ''), 'hadoop_bin': param.get('hadoop_bin', 'hadoop')}


def apply(strategy, settings):
    """Assign the settings to the strategy in PaddleRec's order; returns what was assigned."""
    assigned = {}
    if 'fs_client_param' in settings:
        fs = fs_client(settings['fs_client_param'])
        if fs is not None:
            strategy.fs_client_param = fs
            assigned['fs_client_param'] = fs
    if 'adam_d2sum' in settings:
        strategy.adam_d2sum = bool(settings['adam_d2sum'])
        assigned['adam_d2sum'] = bool(settings['adam_d2sum'])
    if 'table_parameters' in settings:
        configs = sparse_table_configs(settings['table_parameters'])
        strategy.sparse_table_configs = configs
        assigned['sparse_table_configs'] = configs
    if 'fleet_desc_configs' in settings:
        strategy.fleet_desc_configs = settings['fleet_desc_configs']
        assigned['fleet_desc_configs'] = settings['fleet_desc_configs']
    return assigned


def strategy_after(strategy):
    """The strategy's table fields after the assignment (protobuf text)."""
    from google.protobuf import text_format
    proto = strategy.strategy
    return {'adam_d2sum': proto.adam_d2sum,
            'fs_client_param': text_format.MessageToString(proto.fs_client_param),
            'downpour_table_param': [text_format.MessageToString(t)
                                     for t in proto.downpour_table_param]}
