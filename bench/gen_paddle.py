"""A deep MLP made and saved by Paddle 2.6.2 itself, as ../shared/corpus-perf's programs are:
the bench's Paddle-made input beside gen.py's (issue 47).

    /work/paddle/venv/bin/python bench/gen_paddle.py --layers 2500 --out W/mlp_20000_sgd

`x -> layers x fc(width, relu) -> fc(1) -> square_error_cost -> mean`, SGD 0.01, op_callstack
kept, written with `program.desc.serialize_to_string()` (main.pb, startup.pb), with info.json
and cluster_p{2,16,64}_{classic,fleet,ps}.yaml (sync, 2 trainers) so that
`bench/run.py --workdir W --kinds mlp --sizes 20000 --optimizer sgd` times it (8 ops a layer:
2,500 layers make 20,013 ops). Needs Paddle (not the project's venv); deterministic for a
--seed. info.json says `ops_requested` 8 x layers, so run.py takes the folder as its input of
that size instead of generating one. The programs are not kept in the repository (a
2,500-layer main.pb is ~42 MB).
"""
import argparse
import json
import os
import sys
import time

import paddle  # noqa: E402  (Paddle first, before anything of the repository's)

STYLES = ("classic", "fleet", "ps")


def build(layers: int, width: int, seed: int):
    paddle.enable_static()
    paddle.seed(seed)
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = seed
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, width], "float32")
        y = paddle.static.data("y", [-1, 1], "float32")
        h = x
        for _ in range(layers):
            h = paddle.static.nn.fc(h, width, activation="relu")
        pred = paddle.static.nn.fc(h, 1)
        loss = paddle.mean(paddle.nn.functional.square_error_cost(pred, y))
        paddle.optimizer.SGD(learning_rate=0.01).minimize(loss, startup)
    return main, startup


def cluster_yaml(n: int, style: str, trainers: int = 2) -> str:
    eps = ", ".join('"127.0.0.1:%d"' % (6174 + i) for i in range(n))
    return "pservers: [%s]\ntrainers: %d\nmode: sync\nstyle: %s\n" % (eps, trainers, style)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2500)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0, help="as bench/run.py's --seed")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    main_prog, startup = build(a.layers, a.width, a.seed)
    os.makedirs(a.out, exist_ok=True)
    sizes = {}
    for name, prog in (("main", main_prog), ("startup", startup)):
        data = prog.desc.serialize_to_string()
        with open(os.path.join(a.out, name + ".pb"), "wb") as f:
            f.write(data)
        sizes[name] = len(data)
    for n in (2, 16, 64):
        for style in STYLES:
            with open(os.path.join(a.out, "cluster_p%d_%s.yaml" % (n, style)), "w") as f:
                f.write(cluster_yaml(n, style))
    ops = len(main_prog.global_block().ops)
    info = {"kind": "mlp", "ops_requested": 8 * a.layers, "ops_main": ops, "optimizer": "sgd",
            "lr_decay": False, "seed": a.seed, "width": a.width, "layers": a.layers,
            "made_by": "Paddle %s (bench/gen_paddle.py)" % paddle.__version__,
            "op_callstack": "kept", "params": len(main_prog.all_parameters()),
            "bytes_main": sizes["main"], "bytes_startup": sizes["startup"],
            "generate_seconds": round(time.perf_counter() - t0, 2)}
    with open(os.path.join(a.out, "info.json"), "w") as f:
        json.dump(info, f, indent=1)
    print("%s: %d ops, main %d bytes, startup %d bytes" % (a.out, ops, sizes["main"],
                                                            sizes["startup"]), file=sys.stderr)


if __name__ == "__main__":
    main()
