"""Cache writes: in-place in TensorFlow graphs, yet functional; decoding the same with copying writes."""

from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from t2t_relpos.decoding import search
from t2t_relpos.layers import cache_ops
from t2t_relpos.models import Transformer, UniversalTransformer

VOCAB = 13


def _models():
    common = dict(hidden_size=16, filter_size=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=2)
    models = {
        "transformer, relative": Transformer(VOCAB, VOCAB, position_encoding="relative", max_relative_position=3,
                                             **common),
        "transformer, sinusoid": Transformer(VOCAB, VOCAB, position_encoding="sinusoid", **common),
        # ACT's steps are unrolled: 3 write the caches as the default 12 do, and trace in a quarter of the time.
        "universal transformer, act, sepconv": UniversalTransformer(
            VOCAB, VOCAB, hidden_size=16, filter_size=32, num_heads=2, recurrence_type="act", act_max_steps=3,
            transition_type="sepconv", position_encoding="relative", max_relative_position=3),
    }
    for model in models.values():
        model.build()
    return models


@pytest.fixture(scope="module")
def models():
    return _models()


def _copying_write(buffer, update, index, axis):
    start = [0] * len(buffer.shape)
    start[axis] = index
    return ops.slice_update(buffer, start, update)


@pytest.mark.parametrize("name", ["transformer, relative", "transformer, sinusoid",
                                  "universal transformer, act, sepconv"])
def test_searches_in_a_graph_give_what_copying_writes_give(models, name):
    model = models[name]
    inputs = tf.constant([[4, 5, 6, 7, 1], [3, 2, 1, 0, 0]], tf.int32)
    lengths = search.decode_lengths(inputs, 5)

    def both(x):
        return search.greedy(model, x, 10, lengths=lengths), search.beam_search(model, x, 10, beam_size=3,
                                                                                lengths=lengths)

    in_place = tf.nest.map_structure(lambda t: t.numpy(), tf.function(both, autograph=False)(inputs))
    with mock.patch.object(cache_ops, "write", _copying_write):
        copying = tf.nest.map_structure(lambda t: t.numpy(), tf.function(both, autograph=False)(inputs))
    for got, want in zip(tf.nest.flatten(in_place), tf.nest.flatten(copying)):
        if got.dtype == np.int32:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5)


def test_cache_writes_are_functional_wherever_the_old_buffer_is_still_used():
    @tf.function
    def write_twice(buffer):
        first = cache_ops.write(buffer, tf.ones((2, 1, 3)), 1, axis=1)
        second = cache_ops.write(buffer, tf.fill((2, 2, 3), 2.0), 3, axis=1)
        return buffer, first, second

    buffer = tf.zeros((2, 5, 3)) + 0.0
    kept, first, second = (t.numpy() for t in write_twice(buffer))
    np.testing.assert_array_equal(kept, np.zeros((2, 5, 3)))
    want_first, want_second = np.zeros((2, 5, 3)), np.zeros((2, 5, 3))
    want_first[:, 1] = 1.0
    want_second[:, 3:5] = 2.0
    np.testing.assert_array_equal(first, want_first)
    np.testing.assert_array_equal(second, want_second)
    np.testing.assert_array_equal(buffer.numpy(), np.zeros((2, 5, 3)))


def test_cache_writes_in_a_loop_equal_slice_update_eagerly_and_under_xla():
    def fill(buffer):
        def body(i, b):
            return i + 1, cache_ops.write(b, tf.fill((2, 1, 3), tf.cast(i, tf.float32)), i, axis=1)
        return tf.while_loop(lambda i, b: i < 5, body, (0, buffer))[1]

    want = np.broadcast_to(np.arange(5, dtype="float32")[None, :, None], (2, 5, 3))
    for run in (fill, tf.function(fill), tf.function(fill, jit_compile=True)):
        np.testing.assert_array_equal(run(tf.zeros((2, 5, 3))).numpy(), want)
