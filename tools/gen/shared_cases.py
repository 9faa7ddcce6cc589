"""The shared corpus's cases as the generator rebuilds them: which registered builder makes each
case's model, and the optimizer an input-mode run drives with where it matters (an LR scheduler:
the ps and fleet pipelines read Program.lr_scheduler).  No Paddle here."""
import glob
import os

SHARED = ['/work/shared']
FAMILIES = ('classic', 'paddlerec-classic', 'fleet', 'paddlerec-fleet', 'ps', 'ps-tables')

REBUILD = {
    'classic/basic': 'suite_basic',
}

INPUT_OPTIMIZER = {}


def tool(name):
    return os.path.join(SHARED[0], 'tools', name)


def cases(shared, families=None, names=None):
    """(family, case dir) of the shared corpus, families in FAMILIES order, cases sorted."""
    out = []
    for fam in families or FAMILIES:
        for d in sorted(glob.glob(os.path.join(shared, 'corpus', fam, '*', 'case.json'))):
            d = os.path.dirname(d)
            if not names or os.path.basename(d) in names or '%s/%s' % (fam, os.path.basename(d)) in names:
                out.append((fam, d))
    return out
