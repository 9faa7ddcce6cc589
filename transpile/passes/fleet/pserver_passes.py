"""The fleet pserver pipelines: the passes that make an endpoint's main program (pserver.py
builds its blocks) and its startup program (pserver_startup.py)."""
from __future__ import annotations

from ...ir.program import Program
from ...plan.faults import FLEET_ASSIGN_INIT_WHOLE_PARAM
from ..pipeline import PassEnv, Pipeline, named
from .pserver import (FleetPserverIndex, ServerBuild, build_geo_blocks, build_optimize_blocks,
                      large_scale_tables, listen_and_serv)
from .pserver_startup import build_startup, table_param_slices


# --- the pipeline ----------------------------------------------------------------------------
def new_pserver_program(main: Program, env: PassEnv) -> Program:
    """A new program holding the endpoint's listen_and_serv.

    What the passes after it build (ServerBuild) is in env.scratch["server"]."""
    plan, endpoint = env.plan, env.endpoint
    index = env.shared.get("index") or FleetPserverIndex(main, env.startup, plan)
    s = env.scratch["server"] = ServerBuild(main, plan, endpoint, index)
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
    s = env.scratch["server"]
    blocks, lr_block = build_optimize_blocks(s)
    _serve(s, blocks, lr_block)
    return prog


def add_geo_blocks(prog: Program, env: PassEnv) -> Program:
    """Geo: a block per parameter slice, `param = sum(param, param.delta)`."""
    s = env.scratch["server"]
    _serve(s, build_geo_blocks(s), -1)
    return prog


def serve_large_scale_tables(prog: Program, env: PassEnv) -> Program:
    """The large-scale (is_distributed) tables' optimize blocks read and write the table
    (lookup_sparse_table_*).

    Their metas are left for the startup (env.scratch["metas"])."""
    env.scratch["metas"] = large_scale_tables(env.scratch["server"], env.startup)
    return prog


def drop_table_param_slices(prog: Program, env: PassEnv) -> Program:
    """Async servers keep the large-scale tables' rows only in the table: no param var."""
    s = env.scratch["server"]
    for name in table_param_slices(s):
        s.gvars.pop(name, None)
    return prog


def build_pserver_startup(startup: Program, env: PassEnv) -> Program:
    """The origin inits of what this endpoint holds (sliced shapes), then the table init."""
    return build_startup(env.scratch["server"], startup, env.scratch.get("metas", []),
                         FLEET_ASSIGN_INIT_WHOLE_PARAM in env.shared.get("fixed", ()))


MAIN = {mode: Pipeline("pserver main", tuple(map(named, passes))) for mode, passes in (
    ("sync", (new_pserver_program, add_optimize_blocks, serve_large_scale_tables)),
    ("async", (new_pserver_program, add_optimize_blocks, serve_large_scale_tables,
               drop_table_param_slices)),
    ("geo", (new_pserver_program, add_geo_blocks)))}
MAIN["half_async"] = MAIN["async"]
STARTUP = Pipeline("pserver startup", (named(build_pserver_startup),))
