# Factorization machine over two padded multi-hot slots, Paddle 2.6.2 static graph
# (run: python fm.py -> main.pb, startup.pb). Each slot is unsqueezed to [-1, n, 1] for
# sparse_embedding; both slots share the first- and second-order tables.
import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

slot_a = paddle.static.data(name="slot_a", shape=[-1, 5], dtype="int64")   # padded with 0
slot_b = paddle.static.data(name="slot_b", shape=[-1, 3], dtype="int64")
label = paddle.static.data(name="label", shape=[-1, 1], dtype="float32")

VOCAB, K = 600000, 10
w_attr = paddle.ParamAttr(name="fm_w", need_clip=False,
                          initializer=paddle.nn.initializer.Constant(0.0))
v_attr = paddle.ParamAttr(name="fm_v", need_clip=False,
                          initializer=paddle.nn.initializer.Normal(0.0, 0.01))
ids = [paddle.unsqueeze(s, axis=2) for s in (slot_a, slot_b)]
w = paddle.concat([paddle.static.nn.sparse_embedding(i, size=[VOCAB, 1], param_attr=w_attr)
                   for i in ids], axis=1)                                   # [-1, 8, 1]
v = paddle.concat([paddle.static.nn.sparse_embedding(i, size=[VOCAB, K], param_attr=v_attr)
                   for i in ids], axis=1)                                   # [-1, 8, K]

bias = paddle.static.create_parameter([1], "float32", name="fm_bias", is_bias=True)
first = paddle.sum(w, axis=1)                                               # [-1, 1]
second = 0.5 * paddle.sum(paddle.square(paddle.sum(v, axis=1)) - paddle.sum(paddle.square(v), axis=1),
                          axis=1, keepdim=True)
logit = paddle.static.nn.fc(paddle.concat([first + second + bias, first], axis=1), 1, name="calib")
loss = paddle.mean(F.binary_cross_entropy_with_logits(logit, label))

lr = paddle.optimizer.lr.ExponentialDecay(learning_rate=0.1, gamma=0.9999)
optimizer = paddle.optimizer.SGD(learning_rate=lr,
                                 grad_clip=paddle.nn.ClipGradByValue(max=0.5, min=-0.5))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
