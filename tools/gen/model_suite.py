"""Classic transpiler suite nets (the shared corpus's classic family: Paddle's
test_dist_transpiler.py models, and its "Extra" nets), rebuilt layer for layer."""
from models import register

SUITE = 'classic suite'


def _basic_net(paddle, bias=True):
    """x[1000] -> fc 1000 (fc_w, fc_b), square_error_cost against y[1], mean."""
    x = paddle.static.data(name='x', shape=[-1, 1000], dtype='float32')
    bias_attr = paddle.ParamAttr(name='fc_b') if bias else False
    y_predict = paddle.static.nn.fc(x, size=1000, weight_attr=paddle.ParamAttr(name='fc_w'),
                                    bias_attr=bias_attr)
    y = paddle.static.data(name='y', shape=[-1, 1], dtype='float32')
    cost = paddle.nn.functional.square_error_cost(input=y_predict, label=y)
    return paddle.mean(cost)


@register('suite_basic', 'TestBasicModel: fc 1000x1000 (fc_w/fc_b), square_error_cost, mean, '
          'SGD 0.1', SUITE)
def basic(paddle):
    return _basic_net(paddle), paddle.optimizer.SGD(learning_rate=0.1)
