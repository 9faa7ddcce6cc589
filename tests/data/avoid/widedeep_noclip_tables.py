# Wide & Deep CTR model, Paddle 2.6.2 static graph, written from the README's "Save a program from Paddle"
# (run: python widedeep.py  -> main.pb, startup.pb in the current folder).
import paddle
import paddle.nn.functional as F

paddle.enable_static()

# feeds
user_id = paddle.static.data(name="user_id", shape=[-1, 1], dtype="int64")
item_id = paddle.static.data(name="item_id", shape=[-1, 1], dtype="int64")
cate_ids = paddle.static.data(name="cate_ids", shape=[-1, 3], dtype="int64")
dense_feat = paddle.static.data(name="dense_feat", shape=[-1, 13], dtype="float32")
label = paddle.static.data(name="label", shape=[-1, 1], dtype="float32")

EMB = 16
# table 1: user embedding, parameter-server style sparse embedding
user_emb = paddle.static.nn.sparse_embedding(
    input=user_id, size=[100000, EMB],
    param_attr=paddle.ParamAttr(name="user_emb", need_clip=False,
                                initializer=paddle.nn.initializer.Uniform(-0.01, 0.01)))
user_emb = paddle.reshape(user_emb, [-1, EMB])

# table 2: item/category embedding shared, nn.Embedding(sparse=True)
item_table = paddle.nn.Embedding(50000, EMB, sparse=True,
                                 weight_attr=paddle.ParamAttr(
                                     name="item_emb", need_clip=False,
                                     initializer=paddle.nn.initializer.Uniform(-0.01, 0.01)))
item_emb = paddle.reshape(item_table(item_id), [-1, EMB])
cate_emb = paddle.sum(item_table(cate_ids), axis=1)   # [-1, EMB]

# wide part: 1-wide embedding for item id + linear on dense features
wide_table = paddle.nn.Embedding(50000, 1, sparse=True,
                                 weight_attr=paddle.ParamAttr(name="wide_emb", need_clip=False))
wide_logit = paddle.reshape(wide_table(item_id), [-1, 1]) + \
    paddle.static.nn.fc(dense_feat, 1, name="wide_dense")

# deep part
deep = paddle.concat([user_emb, item_emb, cate_emb, dense_feat], axis=1)
for i, width in enumerate([128, 64, 32]):
    deep = paddle.static.nn.fc(deep, width, activation="relu", name="deep_fc%d" % i)
deep_logit = paddle.static.nn.fc(deep, 1, name="deep_out")

logit = wide_logit + deep_logit
loss = paddle.mean(F.binary_cross_entropy_with_logits(logit, label))
prob = F.sigmoid(logit)
auc, batch_auc, _ = paddle.static.auc(
    input=paddle.concat([1 - prob, prob], axis=1),
    label=paddle.cast(label, "int64"))

lr = paddle.optimizer.lr.ExponentialDecay(learning_rate=0.001, gamma=0.999)
optimizer = paddle.optimizer.Adam(learning_rate=lr,
                                  grad_clip=paddle.nn.ClipGradByGlobalNorm(clip_norm=5.0))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
