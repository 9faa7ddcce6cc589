# YouTube-DNN-style ranking, Paddle 2.6.2 static graph (run: python youtube.py -> main.pb, startup.pb).
# The reader packs the four id fields of a row into one int64 tensor [user, video, author, city]
# and the watch history into another; the model slices them apart.
import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

ids = paddle.static.data(name="ids", shape=[-1, 4], dtype="int64")
watch_hist = paddle.static.data(name="watch_hist", shape=[-1, 10], dtype="int64")
label = paddle.static.data(name="label", shape=[-1, 1], dtype="float32")

user = paddle.slice(ids, axes=[1], starts=[0], ends=[1])          # [-1, 1]
video = ids[:, 1:2]                                              # [-1, 1]
author = ids[:, 2]                                               # [-1]
city = ids[:, 3:4]                                               # [-1, 1]

DIM = 24
video_attr = paddle.ParamAttr(name="video_emb", need_clip=False,
                              initializer=paddle.nn.initializer.Normal(0.0, 0.01))
# videos watched and the candidate video: one table on the parameter servers
hist = paddle.static.nn.sparse_embedding(paddle.reshape(watch_hist, [-1, 10, 1]),
                                         size=[5000000, DIM], param_attr=video_attr)
cand = paddle.static.nn.sparse_embedding(video, size=[5000000, DIM], param_attr=video_attr)
user_table = paddle.nn.Embedding(1000000, DIM, sparse=True,
                                 weight_attr=paddle.ParamAttr(name="user_emb", need_clip=False))
author_table = paddle.nn.Embedding(20000, 8, weight_attr=paddle.ParamAttr(name="author_emb"))
city_table = paddle.nn.Embedding(500, 4, weight_attr=paddle.ParamAttr(name="city_emb"))

x = paddle.concat([paddle.mean(hist, axis=1), paddle.reshape(cand, [-1, DIM]),
                   paddle.reshape(user_table(user), [-1, DIM]), author_table(author),
                   paddle.reshape(city_table(city), [-1, 4])], axis=1)
for i, width in enumerate([256, 128, 64]):
    x = paddle.static.nn.fc(x, width, activation="relu", name="relu%d" % i)
logit = paddle.static.nn.fc(x, 1, name="out")
loss = paddle.mean(F.binary_cross_entropy_with_logits(logit, label))

cosine = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=0.002, T_max=20000)
lr = paddle.optimizer.lr.LinearWarmup(learning_rate=cosine, warmup_steps=500, start_lr=0.0002,
                                      end_lr=0.002)
optimizer = paddle.optimizer.Adam(learning_rate=lr, lazy_mode=True,
                                  grad_clip=paddle.nn.ClipGradByNorm(clip_norm=2.0))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
