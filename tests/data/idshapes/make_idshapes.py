import sys, os, paddle
paddle.enable_static()
kind = sys.argv[1]; out = sys.argv[2]; os.makedirs(out, exist_ok=True)
paddle.seed(1)
main, start = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, start):
    y = paddle.static.data("y", [-1, 1], "float32")
    feats = []
    if kind == "v2_1d":
        a = paddle.static.data("a", [-1], "int64")
        t = paddle.nn.Embedding(1000, 8, sparse=True)
        feats.append(t(a))
    elif kind == "v2_3d":
        a = paddle.static.data("a", [-1, 2, 3], "int64")
        t = paddle.nn.Embedding(1000, 8, sparse=True)
        feats.append(paddle.reshape(t(a), [-1, 48]))
    elif kind == "se_multihot":
        a = paddle.static.data("a", [-1, 5], "int64")
        e = paddle.static.nn.sparse_embedding(paddle.unsqueeze(a, 2), [1000, 8], param_attr=paddle.ParamAttr(name="slot_emb"))
        feats.append(paddle.sum(e, 1))
    elif kind == "se_mixed":
        a = paddle.static.data("a", [-1, 5], "int64"); b = paddle.static.data("b", [-1, 1], "int64")
        pa = paddle.ParamAttr(name="slot_emb")
        e = paddle.static.nn.sparse_embedding(paddle.unsqueeze(a, 2), [1000, 8], param_attr=pa)
        f = paddle.static.nn.sparse_embedding(b, [1000, 8], param_attr=pa)
        feats += [paddle.sum(e, 1), paddle.reshape(f, [-1, 8])]
    elif kind == "v2_mixed":
        a = paddle.static.data("a", [-1, 1], "int64"); b = paddle.static.data("b", [-1, 2, 3], "int64")
        t = paddle.nn.Embedding(1000, 8, sparse=True)
        feats += [paddle.reshape(t(a), [-1, 8]), paddle.reshape(t(b), [-1, 48])]
    x = paddle.concat(feats, 1) if len(feats) > 1 else feats[0]
    h = paddle.static.nn.fc(x, 8, activation="relu")
    loss = paddle.mean(paddle.nn.functional.binary_cross_entropy_with_logits(paddle.static.nn.fc(h, 1), y))
    paddle.optimizer.Adam(0.01).minimize(loss)
open(os.path.join(out, "main.pb"), "wb").write(main.desc.serialize_to_string())
open(os.path.join(out, "startup.pb"), "wb").write(start.desc.serialize_to_string())
print("ok", kind)
