"""Run one user model script the way its author runs it (`python <model>.py` in a folder: it
writes main.pb and startup.pb there), with neutral op_callstack paths.  Runs under Paddle's
python (build.py starts it in a clean environment):

    python save.py SCRIPT OUT_DIR SPEC.json RECORD.json

The script runs unchanged, as `__main__`, in OUT_DIR, its code compiled under the neutral path
/home/user/models/<model>/<model>.py (its source lines put in linecache under that name, so
the frames Paddle records read as they would on the author's machine).  Then, in every
op_callstack of the two programs it wrote, the frames above the script's own (this runner's)
are dropped and Paddle's site-packages prefix becomes /usr/local/lib/python3.11/site-packages/:
the bytes depend on the script and Paddle only, not on where either is installed (the form of
../shared/usermodels/widedeep/main.pb, which this reproduces byte for byte).

RECORD.json: what the script's optimizer is (class, learning rate or scheduler with its
settings, clip, regularization, lazy_mode), read from the one optimizer object the script
made (found by the garbage collector: nothing of the script is wrapped, no frame added), for build.py to compare with the model's optimizer spec (models.py).
"""
import json
import linecache
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NEUTRAL_SITE = '/usr/local/lib/python3.11/site-packages/'


def neutral_path(script):
    name = os.path.splitext(os.path.basename(script))[0]
    return '/home/user/models/%s/%s.py' % (name, name)


def _scheduler(lr):
    out = {'scheduler': type(lr).__name__}
    for k, v in sorted(vars(lr).items()):
        if k in ('last_epoch', 'last_lr', 'verbose') or k.startswith('_'):
            continue
        if hasattr(v, 'step') and hasattr(v, 'last_lr'):
            v = _scheduler(v)
        elif isinstance(v, (list, tuple)):
            v = list(v)
        out[k] = v
    return out


def describe_optimizer(opt):
    lr = opt._learning_rate
    rec = {'class': type(opt).__name__,
           'learning_rate': lr if isinstance(lr, (int, float)) else _scheduler(lr)}
    clip = opt._grad_clip
    if clip is not None:
        rec['grad_clip'] = {'type': type(clip).__name__}
        for k in ('max', 'min', 'clip_norm'):
            if hasattr(clip, k):
                rec['grad_clip'][k] = float(getattr(clip, k))
    reg = opt.regularization
    if reg is not None:
        rec['weight_decay'] = {'type': type(reg).__name__, 'coeff': float(reg._coeff)}
    for k in ('_lazy_mode', '_momentum', '_use_nesterov', '_epsilon', '_rho', '_centered',
              '_beta1', '_beta2', '_initial_accumulator_value'):
        if hasattr(opt, k):
            v = getattr(opt, k)
            rec[k.lstrip('_')] = v if isinstance(v, (bool, int, float)) else str(v)
    return rec


def neutralize(data, script_path, framework_pb2):
    """The program bytes with the runner's frames dropped and site-packages made neutral."""
    desc = framework_pb2.ProgramDesc.FromString(data)
    head = 'File "%s"' % script_path
    site = None
    for p in sys.path:
        if p.endswith('site-packages') and os.path.isdir(os.path.join(p, 'paddle')):
            site = p.rstrip('/') + '/'
    for block in desc.blocks:
        for op in block.ops:
            for attr in op.attrs:
                if attr.name != 'op_callstack':
                    continue
                lines = list(attr.strings)
                start = next((i for i, ln in enumerate(lines) if head in ln), 0)
                lines = lines[start:]
                if site:
                    lines = [ln.replace('File "' + site, 'File "' + NEUTRAL_SITE) for ln in lines]
                del attr.strings[:]
                attr.strings.extend(lines)
    return desc.SerializeToString()


def main(argv):
    script, out_dir, spec_path, record_path = [os.path.abspath(a) for a in argv]
    with open(spec_path) as f:
        spec = json.load(f)
    with open(script) as f:
        source = f.read()
    fake = neutral_path(script)
    linecache.cache[fake] = (len(source), None, source.splitlines(True), fake)
    import numpy  # noqa: F401  (before paddle, as tools/gen's roles do)
    import paddle
    os.makedirs(out_dir, exist_ok=True)
    os.chdir(out_dir)
    code = compile(source, fake, 'exec')
    exec(code, {'__name__': '__main__', '__file__': fake, '__builtins__': __builtins__})
    from paddle.base.proto import framework_pb2
    for name in ('main.pb', 'startup.pb'):
        with open(name, 'rb') as f:
            data = neutralize(f.read(), fake, framework_pb2)
        with open(name, 'wb') as f:
            f.write(data)
    import gc
    base = paddle.optimizer.Optimizer     # (Paddle itself keeps a bare one somewhere)
    used = [o for o in gc.get_objects() if isinstance(o, base) and type(o) is not base]
    if len(used) != 1:
        raise SystemExit('the script made %d optimizers (expected one): %s' % (len(used), [type(o) for o in used]))
    sys.path.insert(0, os.path.dirname(HERE))      # tools/gen: optimizers.py
    import optimizers
    mine = describe_optimizer(used[0])
    made = describe_optimizer(optimizers.make(paddle, spec))
    same = json.dumps(mine, sort_keys=True, default=str) == json.dumps(made, sort_keys=True,
                                                                        default=str)
    with open(record_path, 'w') as f:
        json.dump({'script_optimizer': mine, 'spec_optimizer': made, 'agree': same}, f,
                  indent=1, sort_keys=True, default=str)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
