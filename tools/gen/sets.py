"""The case sets the generator makes: (case name, spec, case.json info) triples.  No Paddle here.

    zoo        every PaddleRec model of the zoo inputs (INPUTS/<model>/main.pb, startup.pb,
               model.json) x classic sync/async, fleet sync/async/half_async/geo, ps
               sync/async/geo; 2 pservers, 2 trainers                  -> <style>_<model>_<mode>
    clip       the CTR nets of model_ctr.py x the clip / L2 regimes x every mode of every style
                                                                       -> <style>_<net>_<regime>_<mode>
    ps-tables  ps cases with PaddleRec table_parameters and the other table settings (ps_tables.py)
    parity     the nets of model_parity.py in the styles and modes that show them (issue 45)
                                                          -> <style>_<net>[_<n>ps][<n>t]_<mode>
    lod        the LoD nets of model_lod.py x every mode of every style (issue 47)
                                                                       -> <style>_<net>_<mode>
    usermodels every user model of usermodels/ (INPUTS/<model>/: main.pb, startup.pb, model.json,
               made by usermodels/build.py) x the modes of zoo; 2 pservers, 2 trainers
                                                                       -> <model>_<style>_<mode>
"""
import json
import os

import ps_tables

STYLE_MODES = (('classic', ('sync', 'async', 'half_async')),
               ('fleet', ('sync', 'async', 'half_async', 'geo')),
               ('ps', ('sync', 'async', 'geo')))
ZOO_MODES = (('classic', ('sync', 'async')),
             ('fleet', ('sync', 'async', 'half_async', 'geo')),
             ('ps', ('sync', 'async', 'geo')))


def _base(style, mode):
    return {'style': style, 'mode': mode, 'pservers': ['127.0.0.1:6174', '127.0.0.1:6175'],
            'trainers': 2, 'emit_trainers': 'all', 'settings': {}}


# --- zoo -----------------------------------------------------------------------------------
def zoo_models(inputs):
    """The zoo's models, smallest main.pb first (the biggest take Paddle minutes a role)."""
    out = []
    for name in sorted(os.listdir(inputs)):
        d = os.path.join(inputs, name)
        if all(os.path.isfile(os.path.join(d, f)) for f in ('main.pb', 'startup.pb', 'model.json')):
            out.append((os.path.getsize(os.path.join(d, 'main.pb')), name))
    return [name for _, name in sorted(out)]


def _zoo_info(meta):
    src = meta.get('paddlerec', {})
    info = {'description': 'PaddleRec %s (%s), driven from the zoo input program' % (
        meta.get('model'), meta.get('path', '?')),
        'source': {'repo': src.get('repo'), 'commit': src.get('commit'),
                   'files': src.get('files'), 'config_file': meta.get('config_file'),
                   'config_overrides': meta.get('config_overrides', {}),
                   'program': meta.get('program'),
                   'input': 'gen-out/inputs/%s (model.json, main.pb sha256 %s)' % (
                       meta.get('model'), meta.get('main', {}).get('sha256', '?'))},
        'optimizer': meta.get('optimizer'), 'loss': meta.get('loss')}
    return info


def zoo(inputs, models=None):
    cases = []
    for model in zoo_models(inputs):
        if models and model not in models:
            continue
        d = os.path.join(inputs, model)
        with open(os.path.join(d, 'model.json')) as f:
            meta = json.load(f)
        opt = {k: v for k, v in meta['optimizer'].items() if k in ('class', 'args')}
        for style, modes in ZOO_MODES:
            for mode in modes:
                spec = _base(style, mode)
                spec['name'] = '%s_%s_%s' % (style, model, mode)
                spec['model'] = {'input': d, 'optimizer': opt, 'loss': meta['loss']}
                cases.append((spec['name'], spec, _zoo_info(meta)))
    return cases


# --- clip ------------------------------------------------------------------------------------
CLIP_NETS = ('ctr1_emb', 'ctr1_dist', 'ctr2_emb', 'ctr2_mixed', 'ctr2_dist')
REGIMES = {
    'clipvalue': {'type': 'adam', 'learning_rate': 0.001,
                  'grad_clip': {'type': 'ClipGradByValue', 'max': 1.0, 'min': -1.0}},
    'clipnorm': {'type': 'adam', 'learning_rate': 0.001,
                 'grad_clip': {'type': 'ClipGradByNorm', 'clip_norm': 1.0}},
    'clipglobal': {'type': 'adam', 'learning_rate': 0.001,
                   'grad_clip': {'type': 'ClipGradByGlobalNorm', 'clip_norm': 1.0}},
    'l2': {'type': 'adam', 'learning_rate': 0.001,
           'weight_decay': {'type': 'L2Decay', 'coeff': 0.0001}},
}


def clip():
    import models  # the registry's descriptions (imports no Paddle)
    models.load_all()
    cases = []
    for net in CLIP_NETS:
        for regime, opt in REGIMES.items():
            for style, modes in STYLE_MODES:
                for mode in modes:
                    spec = _base(style, mode)
                    spec['name'] = '%s_%s_%s_%s' % (style, net, regime, mode)
                    spec['model'] = {'builder': net, 'optimizer': opt}
                    info = {'description': '%s; trained with %s' % (
                        models.MODELS[net].description, regime_text(regime)),
                        'issue': 28}
                    cases.append((spec['name'], spec, info))
    return cases


def regime_text(regime):
    import optimizers
    return optimizers.describe(REGIMES[regime])


def tables():
    return ps_tables.cases()


# --- parity (issue 45) -------------------------------------------------------------------------
THREE_PSERVERS = ['127.0.0.1:6174', '127.0.0.1:6175', '127.0.0.1:6176']
# (net, ((style, modes), ...), pservers or None for the default two[, trainers (default 2)])
PARITY = (
    # an LR scheduler with per-parameter learning rates (and a constant rate for contrast)
    ('ctr_paramlr_sched', (('classic', ('sync',)), ('fleet', ('sync',)), ('ps', ('async',))),
     None),
    ('ctr_paramlr_adam_sched', (('ps', ('sync',)),), None),
    ('bow_paramlr_sched', (('fleet', ('async',)), ('ps', ('sync',))), None),
    ('bow_paramlr_const', (('fleet', ('sync',)),), None),
    # tables and fc weights initialized from values
    ('ctr_assign_table', (('classic', ('async',)), ('fleet', ('sync', 'geo')), ('ps', ('sync',))),
     None),
    ('mlp_assign_fc', (('classic', ('sync',)), ('fleet', ('sync',))), None),
    # a table with fewer rows than pservers: a gradient block of no rows
    ('graph_two_dist', (('classic', ('sync',)), ('fleet', ('sync',))), THREE_PSERVERS),
    ('graph_two_dist', (('fleet', ('sync',)),), THREE_PSERVERS, 1),
    # distributed tables looked up with LoD ids: Paddle's DistributeTranspiler raises
    ('bow_dist', (('classic', ('sync', 'half_async')), ('fleet', ('sync',))), None),
    ('bow_fluid_dist', (('classic', ('async',)),), None),
)


def parity():
    import models
    models.load_all()
    cases = []
    for net, styles, pservers, *trainers in PARITY:
        for style, modes in styles:
            for mode in modes:
                spec = _base(style, mode)
                tag = net if pservers is None else '%s_%dps' % (net, len(pservers))
                tag += '%dt' % trainers[0] if trainers else ''
                spec['name'] = '%s_%s_%s' % (style, tag, mode)
                spec['model'] = {'builder': net}
                if pservers is not None:
                    spec['pservers'] = list(pservers)
                if trainers:
                    spec['trainers'] = trainers[0]
                info = {'description': models.MODELS[net].description, 'issue': 45}
                cases.append((spec['name'], spec, info))
    return cases


# --- lod (issue 47) ---------------------------------------------------------------------------
LOD_NETS = ('lod_ctr', 'lod_ctr_dist', 'simnet_dense', 'textcls', 'sage', 'sage_att')


def lod():
    """The LoD nets (model_lod.py) through every mode of every style, 2 pservers, 2 trainers."""
    import models
    models.load_all()
    cases = []
    for net in LOD_NETS:
        for style, modes in STYLE_MODES:
            for mode in modes:
                spec = _base(style, mode)
                spec['name'] = '%s_%s_%s' % (style, net, mode)
                spec['model'] = {'builder': net}
                info = {'description': models.MODELS[net].description, 'issue': 47}
                cases.append((spec['name'], spec, info))
    return cases


# --- usermodels --------------------------------------------------------------------------------
USERMODELS_INPUTS = '/work/gen-out/usermodels'


def usermodels(inputs=None):
    """The user models (tools/gen/usermodels: scripts written as recommendation engineers write
    them, saved after a plain minimize) through every mode of every style."""
    inputs = inputs or USERMODELS_INPUTS
    cases = []
    for model in sorted(os.listdir(inputs)):
        d = os.path.join(inputs, model)
        if not os.path.isfile(os.path.join(d, 'model.json')):
            continue
        with open(os.path.join(d, 'model.json')) as f:
            meta = json.load(f)
        info = {'description': 'user model %s (%s): %s' % (model, meta['script'], meta['mixes']),
                'source': {'script': meta['script'], 'main_sha256': meta['main']['sha256'],
                           'startup_sha256': meta['startup']['sha256']},
                'paddle_single_process': meta['paddle_single_process'], 'issue': 41}
        for style, modes in ZOO_MODES:
            for mode in modes:
                spec = _base(style, mode)
                spec['name'] = '%s_%s_%s' % (model, style, mode)
                spec['model'] = {'input': d, 'optimizer': meta['optimizer']}
                cases.append((spec['name'], spec, info))
    return cases


SETS = {'zoo': zoo, 'clip': clip, 'ps-tables': tables, 'usermodels': usermodels,
        'parity': parity, 'lod': lod}


def make(name, inputs=None):
    """The (case name, spec, info) triples of a set; `inputs` for zoo and usermodels."""
    if name == 'zoo':
        return zoo(inputs or '/work/gen-out/inputs')
    if name == 'usermodels':
        return usermodels(inputs)
    return SETS[name]()
