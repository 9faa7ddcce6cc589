"""What a var a trainer sends meets on its pserver: a block that reads it (a step counter: an
LR-decay block), under the block's shape; what it receives, the shape of the block it comes
from. The trainer checks (trainer.py) ask this of every edge; a streamed check (stream.py)
asks it of each send while that pserver's programs are read (`target_of`), keeps what it
found and lets the pserver's ops go."""
from __future__ import annotations

import re

from ..ir.vartable import type_of
from .ops import (fmt_shape, input_names, is_dense, is_dense_type, is_geo_update, is_static,
                  is_update_op)

# the per-peer copies Paddle makes of a sent grad: fc_w@GRAD.trainer_0
_PEER_SUFFIX = re.compile(r"\.(trainer|pserver)_\d+$")


def strip_peer(name: str) -> list:
    """Names a sent var may be known by on the pserver: itself, without .trainer_N/.pserver_N."""
    out = [name]
    if ".trainer_" not in name and ".pserver_" not in name:
        return out          # (_PEER_SUFFIX cannot match: most names)
    n = name
    while _PEER_SUFFIX.search(n):
        n = _PEER_SUFFIX.sub("", n)
        out.append(n)
    return out


def sent_key(keys: dict, e):
    """The grad_to_block_id key (of `keys`) the var of send edge `e` arrives as, or None."""
    if e.name in keys:
        return e.name       # (its own name, strip_peer's first: most sends)
    return next((c for c in strip_peer(e.name) if c in keys), None)


def target_of(ctx, e) -> None:
    """What the trainer checks find of send edge `e` at its pserver (check_counter_target /
    check_send_target), where they ask it: nothing for a control var, an endpoint without
    grad keys or a var it does not know (the trainer checks say those)."""
    keys = ctx.grad_keys.get(e.endpoint)
    if e.name.startswith("__control_var@") or keys is None:
        return
    if e.counter:
        check_counter_target(ctx, e)
        return
    key = sent_key(keys, e)
    if key is not None:
        check_send_target(ctx, e, key)


def check_counter_target(ctx, e) -> None:
    """A trainer's step counter must be read by the pserver's LR-decay ops (which sum the
    trainers' counters into the global step)."""
    if e.name not in ctx.pserver_summary(e.endpoint).later_inputs:
        ctx.add("send", e.part, e.block, e.op,
                "sends the step counter %s to %s, where no block reads it"
                % (e.name, e.endpoint),
                "an LR-decay block on %s that sums the trainers' counters" % e.endpoint)


def check_send_target(ctx, e, key: str) -> None:
    """The pserver must read what was sent, and its shape must be the block's."""
    summary = ctx.pserver_summary(e.endpoint)
    bi = ctx.grad_keys[e.endpoint][key]
    if not 0 < bi < summary.n_blocks:
        return
    ops = summary.blocks[bi]
    first = _first_reader(ops, e.name)
    if e.name != key:
        if first < 0:
            ctx.add("send", e.part, e.block, e.op,
                    "sends %s, which %s block %d never reads" % (e.name, e.endpoint, bi),
                    "a name block %d merges (%s)" % (bi, ", ".join(
                        n for op in ops if op.type == "sum" for n in op.inputs.get("X", ()))
                        or key))
    elif first != 0:
        w = _overwriter(ops, key, e.name)
        if w >= 0:
            ctx.add("send", e.part, e.block, e.op,
                    "sends %s, which %s block %d overwrites with op %d (%s) before using it"
                    % (e.name, e.endpoint, bi, w, ops[w].type),
                    "one of the names op %d reads: %s" % (w, ", ".join(input_names(ops[w]))))
    pb = ctx.param_block(e.endpoint, key)
    if pb is None or not is_dense(pb.var) or pb.sparse:
        return
    check_transfer_shape(ctx, "send", e, pb)


def _first_reader(ops, name: str) -> int:
    """The index of the first of `ops` that reads `name`, or -1 (ops looked at one by one:
    a send to each of tens of thousands of blocks)."""
    if name:
        for j, op in enumerate(ops):
            for args in op.inputs.values():
                if name in args:
                    return j
    return -1


def _overwriter(ops, key: str, name: str) -> int:
    """The index of the first of `ops` that writes `key` (neither an optimizer update nor
    geo's sum(param, delta)) when no such writer reads `name` as its X, else -1."""
    first = -1
    for j, op in enumerate(ops):
        for args in op.outputs.values():
            if key in args:
                break
        else:
            continue            # (writes no `key`)
        if is_update_op(op) or is_geo_update(op):
            continue
        if name in op.inputs.get("X", ()):
            return -1
        if first < 0:
            first = j
    return first


# how a shape mismatch reads: (runtime.json sections, a program's var)
TRANSFER_WORDING = {
    "send": ("send_ctx sends %d rows of %s to %s", "sends %s %s to %s"),
    "recv": ("recv_ctx expects %d rows of %s from %s", "receives %s as %s from %s"),
}


def check_transfer_shape(ctx, kind: str, e, pb) -> None:
    """A var sent to / received from a pserver must have the shape of the block there: by
    runtime.json's section (rows) in fleet style, by the trainer program's var otherwise."""
    rows_msg, var_msg = TRANSFER_WORDING[kind]
    shape = pb.var.shape
    if e.section is not None:
        if shape and e.section != shape[0]:
            ctx.add(kind, e.part, None, None, rows_msg % (e.section, e.name, e.endpoint),
                    "%d rows, the first dim of %s there" % (shape[0], pb.param))
        return
    tt = _trainer_type(ctx, e)
    if tt is None:
        return
    tshape = tt.shape
    if tshape != shape and is_dense_type(tt) and is_static(tshape) and \
            tuple(tshape) != tuple(shape):
        ctx.add(kind, e.part, e.block, e.op, var_msg % (e.name, fmt_shape(tshape), e.endpoint),
                "%s, the shape of %s there" % (fmt_shape(shape), pb.param))


def _trainer_type(ctx, e):
    """The VarType of the var edge `e` names in its trainer program, as seen from its block
    (find_var; most are in block 0, looked up there first, without making the Var), or
    None."""
    tp = ctx.trainer_prog(e.part)
    if tp is None:
        return None
    bi = e.block or 0
    if bi == 0 and tp.blocks:
        tt = type_of(tp.blocks[0].vars, e.name)
        if tt is not None:
            return tt
    tv = tp.find_var(e.name, bi)
    return None if tv is None else tv.type
