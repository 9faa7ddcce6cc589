"""`pstranspile diff A B`: compare two programs (or two split folders), like diff(1)."""
from __future__ import annotations

import os

import click

from ..core.errors import UserError


def register(main_group, handle_errors) -> None:
    """Add the `diff` command to the root click group."""

    @main_group.command("diff")
    @click.argument("a", type=click.Path())
    @click.argument("b", type=click.Path())
    @click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]),
                  default="text", show_default=True, help="How to print the differences.")
    @click.option("--strict", is_flag=True,
                  help="Also compare debug attrs (op_callstack, op_namescope, op_device), "
                       "empty slots, attr types and unset-vs-false flags.")
    @click.option("--op-defaults", "defaults_path", type=click.Path(dir_okay=False),
                  default=None, help="JSON {op type: {attr: default}}: an attr one side lacks "
                  "is no difference when the other side has its registered default "
                  "(default: Paddle 2.6.2's registry, shipped with pstranspile).")
    @click.pass_context
    @handle_errors
    def diff_cmd(ctx, a, b, fmt, strict, defaults_path):
        """Compare two programs block by block: ops inserted, deleted or changed; vars added,
        removed or changed.

        \b
        A and B are .pb / .pdmodel / .json programs (the formats may differ), or two split
        folders (trainer_*/, pserver_*/: every program, runtime.json and ps descriptor
        compared), or two ps descriptors (worker_desc.txt / server_desc.txt, field by
        field).
        `__control_var@...` names are compared by position, debug attrs are ignored unless
        --strict.
        \b
        Examples:
          pstranspile diff ours/trainer_0/main.pb paddle/trainer_0/main.pb
          pstranspile diff --format markdown ours/ paddle/     # two split folders
        \b
        Exit status: 0 same, 1 different, 2 bad input.
        """
        from ..diff import programs as diff_mod
        from ..render import diff_render
        from ..format import programio
        defaults = (diff_mod.load_op_defaults(defaults_path) if defaults_path
                    else diff_mod.builtin_op_defaults())
        da, db = os.path.isdir(a), os.path.isdir(b)
        if da != db:
            raise UserError("cannot compare a folder with a file: %s and %s" % (a, b))
        if da:
            result = diff_mod.diff_trees(a, b, strict, op_defaults=defaults)
            out = diff_render.TREE_RENDERERS[fmt](result)
        elif a.endswith("_desc.txt") and b.endswith("_desc.txt"):
            from ..diff.descriptors import desc_changes
            from ..diff.result import FileDiff, TreeDiff
            result = TreeDiff(a, b)
            ch = desc_changes(a, b)
            if ch:
                result.files.append(FileDiff(os.path.basename(b), "changed", details=ch))
            out = diff_render.TREE_RENDERERS[fmt](result)
        else:
            pa, pb = programio.load(a), programio.load(b)
            result = diff_mod.diff_programs(pa, pb, strict, a, b, defaults)
            out = diff_render.RENDERERS[fmt](result)
        quiet = bool(ctx.obj is not None and getattr(ctx.obj, "quiet", False))
        if not quiet or fmt == "json":
            click.echo(out, nl=False)
        if result.changed:
            ctx.exit(1)
