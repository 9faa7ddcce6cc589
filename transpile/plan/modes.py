"""Paddle's DistributedMode (names and ids, ps/utils/public.py and the Fleet communicator), and
the questions a plan answers about its mode."""
from __future__ import annotations

DISTRIBUTED_MODES = {"sync": ("SYNC", 0), "async": ("ASYNC", 1),
                     "half_async": ("HALF_ASYNC", 2), "geo": ("GEO", 3)}


def mode_id(mode: str) -> int:
    """Paddle's DistributedMode id of a mode ("sync" -> 0 ... "geo" -> 3): listen_and_serv's
    distributed_mode, the communicator's mode."""
    return DISTRIBUTED_MODES[mode][1]


class ModeQuestions:
    """For a plan with a `mode` field ("sync", "async", "half_async" or "geo")."""
    mode: str

    @property
    def mode_name(self) -> str:
        return DISTRIBUTED_MODES[self.mode][0]

    @property
    def mode_id(self) -> int:
        return mode_id(self.mode)

    @property
    def is_geo(self) -> bool:
        return self.mode == "geo"

    @property
    def is_sync(self) -> bool:
        return self.mode == "sync"
