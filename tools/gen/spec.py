"""A case spec: what to drive through Paddle and how; its cluster.yaml; its roles.  No Paddle here.

A spec is a JSON object:

    {"name": "ps_ctr_adam_sync",
     "style": "classic" | "fleet" | "ps",  "mode": "sync" | "async" | "half_async" | "geo",
     "pservers": ["127.0.0.1:6174", ...],  "trainers": 2,
     "emit_trainers": "all" | [0],          which trainers' programs are written
     "model": {"builder": "<models.MODELS name>"}
           or {"input": "<dir with main.pb, startup.pb>", "optimizer": {...optimizers spec},
               "loss": "<var name>" (optional: found from the backward's first op)},
     "settings": {...}}                     style settings, below

settings (all optional):
    classic: slice_var_up, min_block_size, split_method ("round_robin" | "hash_name")
    fleet:   geo_push_nums (geo's need_push_nums, default 400 as in the shared corpus)
    ps:      geo_push_nums (k_steps in geo, default 400), adam_d2sum, table_parameters,
             fs_client_param, fleet_desc_configs
"""
import json

STYLES = ('classic', 'fleet', 'ps')
MODES = {'classic': ('sync', 'async', 'half_async'),
         'fleet': ('sync', 'async', 'half_async', 'geo'),
         'ps': ('sync', 'async', 'geo')}
SETTINGS = {'classic': ('slice_var_up', 'min_block_size', 'split_method'),
            'fleet': ('geo_push_nums',),
            'ps': ('geo_push_nums', 'adam_d2sum', 'table_parameters', 'fs_client_param',
                   'fleet_desc_configs')}
DEFAULT_PSERVERS = ['127.0.0.1:6174', '127.0.0.1:6175']
PS_TRAINER_PORT = 6274      # ps roles: trainer t's endpoint is 127.0.0.1:<6274 + t>


class SpecError(ValueError):
    pass


def check(spec):
    """Validate a spec (raises SpecError naming the field); returns it with defaults filled in."""
    s = dict(spec)
    if s.get('style') not in STYLES:
        raise SpecError('style: %r is not one of %s' % (s.get('style'), ', '.join(STYLES)))
    s.setdefault('mode', 'sync')
    if s['mode'] not in MODES[s['style']]:
        raise SpecError('mode: %r is not one of %s (style %s)' % (
            s['mode'], ', '.join(MODES[s['style']]), s['style']))
    s.setdefault('pservers', list(DEFAULT_PSERVERS))
    s.setdefault('trainers', 2)
    if not isinstance(s['trainers'], int) or s['trainers'] < 1:
        raise SpecError('trainers: %r is not an int >= 1' % (s['trainers'],))
    s.setdefault('emit_trainers', 'all')
    model = s.get('model') or {}
    if not ('builder' in model) ^ ('input' in model):
        raise SpecError('model: give exactly one of "builder" and "input"')
    if 'input' in model and 'optimizer' not in model:
        raise SpecError('model.optimizer: an input model needs the optimizer to drive with')
    settings = s.setdefault('settings', {})
    unknown = sorted(set(settings) - set(SETTINGS[s['style']]))
    if unknown:
        raise SpecError('settings: %s not known for style %s' % (', '.join(unknown), s['style']))
    return s


def trainer_ids(spec):
    if spec['emit_trainers'] == 'all':
        return list(range(spec['trainers']))
    return [int(t) for t in spec['emit_trainers']]


def pserver_role(ep):
    return 'pserver_' + ep.replace(':', '_')


def roles(spec):
    """Role names in run order: trainer 0 first (it writes the case's input programs)."""
    out = ['trainer_%d' % t for t in trainer_ids(spec)]
    if 'trainer_0' not in out:
        out.insert(0, 'trainer_0')
    return out + [pserver_role(ep) for ep in spec['pservers']]


def ps_role_env(spec, role):
    """PaddleCloudRoleMaker's environment for a ps-style role."""
    eps = ','.join(spec['pservers'])
    teps = ','.join('127.0.0.1:%d' % (PS_TRAINER_PORT + t) for t in range(spec['trainers']))
    env = {'PADDLE_PSERVERS_IP_PORT_LIST': eps, 'PADDLE_TRAINER_ENDPOINTS': teps,
           'PADDLE_TRAINERS_NUM': str(spec['trainers']), 'POD_IP': '127.0.0.1'}
    if role.startswith('trainer_'):
        t = int(role.split('_')[1])
        env.update(TRAINING_ROLE='TRAINER', PADDLE_TRAINER_ID=str(t),
                   PADDLE_PORT=str(PS_TRAINER_PORT + t))
    else:
        port = role.rsplit('_', 1)[1]
        env.update(TRAINING_ROLE='PSERVER', PADDLE_TRAINER_ID='0', PADDLE_PORT=port)
    return env


# --- cluster.yaml -----------------------------------------------------------------------------
def _scalar(v):
    if isinstance(v, bool):
        return 'true' if v else 'false'
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, float):
        text = repr(v)           # YAML 1.1 (PyYAML) reads 1e-07 as a string: write 1.0e-07
        if 'e' in text and '.' not in text.split('e')[0]:
            text = text.replace('e', '.0e', 1)
        return text
    return str(v)


def _yaml(value, indent):
    pad = '  ' * indent
    lines = []
    for k, v in value.items():
        if isinstance(v, dict):
            lines.append('%s%s:' % (pad, k))
            lines += _yaml(v, indent + 1)
        elif isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v):
            raise SpecError('%s: lists of lists or maps are not written' % k)
        elif isinstance(v, list):
            lines.append('%s%s: [%s]' % (pad, k, ', '.join(_scalar(x) for x in v)))
        else:
            lines.append('%s%s: %s' % (pad, k, _scalar(v)))
    return lines


def cluster_yaml(spec):
    """The project's cluster config for the case (README "Cluster config")."""
    emit = spec['emit_trainers']
    tid = 'all' if emit == 'all' else trainer_ids(spec)[0]
    head = ['style: %s' % spec['style'], 'pservers:']
    head += ['  - "%s"' % ep for ep in spec['pservers']]
    head += ['trainers: %d' % spec['trainers'], 'trainer_id: %s' % tid, 'mode: %s' % spec['mode']]
    top = {}
    settings = dict(spec['settings'])
    if spec['style'] == 'ps' and spec['mode'] == 'geo':
        top['geo_push_nums'] = settings.pop('geo_push_nums', 400)
    elif spec['style'] == 'fleet' and spec['mode'] == 'geo':
        top['geo_push_nums'] = settings.pop('geo_push_nums', 400)
    else:
        settings.pop('geo_push_nums', None)
    top.update(settings)
    return '\n'.join(head + _yaml(top, 0)) + '\n'
