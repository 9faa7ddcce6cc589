"""report.md's picture of a split: a mermaid flowchart of who sends what to whom, each step.

Classic and fleet: the trainers and each pserver, with the gradient (or, in geo, delta) blocks
the trainers send to it, the parameter blocks they receive from it, and the rows of the sparse
tables they pull from it and push to it, with their sizes. Style ps: the trainers and the
tables of the descriptors (held by the servers), with the dense table's send and pull, and each
sparse table's pulls and pushes. Read off plan.json only (formatting: nothing decided here);
GitHub, GitLab and most markdown viewers draw it.
"""
from __future__ import annotations

from ..core.jsonfmt import column
from .show import human_bytes

MAX_PSERVERS = 8        # pserver nodes drawn; the rest are one node with their sums
MAX_TABLES = 6          # sparse table nodes drawn (style ps); the rest are one node
MAX_NAMES = 4           # names listed in a label before it gives a count only
FLOAT = 4               # bytes of a float32 value (the servers' tables are float32)


def _esc(text: str) -> str:
    """A label's text inside mermaid's double quotes (entity codes for what would end it)."""
    return (str(text).replace("#", "#35;").replace('"', "#quot;").replace("<", "#lt;")
            .replace(">", "#gt;"))


def _label(*lines) -> str:
    return '"%s"' % "<br/>".join(_esc(x) for x in lines if x)


def _plural(n: int, word: str) -> str:
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def _names(names: list, what: str) -> str:
    """`2 id slots (C1, C2)`; past MAX_NAMES names only the count."""
    names = list(names)
    if len(names) <= MAX_NAMES:
        return "%s (%s)" % (_plural(len(names), what), ", ".join(names))
    return _plural(len(names), what)


def _trainers_node(plan: dict) -> str:
    n = int(plan["config"]["trainers"])
    if n == 1:
        return 'T[%s]' % _label("trainer 0")
    return 'T[%s]' % _label("%d trainers" % n, "trainer 0 … %d, each" % (n - 1))


def diagram_lines(plan: dict) -> list[str]:
    """The report's section: a heading, a sentence saying how to read it, the mermaid block."""
    if not plan or "config" not in plan:
        return []
    ps = "tables" in plan
    body = _ps_flows(plan) if ps else _block_flows(plan)
    geo = plan.get("mode") == "geo"
    when = ("every geo_push_nums steps" if geo else
            "each step" if plan.get("mode") == "sync" else "as often as the trainer sends")
    out = ["## Who sends what to whom", "",
           "What each trainer exchanges with the %s, %s (sizes are per trainer: "
           "float32 values; a sparse table's rows go by id, as many as the batch holds)."
           % ("servers' tables" if ps else "pservers", when), "",
           "```mermaid", "flowchart LR"]
    out += ["  " + line for line in body]
    out += ["```", ""]
    return out


# --- classic and fleet: blocks on pservers ------------------------------------------------------

def _row_bytes(param: dict) -> int:
    shape = param.get("shape") or [1]
    rows = max(1, int(shape[0]))
    return int(param.get("bytes", 0) or 0) // rows


def _empty() -> dict:
    return {"send": [0, 0], "recv": [0, 0], "rows": {}, "push": {}, "pull": {}}


def _endpoint_flows(plan: dict, geo: bool) -> dict:
    """{endpoint: {"send": [blocks, bytes], "recv": [blocks, bytes], "rows": {table: row
    bytes}, "push": {...}, "pull": {...}}}: what one trainer sends to and gets from each
    pserver. Remote tables are pulled and pushed by id; other sparse grads go as rows; in geo
    the trainer holds every table and sends row deltas."""
    params = {p["name"]: p for p in plan.get("params") or []}
    remote = set() if geo else {t["name"] for t in plan.get("sparse_tables") or []
                                if t.get("remote_prefetch") or t.get("distributed")}
    flows = {ep: _empty() for ep in plan["config"]["pservers"]}
    # (the fields of each block read as columns: a split's blocks are made as they are read)
    for g in plan.get("grads") or []:
        p = params.get(g.get("param")) or {}
        sizes = column(p.get("blocks") or [], "bytes")
        for i, ep in enumerate(column(g.get("blocks") or [], "endpoint")):
            f = flows.setdefault(ep, _empty())
            if g.get("param") in remote:
                f["push"][g["param"]] = _row_bytes(p)
            elif g.get("kind") == "SELECTED_ROWS" or (geo and p.get("sparse")):
                f["rows"][g["param"]] = _row_bytes(p)
            else:
                f["send"][0] += 1
                f["send"][1] += int(sizes[i]) if i < len(sizes) else 0
    for p in plan.get("params") or []:
        blocks = p.get("blocks") or []
        for ep, size in zip(column(blocks, "endpoint"), column(blocks, "bytes")):
            f = flows.setdefault(ep, _empty())
            if p["name"] in remote or (geo and p.get("sparse")):
                f["pull"][p["name"]] = _row_bytes(p)
            else:
                f["recv"][0] += 1
                f["recv"][1] += int(size or 0)
    return flows


def _merge(flows: list) -> dict:
    out = _empty()
    for f in flows:
        for k in ("send", "recv"):
            out[k] = [out[k][0] + f[k][0], out[k][1] + f[k][1]]
        for k in ("rows", "push", "pull"):
            out[k].update(f[k])
    return out


def _rows(tables: dict, text: str) -> list:
    """A line per table, `text` % (name, row bytes); past MAX_NAMES tables one line for all."""
    if len(tables) <= MAX_NAMES:
        return [text % (name, human_bytes(b)) for name, b in sorted(tables.items())]
    sizes = sorted(set(tables.values()))
    size = human_bytes(sizes[0]) if len(sizes) == 1 else "%s to %s" % (
        human_bytes(sizes[0]), human_bytes(sizes[-1]))
    return [text % ("%d tables" % len(tables), size)]


def _block_edges(node: str, f: dict, geo: bool) -> list:
    out = []
    up = []
    if f["send"][0]:
        up.append("%s, %s" % (_plural(f["send"][0], "delta block" if geo else "gradient block"),
                              human_bytes(f["send"][1])))
    up += _rows(f["rows"], "row deltas of %s (%s per row)" if geo else
                "sparse gradient: rows of %s (%s per row)")
    up += _rows(f["push"], "push: gradient rows of %s (%s per id)")
    down = []
    if f["recv"][0]:
        down.append("%s, %s" % (_plural(f["recv"][0], "parameter block"),
                                human_bytes(f["recv"][1])))
    down += _rows(f["pull"], "rows of %s that others changed (%s per row)" if geo else
                  "pull: rows of %s (%s per id)")
    if up:
        out.append("T -->|%s| %s" % (_label(*up), node))
    if down:
        out.append("%s -->|%s| T" % (node, _label(*down)))
    return out


def _block_flows(plan: dict) -> list:
    eps = list(plan["config"]["pservers"])
    held = plan.get("endpoints") or {}
    geo = plan.get("mode") == "geo"
    flows = _endpoint_flows(plan, geo)
    shown = eps if len(eps) <= MAX_PSERVERS else eps[:MAX_PSERVERS - 1]
    lines = [_trainers_node(plan)]
    for i, ep in enumerate(shown):
        h = held.get(ep) or {}
        node = "P%d" % i
        lines.append("%s[%s]" % (node, _label(
            "pserver %s" % ep, "holds %s, %s" % (_plural(int(h.get("param_blocks", 0) or 0),
                                                         "block"),
                                                 human_bytes(int(h.get("bytes", 0) or 0))))))
        lines += _block_edges(node, flows[ep], geo)
    rest = eps[len(shown):]
    if rest:
        total = sum(int((held.get(ep) or {}).get("bytes", 0) or 0) for ep in rest)
        lines.append("PR[%s]" % _label("%d more pservers" % len(rest),
                                       "%s … %s" % (rest[0], rest[-1]),
                                       "hold %s; flows are their sums" % human_bytes(total)))
        lines += _block_edges("PR", _merge([flows[ep] for ep in rest]), geo)
    return lines


# --- style ps: the tables of the descriptors ----------------------------------------------------

def _table_node(t: dict) -> str:
    kind = t.get("kind")
    head = "table %s: %s" % (t.get("id"), t.get("name"))
    if kind == "sparse":
        rows = t.get("rows") or "unbounded"
        return _label(head, "%s, %s x %s" % (t.get("class"), rows, t.get("dim")),
                      "sharded by feature id over every server")
    if kind in ("dense", "datanorm"):
        shards = t.get("shards") or {}
        vals = list(shards.values())
        held = (", ".join("%s: %s" % (ep, n) for ep, n in shards.items())
                if len(shards) <= 3 else "%s … %s values per server" % (max(vals), min(vals)))
        return _label(head, "%s, %s values (%s)" % (t.get("class"), t.get("rows"),
                                                   _plural(len(t.get("params") or []), "param")),
                      held)
    return _label(head, t.get("class"))


def _values(dims: list, per: str) -> str:
    """`16 values (64 B) per id`, or for several tables `1 to 16 values per id`."""
    lo, hi = min(dims), max(dims)
    if lo == hi:
        return "%s (%s) per %s" % (_plural(lo, "value"), human_bytes(FLOAT * lo), per)
    return "%d to %d values per %s" % (lo, hi, per)


def _grouped(items: list, tables: dict, node_of: dict) -> dict:
    """{node: [(item, its table)]} in the order the nodes first appear."""
    out: dict = {}
    for it in items:
        tid = it["table_id"]
        out.setdefault(node_of.get(tid, "TB%s" % tid), []).append((it, tables.get(tid) or {}))
    return out


def _what(group: list, verb: str) -> str:
    ids = [i for it, _ in group for i in it.get("ids") or []]
    if len(group) == 1:
        return "%s by %s" % (verb, _names(ids, "id slot"))
    return "%s of %d tables by %s" % (verb, len(group), _plural(len(ids), "id slot"))


def _ps_nodes(plan: dict, tables: dict, ex: dict) -> tuple:
    """The servers' subgraph lines and {table id: node}: past MAX_TABLES sparse tables, the
    rest are one node."""
    eps = plan["config"]["pservers"]
    sparse = [tid for tid, t in sorted(tables.items()) if t.get("kind") == "sparse"]
    rest = sparse[MAX_TABLES - 1:] if len(sparse) > MAX_TABLES else []
    node_of = {tid: "TBS" if tid in rest else "TB%s" % tid for tid in tables}
    lines = ['subgraph S[%s]' % _label(_plural(len(eps), "server") + (
        " (%s)" % ", ".join(eps) if len(eps) <= 3 else ""))]
    for tid, t in sorted(tables.items()):
        if tid in rest or (t.get("kind") == "barrier" and not ex.get("barrier")):
            continue
        lines.append("  %s[%s]" % (node_of[tid], _table_node(t)))
    if rest:
        lines.append("  TBS[%s]" % _label(
            "%d more sparse tables" % len(rest), "tables %s to %s" % (rest[0], rest[-1]),
            "sharded by feature id over every server"))
    lines.append("end")
    return lines, node_of


def _ps_flows(plan: dict) -> list:
    tables = {t["id"]: t for t in plan.get("tables") or []}
    trainers = plan.get("trainers") or {}
    ex = trainers.get("0") or next(iter(trainers.values()), {})
    geo = plan.get("mode") == "geo"
    nodes, node_of = _ps_nodes(plan, tables, ex)
    lines = [_trainers_node(plan)] + nodes
    for node, group in _grouped(ex.get("pull") or [], tables, node_of).items():
        lines.append("%s -->|%s| T" % (node, _label(
            _what(group, "pull: rows"), _values([int(t.get("dim") or 0) for _, t in group],
                                                "id"))))
    for node, group in _grouped(ex.get("push") or [], tables, node_of).items():
        lines.append("T -->|%s| %s" % (_label(
            _what(group, "push: gradients"),
            _values([int(t.get("dim") or 0) for _, t in group], "id") +
            ", with its show and click"), node))
    sparse_sends = [s for s in ex.get("send") or [] if s.get("is_sparse")]
    for node, group in _grouped(sparse_sends, tables, node_of).items():
        queues = _names([s["queue"] for s, _ in group], "queue")
        lines += ["T -->|%s| %s" % (_label("send %s: deltas of the rows it touched" % queues,
                                           _values([int(t.get("dim") or 0) for _, t in group],
                                                   "row")), node),
                  "%s -->|%s| T" % (node, _label("pull: the rows other trainers changed"))]
    for s in ex.get("send") or []:
        if not s.get("is_sparse"):
            lines += _dense_send(s, tables.get(s["table_id"]) or {})
    if geo:                     # the communicator sends the dense deltas and pulls them back
        for tid, t in sorted(tables.items()):
            if t.get("kind") == "dense":
                size = human_bytes(FLOAT * int(t.get("rows") or 0))
                lines.append("T -->|%s| TB%s" % (_label("dense deltas: %s values, %s" % (
                    t.get("rows"), size)), tid))
                lines.append("TB%s -->|%s| T" % (tid, _label("pull: %s values, %s" % (
                    t.get("rows"), size))))
    bar = next((tid for tid, t in tables.items() if t.get("kind") == "barrier"), None)
    if ex.get("barrier") and bar is not None:
        lines.append("T -.->|%s| TB%s" % (_label("send_barrier, each step"), bar))
    return lines


def _dense_send(s: dict, t: dict) -> list:
    tid = s["table_id"]
    values = int(t.get("rows") or 0)
    size = human_bytes(FLOAT * values)
    return ["T -->|%s| TB%s" % (_label("send %s: %s" % (s["queue"], _plural(
        len(s.get("vars") or []), "gradient")), "%d values, %s" % (values, size)), tid),
            "TB%s -->|%s| T" % (tid, _label("pull: %s" % _plural(len(t.get("params") or []),
                                                                  "parameter"),
                                            "%d values, %s" % (values, size)))]
