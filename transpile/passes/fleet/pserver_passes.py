"""The fleet pserver pipelines: the passes that make an endpoint's main program (pserver.py
builds its blocks) and its startup program (pserver_startup.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...ir.program import Program
from ...plan.faults import FLEET_ASSIGN_INIT_WHOLE_PARAM
from ..pipeline import PassEnv, PassState, Pipeline, named
from .pserver import (FleetPserverIndex, ServerBuild, build_geo_blocks, build_optimize_blocks,
                      large_scale_tables, listen_and_serv)
from .pserver_startup import build_startup, table_param_slices


# --- the pipeline ----------------------------------------------------------------------------
@dataclass
class FleetServerState(PassState):
    """What a fleet pserver's main passes leave for the later ones and for its startup."""
    server: Optional[ServerBuild] = None
    metas: list = field(default_factory=list)   # the large-scale tables' (for the startup)


def new_pserver_program(main: Program, env: PassEnv) -> Program:
    """A new program holding the endpoint's listen_and_serv.

    What the passes after it build (ServerBuild) is in env.state.server."""
    plan, endpoint = env.plan, env.endpoint
    index = env.shared.get("index") or FleetPserverIndex(main, env.startup, plan)
    s = env.state.server = ServerBuild(main, plan, endpoint, index)
    s.prog.global_block.ops.append(listen_and_serv(plan, endpoint))
    return s.prog


def _serve(s: ServerBuild, blocks: list, lr_block: int) -> None:
    """listen_and_serv's blocks and grad maps, once the blocks are built."""
    las = s.prog.global_block.ops[0]
    las.set_attr("optimize_blocks", blocks)
    las.set_attr("grad_to_block_id", list(s.grad_to_block_id))
    las.set_attr("sparse_grad_to_param", list(s.sparse_grad_to_param))
    las.set_attr("lr_decay_block_id", lr_block)


def add_optimize_blocks(prog: Program, env: PassEnv) -> Program:
    """The LR-decay block and an optimize block per parameter block held here (the merge of
    the trainers' grads, the optimizer op and its clip / regularization ops)."""
    s = env.state.server
    blocks, lr_block = build_optimize_blocks(s)
    _serve(s, blocks, lr_block)
    return prog


def add_geo_blocks(prog: Program, env: PassEnv) -> Program:
    """Geo: a block per parameter slice, `param = sum(param, param.delta)`."""
    s = env.state.server
    _serve(s, build_geo_blocks(s), -1)
    return prog


def serve_large_scale_tables(prog: Program, env: PassEnv) -> Program:
    """The large-scale (is_distributed) tables' optimize blocks read and write the table
    (lookup_sparse_table_*).

    Their metas are left for the startup (env.state.metas)."""
    env.state.metas = large_scale_tables(env.state.server, env.startup)
    return prog


def drop_table_param_slices(prog: Program, env: PassEnv) -> Program:
    """Async servers keep the large-scale tables' rows only in the table: no param var."""
    s = env.state.server
    for name in table_param_slices(s):
        s.gvars.pop(name, None)
    return prog


def build_pserver_startup(startup: Program, env: PassEnv) -> Program:
    """The origin inits of what this endpoint holds (sliced shapes), then the table init."""
    return build_startup(env.state.server, startup, env.state.metas,
                         FLEET_ASSIGN_INIT_WHOLE_PARAM in env.shared.get("fixed", ()))


_NEW = named(new_pserver_program, writes=("server",))
_SERVER = ("server",)
MAIN = {mode: Pipeline("pserver main", (_NEW,) + passes, state=FleetServerState) for mode, passes in (
    ("sync", (named(add_optimize_blocks, reads=_SERVER),
              named(serve_large_scale_tables, reads=_SERVER, writes=("metas",)))),
    ("async", (named(add_optimize_blocks, reads=_SERVER),
               named(serve_large_scale_tables, reads=_SERVER, writes=("metas",)),
               named(drop_table_param_slices, reads=_SERVER))),
    ("geo", (named(add_geo_blocks, reads=_SERVER),)))}
MAIN["half_async"] = MAIN["async"]
# (metas is given whatever the mode: geo writes none, and its default says no large-scale table)
STARTUP = Pipeline("pserver startup",
                   (named(build_pserver_startup, reads=("server", "metas")),),
                   state=FleetServerState, given=("server", "metas"))
