# Two-tower DSSM for retrieval-style ranking, Paddle 2.6.2 static graph (run: python dssm.py -> main.pb, startup.pb).
# The query and the title share one term vocabulary, so one term table serves both towers.
import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

user_id = paddle.static.data(name="user_id", shape=[-1, 1], dtype="int64")
query_terms = paddle.static.data(name="query_terms", shape=[-1, 8], dtype="int64")   # padded with 0
item_id = paddle.static.data(name="item_id", shape=[-1, 1], dtype="int64")
title_terms = paddle.static.data(name="title_terms", shape=[-1, 12], dtype="int64")  # padded with 0
label = paddle.static.data(name="label", shape=[-1, 1], dtype="float32")

DIM = 32
init = paddle.nn.initializer.Normal(0.0, 0.01)
# the embedding tables are not clipped (only the towers are)
term_table = paddle.nn.Embedding(200000, DIM, padding_idx=0, sparse=True,
                                 weight_attr=paddle.ParamAttr(name="term_emb", initializer=init,
                                                              need_clip=False))
user_table = paddle.nn.Embedding(100000, DIM, sparse=True,
                                 weight_attr=paddle.ParamAttr(name="user_emb", initializer=init,
                                                              need_clip=False))
item_table = paddle.nn.Embedding(80000, DIM, sparse=True,
                                 weight_attr=paddle.ParamAttr(name="item_emb", initializer=init,
                                                              need_clip=False))


def tower(ids_emb, terms, prefix):
    bag = paddle.sum(term_table(terms), axis=1)                      # [-1, DIM]
    x = paddle.concat([paddle.reshape(ids_emb, [-1, DIM]), bag], axis=1)
    x = paddle.static.nn.fc(x, 64, activation="tanh", name=prefix + "_fc0")
    return paddle.static.nn.fc(x, 32, activation="tanh", name=prefix + "_fc1")


query_vec = tower(user_table(user_id), query_terms, "query")
doc_vec = tower(item_table(item_id), title_terms, "doc")
sim = paddle.reshape(F.cosine_similarity(query_vec, doc_vec, axis=1), [-1, 1])
logit = paddle.scale(sim, scale=5.0)
loss = paddle.mean(F.binary_cross_entropy_with_logits(logit, label))

lr = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=0.05, T_max=10000)
optimizer = paddle.optimizer.SGD(learning_rate=lr,
                                 grad_clip=paddle.nn.ClipGradByNorm(clip_norm=1.0))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
