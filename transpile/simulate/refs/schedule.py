"""The training schedule of each mode: what the original program is trained under (the
reference) and what the in-process cluster runs the split under, step for step, so that a
correct split equals the reference exactly (in float64 to rounding, most often bit for bit).

sync: every step, each trainer computes the gradients of its shard of the step's global batch
  from the same parameters; they are averaged and the update ops run once (dataparallel.py).
async, half_async: turns, trainer 0 first in every step. In its turn a trainer computes the
  gradients of its shard from the parameters it holds (those it pulled at the end of its
  previous turn; the initial ones at first), except remote tables (looked up with
  is_distributed or remote_prefetch), which it reads from the pservers as they are in its turn;
  the pservers apply each gradient as it arrives (no averaging over trainers: Paddle's
  RunAsyncLoop), then the trainer pulls every parameter it holds. A send carries one step's
  gradient (Fleet's runtime.json sets communicator_max_merge_var_num and
  communicator_send_queue_size to 1: nothing to merge; half_async merges the one batch each
  trainer's barrier releases). State the forward writes (batch_norm's running statistics) is
  each trainer's own. turns.py.
geo: each trainer trains the whole program (optimizer included) locally on its shards; after
  every K-th step (K = geo_push_nums, at most --push-every) the trainers take turns, trainer 0
  first, to push and pull (Paddle's GeoCommunicator): for a dense parameter delta =
  (local - last pulled) / trainers, last pulled += delta, the pservers add the delta; then
  local += pserver - last pulled, last pulled = pserver. A sparse table (a SelectedRows
  gradient) pushes only the rows its gradients touched since the trainer's last push, and
  pulls, from every block of the table, the rows any trainer pushed since its last pull
  (Paddle's AsyncSparseParamUpdateRecorder; Paddle 2.0 skips a pserver the trainer sent no
  rows to). geo.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...core.errors import UserError

MODES = ("sync", "async", "half_async", "geo")
# geo's default push interval in a simulation: Paddle pushes after geo_push_nums steps (or
# sooner, when its send queue stays empty); a run of a few steps must push more than never.
PUSH_EVERY = 2


@dataclass(frozen=True)
class Schedule:
    mode: str
    trainers: int
    push_every: int = 1          # geo: push after every push_every-th step of a trainer

    @property
    def turns(self) -> bool:
        return self.mode in ("async", "half_async")

    def pushes_after(self, step: int) -> bool:
        """geo: whether the trainers push and pull after step `step` (0-based)."""
        return self.mode == "geo" and (step + 1) % self.push_every == 0

    def describe(self) -> str:
        if self.mode == "sync":
            return "sync: every step, gradients of the trainers' shards averaged, one update"
        if self.turns:
            return ("%s: turns, trainer 0 first each step; a trainer's gradients applied as "
                    "they arrive, then it pulls" % self.mode)
        return ("geo: local training; after every %d step%s the trainers push deltas and pull, "
                "trainer 0 first" % (self.push_every, "s" if self.push_every > 1 else ""))


def make_schedule(config, push_every=None) -> Schedule:
    if config.mode not in MODES:
        raise UserError("mode %r is not simulated (modes: %s)" % (config.mode, ", ".join(MODES)))
    k = 1
    if config.mode == "geo":
        want = PUSH_EVERY if push_every is None else int(push_every)
        if want < 1:
            raise UserError("--push-every must be at least 1, got %d" % want)
        k = max(1, min(want, int(config.geo_push_nums or 1)))
    return Schedule(config.mode, max(1, config.trainers), k)
