"""The ps pserver programs: what Paddle 2.6 leaves a parameter server. Its tables are described
by server_desc.txt (output/psdesc.py); the programs hold nothing in sync and async mode
(`_main_server` / `_startup_server` are new programs no pass touches), and in geo mode one
`listen_and_serv` (add_listen_and_serv_pass) with no blocks to run."""
from __future__ import annotations

from ...ir.program import Attr, Block, Program
from ...plan.ps import PsPlan
from .opmake import ps_op


def listen_and_serv(plan: PsPlan, endpoint: str):
    """add_listen_and_serv_pass's op: its endpoint, its index, the trainers, geo's mode."""
    return ps_op("listen_and_serv", {"X": []}, {}, {
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
        "rpc_prefetch_thread_num": Attr("INT", -1)})


def pserver_programs(plan: PsPlan, endpoint: str) -> tuple:
    """(main, startup) of the pserver at `endpoint`."""
    main = Program([Block(0, -1)])
    if plan.is_geo:
        main.global_block.ops.append(listen_and_serv(plan, endpoint))
    return main, Program([Block(0, -1)])
