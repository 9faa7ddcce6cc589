"""Train a saved user model for a few steps in Paddle 2.6.2's own single-process executor (CPU),
as its author would try it before going distributed.  Runs under Paddle's python:

    python run_original.py MODEL_DIR STEPS RESULT.json

MODEL_DIR holds main.pb and startup.pb.  Feeds: every data var of main, batch 8 (its -1 dims),
int64 feeds drawn from {0, 1} (valid ids of every table and labels of every loss here), float
feeds uniform in [0, 1), numpy seed 0.  RESULT.json: {"status": "trains" | "fails", "losses":
[...] | "error": first line of Paddle's message, "op": the failing op when Paddle names it}.
"""
import json
import os
import re
import sys


def first_line(exc):
    """Paddle's reason: the `XxxError: ...` line of its message (else the first line)."""
    text = str(exc)
    m = re.findall(r"^\s*(\w+(?:Error|Exception): .*)$", text, re.M)
    if m:
        return m[-1].strip()[:300]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


def main(argv):
    model_dir, steps, out = argv[0], int(argv[1]), argv[2]
    import numpy as np
    import paddle
    paddle.enable_static()
    with open(model_dir + '/main.pb', 'rb') as f:
        main_prog = paddle.static.Program.parse_from_string(f.read())
    with open(model_dir + '/startup.pb', 'rb') as f:
        startup = paddle.static.Program.parse_from_string(f.read())
    block = main_prog.global_block()
    loss = None
    for op in block.ops:
        if op.type == 'fill_constant' and int(op.attr('op_role')) == 257:
            loss = op.output('Out')[0][:-len('@GRAD')]
            break
    feeds = [v for v in block.vars.values() if v.desc.need_check_feed()]   # paddle.static.data's
    rng = np.random.RandomState(0)
    exe = paddle.static.Executor(paddle.CPUPlace())
    result = {'status': 'trains', 'losses': []}
    try:
        exe.run(startup)
        for _ in range(steps):
            feed = {}
            for v in feeds:
                shape = [8 if d < 0 else d for d in v.shape]
                if v.dtype == paddle.int64:
                    feed[v.name] = rng.randint(0, 2, size=shape).astype('int64')
                else:
                    feed[v.name] = rng.uniform(0, 1, size=shape).astype('float32')
            out_loss, = exe.run(main_prog, feed=feed, fetch_list=[loss])
            result['losses'].append(float(np.asarray(out_loss).reshape(-1)[0]))
    except Exception as exc:  # noqa: BLE001  (Paddle failing is the outcome recorded)
        result = {'status': 'fails', 'error': first_line(exc)}
        m = re.search(r"\[operator < (\w+) > error\]", str(exc))
        if m:
            result['op'] = m.group(1)
    with open(out, 'w') as f:
        json.dump(result, f, indent=1, sort_keys=True)
    sys.stdout.flush()
    os._exit(0)      # Paddle's threads can keep a failed run's interpreter from exiting


if __name__ == '__main__':
    main(sys.argv[1:])
