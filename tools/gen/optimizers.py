"""Optimizer specs (JSON) -> paddle.optimizer objects.  Runs inside a role process.

    {"type": "adam", "learning_rate": 0.001, "kwargs": {"lazy_mode": true},
     "grad_clip": {"type": "ClipGradByNorm", "clip_norm": 1.0},
     "weight_decay": {"type": "L2Decay", "coeff": 0.0001}}

Or the zoo inputs' form {"class": "paddle.optimizer.Adam", "args": {...}} (model.json).
learning_rate is a number or a scheduler {"scheduler": "ExponentialDecay",
"args": {"learning_rate": 0.1, "gamma": 0.9}} (any paddle.optimizer.lr class; an arg may be
such a scheduler itself: LinearWarmup over CosineAnnealingDecay).  type is a
paddle.optimizer class name, case-insensitive ("sgd", "adam", "adagrad", "momentum", "rmsprop",
"adamw", "lamb", "adamax", "adadelta").  grad_clip: ClipGradByValue (max, min), ClipGradByNorm
(clip_norm), ClipGradByGlobalNorm (clip_norm).  weight_decay: a float or L2Decay / L1Decay (coeff).
"""

NAMES = {'sgd': 'SGD', 'adam': 'Adam', 'adagrad': 'Adagrad', 'momentum': 'Momentum',
         'rmsprop': 'RMSProp', 'adamw': 'AdamW', 'lamb': 'Lamb', 'adamax': 'Adamax',
         'adadelta': 'Adadelta'}


def learning_rate(paddle, lr):
    """A number, or a scheduler; a scheduler's args may hold a scheduler (LinearWarmup's
    learning_rate)."""
    if isinstance(lr, dict):
        cls = getattr(paddle.optimizer.lr, lr['scheduler'])
        return cls(**{k: learning_rate(paddle, v) for k, v in lr.get('args', {}).items()})
    return lr


def grad_clip(paddle, clip):
    if clip is None:
        return None
    kwargs = {k: v for k, v in clip.items() if k != 'type'}
    return getattr(paddle.nn, clip['type'])(**kwargs)


def weight_decay(paddle, wd):
    if wd is None or isinstance(wd, (int, float)):
        return wd
    return getattr(paddle.regularizer, wd['type'])(coeff=wd.get('coeff', 0.0))


def _resolve(paddle, dotted):
    obj = paddle
    for part in dotted.split('.')[1:]:
        obj = getattr(obj, part)
    return obj


def _from_class_form(paddle, spec):
    """{"class": "paddle.optimizer.Adam", "args": {...}} (the zoo inputs' model.json form); an
    args.learning_rate may itself be {"class": "paddle.optimizer.lr.X", "args": {...}}."""
    args = dict(spec.get('args', {}))
    lr = args.get('learning_rate')
    if isinstance(lr, dict):
        args['learning_rate'] = _resolve(paddle, lr['class'])(**lr.get('args', {}))
    return _resolve(paddle, spec['class'])(**args)


def make(paddle, spec):
    """The optimizer object a spec describes."""
    if 'class' in spec:
        return _from_class_form(paddle, spec)
    name = NAMES.get(spec['type'].lower(), spec['type'])
    cls = getattr(paddle.optimizer, name)
    kwargs = dict(spec.get('kwargs', {}))
    kwargs['learning_rate'] = learning_rate(paddle, spec.get('learning_rate', 0.001))
    if spec.get('grad_clip'):
        kwargs['grad_clip'] = grad_clip(paddle, spec['grad_clip'])
    if spec.get('weight_decay') is not None:
        kwargs['weight_decay'] = weight_decay(paddle, spec['weight_decay'])
    return cls(**kwargs)


def describe(spec):
    """A short human text of an optimizer spec (case.json)."""
    if 'class' in spec:
        args = spec.get('args', {})
        return '%s(%s)' % (spec['class'], ', '.join('%s=%s' % (k, _arg(v))
                                                     for k, v in sorted(args.items())))
    parts = ['learning_rate=%s' % _lr_text(spec.get('learning_rate', 0.001))]
    parts += ['%s=%r' % kv for kv in sorted(spec.get('kwargs', {}).items())]
    for key in ('grad_clip', 'weight_decay'):
        v = spec.get(key)
        if isinstance(v, dict):
            args = ', '.join('%s=%r' % kv for kv in sorted(v.items()) if kv[0] != 'type')
            parts.append('%s=%s(%s)' % (key, v['type'], args))
        elif v is not None:
            parts.append('%s=%r' % (key, v))
    return '%s(%s)' % (NAMES.get(spec['type'].lower(), spec['type']), ', '.join(parts))


def _lr_text(lr):
    if isinstance(lr, dict):
        return '%s(%s)' % (lr['scheduler'], ', '.join(
            '%s=%s' % (k, _lr_text(v)) for k, v in sorted(lr.get('args', {}).items())))
    return repr(lr)


def _arg(v):
    if isinstance(v, dict) and 'class' in v:
        return '%s(%s)' % (v['class'], ', '.join('%s=%r' % kv for kv in sorted(v.get('args', {}).items())))
    return repr(v)
