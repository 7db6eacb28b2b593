"""Position-wise matmuls over flattened positions: the same products as `ops.matmul`, in smaller graphs."""

import collections

import numpy as np
import tensorflow as tf
from keras import ops

from t2t_relpos.layers import FeedForward, RelationAwareMultiHeadAttention, TransformerEncoder
from t2t_relpos.layers.positionwise import at_positions, flatten_positions


def _graph_ops(fn, *signature):
    graph = tf.function(fn, autograph=False).get_concrete_function(*signature).graph
    return collections.Counter(op.type for op in graph.get_operations())


def test_at_positions_gives_the_products_and_gradients_of_a_3d_matmul_exactly():
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(3, 5, 8)).astype("float32"))
    kernel = tf.Variable(rng.normal(size=(8, 6)).astype("float32"))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = at_positions(lambda flat: ops.matmul(flat, kernel), x)
        theirs = ops.matmul(x, kernel)  # tf.tensordot on TensorFlow
        loss_ours, loss_theirs = ops.sum(ours * ours), ops.sum(theirs * theirs)
    np.testing.assert_array_equal(ours, theirs)
    for a, b in zip(tape.gradient(loss_ours, [x, kernel]), tape.gradient(loss_theirs, [x, kernel])):
        np.testing.assert_array_equal(a, b)
    assert tuple(flatten_positions(x).shape) == (15, 8)


def test_dynamic_shapes_are_restored_in_a_trace():
    kernel = np.ones((4, 2), "float32")
    fn = tf.function(lambda x: at_positions(lambda flat: ops.matmul(flat, kernel), x), autograph=False)
    concrete = fn.get_concrete_function(tf.TensorSpec([None, None, 4], tf.float32))
    assert concrete.output_shapes.as_list() == [None, None, 2]
    assert tuple(concrete(tf.ones((2, 7, 4))).shape) == (2, 7, 2)


def test_the_layers_trace_to_small_graphs():
    """Graph-size guards (ops per trace, width 8; before the position-wise matmuls: attention 333, feed-forward
    82, encoder layer 434; now 189, 56 and 264): tracing time grows with the ops, and every trainer start pays it."""
    states = (tf.TensorSpec([None, None, 8], tf.float32), tf.TensorSpec([None, None], tf.bool))
    sample = np.zeros((1, 3, 8), "float32")
    attention = RelationAwareMultiHeadAttention(num_heads=2, key_dim=4, max_relative_position=8)
    attention(sample)
    feed_forward = FeedForward(8, 16, relu_dropout=0.1)
    feed_forward(sample)
    encoder = TransformerEncoder(num_layers=1, hidden_size=8, num_heads=2, filter_size=16,
                                 position_encoding="relative", max_relative_position=8)
    encoder(sample)
    counts = {
        "attention": _graph_ops(lambda x, mask: attention(x, query_mask=mask, value_mask=mask), *states),
        "feed_forward": _graph_ops(lambda x: feed_forward(x, training=True), states[0]),
        "encoder": _graph_ops(lambda x, mask: encoder(x, padding_mask=mask, training=True), *states),
    }
    sizes = {name: sum(c.values()) for name, c in counts.items()}
    assert sizes["attention"] <= 200 and sizes["feed_forward"] <= 60 and sizes["encoder"] <= 300, sizes
    assert all(c["MatMul"] for c in counts.values()) and not any(
        "Tensordot" in op.name for op in tf.function(lambda x: feed_forward(x), autograph=False)
        .get_concrete_function(states[0]).graph.get_operations())
