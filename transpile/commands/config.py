"""`pstranspile config check C.yaml`: validate a cluster config, print it with its defaults."""
from __future__ import annotations

import click


def register(main_group, handle_errors):
    """Add `config` to the root click group."""
    @main_group.group()
    def config():
        """Cluster config files."""

    @config.command("check")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.pass_obj
    @handle_errors
    def config_check(obj, file):
        """Validate a cluster config and print it with every default filled in.

        \b
        Keys (defaults in brackets):
          pservers        list of host:port, in order, no duplicates      (required)
          trainers        number of trainers, >= 1                          [1]
          trainer_id      0..trainers-1, or "all"                           [0]
          mode            sync | async | half_async | geo (ps: no half_async) [sync]
          style           fleet | classic | ps                              [fleet]
          slice_var_up    slice large parameters into blocks                [true]
          min_block_size  smallest block, in elements                       [8192]
          split_method    round_robin | hash_name | balanced                [round_robin]
          geo_push_nums   geo mode: steps between pushes                    [100]
        """
        import yaml
        from ..core.config import load_config
        cfg = load_config(file)
        click.echo(yaml.safe_dump(cfg.to_dict(), sort_keys=False, default_flow_style=None),
                   nl=False)
    return config
