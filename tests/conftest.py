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


# The suite runs in one process for minutes: what a test leaves behind adds to the peak of every
# later one (a simulation of a table of a million rows is gigabytes). So a test that grew the
# process by more than this is followed by a collection, and when a test module's tests are
# done every test module's caches (module globals named *cache*: dicts, functools caches) are
# emptied and the garbage collected: a cache lives as long as the module that fills it.
GREW_KB = 256 * 1024
_last = {"module": None, "rss": 0}


def _rss_kb() -> int:
    """This process's resident memory in KiB (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return 0


def _release_memory() -> None:
    """Collect the garbage, and hand the freed heap back to the OS (glibc keeps it)."""
    import gc
    gc.collect()
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _clear_test_caches() -> None:
    for mod in list(sys.modules.values()):
        path = getattr(mod, "__file__", None) or ""
        if not path.startswith(HERE + os.sep):
            continue
        for name, value in list(vars(mod).items()):
            if "cache" in name.lower() and isinstance(value, dict):
                value.clear()
            elif callable(getattr(value, "cache_clear", None)) and \
                    getattr(value, "__module__", None) == mod.__name__:
                value.cache_clear()


def pytest_runtest_setup(item):
    # the first test of a module: the last module's fixtures are gone, its caches go now
    if _last["module"] is not None and item.module is not _last["module"]:
        _clear_test_caches()
        _release_memory()
    _last["module"] = item.module
    _last["rss"] = _rss_kb()


def pytest_runtest_logfinish(nodeid, location):
    # after the test's teardown: a test that grew the process much leaves no garbage behind
    if _rss_kb() - _last["rss"] > GREW_KB:
        _release_memory()


def pytest_runtest_teardown(item, nextitem):
    # a test that leaves Python's cyclic collector off makes every later test keep its garbage
    # (the whole suite once grew past 13 GB that way): fail the test that did it
    import gc
    if not gc.isenabled():
        gc.enable()
        raise AssertionError("%s left the cyclic garbage collector disabled" % item.nodeid)
