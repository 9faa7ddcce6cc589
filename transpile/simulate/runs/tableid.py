"""Fleet's sparse tables addressed by table id: `distributed_lookup_table` with a `table_id`
(no endpoints) and `distributed_push_sparse`, executed with the table semantics the split
itself defines.

A table id names a sparse context of the trainer's runtime.json: the context's own `table_id`
when it has one (>= 0), else the number Paddle's `distributed_ops_pass` gave it — the sparse
contexts in runtime.json's order, counted from 1 when the program has dense parameters (table 0
is then the dense table) and from 0 when it has none. The context's `split_varnames`,
`split_endpoints` and `sections` cut the table's rows into blocks; on its endpoint a block is
the parameter that the optimize op reading the block's grad updates (or, without one, the var
named like the grad block without `@GRAD`).

- lookup: each id goes to the block holding its row, the rows come back in order (padding ids
  give zeros);
- push: the ids and the lookup outputs' grads make the table's SelectedRows grad (one row per
  id, repeats kept), cut by rows into the context's blocks and delivered to their endpoints as
  a `send` of the context would.

Where the split does not hold together (a table id no context names, a context for another
table, a block no pserver serves), the run stops with that reason (SimError, exit 1).
"""
from __future__ import annotations

import re

import numpy as np

from ..model.values import SelectedRows, SimError, split_rows

_TRAINER = re.compile(r"\.trainer_\d+(?=$|\.)")


def _table_of(name: str) -> str:
    """The table a push's W names: `emb@GRAD@RENAME@block0@0` -> `emb`."""
    return name.split("@GRAD")[0]


def sparse_contexts(runtime: dict) -> dict:
    """table id -> (context name, context) of the sparse tables of a runtime.json."""
    ctxs = runtime.get("send_ctx") or {}
    sparse = [(n, c) for n, c in ctxs.items()
              if c.get("is_sparse") and not c.get("is_tensor_table")]
    dense = any(not c.get("is_sparse") and not c.get("is_tensor_table") for c in ctxs.values())
    out = {}
    for i, (n, c) in enumerate(sparse):
        tid = c.get("table_id", -1)
        out[int(tid) if tid is not None and int(tid) >= 0 else i + (1 if dense else 0)] = (n, c)
    return out


def _context(tr, op, table: str):
    """(name, ctx) of the sparse context op's table_id names, checked against `table`."""
    if tr.runtime is None:
        raise SimError("%s of %s addresses table_id %s, which only the trainer's runtime.json "
                       "can resolve, and the split has none" % (op.type, table,
                                                                 op.attr("table_id")))
    tid = int(op.attr("table_id"))
    ctxs = sparse_contexts(tr.runtime)
    if tid not in ctxs:
        raise SimError("%s of %s has table_id %d, which no sparse send_ctx of %s's runtime.json "
                       "names (its sparse tables: %s)"
                       % (op.type, table, tid, tr.label,
                          ", ".join("%d = %s" % (k, n) for k, (n, _) in sorted(ctxs.items()))
                          or "none"))
    name, ctx = ctxs[tid]
    origin = ctx.get("origin_varnames") or [name]
    if not any(_owner(tr, o) == table for o in origin):
        own = _unordered(tr, ctxs, table)
        if own is not None:
            return own
        raise SimError("%s of %s has table_id %d, which is the send_ctx of %s in %s's "
                       "runtime.json, another table" % (op.type, table, tid, name, tr.label))
    return name, ctx


def _owner(tr, name: str) -> str:
    """The table a context's var carries: the param the original's update names it with in
    op_role_var (a clip's output, which the update read), else the name's `@GRAD` prefix."""
    ref = tr.cluster.reference
    owners = getattr(ref, "grad_owners", None)
    if owners is None:
        from ...ir import roles
        owners = {}
        for op in ref.main.global_block.ops:
            rv = op.attr(roles.ROLE_VAR_ATTR) or []
            for p, g in zip(rv[::2], rv[1::2]):
                owners.setdefault(g, p)
        ref.grad_owners = owners
    return owners.get(name) or _table_of(name)


def _unordered(tr, ctxs: dict, table: str):
    """(name, ctx) of `table`'s own sparse context when the trainer's table ids are a
    one-to-one assignment of the ids runtime.json's sparse contexts count to their tables, but
    in another order: `split --out` writes runtime.json's keys sorted, so the order of its
    contexts (what the positional ids count) is not the one the split numbered them in.
    None where they are not (two tables on one id, a table without a context)."""
    by_table = {}
    for name, ctx in ctxs.values():
        for o in ctx.get("origin_varnames") or [name]:
            by_table[_owner(tr, o)] = (name, ctx)
    ids = {}
    for op in tr.main.global_block.ops:
        if op.type in ("distributed_lookup_table", "distributed_push_sparse") \
                and op.attr("table_id") is not None and op.input("W"):
            t = _table_of(op.input("W")[0])
            if ids.setdefault(t, int(op.attr("table_id"))) != int(op.attr("table_id")):
                return None
    if table not in by_table or set(ids) - set(by_table) \
            or len(set(ids.values())) != len(ids) or set(ids.values()) - set(ctxs):
        return None
    return by_table[table]


def _blocks(cluster, tr, op, table, name, ctx):
    """[(first row, rows, endpoint, grad block, param block)] of a sparse context."""
    names = ctx.get("split_varnames") or []
    eps = ctx.get("split_endpoints") or []
    sections = [int(s) for s in ctx.get("sections") or []]
    if not (len(names) == len(eps) == len(sections)) or not names:
        raise SimError("send_ctx %s: %d split_varnames, %d endpoints, %d sections"
                       % (name, len(names), len(eps), len(sections)))
    out, start = [], 0
    for g, ep, h in zip(names, eps, sections):
        ps = cluster.pserver(ep, tr.label)
        param = ps.param_for_grad(_TRAINER.sub("", g))
        if param is None:
            raise SimError("%s of %s (table_id %s): pserver %s serves no block of the table for "
                           "%s (no optimize op updates a parameter with it, and it holds no %s)"
                           % (op.type, table, op.attr("table_id"), ep, g,
                              _TRAINER.sub("", g).replace("@GRAD", "")))
        out.append((start, h, ep, g, param))
        start += h
    return out


def lookup(cluster, tr, ex, block_idx, op):
    """distributed_lookup_table by table_id: rows of the pservers' table blocks."""
    table = (op.input("W") or ["?"])[0]
    name, ctx = _context(tr, op, table)
    blocks = _blocks(cluster, tr, op, table, name, ctx)
    height = blocks[-1][0] + blocks[-1][1]
    starts = np.array([b[0] for b in blocks])
    v2 = op.attr("lookup_table_version", "lookup_table") == "lookup_table_v2"
    pad = op.attr("padding_idx", -1)
    for ids_name, out_name in zip(op.input("Ids"), op.output("Outputs")):
        ids = np.asarray(ex.read(ids_name)).astype(np.int64)
        flat = ids.reshape(-1)
        if flat.size and (flat.min() < 0 or flat.max() >= height):
            raise SimError("%s of %s: id %d of %s outside the table's %d rows (send_ctx %s)"
                           % (op.type, table, int(flat.max()), ids_name, height, name))
        which = np.searchsorted(starts, flat, side="right") - 1
        rows = None
        for k, (r0, _, ep, _, param) in enumerate(blocks):
            m = which == k
            if not m.any():
                continue
            got = np.asarray(cluster.pserver(ep, tr.label).lookup(param, flat[m] - r0,
                                                                   tr.label))
            if rows is None:
                rows = np.zeros((flat.size,) + got.shape[1:], dtype=got.dtype)
            rows[m] = got
        if rows is None:
            w = ex.program.find_var(out_name)
            width = (w.shape[-1] if w is not None and w.shape else 1)
            rows = np.zeros((0, width), dtype=cluster.float_dtype)
        if pad is not None and pad != -1:
            rows = np.where((flat == pad)[:, None], 0.0, rows)
        lead = ids.shape if v2 else ids.shape[:-1]
        ex.write(block_idx, out_name, rows.reshape(tuple(lead) + rows.shape[1:]),
                 tr.scope.lods.get(ids_name))


def push(cluster, tr, ex, op):
    """distributed_push_sparse: the table's SelectedRows grad, sent by its context."""
    table = _table_of((op.input("W") or ["?"])[0])
    name, ctx = _context(tr, op, table)
    blocks = _blocks(cluster, tr, op, table, name, ctx)
    height = blocks[-1][0] + blocks[-1][1]
    ids_names, grads = op.input("Ids"), op.input("Outputs")
    if len(ids_names) != len(grads):
        raise SimError("%s of %s: %d Ids for %d Outputs" % (op.type, table, len(ids_names),
                                                            len(grads)))
    rows, vals = [], []
    for i_name, g_name in zip(ids_names, grads):
        ids = np.asarray(ex.read(i_name)).astype(np.int64).reshape(-1)
        g = np.asarray(ex.read(g_name))
        if g.size != ids.size * (g.size // max(ids.size, 1)) or not ids.size:
            continue
        rows.append(ids)
        vals.append(g.reshape(ids.size, -1))
    if not rows:
        raise SimError("%s of %s pushes no ids" % (op.type, table))
    grad = SelectedRows(np.concatenate(rows), np.concatenate(vals), height)
    for part, (_, _, ep, g, _) in zip(split_rows(grad, [b[1] for b in blocks], name), blocks):
        cluster.pserver(ep, tr.label).receive(g, part, None, tr.label)
