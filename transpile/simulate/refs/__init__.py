"""The reference a split must equal: the original program trained under each mode's schedule
(`schedule.py`): its initial state (`reference.py`), sync over data-parallel shards
(`original.py`, `dataparallel.py`), async and half_async in turns (`turns.py`), geo-SGD
(`georef.py`, with `geo.py` the push and pull arithmetic the split's trainers share)."""
