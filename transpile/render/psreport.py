"""What a ps-style split placed where, read from its plan.json: the tables section of report.md
and the summary `split` prints. Formatting only."""
from __future__ import annotations

from ..plan.faults import summary as faults_summary
from . import fold
from .show import ENDPOINTS_WHERE, emit, human_bytes, load_bar, program_rows, surplus_line


def _dims(t: dict) -> str:
    if t.get("kind") == "sparse":
        rows = t.get("rows")
        return "%s x %s" % ("unbounded" if not rows else rows, t.get("dim"))
    if t.get("kind") in ("dense", "datanorm"):
        return "%s" % t.get("rows")
    return ""


def _rule(t: dict) -> str:
    rule = t.get("rule")
    if not rule:
        return ""
    r = t.get("sgd_rule")
    if r:
        return "%s (%s, lr %.6g, init range %.6g)" % (rule, r.get("name"),
                                                      r.get("learning_rate", 0),
                                                      r.get("initial_range", 0))
    return rule


RULE_SHORT = (("learning_rate", "lr"), ("initial_g2sum", "g2sum"), ("initial_range", "range"),
              ("beta1_decay_rate", "beta1"), ("beta2_decay_rate", "beta2"),
              ("ada_epsilon", "eps"), ("weight_bounds", "bounds"))
CTR_SHORT = (("nonclk_coeff", "nonclk"), ("click_coeff", "click"), ("base_threshold", "base"),
             ("delta_threshold", "delta"), ("delta_keep_days", "keep days"),
             ("show_click_decay_rate", "decay"), ("delete_threshold", "delete"),
             ("delete_after_unseen_days", "unseen days"),
             ("ssd_unseenday_threshold", "ssd unseen"), ("show_scale", "show_scale"),
             ("zero_init", "zero_init"))


def _num(v) -> str:
    if isinstance(v, list):
        return "[%s]" % ", ".join(_num(x) for x in v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return "%.6g" % v if isinstance(v, float) else str(v)


def rule_text(r: dict) -> str:
    """`SparseAdaGradSGDRule (lr 0.05, g2sum 3, range 0.0001, bounds [-10, 10])`."""
    params = next((r[b] for b in ("naive", "adagrad", "adam") if b in r), {})
    inner = ", ".join("%s %s" % (short, _num(params[k])) for k, short in RULE_SHORT
                      if k in params)
    return "%s%s" % (r.get("name"), " (%s)" % inner if inner else "")


def ctr_text(ctr: dict) -> str:
    return ", ".join("%s %s" % (short, _num(ctr[k])) for k, short in CTR_SHORT if k in ctr)


def settings_rows(t: dict) -> list:
    """[(what, text)] of a sparse table's settings: class and shards, accessor, rules,
    thresholds, cache, where they come from."""
    a = t.get("accessor") or {}
    if "embed_rule" not in a:
        return []
    cache = ", ".join("%s %s" % (k, _num(v)) for k, v in
                      (t.get("table_settings") or {}).items())
    rows = [("table", "%s, %s shards%s" % (t.get("class"), t.get("shard_num"),
                                          "; " + cache if cache else "")),
            ("accessor", "%s, fea_dim %s, embedx_dim %s, embedx_threshold %s" % (
                a.get("class"), a.get("fea_dim"), a.get("embedx_dim"),
                a.get("embedx_threshold"))),
            ("embed rule", rule_text(a["embed_rule"])),
            ("embedx rule", rule_text(a["embedx_rule"])),
            ("thresholds", ctr_text(a.get("ctr") or {}))]
    rows.append(("from", t.get("settings_from") or "Paddle's defaults and the program"))
    return rows


def unbounded(plan: dict) -> str:
    """What the `unbounded` size of a sparse table means, or "" when no table has it."""
    names = ["%s (%s)" % (t.get("id"), t.get("name")) for t in plan.get("tables") or []
             if t.get("kind") == "sparse" and not t.get("rows")]
    if not names:
        return ""
    return ("unbounded: table%s %s: a distributed table (sparse_embedding, is_distributed), "
            "to which Paddle's descriptors give no row count (table_num 0): the servers make "
            "its rows as the ids arrive" % ("s" * (len(names) > 1), ", ".join(names)))


def _where(t: dict) -> str:
    if t.get("kind") == "sparse":
        return "every server (%s shards by feature id)" % t.get("shard_num")
    shards = t.get("shards")
    if shards:     # the endpoints' table below lists every shard of a long list
        return fold.names(["%s: %s" % kv for kv in shards.items()], "shards")[0]
    return "every server"


def _endpoint_lines(plan: dict) -> list:
    """The report's table of what each server holds of the dense table (folded when long)."""
    out: list = []
    eps = plan.get("endpoints") or {}
    if eps:
        top = max([h.get("bytes", 0) for h in eps.values()] or [0]) or 1
        rows = []
        for ep, h in eps.items():
            b = int(h.get("bytes", 0) or 0)
            rows.append("| %s | %s | %s | `%s` |" % (
                ep, ", ".join("table %s: %s" % kv for kv in (h.get("dense_shard") or {}).items())
                or "-", human_bytes(b), "█" * round(20 * b / top) or "·"))
        out += fold.table(["| endpoint | dense values held | bytes | load |",
                           "|---|---|---|---|"], rows, "endpoints",
                          "plan.json's `endpoints` lists them")
        line = surplus_line(plan)
        if line:
            out += [line[0].upper() + line[1:] + ".", ""]
        out.append("Bytes count the dense table's values on each server (its shard of every "
                   "parameter and optimizer state); sparse tables grow with the ids seen.")
        out.append("")
    return out


def table_lines(plan: dict) -> list[str]:
    """The report's tables and trainers sections."""
    out = ["## Tables", "",
           "What worker_desc.txt and server_desc.txt describe: each sparse table is sharded "
           "by feature id over every server; the dense parameters are merged into one table "
           "whose elements the servers hold in contiguous shards.", ""]
    rows = []
    for t in plan.get("tables") or []:
        name = t.get("name")
        if t.get("kind") in ("dense", "datanorm"):
            name = "%s (%d params)" % (name, len(t.get("params") or []))
        rows.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            t.get("id"), t.get("kind"), t.get("class"), name, _dims(t), _rule(t),
            "" if t.get("kind") == "barrier" else _where(t)))
    out += fold.table(["| id | kind | class | name | size | rule | held by |",
                       "|---|---|---|---|---|---|---|"], rows, "tables",
                      "plan.json's `tables` lists them")
    if unbounded(plan):
        out += ["Size " + unbounded(plan) + ".", ""]
    for t in plan.get("tables") or []:
        if t.get("kind") in ("dense", "datanorm"):
            inline, block = fold.names(t.get("params") or [], "parameters")
            out += ["Table %s merges: %s." % (t.get("id"), inline), ""] + block
    sparse = [t for t in plan.get("tables") or [] if settings_rows(t)]
    if sparse:
        out += ["### Sparse table settings", "",
                "The accessor and SGD rules of each sparse table as the descriptors give "
                "them to the servers (the config's table_parameters / fleet_desc_configs, "
                "then Paddle's defaults and the program's learning rate and initializers).",
                ""]
        rows = ["| %s | %s | %s | %s |" % (t.get("id"), t.get("name"), what, text)
                for t in sparse for what, text in settings_rows(t)]
        out += fold.table(["| id | table | setting | value |", "|---|---|---|---|"], rows,
                          "settings of %d sparse tables" % len(sparse),
                          "`pstranspile plan` prints every table's")
    out += _endpoint_lines(plan)
    trainers = plan.get("trainers") or {}
    if trainers:
        out += ["## What each trainer pulls, pushes and sends", ""]
        rows, folded, seen = [], [], set()

        def short(text_and_block):
            inline, block = text_and_block
            if block and tuple(block) not in seen:      # every trainer has the same lists
                seen.add(tuple(block))
                folded.extend(block)
            return inline

        def ids(p):
            return short(fold.names(p["ids"], "ids of table %s" % p["table_id"]))
        for tid, tr in trainers.items():
            pulls = short(fold.names(["table %s (%s) by %s" % (p["table_id"], p["table"], ids(p))
                                      for p in tr.get("pull") or []], "pulls", sep="; ")) or "-"
            pushes = short(fold.names(["table %s by %s" % (p["table_id"], ids(p))
                                       for p in tr.get("push") or []], "pushes", sep="; ")) or "-"
            sends = short(fold.names(["%s to table %s (%d vars)" % (s["queue"], s["table_id"],
                                                                    len(s["vars"]))
                                      for s in tr.get("send") or []], "sends", sep="; ")) or "-"
            dims = ", ".join("table %s: %s" % kv for kv in (tr.get("dense_dims") or {}).items())
            rows.append("| %s | %s | %s | %s | %s | %s |" % (
                tid, pulls, pushes, sends, "yes" if tr.get("barrier") else "no", dims or "-"))
        out += fold.table(["| trainer | pulls | pushes | sends | barrier | dense dims |",
                           "|---|---|---|---|---|---|"], rows, "trainers") + folded
    for note in plan.get("notes") or []:
        out.append("Note: %s." % note)
    if plan.get("notes"):
        out.append("")
    return out


def summary_lines(plan: dict, out_dir: str):
    """(style, text) lines of `split`'s summary of a ps split."""
    cfg = plan["config"]
    yield "bold", "split (ps style, %s mode, %d trainers, %d pservers) -> %s" % (
        plan["mode"], cfg["trainers"], len(cfg["pservers"]), out_dir)
    yield from _table_rows(plan)
    yield from program_rows(plan)
    for note in plan.get("notes") or []:
        yield "", "  note: " + note
    line = faults_summary(plan.get("faults") or [])
    if line:
        yield "yellow" if "reproduced" in line else "", "  " + line


def plan_lines(plan: dict, source: str = ""):
    """(style, text) lines of `pstranspile plan` for the ps style: the tables, the dense
    shards, what each trainer exchanges (a ps split has no split methods to compare)."""
    cfg = plan["config"]
    yield "bold", "plan (ps style, %s mode, %d trainers, %d pservers)%s" % (
        plan["mode"], cfg["trainers"], len(cfg["pservers"]), (": " + source) if source else "")
    yield from _table_rows(plan)
    for t in plan.get("tables") or []:
        rows = settings_rows(t)
        if rows:
            yield "bold", "  table %s (%s)" % (t["id"], t["name"])
            for what, text in rows:
                yield "", "    %-12s %s" % (what, text)
    yield "bold", "  %-8s %s" % ("trainer", "sends / pulls / pushes")
    for tid, tr in (plan.get("trainers") or {}).items():
        parts = ["%s -> table %s" % (s["queue"], s["table_id"]) for s in tr.get("send") or []]
        parts += ["pull table %s" % p["table_id"] for p in tr.get("pull") or []]
        parts += ["push table %s" % p["table_id"] for p in tr.get("push") or []]
        if tr.get("barrier"):
            parts.append("send_barrier")
        yield "", "  %-8s %s" % (tid, ", ".join(parts) or "-")
    for note in plan.get("notes") or []:
        yield "", "  note: " + note


def _table_rows(plan: dict):
    eps = plan["config"]["pservers"]
    yield "bold", "  %-4s %-8s %-22s %-28s %s" % ("id", "kind", "class", "name", "size")
    for t in plan.get("tables") or []:
        yield "", "  %-4s %-8s %-22s %-28s %s" % (t["id"], t["kind"], t["class"], t["name"],
                                                  _dims(t))
    if unbounded(plan):
        yield "", "  " + unbounded(plan)
    held = plan["endpoints"]
    top = max([held[ep]["bytes"] for ep in eps] or [0])
    yield "bold", "  %-22s %10s  dense load" % ("endpoint", "dense held")
    for line in fold.head(["  %-22s %10s  %s" % (ep, human_bytes(held[ep]["bytes"]),
                                                  load_bar(held[ep]["bytes"], top))
                           for ep in eps], "endpoints", ENDPOINTS_WHERE):
        yield "", line
    line = surplus_line(plan)
    if line:
        yield "yellow", "  " + line


def print_summary(plan: dict, out_dir: str, color: bool = False) -> None:
    emit(summary_lines(plan, out_dir), color)
