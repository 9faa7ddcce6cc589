"""OPS.md and SUMMARY.md of a paddlerec_inputs.py output folder (from its model folders)."""
import json
import os


def _models(out):
    """[(name, model.json dict or None, error line or None)], by name."""
    rows = []
    for name in sorted(os.listdir(out)):
        d = os.path.join(out, name)
        if not os.path.isdir(d):
            continue
        mj, err = os.path.join(d, "model.json"), os.path.join(d, "error.txt")
        if os.path.isfile(mj):
            with open(mj, encoding="utf-8") as f:
                rows.append((name, json.load(f), None))
        elif os.path.isfile(err):
            with open(err, encoding="utf-8") as f:
                rows.append((name, None, f.read().strip()))
    return rows


def ops_md(rows):
    """Every op type in any built model's main or startup program (all blocks, grad ops too)."""
    uses = {}
    for name, doc, _ in rows:
        if doc is None:
            continue
        for prog in ("main", "startup"):
            for op, n in doc[prog]["op_counts"].items():
                u = uses.setdefault(op, {})
                key = (name, prog)
                u[key] = u.get(key, 0) + n
    built = sum(1 for _, doc, _ in rows if doc is not None)
    lines = ["# Op types of the PaddleRec input programs", "",
             f"{len(uses)} op types over the main and startup programs (every block, grad and "
             f"optimizer ops included) of the {built} built models. `models` lists each model "
             "using the op, with `(s)` when only its startup program does; `count` is the "
             "number of ops over all of them.", "",
             "| op type | models | count | used by |", "| --- | ---: | ---: | --- |"]
    for op in sorted(uses):
        by_model = {}
        for (name, prog), n in uses[op].items():
            by_model.setdefault(name, set()).add(prog)
        shown = [m + ("" if "main" in progs else " (s)") for m, progs in sorted(by_model.items())]
        total = sum(uses[op].values())
        lines.append(f"| `{op}` | {len(by_model)} | {total} | {', '.join(shown)} |")
    return "\n".join(lines) + "\n"


def _feeds_text(feeds):
    """name[shape]:dtype, a run of 3 or more feeds of one shape and dtype as
    'first .. last (n x [shape]:dtype)'."""
    parts, i = [], 0
    while i < len(feeds):
        j = i
        key = (feeds[i]["shape"], feeds[i]["dtype"])
        while j + 1 < len(feeds) and (feeds[j + 1]["shape"], feeds[j + 1]["dtype"]) == key:
            j += 1
        f = feeds[i]
        if j - i >= 2:
            parts.append(f"{f['name']} .. {feeds[j]['name']} ({j - i + 1} x "
                         f"{f['shape']}:{f['dtype']})")
        else:
            parts.extend(f"{g['name']}{g['shape']}:{g['dtype']}" for g in feeds[i:j + 1])
        i = j + 1
    return ", ".join(parts)


def _summary_row(name, doc, err, note):
    if doc is None:
        why = err.replace("|", "/") + (f". Note: {note}" if note else "")
        return f"| {name} | not built | {why} | | | | | |"
    tables = doc["lookup_tables"]
    sparse = [f"{w} {'x'.join(str(d) for d in t['shape'])}" for w, t in tables.items()
              if t["is_sparse"] or t["is_distributed"]]
    dense_emb = sum(1 for t in tables.values() if not (t["is_sparse"] or t["is_distributed"]))
    feeds = _feeds_text(doc["feeds"])
    opt = doc["optimizer"]
    opt_s = opt["class"].rsplit(".", 1)[-1] + ("+" + opt["lr_scheduler"]["class"].rsplit(
        ".", 1)[-1] if opt.get("lr_scheduler") else "")
    patched = "; patched" if doc["patched"] else ""
    ops = (f"main {doc['main']['ops']} ops / {len(doc['main']['op_counts'])} types"
           f" / {doc['main']['blocks']} blocks, startup {doc['startup']['ops']}")
    params = f"{len(doc['params'])} ({doc['param_values']:,} values)"
    emb = "; ".join(sparse) if sparse else "none"
    if dense_emb:
        emb += f" (+{dense_emb} dense embedding)"
    size = f"{doc['main']['bytes'] / 1024:.0f} + {doc['startup']['bytes'] / 1024:.0f} KiB"
    return (f"| {name} | built{patched} | {opt_s}, loss `{doc['loss']}` | {ops} | {params} | "
            f"{emb} | {feeds} | {size} |")


def summary_md(rows, notes):
    built = [r for r in rows if r[1] is not None]
    lines = ["# PaddleRec input programs: summary", "",
             f"{len(rows)} models: {len(built)} built, {len(rows) - len(built)} not built. "
             "Sparse tables: lookup tables with is_sparse/is_distributed (name, shape). "
             "Size: main.pb + startup.pb.", "",
             "| model | outcome | optimizer, loss / why not | ops | params | sparse tables | "
             "feeds | size |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, doc, err in rows:
        lines.append(_summary_row(name, doc, err, notes.get(name)))
    return "\n".join(lines) + "\n"


def write_reports(out, notes):
    """OUT/OPS.md and OUT/SUMMARY.md; notes: {model name: why it is not built, beyond the
    exception}."""
    rows = _models(out)
    with open(os.path.join(out, "OPS.md"), "w", encoding="utf-8") as f:
        f.write(ops_md(rows))
    with open(os.path.join(out, "SUMMARY.md"), "w", encoding="utf-8") as f:
        f.write(summary_md(rows, notes))
