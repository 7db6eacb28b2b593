"""Position signals against a numpy transcription of the sinusoid formula."""

import os

import keras
import numpy as np
from keras import ops

from t2t_relpos.layers import SinusoidalPositionEncoding, StepEncoding, timing_signal


def numpy_signal(positions, channels, min_timescale=1.0, max_timescale=1.0e4):
    half = channels // 2
    increment = np.log(max_timescale / min_timescale) / max(half - 1, 1)
    inv = min_timescale * np.exp(np.arange(half) * -increment)
    scaled = np.asarray(positions, float)[:, None] * inv[None]
    signal = np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)
    return np.pad(signal, [[0, 0], [0, channels % 2]])


def test_timing_signal_matches_formula():
    for channels in (8, 9, 64):
        got = ops.convert_to_numpy(timing_signal(np.arange(11), channels))
        np.testing.assert_allclose(got, numpy_signal(np.arange(11), channels), atol=1e-5)


def test_start_index_shifts_the_signal():
    x = np.zeros((2, 5, 16), "float32")
    layer = SinusoidalPositionEncoding()
    from_zero = ops.convert_to_numpy(layer(np.zeros((2, 12, 16), "float32")))
    from_seven = ops.convert_to_numpy(layer(x, start_index=7))
    np.testing.assert_allclose(from_seven, from_zero[:, 7:12], atol=1e-5)
    assert from_seven.shape == (2, 5, 16)


def test_step_signal_is_the_same_at_every_position():
    x = np.zeros((2, 5, 16), "float32")
    got = ops.convert_to_numpy(StepEncoding()(x, step=3))
    np.testing.assert_allclose(got, np.broadcast_to(numpy_signal([3], 16)[0], (2, 5, 16)), atol=1e-5)
    assert not np.allclose(got, ops.convert_to_numpy(StepEncoding()(x, step=4)))


def test_position_layers_serialise(tmp_path):
    inputs = keras.Input((None, 8))
    outputs = inputs + SinusoidalPositionEncoding(max_timescale=100.0)(inputs) + StepEncoding()(inputs)
    model = keras.Model(inputs, outputs)
    path = os.path.join(tmp_path, "positions.keras")
    model.save(path)
    x = np.random.default_rng(0).normal(size=(2, 4, 8)).astype("float32")
    np.testing.assert_allclose(ops.convert_to_numpy(keras.models.load_model(path)(x)),
                               ops.convert_to_numpy(model(x)), atol=1e-6)
