"""Reads a trainer process fails at: every style, every trainer (ir/dataflow.py).

A trainer's main program runs with its feeds (the original's) and its persistable vars (its
startup program's, or what the runtime receives or pulls into them); an op that reads a var
nothing of that gives a value, or an empty SelectedRows' rows (a table's gradient whose lookup
grads became a push), fails at the trainer's first step: a finding, naming the Paddle fault that
makes the split so where it is one (a clip over a pushed table: fleet- / ps-sparse-clip-dropped;
a classic trainer sending the output of a clip moved to the pservers: classic-clip-on-pserver).
The first such read of each trainer is reported (the process stops there) with how many follow.
"""
from __future__ import annotations

from ..ir import roles
from ..ir.dataflow import data_names, dense_at, unvalued_reads
from ..ir.vartable import persistable_names
from ..plan.faults import (CLASSIC_CLIP_ON_PSERVER, FLEET_GEO_DENSE_TABLE_GRAD,
                           FLEET_SPARSE_CLIP_DROPPED, KIND, PS_GEO_DENSE_TABLE_GRAD,
                           PS_SPARSE_CLIP_DROPPED)
from .loading import Part

_SPARSE_CLIP = {KIND[f].style: f for f in (FLEET_SPARSE_CLIP_DROPPED, PS_SPARSE_CLIP_DROPPED)}
_GEO_DENSE = {KIND[f].style: f for f in (FLEET_GEO_DENSE_TABLE_GRAD, PS_GEO_DENSE_TABLE_GRAD)}
CLIP_SCOPE = "gradient_clip"


def check_reads(ctx) -> None:
    """A finding for the first read of each trainer's main program that has no value (and,
    in geo, for a send of a table's gradient made dense)."""
    if not ctx.replay(*_READ_FIRST):
        _check_reads(ctx)


# where trainer_reads_first keeps what check_reads finds (CheckContext.recording)
_READ_FIRST = ("trainer_reads", "")


def trainer_reads_first(ctx) -> None:
    """check_reads run ahead of its turn, what it finds kept for it (a streamed check's,
    stream.py: before the pservers are read, it reads only the trainers' programs and the
    original's feeds). What it holds while it runs (every name a trainer's ops write: a set of
    tens of thousands of names at 64 pservers) is then not held on top of the pservers'
    index."""
    with ctx.recording(*_READ_FIRST):
        _check_reads(ctx)


def _check_reads(ctx) -> None:
    feeds = ctx.memo("data_names", lambda: frozenset(data_names(ctx.main)))
    for tid in sorted(ctx.split.trainers):
        part = ctx.split.trainers[tid]["main"]
        misses = trainer_misses(part.prog, feeds)
        if misses:
            _report(ctx, part, misses)
        elif ctx.geo:
            _geo_dense_sends(ctx, part)


def _geo_dense_sends(ctx, part: Part) -> None:
    """geo: a send of a sparse table's gradient that an op made dense (a weight decay's sum):
    the geo communicator reads its rows, the trainer fails there."""
    found = dense_at(part.prog)
    if not found:
        return
    j, op, name = found[0]
    fault = _GEO_DENSE.get(ctx.config.style, "")
    ctx.add("send", part, 0, j, "%ssend of %s, a table's SelectedRows gradient made dense by "
            "an op after it (a weight decay's sum): the geo communicator reads the rows of a "
            "SelectedRows gradient, so the trainer fails here at its first push%s" % (
                "Paddle fault %s: " % fault if fault else "", name,
                " (%d more such sends)" % (len(found) - 1) if len(found) > 1 else ""),
            "the table's SelectedRows gradient", fault=fault)


def trainer_misses(prog, feeds) -> list:
    """The Unvalued reads of a trainer's main program (ir/dataflow.py), its feeds and
    persistable vars given."""
    given = set(feeds)
    for block in prog.blocks:
        given.update(persistable_names(block.vars))
    return unvalued_reads(prog, given)


def _report(ctx, part: Part, misses: list) -> None:
    first = misses[0]
    op = part.prog.blocks[first.block].ops[first.index]
    fault = _fault(ctx, op, first)
    if not first.empty_rows:
        what = "which no op of the trainer writes before it (nor is it fed, received or " \
               "initialized)"
    elif first.empty_from == (first.name,):
        what = "an empty SelectedRows (no op of the trainer writes its rows)"
    else:
        names = list(first.empty_from[:3]) + (["..."] if len(first.empty_from) > 3 else [])
        what = "an empty SelectedRows (made of %s, whose rows no op of the trainer writes)" \
            % ", ".join(names)
    more = len(misses) - 1
    ctx.add("send" if first.op_type == "send" else "trainer", part, first.block, first.index, "%s%s reads %s, %s: the trainer fails "
            "here at its first step%s" % (
                "Paddle fault %s: " % fault if fault else "", first.op_type, first.name, what,
                " (%d more such read%s after it)" % (more, "s" * (more > 1)) if more else ""),
            "what `paddle_faults: fix` writes: " + KIND[fault].fix.split(";")[0] if fault
            else "a value for every var an op reads", fault=fault)


def _fault(ctx, op, miss) -> str:
    """The Paddle fault that explains an unvalued read, or ""."""
    style = ctx.config.style
    clip = roles.is_clip_op(op, CLIP_SCOPE)
    if miss.empty_rows and clip and style in _SPARSE_CLIP:
        return _SPARSE_CLIP[style]
    if KIND[CLASSIC_CLIP_ON_PSERVER].style == style:
        outs = ctx.memo("clip_outputs", lambda: _clip_outputs(ctx.main))
        base = miss.name.split(".block")[0].split(".trainer_")[0]
        if base in outs:
            return CLASSIC_CLIP_ON_PSERVER
    return ""


def _clip_outputs(main) -> set:
    """The vars the original's gradient-clip ops write."""
    return {n for op in main.global_block.ops if roles.is_clip_op(op, CLIP_SCOPE)
            for n in op.output("Out")}
