# Wide & deep with ordinary dense embeddings and data_norm on the counters, Paddle 2.6.2 static graph
# (run: python wdl_dense.py -> main.pb, startup.pb). Each categorical field is one id a row (1-D).
import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

dense_feat = paddle.static.data(name="dense_feat", shape=[-1, 13], dtype="float32")
cats = [paddle.static.data(name="C%d" % i, shape=[-1], dtype="int64") for i in range(1, 7)]
label = paddle.static.data(name="label", shape=[-1, 1], dtype="float32")

normed = paddle.static.nn.data_norm(dense_feat, name="dense_dn")

embs = []
for i, ids in enumerate(cats):
    table = paddle.nn.Embedding(
        1000, 8, weight_attr=paddle.ParamAttr(name="cat%d_emb" % i,
                                              regularizer=paddle.regularizer.L2Decay(1e-4)))
    embs.append(table(ids))                                                   # [-1, 8]

wide_logit = paddle.static.nn.fc(
    normed, 1, name="wide",
    weight_attr=paddle.ParamAttr(regularizer=paddle.regularizer.L1Decay(1e-4)))
deep = paddle.concat(embs + [normed], axis=1)
deep = paddle.static.nn.fc(deep, 64, activation="relu", name="deep_fc0")
deep = paddle.static.nn.fc(deep, 32, activation="relu", name="deep_fc1")
logit = wide_logit + paddle.static.nn.fc(deep, 1, name="deep_out")

loss = paddle.mean(F.binary_cross_entropy_with_logits(logit, label))
prob = F.sigmoid(logit)
auc, batch_auc, _ = paddle.static.auc(input=paddle.concat([1 - prob, prob], axis=1),
                                      label=paddle.cast(label, "int64"))

optimizer = paddle.optimizer.Adagrad(learning_rate=0.01, initial_accumulator_value=0.1,
                                     grad_clip=paddle.nn.ClipGradByNorm(clip_norm=5.0))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
