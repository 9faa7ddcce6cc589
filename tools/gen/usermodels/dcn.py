# Deep & Cross Network, Paddle 2.6.2 static graph (run: python dcn.py -> main.pb, startup.pb).
# Ten categorical slots share one hashed feature table, L2-regularized on its own;
# the rest of the model is L1-regularized by the optimizer.
import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

slots = [paddle.static.data(name="C%d" % i, shape=[-1, 1], dtype="int64") for i in range(1, 11)]
dense_input = paddle.static.data(name="dense_input", shape=[-1, 13], dtype="float32")
label = paddle.static.data(name="label", shape=[-1, 1], dtype="int64")

feat_table = paddle.nn.Embedding(
    400000, 8, sparse=True,
    weight_attr=paddle.ParamAttr(name="feat_emb", regularizer=paddle.regularizer.L2Decay(1e-5)))
x0 = paddle.concat([paddle.reshape(feat_table(s), [-1, 8]) for s in slots] + [dense_input], axis=1)
D = 10 * 8 + 13

# cross network
xl = x0
for i in range(3):
    w = paddle.static.create_parameter([D, 1], "float32", name="cross_w%d" % i)
    b = paddle.static.create_parameter([D], "float32", name="cross_b%d" % i, is_bias=True)
    xl = x0 * paddle.matmul(xl, w) + b + xl

# deep network
h = x0
for i, width in enumerate([256, 128]):
    h = paddle.static.nn.fc(h, width, name="deep_fc%d" % i)
    h = F.relu(paddle.static.nn.batch_norm(h, name="deep_bn%d" % i))

logits = paddle.static.nn.fc(paddle.concat([xl, h], axis=1), 2, name="dcn_out")
loss = paddle.mean(F.cross_entropy(logits, label))
auc, batch_auc, _ = paddle.static.auc(input=F.softmax(logits), label=label)

optimizer = paddle.optimizer.Momentum(learning_rate=0.01, momentum=0.9,
                                      weight_decay=paddle.regularizer.L1Decay(1e-6))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
