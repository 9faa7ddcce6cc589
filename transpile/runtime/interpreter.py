"""The Python that runs the roles: one that imports Paddle 2.6.2 with protobuf 4.x.

pstranspile never imports Paddle itself: every role is a process of that Python running
role.py. Which Python: `--paddle-python PATH`, else $PSTRANSPILE_PADDLE_PYTHON, else the one
running pstranspile (`pip install 'pstranspile[paddle]'` puts paddlepaddle 2.6.2 and protobuf
4.25.5 beside it). $PSTRANSPILE_PADDLE_PATH (folders, `os.pathsep`-separated) goes first on the
roles' PYTHONPATH: a protobuf 4.x installed with `pip install --target DIR` where the
environment's own protobuf is newer (Paddle 2.6.2's fleet code fails with protobuf 5 and later).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from ..core.errors import UserError

PADDLE_VERSION = "2.6.2"
HOW = ("pip install 'pstranspile[paddle]' (paddlepaddle 2.6.2, protobuf 4.25.5), or name a "
       "Python that has them: --paddle-python PATH or PSTRANSPILE_PADDLE_PYTHON")
PROBE = ("import json, sys\n"
         "out = {}\n"
         "try:\n"
         "    import google.protobuf as pb\n"
         "    out['protobuf'] = pb.__version__\n"
         "except Exception as e:\n"
         "    out['protobuf_error'] = '%s: %s' % (type(e).__name__, e)\n"
         "try:\n"
         "    import paddle\n"
         "    out['paddle'] = paddle.__version__\n"
         "    from paddle.base import core\n"
         "    out['pscore'] = hasattr(core, 'DistFleetWrapper')\n"
         "except Exception as e:\n"
         "    out['paddle_error'] = '%s: %s' % (type(e).__name__, str(e).splitlines()[0][:200])\n"
         "sys.stdout.write('@@' + json.dumps(out))\n")


@dataclass(frozen=True)
class PaddlePython:
    """A Python that imports Paddle 2.6.2, and the environment its roles run in."""
    executable: str
    paddle: str
    protobuf: str
    path: tuple = ()            # folders first on the roles' PYTHONPATH

    def env(self, base=None) -> dict:
        env = dict(os.environ if base is None else base)
        parts = list(self.path) + [p for p in [env.get("PYTHONPATH")] if p]
        if parts:
            env["PYTHONPATH"] = os.pathsep.join(parts)
        return env


def find_paddle_python(explicit: str | None = None) -> PaddlePython:
    """The Python to run the roles with, probed in a child process (UserError, exit 2, when
    there is none: one line saying how to get one)."""
    exe = explicit or os.environ.get("PSTRANSPILE_PADDLE_PYTHON") or sys.executable
    exe = os.path.abspath(exe) if os.sep in exe else (shutil.which(exe) or exe)
    where = "--paddle-python" if explicit else (
        "PSTRANSPILE_PADDLE_PYTHON" if os.environ.get("PSTRANSPILE_PADDLE_PYTHON") else
        "this Python")
    path = tuple(p for p in os.environ.get("PSTRANSPILE_PADDLE_PATH", "").split(os.pathsep)
                 if p)
    probe = PaddlePython(exe, "", "", path)
    try:
        out = subprocess.run([exe, "-c", PROBE], capture_output=True, text=True, timeout=120,
                             env=probe.env(), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        raise UserError("%s (%s) cannot be run: %s; %s" % (exe, where, e, HOW)) from None
    text = out.stdout.rpartition("@@")[2]
    try:
        info = json.loads(text)
    except ValueError:
        raise UserError("%s (%s) does not run: %s; %s"
                        % (exe, where, (out.stderr.strip().splitlines() or ["no output"])[-1],
                           HOW)) from None
    if "paddle" not in info:
        raise UserError("Paddle %s is not importable by %s (%s: %s); %s"
                        % (PADDLE_VERSION, exe, where, info.get("paddle_error", "?"), HOW))
    if info["paddle"] != PADDLE_VERSION:
        raise UserError("%s (%s) imports Paddle %s; run needs Paddle %s (its parameter server "
                        "is the one simulate models); %s" % (exe, where, info["paddle"],
                                                             PADDLE_VERSION, HOW))
    if not info.get("pscore"):
        raise UserError("%s (%s): this Paddle %s has no parameter-server core "
                        "(core.DistFleetWrapper); %s" % (exe, where, info["paddle"], HOW))
    if not str(info.get("protobuf", "")).startswith("4."):
        raise UserError("%s (%s) imports protobuf %s with Paddle %s, whose fleet code needs "
                        "protobuf 4.x: pip install protobuf==4.25.5 into it, or "
                        "`pip install --target DIR protobuf==4.25.5` and "
                        "PSTRANSPILE_PADDLE_PATH=DIR" % (exe, where, info.get("protobuf"),
                                                         info["paddle"]))
    return PaddlePython(exe, info["paddle"], info["protobuf"], path)
