# DeepFM on Criteo-like slots, Paddle 2.6.2 static graph (run: python deepfm.py -> main.pb, startup.pb).
# First- and second-order weights are two large sparse tables on the parameter servers,
# each looked up for every slot.
import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

NUM_SLOTS, K, VOCAB = 8, 8, 1000001
slots = [paddle.static.data(name="C%d" % i, shape=[-1, 1], dtype="int64")
         for i in range(1, NUM_SLOTS + 1)]
dense_input = paddle.static.data(name="dense_input", shape=[-1, 13], dtype="float32")
label = paddle.static.data(name="label", shape=[-1, 1], dtype="int64")

w_attr = paddle.ParamAttr(name="fm_w", initializer=paddle.nn.initializer.Constant(0.0),
                          need_clip=False)
v_attr = paddle.ParamAttr(name="fm_v", initializer=paddle.nn.initializer.Uniform(-0.05, 0.05),
                          need_clip=False)
first = [paddle.static.nn.sparse_embedding(s, size=[VOCAB, 1], param_attr=w_attr) for s in slots]
second = [paddle.static.nn.sparse_embedding(s, size=[VOCAB, K], param_attr=v_attr) for s in slots]

# FM part
y_first = paddle.add_n(first) + paddle.static.nn.fc(dense_input, 1, name="dense_w")   # [-1, 1]
v = paddle.stack(second, axis=1)                                                     # [-1, S, K]
sum_sq = paddle.square(paddle.sum(v, axis=1))
sq_sum = paddle.sum(paddle.square(v), axis=1)
y_second = 0.5 * paddle.sum(sum_sq - sq_sum, axis=1, keepdim=True)                   # [-1, 1]

# DNN part
h = paddle.concat([paddle.reshape(v, [-1, NUM_SLOTS * K]), dense_input], axis=1)
for i in range(3):
    h = paddle.static.nn.fc(h, 200, activation="relu", name="dnn_fc%d" % i)
y_dnn = paddle.static.nn.fc(h, 1, name="dnn_out")

logit = y_first + y_second + y_dnn
prob = F.sigmoid(logit)
loss = paddle.mean(F.binary_cross_entropy_with_logits(logit, paddle.cast(label, "float32")))
auc, batch_auc, _ = paddle.static.auc(input=paddle.concat([1 - prob, prob], axis=1), label=label)

optimizer = paddle.optimizer.Adam(learning_rate=0.001, lazy_mode=True,
                                  grad_clip=paddle.nn.ClipGradByGlobalNorm(clip_norm=10.0))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
