"""Style ps in `simulate`: its split run on the descriptors (`run.py`: the in-process cluster of
`cluster.py` against the reference of `ref.py`), geo as Paddle's GeoCommunicator runs it
(`geo.py`, `georun.py`), over the tables of Paddle's ps runtime (`tables/`)."""
