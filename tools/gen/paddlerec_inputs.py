#!/usr/bin/env python3
"""Build the input programs (main.pb, startup.pb) of PaddleRec's static models in Paddle 2.6.2.

    python3 tools/gen/paddlerec_inputs.py TREE (--all | MODEL_DIR...) [--out DIR]

TREE is a PaddleRec work tree (e.g. `git --git-dir=<bare> archive <commit>`, unpacked); a model is
a folder of it with a static_model.py (models/rank/autoint).  For each model, in a fresh Paddle
interpreter (paddlerec_build.py), PaddleRec's static trainer sequence runs with the model's own
config (config.yaml, flattened as PaddleRec's load_yaml does) and writes
OUT/<model>/{main.pb, startup.pb, model.json}, or OUT/<model>/error.txt (one line) when the model
does not build.  Then OUT/OPS.md and OUT/SUMMARY.md are written from every model folder in OUT.
Runs under any Python 3 with PyYAML; Paddle's own Python only runs the children.
See tools/gen/README_inputs.md for model.json.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# The child runs paddlerec_build.py compiled under its project-relative name, from the project
# root: every op's op_callstack starts with its frames, and Python would name a script it runs
# by absolute path, so the bytes would change with where the project is checked out.
CHILD = "tools/gen/paddlerec_build.py"
CHILD_BOOT = (f"p = {CHILD!r}\n"
              "exec(compile(open(p, encoding='utf-8').read(), p, 'exec'), "
              "{'__name__': '__main__', '__file__': p})")
sys.path.insert(0, HERE)

import paddlerec_report as report  # noqa: E402

FORMAT = "paddlerec-inputs/1"
CORPUS_COMMIT = "656326adf3c4117c11ec0eff5e8f61acd8191c2a"
PADDLE_PYTHON = "/work/paddle/venv/bin/python"
PADDLE_PYTHONPATH = "/work/paddle/pb425"
DEFAULT_OUT = "/work/gen-out/inputs"
CONFIG_PARTS = ("workspace", "runner", "hyper_parameters")   # PaddleRec's load_yaml filters
ENV_DROPPED_PREFIXES = ("FLAGS_communicator_", "FLAGS_rpc_")
ENV_DROPPED = ("CPU_NUM",)
PROGRAM = ("StaticModel(config); feeds = create_feeds(); net(feeds); create_optimizer() "
           "(PaddleRec's static trainer sequence, tools/static_trainer.py, without the executor; "
           "config = the model's config file flattened as PaddleRec's load_yaml does, plus "
           "yaml_path and config_abs_dir); then every empty input/output slot of every op of the "
           "main program dropped (strip_empty_slots); main.pb / startup.pb = "
           "program.desc.serialize_to_string() of the default main / startup program")

# model folder -> name, where the folder's last part alone is not a good name
NAMES = {
    "models/demo/movie_recommand/rank": "movie_recommand_rank",
    "models/demo/movie_recommand/recall": "movie_recommand_recall",
    "models/recall/deepwalk/deepwalk_train": "deepwalk",
    "models/recall/deepwalk/multi_class": "deepwalk_multi_class",
    "models/recall/word2vec/benchmark": "word2vec_benchmark",
}

# model folder -> its config file, where it has no config.yaml and several others (the one its
# README runs tools/static_trainer.py with)
CONFIGS = {
    "models/rank/slot_dnn": "config_queuedataset.yaml",
}

# model folder -> a note for SUMMARY.md on why it is not built, beyond the exception
NOTES = {
    "models/recall/deepwalk/deepwalk_train": "pgl is not installed; its create_feeds() also "
    "downloads the BlogCatalog data set (pgl.dataset.BlogCatalogDataset) for num_nodes",
    "models/recall/deepwalk/multi_class": "pgl is not installed; its create_feeds() also "
    "downloads the BlogCatalog data set (pgl.dataset.BlogCatalogDataset) for num_nodes",
    "models/recall/word2vec/benchmark": "written for the Paddle 2.0 betas: paddle.initializer, "
    "then paddle.sum(dim=, keep_dim=), paddle.static.exponential_decay",
    "models/rank/fastformer": "its layers initialise weights with Tensor.set_value(tensor), "
    "which works in dygraph only",
}

# model folder -> what had to be adjusted for Paddle 2.6.2: one-line "source_patches" ({file,
# old, new, why}; see paddlerec_compat.py), "config_overrides" (flattened key -> value).  None
# at the corpus commit: every model that does not build fails for a reason no small patch fixes.
PATCHES = {}


def model_name(model_dir):
    return NAMES.get(model_dir, os.path.basename(model_dir).replace("-", "_"))


def git_blob(path):
    """git hash-object of a file."""
    with open(path, "rb") as f:
        data = f.read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def config_file(tree, model_dir):
    """CONFIGS' choice, else config.yaml, else the folder's only .yaml file."""
    folder = os.path.join(tree, model_dir)
    if model_dir in CONFIGS:
        return os.path.join(model_dir, CONFIGS[model_dir])
    if os.path.isfile(os.path.join(folder, "config.yaml")):
        return os.path.join(model_dir, "config.yaml")
    found = sorted(f for f in os.listdir(folder) if f.endswith((".yaml", ".yml")))
    if len(found) != 1:
        raise ValueError(f"{model_dir}: no config.yaml and {len(found)} other yaml files")
    return os.path.join(model_dir, found[0])


def _flatten(prefix, value, out):
    """PaddleRec's flattening: nested dicts joined with '.', and a list under the key dataset,
    phase or runner is a list of named sections (<key>.<name>.<field>)."""
    for k, v in value.items():
        if isinstance(v, dict):
            _flatten(prefix + [str(k)], v, out)
        elif k in ("dataset", "phase", "runner") and isinstance(v, list):
            for item in v:
                if item.get("name") is None:
                    raise ValueError(f"name must be in {k} list")
                _flatten(prefix + [k, item["name"]], item, out)
        else:
            out[".".join(prefix + [str(k)])] = v


def load_config(tree, cfg_rel, overrides):
    """The config dict StaticModel(config) gets from PaddleRec's static trainer."""
    path = os.path.join(tree, cfg_rel)
    with open(path, encoding="utf-8") as f:
        raw = yaml.load(f.read(), Loader=yaml.FullLoader)
    flat = {}
    _flatten([], raw or {}, flat)
    config = {k: v for k, v in flat.items() if k.startswith(CONFIG_PARTS)}
    config.update(overrides)
    config["yaml_path"] = os.path.abspath(path)
    config["config_abs_dir"] = os.path.dirname(os.path.abspath(path))
    return config


def child_env(pythonpath):
    env = {k: v for k, v in os.environ.items()
           if k not in ENV_DROPPED and not k.startswith(ENV_DROPPED_PREFIXES)}
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONPATH"] = pythonpath
    env.pop("PYTHONSTARTUP", None)
    return env


def run_child(args, tree, model_dir, config, patch, out):
    req = {"tree": tree, "model_dir": model_dir, "config": config, "out": out,
           "source_patches": patch.get("source_patches", [])}
    proc = subprocess.run([args.paddle_python, "-c", CHILD_BOOT],
                          input=json.dumps(req), text=True, capture_output=True, cwd=ROOT,
                          env=child_env(args.pythonpath), timeout=args.timeout, check=False)
    return proc


def patched_list(patch, info):
    out = []
    for k, v in sorted(patch.get("config_overrides", {}).items()):
        out.append({"kind": "config_override", "key": k, "value": v})
    for p in patch.get("source_patches", []):
        out.append(dict(kind="source_patch", **p))
    return out


def model_json(args, tree, model_dir, cfg_rel, config, patch, info):
    files = sorted(set(info.pop("files_loaded")) | {cfg_rel})
    blobs = {f: git_blob(os.path.join(tree, f)) for f in files}
    shown = {k: v for k, v in config.items() if k not in ("yaml_path", "config_abs_dir")}
    doc = {
        "format": FORMAT,
        "model": model_name(model_dir),
        "path": model_dir,
        "paddlerec": {"repo": "https://github.com/PaddlePaddle/PaddleRec",
                      "commit": args.commit, "files": blobs},
        "config_file": cfg_rel,
        "config_overrides": patch.get("config_overrides", {}),
        "config": shown,
        "paddle": "2.6.2 (CPU wheel), static mode, PYTHONHASHSEED=0, fresh interpreter",
        "program": PROGRAM,
        "patched": patched_list(patch, info),
    }
    doc.update(info)
    if len(info.pop("source_patches_applied")) != len(patch.get("source_patches", [])):
        raise RuntimeError("a source patch was not applied")
    return doc


def build_one(args, tree, model_dir):
    """Build one model into OUT/<name>; returns (name, 'built' | error line)."""
    name = model_name(model_dir)
    out = os.path.join(args.out, name)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    patch = PATCHES.get(model_dir, {})
    try:
        cfg_rel = config_file(tree, model_dir)
        config = load_config(tree, cfg_rel, patch.get("config_overrides", {}))
        json.dumps(config)
    except (OSError, ValueError, TypeError, yaml.YAMLError) as exc:
        return name, _error(out, f"config: {type(exc).__name__}: {exc}")
    try:
        proc = run_child(args, tree, model_dir, config, patch, out)
    except subprocess.TimeoutExpired:
        return name, _error(out, f"timeout: the build took more than {args.timeout}s")
    err = os.path.join(out, "error.txt")
    if proc.returncode != 0:
        if not os.path.exists(err):
            tail = " ".join(proc.stderr.strip().splitlines()[-1:]) or f"exit {proc.returncode}"
            return name, _error(out, f"crash: the Paddle process exited {proc.returncode}: "
                                     f"{tail}")
        with open(err, encoding="utf-8") as f:
            return name, f.read().strip()
    build = os.path.join(out, "build.json")
    with open(build, encoding="utf-8") as f:
        info = json.load(f)
    os.remove(build)
    info["main"]["sha256"] = _sha256(os.path.join(out, "main.pb"))
    info["startup"]["sha256"] = _sha256(os.path.join(out, "startup.pb"))
    info["main"]["bytes"] = info.pop("main_bytes")
    info["startup"]["bytes"] = info.pop("startup_bytes")
    doc = model_json(args, tree, model_dir, cfg_rel, config, patch, info)
    with open(os.path.join(out, "model.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    return name, "built"


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _error(out, line):
    with open(os.path.join(out, "error.txt"), "w", encoding="utf-8") as f:
        f.write(line + "\n")
    return line


def all_models(tree):
    found = []
    for d, dirs, files in os.walk(os.path.join(tree, "models")):
        dirs.sort()
        if "static_model.py" in files:
            found.append(os.path.relpath(d, tree))
    return sorted(found)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", help="PaddleRec work tree")
    ap.add_argument("models", nargs="*", help="model folders (models/rank/autoint)")
    ap.add_argument("--all", action="store_true", help="every folder with a static_model.py")
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--commit", default=CORPUS_COMMIT, help="the tree's PaddleRec commit")
    ap.add_argument("--paddle-python", default=PADDLE_PYTHON)
    ap.add_argument("--pythonpath", default=PADDLE_PYTHONPATH)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--no-reports", action="store_true", help="skip OPS.md / SUMMARY.md")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    tree = os.path.abspath(args.tree)
    args.out = os.path.abspath(args.out)
    if not os.path.isdir(os.path.join(tree, "models")):
        print(f"paddlerec_inputs: error: {args.tree}: not a PaddleRec tree (no models/)",
              file=sys.stderr)
        return 2
    models = all_models(tree) if args.all else [m.rstrip("/") for m in args.models]
    for m in models:
        if not os.path.isfile(os.path.join(tree, m, "static_model.py")):
            print(f"paddlerec_inputs: error: {m}: no static_model.py in {tree}", file=sys.stderr)
            return 2
    os.makedirs(args.out, exist_ok=True)
    for m in models:
        name, outcome = build_one(args, tree, m)
        print(f"{name:28s} {outcome}", flush=True)
    if not args.no_reports:
        report.write_reports(args.out, {model_name(d): n for d, n in NOTES.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
