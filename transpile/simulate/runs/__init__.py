"""A run of `simulate`: `runner.py` (its `SimOptions`, the `RunContext` a style's split runs
with, the one step loop `train_steps`), `result.py` (`SimResult`), the split read from its
folder (`loading.py`, `splitprograms.py`), and styles classic and fleet's in-process cluster
(`clusterrun.py` on `cluster.py`, `pserver.py`, `tableid.py`: fleet's tables by table id)."""
