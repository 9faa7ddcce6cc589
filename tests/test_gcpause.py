"""core/gcpause.py: the collector paused around bulk work; in the console script, what the work
made is frozen out of the collector's sight afterwards, and large objects are kept to the exit."""
import gc

from transpile.core import gcpause


def test_paused_gc_restores_the_collector_and_freezes_only_in_the_console_script(monkeypatch):
    monkeypatch.setattr(gcpause, "_keeping", False)
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        with gcpause.paused_gc():
            assert not gc.isenabled()
            with gcpause.paused_gc():                   # nested
                made = [[i] for i in range(1000)]
            assert not gc.isenabled()
        assert gc.isenabled() and gc.get_freeze_count() == frozen     # in-process: as it was
        monkeypatch.setattr(gcpause, "_keeping", True)
        with gcpause.paused_gc():
            made += [[i] for i in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() >= frozen + 2000
        gcpause.keep_until_exit(made)
        assert gcpause._KEEP[-1] is made
    finally:
        gc.unfreeze()
        gcpause._KEEP.clear()


def test_nothing_is_kept_in_process(monkeypatch):
    monkeypatch.setattr(gcpause, "_keeping", False)
    gcpause.keep_until_exit([1])
    assert gcpause._KEEP == []
