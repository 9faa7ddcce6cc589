"""The model registry: synthetic models, each a builder that makes the layers of a training
program (inside the caller's program_guard + unique_name.guard) and returns (loss, optimizer),
the optimizer not yet minimized.  Runs inside a role process.

    models.build(paddle, name) -> (loss, optimizer)
    models.MODELS[name] -> Entry(builder, description, family)

The builders live in model_*.py by family and register themselves here when imported:
model_suite.py (the classic transpiler suite nets of the shared corpus), model_nets.py (the
fleet and ps nets of the shared corpus), model_ctr.py (the CTR nets of the clip and ps-tables
sets), model_parity.py (the nets of the parity set), model_lod.py (the LoD nets of the lod set).
"""
import collections
import importlib

Entry = collections.namedtuple('Entry', 'builder description family')
MODELS = {}
MODULES = ('model_suite', 'model_nets', 'model_ctr', 'model_parity', 'model_lod')


def register(name, description, family):
    def deco(fn):
        if name in MODELS:
            raise ValueError('model %r registered twice' % name)
        MODELS[name] = Entry(fn, description, family)
        return fn
    return deco


def load_all():
    for m in MODULES:
        importlib.import_module(m)
    return MODELS


def get(name):
    load_all()
    if name not in MODELS:
        raise KeyError('unknown model %r (known: %s)' % (name, ', '.join(sorted(MODELS))))
    return MODELS[name]


def build(paddle, name):
    """(loss, optimizer) of a registered model."""
    return get(name).builder(paddle)
