"""`pstranspile config check C.yaml...`: validate cluster configs, print them with their
defaults."""
from __future__ import annotations

import click


from .common import load_program, options


def register(main_group, handle_errors):
    """Add `config` to the root click group."""
    @main_group.group()
    def config():
        """Cluster config files."""

    @config.command("check")
    @click.argument("files", metavar="FILE...", nargs=-1, required=True,
                    type=click.Path(dir_okay=False))
    @click.option("--program", type=click.Path(dir_okay=False), default=None,
                  help="The main program (style ps): every table the settings name must be "
                       "one of its sparse tables, with an accessor that fits its width.")
    @click.option("--strict", is_flag=True,
                  help="Style ps: a setting Paddle accepts but never uses is an error too "
                       "(without it, a warning).")
    @click.option("-q", "--quiet", is_flag=True,
                  help="Print only the errors and warnings, not the configs.")
    @click.pass_obj
    @handle_errors
    def config_check(obj, files, program, strict, quiet):
        """Validate cluster configs and print each with every default filled in.

        \b
        Keys (defaults in brackets):
          pservers        list of host:port, in order, no duplicates      (required)
          trainers        number of trainers, >= 1                          [1]
          trainer_id      0..trainers-1, or "all"                           [0]
          mode            sync | async | half_async | geo                   [sync]
                          (ps: no half_async; classic: no geo)
          style           fleet | classic | ps                              [fleet]
          slice_var_up    slice large parameters into blocks                [true]
          min_block_size  smallest block, in elements                       [8192]
          split_method    round_robin | hash_name | balanced                [round_robin]
          geo_push_nums   geo mode: steps between pushes                    [100]
          lr_scheduler    auto | true | false                               [auto]
          paddle_faults   reproduce | fix                                   [reproduce]
        Style ps, the DistributedStrategy settings that reach the descriptors:
          table_parameters    table name -> settings, as PaddleRec writes it  [none]
          fleet_desc_configs  table name -> sparse_* keys                     [none]
          fs_client_param     uri, user, passwd, hadoop_bin                   [none]
          adam_d2sum          the dense table's adam_d2sum rule               [false]
        Style ps: a setting Paddle would write for a server that cannot run it (an unknown
        accessor, class or rule, a rule's missing field, unordered weight bounds, a negative
        threshold) or that Paddle skips without a word (a key naming no field: a typo) is an
        error naming the key (exit 2); with --program, so is a table name that is no sparse
        table of the program, and dims Paddle would refuse. A setting Paddle reads and then
        drops (a rule's block its rule does not read, a value Paddle writes over, table
        settings in geo mode) is a warning on stderr, an error with --strict.
        Several files (a pre-commit hook passes every changed one): each is checked, an
        error names its file, the exit status is 2 if any failed; with --quiet only the
        errors and warnings are printed.
        """
        from ..core.errors import UserError
        main = load_program(program) if program else None
        failed = 0
        for file in files:
            try:
                text = _check_file(file, main, strict)
            except UserError as e:
                if len(files) == 1:
                    raise
                click.echo("pstranspile: error: %s" % str(e).replace("\n", " "), err=True)
                failed += 1
                continue
            if not options().is_quiet(quiet):
                click.echo(("# %s\n" % file if len(files) > 1 else "") + text, nl=False)
        if failed:
            click.get_current_context().exit(2)
    return config


def _check_file(file: str, main, strict: bool) -> str:
    """The config `file` with its defaults, as YAML text; its first error raised (ConfigError),
    its warnings printed on stderr."""
    import yaml
    from ..core.config import ConfigError, key_line, load_config_lines
    from ..core.ps_lint import NoEffect, config_problems
    cfg, data, lines = load_config_lines(file)
    ps = cfg.traits.strategy_settings
    problems = config_problems(cfg) if ps else []
    if main is not None and ps:
        problems += program_problems(cfg, main)

    def where(key):
        line = key_line(data, lines, key)
        return "%s: %s%s" % (file, key, " (line %d)" % line if line else "")

    errors = [(k, p) for k, p in problems if strict or not isinstance(p, NoEffect)]
    if errors:
        key, problem = errors[0]
        raise ConfigError("%s: %s" % (where(key), problem))
    for key, problem in problems:
        click.echo("pstranspile: warning: %s: %s" % (where(key), problem), err=True)
    return yaml.safe_dump(cfg.to_dict(every_key=ps), sort_keys=False, default_flow_style=None)


def program_problems(cfg, main) -> list:
    """[(key, problem)] of the table settings against a program: names of no sparse table,
    accessors whose dims do not fit the embedding (Paddle's check_embedding_dim)."""
    from ..core.errors import RefusedError
    from ..plan.ps import remote_tables
    from ..plan.ps_accessor import ProgramRule, sparse_settings
    tables = remote_tables(main)
    entries = cfg.strategy_tables()
    out = []
    for kind, name, entry in entries:
        table = entry.get("table_name")
        key = "%s.%s" % (kind, name)
        if table not in tables:
            out.append((key, "names no sparse table of the program (%s): Paddle ignores it"
                        % (", ".join(tables) or "it has none")))
            continue
        w = main.global_block.vars.get(table)
        emb = int(w.shape[1]) if w is not None and w.shape and len(w.shape) > 1 else 0
        placeholder = ProgramRule("adam", None, ("beta1&0.9", "beta2&0.999", "epsilon&1e-08"))
        try:
            sparse_settings(table, emb, placeholder, entries, len(cfg.pservers))
        except RefusedError as e:
            out.append((key + ".accessor", "%s (embedding %s is %d wide)" % (e, table, emb)))
    return out
