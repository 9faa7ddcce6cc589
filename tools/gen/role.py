"""One role of a case, in a fresh interpreter (run by runner.py with Paddle's python):

    python role.py SPEC.json ROLE CASE_DIR RESULT.json

ROLE is trainer_<id> or pserver_<host>_<port>.  The style's driver (drive_<style>.py) builds or
parses the model, runs Paddle's pipeline for this role and writes CASE_DIR/expected/<ROLE>/
(and, for trainer_0, the case's input CASE_DIR/main.pb, startup.pb).  RESULT.json records how it
went: {"role", "status": "ok" | "error", "stage", and for an error "type", "message" (one line),
"where" (the raising frame)} plus what the driver noted (patches, strategy, ...).
Exit status 0 unless the interpreter itself dies.
"""
import importlib
import json
import os
import random
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def one_line(exc):
    """The reason of an exception on one line: its first non-empty line, or for Paddle's
    enforce errors (a banner, then the message) the first line after the banner."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if not lines:                 # a bare assert: say where it failed
        tb = traceback.extract_tb(exc.__traceback__)
        if not tb:
            return type(exc).__name__
        f = tb[-1]
        return '%s in %s (%s line %d)' % (type(exc).__name__, f.name,
                                           os.path.basename(f.filename), f.lineno)
    for i, ln in enumerate(lines):
        if ln.startswith('----') or ln.startswith('Error Message Summary'):
            continue
        if ln.startswith('C++ Traceback') or ln.startswith('0   '):
            continue
        return ln
    return lines[0]


def where(exc):
    tb = traceback.extract_tb(exc.__traceback__)
    if not tb:
        return ''
    f = tb[-1]
    return 'File "%s", line %d, in %s' % (f.filename, f.lineno, f.name)


def main(argv):
    spec_path, role, case_dir, result_path = argv
    with open(spec_path) as f:
        spec = json.load(f)
    random.seed(0)          # Paddle names control vars __control_var@<random.random()>
    result = {'role': role, 'status': 'ok', 'stage': 'import'}
    try:
        import numpy  # noqa: F401  (first: np.random.seed segfaults once paddle's libs loaded first)
        import paddle
        paddle.enable_static()
        driver = importlib.import_module('drive_' + spec['style'])
        driver.run(paddle, spec, role, case_dir, result)
    except Exception as exc:  # noqa: BLE001  (Paddle refusing the case is an outcome)
        result.update(status='error', type=type(exc).__name__, message=one_line(exc),
                      where=where(exc))
    with open(result_path, 'w') as f:
        json.dump(result, f, indent=1, sort_keys=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
