# Shared-bottom multi-task model (click, finish), Paddle 2.6.2 static graph
# (run: python shared_bottom.py -> main.pb, startup.pb). The context feed holds 3 fields of
# 2 ids each, flat; reshaped to [-1, 3, 2] and looked up in one context table.
import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

user_id = paddle.static.data(name="user_id", shape=[-1, 1], dtype="int64")
item_id = paddle.static.data(name="item_id", shape=[-1, 1], dtype="int64")
context = paddle.static.data(name="context", shape=[-1, 6], dtype="int64")
click = paddle.static.data(name="click", shape=[-1, 1], dtype="float32")
finish = paddle.static.data(name="finish", shape=[-1, 1], dtype="float32")

user_table = paddle.nn.Embedding(300000, 16, sparse=True, weight_attr=paddle.ParamAttr(name="user_emb"))
item_table = paddle.nn.Embedding(200000, 16, sparse=True, weight_attr=paddle.ParamAttr(name="item_emb"))
ctx_table = paddle.nn.Embedding(10000, 8, sparse=True, weight_attr=paddle.ParamAttr(name="ctx_emb"))

ctx = paddle.sum(ctx_table(paddle.reshape(context, [-1, 3, 2])), axis=2)    # [-1, 3, 8]
x = paddle.concat([paddle.reshape(user_table(user_id), [-1, 16]),
                   paddle.reshape(item_table(item_id), [-1, 16]),
                   paddle.reshape(ctx, [-1, 24])], axis=1)
bottom = paddle.static.nn.fc(x, 128, activation="relu", name="bottom0")
bottom = paddle.static.nn.fc(bottom, 64, activation="relu", name="bottom1")

losses = []
for name, label in (("click", click), ("finish", finish)):
    h = paddle.static.nn.fc(bottom, 32, activation="relu", name=name + "_tower")
    logit = paddle.static.nn.fc(h, 1, name=name + "_out")
    prob = F.sigmoid(logit)
    paddle.static.auc(input=paddle.concat([1 - prob, prob], axis=1), label=paddle.cast(label, "int64"))
    losses.append(paddle.mean(F.binary_cross_entropy_with_logits(logit, label)))
loss = losses[0] + losses[1]

optimizer = paddle.optimizer.RMSProp(learning_rate=0.001, centered=True,
                                     grad_clip=paddle.nn.ClipGradByValue(max=1.0),
                                     weight_decay=paddle.regularizer.L2Decay(1e-5))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
