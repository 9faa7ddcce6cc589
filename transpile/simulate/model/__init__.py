"""The numpy model simulate runs programs on: values and tables (`values.py`, `keyed.py`,
`largescale.py`), an op's kernels (`kernels/`), the executor, and the feeds bounded by their
uses (`feeds.py`, `feeduses.py`, `batchsize.py`)."""
