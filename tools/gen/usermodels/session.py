# Session-based ranking: the user's last 3 sessions of 5 items each, Paddle 2.6.2 static graph
# (run: python session.py -> main.pb, startup.pb). Session items and the target share the item table.
import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

sess_items = paddle.static.data(name="sess_items", shape=[-1, 3, 5], dtype="int64")
user_id = paddle.static.data(name="user_id", shape=[-1, 1], dtype="int64")
target = paddle.static.data(name="target", shape=[-1, 1], dtype="int64")
label = paddle.static.data(name="label", shape=[-1, 1], dtype="int64")

item_table = paddle.nn.Embedding(100000, 16, sparse=True,
                                 weight_attr=paddle.ParamAttr(name="item_emb"))
user_table = paddle.nn.Embedding(50000, 16, sparse=True,
                                 weight_attr=paddle.ParamAttr(name="user_emb", need_clip=False))

sessions = paddle.mean(item_table(sess_items), axis=2)          # [-1, 3, 16]
sessions = paddle.static.nn.fc(sessions, 16, num_flatten_dims=2, activation="tanh", name="sess_fc")
x = paddle.concat([paddle.reshape(sessions, [-1, 48]),
                   paddle.reshape(item_table(target), [-1, 16]),
                   paddle.reshape(user_table(user_id), [-1, 16])], axis=1)
x = paddle.static.nn.fc(x, 64, activation="relu", name="fc0")
logits = paddle.static.nn.fc(x, 2, name="fc_out")
loss = paddle.mean(F.cross_entropy(logits, label))
auc, batch_auc, _ = paddle.static.auc(input=F.softmax(logits), label=label)

lr = paddle.optimizer.lr.PiecewiseDecay(boundaries=[2000], values=[0.001, 0.0005])
optimizer = paddle.optimizer.RMSProp(learning_rate=lr, rho=0.95,
                                     grad_clip=paddle.nn.ClipGradByGlobalNorm(clip_norm=1.0))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
