"""The comparison of a split's run with its reference and what explains a difference: the
parameter comparison (`compare.py`, style ps's `pscompare.py`), the named ps differences
(`pswhy.py`, `psexplain.py`), what Paddle cannot run of the original (`paddlelimits.py`), and
the result for a person or a program (`render.py`, `psrender.py`)."""
