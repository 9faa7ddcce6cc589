import os
import sys

# numpy's OpenBLAS threads only slow the small matrices of the simulate tests down on 2 cores;
# this must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)


def pytest_configure(config):
    # `-m "not slow"` skips the corpus-wide sweeps (they run in `make test`)
    config.addinivalue_line("markers", "slow: a corpus-wide sweep (seconds, not milliseconds)")


def pytest_runtest_teardown(item, nextitem):
    # a test that leaves Python's cyclic collector off makes every later test keep its garbage
    # (the whole suite once grew past 13 GB that way): fail the test that did it
    import gc
    if not gc.isenabled():
        gc.enable()
        raise AssertionError("%s left the cyclic garbage collector disabled" % item.nodeid)
