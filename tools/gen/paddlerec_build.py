"""Build ONE PaddleRec model's training program pair in Paddle 2.6.2 static mode (child process).

Run by tools/gen/paddlerec_inputs.py, one fresh interpreter per model, under Paddle's own Python
(PYTHONHASHSEED=0, PYTHONPATH=<protobuf 4.25.5>), with the request as JSON on stdin:

    {"tree": <PaddleRec work tree>, "model_dir": "models/rank/autoint",
     "config": {<flattened config.yaml, as PaddleRec's load_yaml gives it>},
     "source_patches": [{file, old, new, why}],
     "out": <folder for main.pb, startup.pb, build.json>}

It runs PaddleRec's static trainer sequence (tools/static_trainer.py without the executor):
StaticModel(config); feeds = create_feeds(); net(feeds); create_optimizer() -- whose
optimizer.minimize(cost) appends backward and update ops -- then drops every empty input/output
slot of the main program (the corpus's strip_empty_slots) and writes
main.pb / startup.pb = program.desc.serialize_to_string().  build.json says what was built:
loss, optimizer class and arguments, feeds, parameters, lookup tables, op counts, files loaded.
On failure it writes error.txt (one line: exception, message, innermost PaddleRec/Paddle frame)
and exits 3.

The model's modules are imported from a path relative to the tree's parent folder
("<tree name>/models/..."), so the op_callstack frames that name model files do not depend on
where the tree lives.
"""
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import paddlerec_record as record  # noqa: E402


def _fail(out, exc, tree_rel):
    """error.txt: one line, '<Type>: <message> (at <file>:<line> in <func>)'."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = None
    for fr in frames:
        if fr.filename.startswith(tree_rel) or "/paddle/" in fr.filename:
            where = fr
    where = where or (frames[-1] if frames else None)
    msg = " ".join(str(exc).split())
    if len(msg) > 400:
        msg = msg[:400] + "..."
    loc = ""
    if where is not None:
        fn = where.filename
        cut = fn.find("site-packages/")
        fn = fn[cut + len("site-packages/"):] if cut >= 0 else fn
        loc = f" (at {fn}:{where.lineno} in {where.name})"
    line = f"{type(exc).__name__}: {msg}{loc}"
    with open(os.path.join(out, "error.txt"), "w", encoding="utf-8") as f:
        f.write(line + "\n")
    with open(os.path.join(out, "traceback.txt"), "w", encoding="utf-8") as f:
        f.write("".join(traceback.format_exception(exc)))
    return line


def _import_static_model(model_rel):
    """Import the model's static_model.StaticModel from the relative model folder."""
    sys.path.insert(0, model_rel)
    import static_model
    return static_model.StaticModel


def build(req):
    """The static trainer sequence; returns (main, startup, info)."""
    import paddle
    import paddlerec_compat as compat

    paddle.enable_static()
    applied = compat.install(req.get("source_patches", []), req["tree_rel"])
    rec = record.Recorder(paddle)
    model_rel = os.path.join(req["tree_rel"], req["model_dir"])
    StaticModel = _import_static_model(model_rel)
    model = StaticModel(req["config"])
    feeds = model.create_feeds()
    model.net(feeds)
    rec.watch_minimize()
    try:
        model.create_optimizer()
    finally:
        rec.unwatch()
    if rec.minimize is None:
        raise RuntimeError("create_optimizer() did not call an optimizer's minimize")
    main = paddle.static.default_main_program()
    startup = paddle.static.default_startup_program()
    stripped = record.strip_empty_slots(main)
    info = record.describe(paddle, main, startup, feeds, rec, stripped)
    info["source_patches_applied"] = applied
    info["files_loaded"] = record.files_under(req["tree_rel"])
    return main, startup, info


def main():
    req = json.load(sys.stdin)
    out = req["out"]
    os.makedirs(out, exist_ok=True)
    tree = os.path.abspath(req["tree"])
    os.chdir(os.path.dirname(tree))
    req["tree_rel"] = os.path.basename(tree)
    try:
        main_prog, startup, info = build(req)
        main_bytes = main_prog.desc.serialize_to_string()
        startup_bytes = startup.desc.serialize_to_string()
    except Exception as exc:  # noqa: BLE001 - any failure of the model is the finding
        print(_fail(out, exc, req["tree_rel"]), file=sys.stderr)
        return 3
    with open(os.path.join(out, "main.pb"), "wb") as f:
        f.write(main_bytes)
    with open(os.path.join(out, "startup.pb"), "wb") as f:
        f.write(startup_bytes)
    info["main_bytes"] = len(main_bytes)
    info["startup_bytes"] = len(startup_bytes)
    with open(os.path.join(out, "build.json"), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
