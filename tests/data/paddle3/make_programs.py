"""Make this folder's programs with PaddlePaddle 3.x (not run by the tests: they need no Paddle).

    FLAGS_enable_pir_api=0 PYTHONHASHSEED=0 python make_programs.py OUT_DIR adam
    FLAGS_enable_pir_api=0 PYTHONHASHSEED=0 python make_programs.py OUT_DIR sgd

The old static-graph IR (ProgramDesc) is what parameter-server training uses: PaddleRec's
static PS trainer sets FLAGS_enable_pir_api=0, and so must this script (with PIR on, a
static program has no ProgramDesc to save). The model is samples/ctr_sparse_adam's: a 13-wide
dense input and two id slots C1, C2 looked up in one sparse embedding table
SparseFeatFactors [10000, 16] (uniform in [-1, 1], as in the 2.6.2 sample) -> concat -> fc 64 relu -> fc 1 -> binary cross entropy with
logits -> mean, minimized by Adam(0.001) (ctr_adam_*) or SGD(0.01) (ctr_sgd_*); the bytes of
program.desc.serialize_to_string() right after minimize. One program per process, as a user's
script makes it (a second program built in the same process gets other unique names:
learning_rate_1 ...).
"""
import os
import sys

if os.environ.get("FLAGS_enable_pir_api") != "0":
    sys.exit("set FLAGS_enable_pir_api=0 (the old static IR), as PaddleRec's PS trainer does")

import paddle  # noqa: E402


def build(optimizer: str):
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        dense = paddle.static.data("dense_input", [-1, 13], "float32")
        ids = [paddle.static.data(n, [-1, 1], "int64") for n in ("C1", "C2")]
        label = paddle.static.data("label", [-1, 1], "float32")
        embs = [paddle.static.nn.embedding(i, size=[10000, 16], is_sparse=True,
                                           param_attr=paddle.ParamAttr(
                                               name="SparseFeatFactors",
                                               initializer=paddle.nn.initializer.Uniform(-1, 1)))
                for i in ids]
        x = paddle.concat([dense] + [paddle.reshape(e, [-1, 16]) for e in embs], axis=1)
        h = paddle.static.nn.fc(x, 64, activation="relu")
        logit = paddle.static.nn.fc(h, 1)
        loss = paddle.mean(paddle.nn.functional.binary_cross_entropy_with_logits(logit, label))
        opt = (paddle.optimizer.Adam(0.001) if optimizer == "adam"
               else paddle.optimizer.SGD(0.01))
        opt.minimize(loss, startup_program=startup)
    return main, startup


def main(out, optimizer):
    os.makedirs(out, exist_ok=True)
    paddle.seed(0)
    prog, startup = build(optimizer)
    for name, p in (("main", prog), ("startup", startup)):
        with open(os.path.join(out, "ctr_%s_%s.pb" % (optimizer, name)), "wb") as f:
            f.write(p.desc.serialize_to_string())
    print("paddle", paddle.__version__, paddle.version.commit)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
