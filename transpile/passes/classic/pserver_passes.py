"""The classic pserver pipelines: an endpoint's main program built step by step (pserver.py's
PserverBuild, left in env.state.server) and its startup program."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...ir.program import Program
from ...plan.faults import CLASSIC_ASSIGN_INIT_WHOLE_PARAM
from ..pipeline import PassEnv, PassState, Pipeline, named
from .pserver import ClassicPserverIndex, PserverBuild, build_pserver_startup


@dataclass
class ClassicServerState(PassState):
    """What a classic pserver's main passes leave for the later ones and for its startup."""
    server: Optional[PserverBuild] = None


def new_pserver_program(main: Program, env: PassEnv) -> Program:
    """A new program declaring the blocks held here: parameter blocks, merged grads and, in sync
    mode, the trainers' copies of each grad block."""
    index = env.shared.get("index") or ClassicPserverIndex(main, env.plan, env.trainer_id)
    b = env.state.server = PserverBuild(main, env.plan, env.endpoint, index.trainer_id, index)
    return b.prog


def _step(method: str, doc: str):
    def run(prog: Program, env: PassEnv) -> Program:
        getattr(env.state.server, method)()
        return prog
    run.__name__ = method
    run.__doc__ = doc
    return run


add_lr_decay_block = _step("add_lr_decay_block", PserverBuild.add_lr_decay_block.__doc__)
add_param_blocks = _step("add_param_blocks", PserverBuild.add_param_blocks.__doc__)
add_table_blocks = _step("add_table_blocks", PserverBuild.add_table_blocks.__doc__)
add_listen_and_serv = _step("add_listen_and_serv", PserverBuild.add_listen_and_serv.__doc__)


def init_held_vars(startup: Program, env: PassEnv) -> Program:
    """Initialise exactly the vars the pserver holds: each init op of the original startup
    whose output lives here, renamed to the block and reshaped to it."""
    b = env.state.server
    return build_pserver_startup(startup, b.prog, b.aliases, env.shared.get("writers"),
                                 env.endpoint, {blk.name: blk for _, blk in b.local},
                                 CLASSIC_ASSIGN_INIT_WHOLE_PARAM in env.shared.get("fixed", ()))


MAIN = Pipeline("pserver main", (named(new_pserver_program, writes=("server",)),) + tuple(
    named(step, reads=("server",)) for step in (
        add_lr_decay_block, add_param_blocks, add_table_blocks, add_listen_and_serv)),
    state=ClassicServerState)
STARTUP = Pipeline("pserver startup", (named(init_held_vars, reads=("server",)),),
                   state=ClassicServerState, given=("server",))
