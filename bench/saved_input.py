#!/usr/bin/env python3
"""Make a bench input folder of a program saved elsewhere (a Paddle-made main.pb and
startup.pb, such as ../shared/corpus-perf/mlp_sgd_5k), so that bench/run.py times it:

    python bench/saved_input.py SRC W/mlp_5000_sgd --kind mlp --ops 5000 --optimizer sgd
    python bench/run.py --workdir W --kinds mlp --sizes 5000 --optimizer sgd

copies SRC/main.pb and SRC/startup.pb into OUT, writes the cluster configs
cluster_p{2,16,64}_{fleet,classic,ps}.yaml (sync, 2 trainers: gen.py's) and info.json, which
says what run.py looks for to take the folder as its input of that kind and size instead of
generating one (kind, ops_requested, optimizer, lr_decay, seed) and what the program holds (its
ops, params and bytes, read with the project's reader). bench/gen_paddle.py makes such a folder
with Paddle itself.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from transpile.format import programio  # noqa: E402


def _bench_gen():
    """bench/gen.py, loaded from its file (a module named `gen` elsewhere on the path, as in
    a test run, is another one)."""
    spec = importlib.util.spec_from_file_location("pstranspile_bench_gen",
                                                  os.path.join(HERE, "gen.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", help="a folder holding main.pb and startup.pb")
    ap.add_argument("out", help="the input folder to make (as W/<kind>_<ops>_<optimizer>)")
    ap.add_argument("--kind", required=True, help="what run.py's --kinds calls it (mlp, ctr)")
    ap.add_argument("--ops", type=int, required=True, help="the size run.py's --sizes names")
    ap.add_argument("--optimizer", required=True, help="as run.py's --optimizer")
    ap.add_argument("--lr-decay", action="store_true", help="as run.py's --lr-decay")
    ap.add_argument("--seed", type=int, default=0, help="as run.py's --seed")
    a = ap.parse_args(argv)
    gen = _bench_gen()
    os.makedirs(a.out, exist_ok=True)
    sizes = {}
    for name in ("main", "startup"):
        dst = os.path.join(a.out, name + ".pb")
        shutil.copyfile(os.path.join(a.src, name + ".pb"), dst)
        sizes[name] = os.path.getsize(dst)
    for n in gen.PSERVER_COUNTS:
        for style in gen.STYLES:
            with open(os.path.join(a.out, "cluster_p%d_%s.yaml" % (n, style)), "w") as f:
                f.write(gen.cluster_yaml(n, style))
    main_prog = programio.load(os.path.join(a.out, "main.pb"))
    info = {"kind": a.kind, "ops_requested": a.ops, "optimizer": a.optimizer,
            "lr_decay": a.lr_decay, "seed": a.seed, "made_by": "copied from %s" % a.src,
            "ops_main": len(main_prog.global_block.ops), "params": len(main_prog.parameters()),
            "bytes_main": sizes["main"], "bytes_startup": sizes["startup"],
            "generate_seconds": 0.0}
    with open(os.path.join(a.out, "info.json"), "w") as f:
        json.dump(info, f, indent=1)
    print("%s: %d ops, main %d bytes, startup %d bytes" % (
        a.out, info["ops_main"], sizes["main"], sizes["startup"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
