# DIN: attention of the target item over the user's behaviour sequence, Paddle 2.6.2 static graph
# (run: python din.py -> main.pb, startup.pb). Items and categories of the history and of the
# target are looked up in the same two tables.
import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

SEQ = 20
hist_item = paddle.static.data(name="hist_item", shape=[-1, SEQ], dtype="int64")   # 0 = padding
hist_cate = paddle.static.data(name="hist_cate", shape=[-1, SEQ], dtype="int64")
target_item = paddle.static.data(name="target_item", shape=[-1, 1], dtype="int64")
target_cate = paddle.static.data(name="target_cate", shape=[-1, 1], dtype="int64")
label = paddle.static.data(name="label", shape=[-1, 1], dtype="float32")

item_table = paddle.nn.Embedding(300000, 16, padding_idx=0, sparse=True,
                                 weight_attr=paddle.ParamAttr(name="item_emb"))
cate_table = paddle.nn.Embedding(5000, 8, padding_idx=0, sparse=True,
                                 weight_attr=paddle.ParamAttr(name="cate_emb"))

keys = paddle.concat([item_table(hist_item), cate_table(hist_cate)], axis=2)      # [-1, SEQ, 24]
query = paddle.concat([item_table(target_item), cate_table(target_cate)], axis=2)  # [-1, 1, 24]
query_seq = paddle.expand(query, [-1, SEQ, 24])

att_in = paddle.concat([query_seq, keys, query_seq - keys, query_seq * keys], axis=2)
att = paddle.static.nn.fc(att_in, 80, num_flatten_dims=2, activation="sigmoid", name="att_fc0")
att = paddle.static.nn.fc(att, 40, num_flatten_dims=2, activation="sigmoid", name="att_fc1")
att = paddle.static.nn.fc(att, 1, num_flatten_dims=2, name="att_fc2")               # [-1, SEQ, 1]
mask = paddle.unsqueeze(paddle.cast(hist_item > 0, "float32"), axis=2)
att = att * mask + (1.0 - mask) * (-1e9)
weights = F.softmax(att, axis=1)
interest = paddle.sum(weights * keys, axis=1)                                       # [-1, 24]

x = paddle.concat([interest, paddle.reshape(query, [-1, 24])], axis=1)
x = paddle.static.nn.fc(x, 200, activation="relu", name="mlp_fc0")
x = paddle.static.nn.fc(x, 80, activation="relu", name="mlp_fc1")
logit = paddle.static.nn.fc(x, 1, name="mlp_out")
loss = paddle.mean(F.binary_cross_entropy_with_logits(logit, label))
prob = F.sigmoid(logit)
auc, batch_auc, _ = paddle.static.auc(input=paddle.concat([1 - prob, prob], axis=1),
                                      label=paddle.cast(label, "int64"))

lr = paddle.optimizer.lr.PiecewiseDecay(boundaries=[1000, 5000], values=[0.01, 0.005, 0.001])
optimizer = paddle.optimizer.Adam(learning_rate=lr,
                                  grad_clip=paddle.nn.ClipGradByNorm(clip_norm=5.0))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
