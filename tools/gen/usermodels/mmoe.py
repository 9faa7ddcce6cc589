# MMoE multi-task ranking (click and like), Paddle 2.6.2 static graph (run: python mmoe.py -> main.pb, startup.pb).
# Small-vocabulary user fields with ordinary dense embeddings, one table per field.
import paddle
import paddle.nn.functional as F

paddle.enable_static()
paddle.seed(2024)

FIELDS = [("gender", 3), ("occupation", 30), ("city", 400), ("device", 50), ("hour", 24)]
inputs = {name: paddle.static.data(name=name, shape=[-1, 1], dtype="int64") for name, _ in FIELDS}
age = paddle.static.data(name="age", shape=[-1], dtype="int64")            # one age bucket a row
dense_feat = paddle.static.data(name="dense_feat", shape=[-1, 10], dtype="float32")
label_click = paddle.static.data(name="label_click", shape=[-1, 1], dtype="float32")
label_like = paddle.static.data(name="label_like", shape=[-1, 1], dtype="float32")

embs = []
for name, vocab in FIELDS:
    table = paddle.nn.Embedding(vocab, 8, weight_attr=paddle.ParamAttr(name=name + "_emb"))
    embs.append(paddle.reshape(table(inputs[name]), [-1, 8]))
age_table = paddle.nn.Embedding(10, 8, weight_attr=paddle.ParamAttr(name="age_emb"))
embs.append(age_table(age))                                                  # [-1, 8]
x = paddle.concat(embs + [dense_feat], axis=1)
x = paddle.static.nn.batch_norm(x, name="input_bn")

N_EXPERTS = 4
experts = paddle.stack([paddle.static.nn.fc(x, 64, activation="relu", name="expert%d" % i)
                        for i in range(N_EXPERTS)], axis=1)                  # [-1, E, 64]


def task(name, label):
    gate = F.softmax(paddle.static.nn.fc(x, N_EXPERTS, name=name + "_gate"))
    mixed = paddle.sum(experts * paddle.unsqueeze(gate, axis=2), axis=1)     # [-1, 64]
    h = paddle.static.nn.fc(mixed, 32, activation="relu", name=name + "_tower")
    h = F.dropout(h, p=0.2)
    logit = paddle.static.nn.fc(h, 1, name=name + "_out")
    prob = F.sigmoid(logit)
    auc, _, _ = paddle.static.auc(input=paddle.concat([1 - prob, prob], axis=1),
                                  label=paddle.cast(label, "int64"))
    return paddle.mean(F.binary_cross_entropy_with_logits(logit, label))


loss = task("click", label_click) + 0.5 * task("like", label_like)

lr = paddle.optimizer.lr.ExponentialDecay(learning_rate=0.01, gamma=0.99)
optimizer = paddle.optimizer.Momentum(learning_rate=lr, momentum=0.9,
                                      weight_decay=paddle.regularizer.L2Decay(1e-4))
optimizer.minimize(loss)

open('main.pb', 'wb').write(paddle.static.default_main_program().desc.serialize_to_string())
open('startup.pb', 'wb').write(paddle.static.default_startup_program().desc.serialize_to_string())
print("saved")
