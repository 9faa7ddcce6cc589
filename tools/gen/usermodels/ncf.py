# NeuMF (GMF + MLP), Paddle 2.6.2 static graph (run: python ncf.py -> main.pb, startup.pb).
# User ids come one a row (1-D) and index two large sparse user tables; items use dense tables.
import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

user_id = paddle.static.data(name="user_id", shape=[-1], dtype="int64")
item_id = paddle.static.data(name="item_id", shape=[-1, 1], dtype="int64")
label = paddle.static.data(name="label", shape=[-1, 1], dtype="float32")

mf_user = paddle.nn.Embedding(2000000, 8, sparse=True, weight_attr=paddle.ParamAttr(name="mf_user"))
mlp_user = paddle.nn.Embedding(2000000, 16, sparse=True,
                               weight_attr=paddle.ParamAttr(name="mlp_user"))
mf_item = paddle.nn.Embedding(30000, 8, weight_attr=paddle.ParamAttr(name="mf_item"))
mlp_item = paddle.nn.Embedding(30000, 16, weight_attr=paddle.ParamAttr(name="mlp_item"))

gmf = mf_user(user_id) * paddle.reshape(mf_item(item_id), [-1, 8])                     # [-1, 8]
mlp = paddle.concat([mlp_user(user_id), paddle.reshape(mlp_item(item_id), [-1, 16])], axis=1)
for i, width in enumerate([32, 16, 8]):
    mlp = paddle.static.nn.fc(mlp, width, activation="relu", name="mlp%d" % i)
logit = paddle.static.nn.fc(paddle.concat([gmf, mlp], axis=1), 1, name="neumf_out")
loss = paddle.mean(F.binary_cross_entropy_with_logits(logit, label))

optimizer = paddle.optimizer.Adagrad(learning_rate=0.05,
                                     grad_clip=paddle.nn.ClipGradByGlobalNorm(clip_norm=5.0))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
