"""The edges of a trainer: each var it sends to or receives from one endpoint, from its send and
recv ops (classic) or runtime.json's send_ctx / recv_ctx (fleet); trainer.py checks them.
"""
from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass
from typing import Optional

from .loading import Part


@dataclass(slots=True)
class Edge:
    """One var a trainer sends to or receives from one endpoint."""
    name: str
    endpoint: str
    part: str
    block: Optional[int]
    op: Optional[int]
    section: Optional[int] = None     # rows, from runtime.json
    via: str = ""                     # "send", "recv", "send_ctx", "recv_ctx"
    counter: bool = False             # the LR-decay step counter, sent to every pserver


def edges_from_ops(ctx, part: Part, op_type: str, slot: str, out: "EdgeRuns") -> None:
    """Classic style: one edge per var of each send (X) / recv (Out) op and its epmap, added
    to `out` an entry per op (the op's own lists of names and endpoints: only read)."""
    prog = part.prog
    # the attrs read here are not kept by the ops (_peeked: at 64 pservers, an epmap of
    # tens of endpoints and a decoded attr or two per send and recv, megabytes), each epmap
    # one tuple per list of endpoints (a few hundred among thousands of ops)
    shared = ctx.memo("edge_endpoints", dict)
    for bi in sorted(ctx.reach.get(part.name, {0})):
        for j, op in enumerate(prog.blocks[bi].ops):
            if op.type != op_type:
                continue
            eps = tuple(_peeked(op, "epmap") or ())
            eps = shared.setdefault(eps, eps)
            names = _listed(op.input(slot) if slot == "X" else op.output(slot))
            if not eps:
                continue
            # runtime_split_send_recv: one var on the wire per endpoint, split at run time
            split_names = _listed(_peeked(op, "send_varnames" if op_type == "send"
                                              else "recv_varnames"))
            if split_names:
                names = split_names
            counter = _is_broadcast(op, names, eps)
            if counter:
                names = names * len(eps)
            if len(eps) != len(names):
                ctx.add(op_type, part, bi, j,
                        "%s has %d vars but %d epmap entries" % (op_type, len(names), len(eps)),
                        "one endpoint per var")
                continue
            out.add_run(names, eps, part.name, bi, j, op_type, counter)


def _peeked(op, name: str):
    """op.attr(name), where the op is as read decoded for this call only (OpSource.peek: the
    op keeps nothing of it)."""
    src = op.source
    if src is None or op.attrs_decoded or name in op.attr_patch:
        return op.attr(name)
    a = src.peek(name)
    return None if a is None else a.value


def _listed(value) -> list:
    """list(value or []), a list as it is (an op's own, never changed here: a copy per send
    and recv op of a trainer at 64 pservers was megabytes held with its edges)."""
    return value if value.__class__ is list else list(value or [])


class EdgeRuns:
    """Edges kept an entry per op (its names and endpoints: a send or recv of a parameter's
    64 slices is one entry, not 64 Edges), each Edge made when asked for (gone through in
    order, or the i-th: edge(i)): what a classic trainer sends and receives at 64 pservers
    is tens of thousands of edges, held while the pservers are read and the trainer checks
    run. `append` keeps an Edge as it is."""
    __slots__ = ("items", "_starts")

    def __init__(self):
        self.items: list = []
        self._starts = None         # the index of each item's first edge (edge())

    def append(self, edge: Edge) -> None:
        self.items.append(edge)
        self._starts = None

    def add_run(self, names: list, eps: list, part: str, block: int, op: int, via: str,
                counter: bool) -> None:
        self.items.append((names, eps, part, block, op, via, counter))
        self._starts = None

    def __iter__(self):
        for item in self.items:
            if item.__class__ is Edge:
                yield item
                continue
            names, eps, part, block, op, via, counter = item
            for n, ep in zip(names, eps):
                yield Edge(n, ep, part, block, op, via=via, counter=counter)

    def heads(self):
        """(name, endpoint, part) of each edge, in order, no Edge made (what streamed_edges and
        the recv checks read of all of tens of thousands)."""
        for item in self.items:
            if item.__class__ is Edge:
                yield item.name, item.endpoint, item.part
            else:
                part = item[2]
                for n, ep in zip(item[0], item[1]):
                    yield n, ep, part

    def edge(self, i: int) -> Edge:
        """The i-th edge (as iterating them gives it)."""
        starts = self._starts
        if starts is None:
            starts = self._starts = array("q")
            at = 0
            for item in self.items:
                starts.append(at)
                at += 1 if item.__class__ is Edge else min(len(item[0]), len(item[1]))
        k = bisect_right(starts, i) - 1
        item = self.items[k]
        if item.__class__ is Edge:
            return item
        names, eps, part, block, op, via, counter = item
        j = i - starts[k]
        return Edge(names[j], eps[j], part, block, op, via=via, counter=counter)


def _is_broadcast(op, names: list, eps: list) -> bool:
    """Classic async/half_async with LR decay: the trainer's step counter goes to every pserver
    (each runs the LR-decay block), one var with every endpoint, sent with merge_add."""
    return (op.type == "send" and len(names) == 1 and len(eps) > 1
            and op.attr("merge_add") is True and not op.attr("sections"))


def edges_from_ctx(ctx, part_name, rt: dict, key: str, out) -> None:
    """Fleet style: one edge per split var of runtime.json's send_ctx / recv_ctx."""
    for var, c in (rt.get(key) or {}).items():
        if not isinstance(c, dict) or c.get("is_tensor_table"):
            continue
        names = list(c.get("split_varnames") or [])
        eps = list(c.get("split_endpoints") or [])
        secs = list(c.get("sections") or [])
        if len(names) != len(eps):
            ctx.add("send" if key == "send_ctx" else "recv", part_name, None, None,
                    "%s %s: %d split_varnames but %d split_endpoints"
                    % (key, var, len(names), len(eps)), "one endpoint per split var")
            continue
        for i, (n, ep) in enumerate(zip(names, eps)):
            out.append(Edge(n, ep, part_name, None, None,
                             secs[i] if i < len(secs) and len(secs) == len(names) else None,
                             via=key))
