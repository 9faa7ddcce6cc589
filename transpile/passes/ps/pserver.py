"""The ps pserver programs: what Paddle 2.6 leaves a parameter server. Its tables are described
by server_desc.txt (output/psdesc.py); the programs hold nothing in sync and async mode
(`_main_server` / `_startup_server` are new programs no pass touches), and in geo mode one
`listen_and_serv` (add_listen_and_serv_pass) with no blocks to run."""
from __future__ import annotations

from ...ir.program import Attr, Block, Program
from ..pipeline import PassEnv, Pipeline, named
from .opmake import ps_op


def new_server_program(prog: Program, env: PassEnv) -> Program:
    """A new empty program (`_main_server` / `_startup_server`): nothing of the input stays."""
    return Program([Block(0, -1)])


def add_listen_and_serv(prog: Program, env: PassEnv) -> Program:
    """add_listen_and_serv_pass's op: its endpoint, its index, the trainers, geo's mode."""
    plan, endpoint = env.plan, env.endpoint
    out = prog.shallow_copy()
    out.global_block.ops.append(ps_op("listen_and_serv", {"X": []}, {}, {
        "grad_to_block_id": Attr("STRINGS", []),
        "sparse_grad_to_param": Attr("STRINGS", []),
        "lr_decay_block_id": Attr("INT", -1),
        "dc_asgd": Attr("BOOLEAN", False),
        "Fanin": Attr("INT", plan.trainers),
        "pserver_id": Attr("INT", plan.server_index(endpoint)),
        "optimize_blocks": Attr("BLOCKS", []),
        "endpoint": Attr("STRING", endpoint),
        "prefetch_var_name_to_block_id": Attr("STRINGS", []),
        "checkpint_block_id": Attr("INT", -1),
        "distributed_mode": Attr("INT", plan.mode_id),
        "rpc_get_thread_num": Attr("INT", -1),
        "rpc_send_thread_num": Attr("INT", -1),
        "rpc_prefetch_thread_num": Attr("INT", -1)}))
    return out


MAIN = Pipeline("pserver main", (named(new_server_program),))
GEO_MAIN = Pipeline("pserver main", (named(new_server_program), named(add_listen_and_serv)))
STARTUP = Pipeline("pserver startup", (named(new_server_program),))
