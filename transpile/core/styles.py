"""The styles a split can be made in, as data: what each one is and what its split holds.

This is the one place that names the styles (and the config's allowed values of `style:`).
Code elsewhere asks a style's traits what its split is made of (`traits(config.style)
.descriptors`, ...) and never compares its name; the behaviour of each style is registered
once: for `split` (its plan, passes and outputs) in transpile/styles/, for each floor above
(check, simulate, render, the commands) in that floor's slot of stylehooks.py.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StyleTraits:
    """What a style is, for every layer that must tell the styles apart."""
    name: str
    paddle: str                 # the Paddle code it reproduces
    modes: tuple                # the modes Paddle builds in this style
    runtime_json: bool          # trainers carry runtime.json (the communicator's contexts)
    descriptors: bool           # worker_desc.txt / server_desc.txt (the brpc tables)
    strategy_settings: bool     # the config's DistributedStrategy settings (PS_FIELDS:
                                # tables, accessors...) apply, linted by ps_lint.py
    optimize_blocks: bool       # pservers optimize in listen_and_serv's optimize blocks
    sparse_table_ids: bool      # sparse tables are numbered (distributed_lookup_table table_id)
    sync_mode_from_flag: bool   # listen_and_serv's distributed_mode is 0 sync / 1 otherwise
    sliced_by_config: bool      # slice_var_up / min_block_size / split_method are honoured
    runs_on: str = ""           # the Paddle versions whose runtime trains its splits
    runnable: bool = False      # `run` trains its splits on Paddle 2.6.2's runtime
    modes_note: str = ""        # why a mode is missing, for the config error


CLASSIC = StyleTraits(
    name="classic", paddle="the fluid DistributeTranspiler",
    modes=("sync", "async", "half_async"), runtime_json=False, descriptors=False,
    strategy_settings=False,
    optimize_blocks=True, sparse_table_ids=False, sync_mode_from_flag=True,
    sliced_by_config=True,
    runs_on="Paddle 1.x and 2.0 (fluid's listen_and_serv pservers and RPC ops: Paddle "
            "2.6.2 has no recv, split_byref or prefetch)",
    modes_note="the classic DistributeTranspiler has no geo mode (Paddle's GeoSgdTranspiler "
               "is another tool); use style: fleet")
FLEET = StyleTraits(
    name="fleet", paddle="Paddle 2.0 Fleet's parameter_server/ir passes",
    modes=("sync", "async", "half_async", "geo"), runtime_json=True, descriptors=False,
    strategy_settings=False,
    optimize_blocks=True, sparse_table_ids=True, sync_mode_from_flag=False,
    sliced_by_config=False,
    runs_on="Paddle 2.0 (its Fleet communicator and listen_and_serv pservers; from 2.1 on "
            "Paddle runs style ps)")
PS = StyleTraits(
    name="ps", paddle="Paddle 2.1+'s PsProgramBuilder passes and TheOnePSRuntime",
    modes=("sync", "async", "geo"), runtime_json=False, descriptors=True,
    strategy_settings=True,
    optimize_blocks=False, sparse_table_ids=True, sync_mode_from_flag=False,
    sliced_by_config=False,
    runs_on="Paddle 2.1 to 2.6 (the_one_ps brpc parameter server)", runnable=True,
    modes_note="Paddle 2.1+ has no CPU half_async")

STYLES = {s.name: s for s in (FLEET, CLASSIC, PS)}     # the config's allowed values, in order
DEFAULT_STYLE = FLEET.name


def traits(name: str) -> StyleTraits:
    """The traits of a style by its config name (KeyError for an unknown one: the config
    loader has refused it before)."""
    return STYLES[name]
