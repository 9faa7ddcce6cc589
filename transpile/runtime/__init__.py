"""`pstranspile run`: a style-ps split trained on Paddle 2.6.2's own brpc parameter server.

pstranspile never imports Paddle: every role is a process of a Python that does
(`interpreter.py` finds it), running `role.py` (with `rolegeo.py`, geo's communicator). The
rest prepares and reads: `rundir.py` (the split read, the run folder), `predict.py`
(simulate's prediction of the same split, feeds and initial values), `local.py` (`--local`:
every role on 127.0.0.1), `cluster.py` (one role of a cluster, from Paddle's launcher
environment), `verdict.py` (the comparison and its text, json and junit forms).
"""
