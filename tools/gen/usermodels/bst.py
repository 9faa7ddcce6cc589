# Behaviour Sequence Transformer (BST-like), Paddle 2.6.2 static graph (run: python bst.py -> main.pb, startup.pb).
# The target item comes one id a row; it is unsqueezed to [-1, 1] and looked up with the
# sequence (unsqueezed to [-1, 10, 1]) in one item table on the parameter servers.
import math

import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

SEQ, DIM = 10, 16
seq_items = paddle.static.data(name="seq_items", shape=[-1, SEQ], dtype="int64")
target_item = paddle.static.data(name="target_item", shape=[-1], dtype="int64")
user_feat = paddle.static.data(name="user_feat", shape=[-1, 6], dtype="float32")
label = paddle.static.data(name="label", shape=[-1, 1], dtype="float32")

attr = paddle.ParamAttr(name="item_emb", need_clip=False,
                        initializer=paddle.nn.initializer.Normal(0.0, 0.02))
seq = paddle.static.nn.sparse_embedding(paddle.unsqueeze(seq_items, axis=2), size=[1000000, DIM],
                                        param_attr=attr)                    # [-1, SEQ, DIM]
tgt = paddle.static.nn.sparse_embedding(paddle.unsqueeze(target_item, axis=1),
                                        size=[1000000, DIM], param_attr=attr)  # [-1, DIM]
tokens = paddle.concat([seq, paddle.unsqueeze(tgt, axis=1)], axis=1)         # [-1, SEQ+1, DIM]
pos = paddle.static.create_parameter([SEQ + 1, DIM], "float32", name="pos_emb",
                                     default_initializer=paddle.nn.initializer.Normal(0.0, 0.02))
tokens = tokens + pos

q = paddle.static.nn.fc(tokens, DIM, num_flatten_dims=2, name="att_q")
k = paddle.static.nn.fc(tokens, DIM, num_flatten_dims=2, name="att_k")
v = paddle.static.nn.fc(tokens, DIM, num_flatten_dims=2, name="att_v")
scores = paddle.matmul(q, k, transpose_y=True) / math.sqrt(DIM)
att = paddle.matmul(F.dropout(F.softmax(scores, axis=-1), p=0.1), v)
h = paddle.static.nn.layer_norm(tokens + att, begin_norm_axis=2, name="att_ln")
ffn = paddle.static.nn.fc(h, 32, num_flatten_dims=2, activation="relu", name="ffn0")
h = paddle.static.nn.layer_norm(h + paddle.static.nn.fc(ffn, DIM, num_flatten_dims=2, name="ffn1"),
                                begin_norm_axis=2, name="ffn_ln")

x = paddle.concat([paddle.reshape(h, [-1, (SEQ + 1) * DIM]), user_feat], axis=1)
x = paddle.static.nn.fc(x, 128, activation="relu", name="mlp0")
x = F.dropout(x, p=0.2)
logit = paddle.static.nn.fc(x, 1, name="mlp_out")
loss = paddle.mean(F.binary_cross_entropy_with_logits(logit, label))

lr = paddle.optimizer.lr.LinearWarmup(learning_rate=0.001, warmup_steps=1000, start_lr=1e-5,
                                      end_lr=0.001)
optimizer = paddle.optimizer.Adam(learning_rate=lr,
                                  grad_clip=paddle.nn.ClipGradByGlobalNorm(clip_norm=1.0))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
