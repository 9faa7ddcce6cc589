# tight clips over a shared nn.Embedding(sparse=True) table + a sparse_embedding table
import sys, os, paddle
paddle.enable_static()
kind = sys.argv[1]; out = sys.argv[2]; os.makedirs(out, exist_ok=True)
paddle.seed(1)
main, start = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, start):
    u = paddle.static.data("u", [-1, 1], "int64"); i = paddle.static.data("i", [-1, 1], "int64")
    c = paddle.static.data("c", [-1, 3], "int64"); y = paddle.static.data("y", [-1, 1], "float32")
    ue = paddle.reshape(paddle.static.nn.sparse_embedding(u, [1000, 8], param_attr=paddle.ParamAttr(name="user_emb")), [-1, 8])
    t = paddle.nn.Embedding(500, 8, sparse=True, weight_attr=paddle.ParamAttr(name="item_emb"))
    x = paddle.concat([ue, paddle.reshape(t(i), [-1, 8]), paddle.sum(t(c), 1)], 1)
    h = paddle.static.nn.fc(x, 16, activation="relu")
    loss = paddle.mean(paddle.nn.functional.binary_cross_entropy_with_logits(paddle.static.nn.fc(h, 1), y))
    clip = {"value": paddle.nn.ClipGradByValue(0.002), "norm": paddle.nn.ClipGradByNorm(0.002), "global": paddle.nn.ClipGradByGlobalNorm(0.01)}[kind]
    paddle.optimizer.Adam(0.01, grad_clip=clip).minimize(loss)
open(os.path.join(out, "main.pb"), "wb").write(main.desc.serialize_to_string())
open(os.path.join(out, "startup.pb"), "wb").write(start.desc.serialize_to_string())
