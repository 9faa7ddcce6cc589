# ESMM: CTR and CTCVR over the whole impression space, Paddle 2.6.2 static graph
# (run: python esmm.py -> main.pb, startup.pb). One feature table on the parameter servers holds
# user tags and item ids; the tag slot is padded multi-hot, unsqueezed for sparse_embedding.
import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

user_tags = paddle.static.data(name="user_tags", shape=[-1, 10], dtype="int64")   # padded with 0
item_id = paddle.static.data(name="item_id", shape=[-1, 1], dtype="int64")
click = paddle.static.data(name="click", shape=[-1, 1], dtype="float32")
conversion = paddle.static.data(name="conversion", shape=[-1, 1], dtype="float32")

DIM = 16
attr = paddle.ParamAttr(name="feat_emb", initializer=paddle.nn.initializer.Uniform(-0.02, 0.02))
tags = paddle.static.nn.sparse_embedding(paddle.unsqueeze(user_tags, axis=2),
                                         size=[2000000, DIM], param_attr=attr)     # [-1, 10, DIM]
item = paddle.static.nn.sparse_embedding(item_id, size=[2000000, DIM], param_attr=attr)
x = paddle.concat([paddle.sum(tags, axis=1), paddle.reshape(item, [-1, DIM])], axis=1)


def tower(name):
    h = paddle.static.nn.fc(x, 128, activation="relu", name=name + "_fc0")
    h = paddle.static.nn.fc(h, 64, activation="relu", name=name + "_fc1")
    return F.sigmoid(paddle.static.nn.fc(h, 1, name=name + "_out"))


p_ctr = tower("ctr")
p_cvr = tower("cvr")
p_ctcvr = p_ctr * p_cvr
loss = paddle.mean(F.binary_cross_entropy(paddle.clip(p_ctr, 1e-7, 1 - 1e-7), click)) + \
    paddle.mean(F.binary_cross_entropy(paddle.clip(p_ctcvr, 1e-7, 1 - 1e-7), conversion))
auc_ctr, _, _ = paddle.static.auc(input=paddle.concat([1 - p_ctr, p_ctr], axis=1),
                                  label=paddle.cast(click, "int64"))
auc_ctcvr, _, _ = paddle.static.auc(input=paddle.concat([1 - p_ctcvr, p_ctcvr], axis=1),
                                    label=paddle.cast(conversion, "int64"))

lr = paddle.optimizer.lr.LinearWarmup(learning_rate=0.1, warmup_steps=100, start_lr=0.01, end_lr=0.1)
optimizer = paddle.optimizer.SGD(learning_rate=lr)
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
