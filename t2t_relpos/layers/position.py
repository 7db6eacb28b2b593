"""Position signals: the sinusoidal timing signal and the Universal Transformer's step (depth) signal."""

import math

import keras
from keras import ops


def timing_signal(positions, channels, min_timescale=1.0, max_timescale=1.0e4, dtype="float32"):
    """Sinusoids of `positions` (any shape) at geometric timescales: `positions.shape + [channels]`.

    The first half of the channels are sines, the second half cosines (tensor2tensor's layout); an odd
    channel count is padded with one zero channel.
    """
    num_timescales = channels // 2
    increment = math.log(max_timescale / min_timescale) / max(num_timescales - 1, 1)
    inv_timescales = min_timescale * ops.exp(
        ops.arange(num_timescales, dtype="float32") * -increment)
    scaled = ops.cast(positions, "float32")[..., None] * inv_timescales
    signal = ops.concatenate([ops.sin(scaled), ops.cos(scaled)], axis=-1)
    if channels % 2:
        signal = ops.pad(signal, [[0, 0]] * (len(signal.shape) - 1) + [[0, 1]])
    return ops.cast(signal, dtype)


@keras.saving.register_keras_serializable(package="t2t_relpos")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """The absolute sinusoidal position signal of Vaswani et al. (2017), from any start position.

    Returns the signal (to be added by the caller) for the positions `start_index + arange(T)`, broadcast to
    the input's shape. `start_index` lets incremental decoding ask for the signal of the current step.

    Args:
        min_timescale: Shortest wavelength / 2 pi.
        max_timescale: Longest wavelength / 2 pi.

    Call arguments:
        inputs: `[B, T, D]`.
        start_index: int scalar (or tensor), the position of the first step.

    Returns:
        `[B, T, D]`.

    Example:

    >>> import numpy as np
    >>> x = np.zeros((2, 5, 8), "float32")
    >>> tuple((x + SinusoidalPositionEncoding()(x)).shape)
    (2, 5, 8)
    """

    def __init__(self, min_timescale=1.0, max_timescale=1.0e4, **kwargs):
        super().__init__(**kwargs)
        self.min_timescale = min_timescale
        self.max_timescale = max_timescale

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        positions = start_index + ops.arange(shape[1], dtype="int32")
        signal = timing_signal(positions, shape[-1], self.min_timescale, self.max_timescale,
                               dtype=self.compute_dtype)
        return ops.broadcast_to(signal[None], shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"min_timescale": self.min_timescale, "max_timescale": self.max_timescale})
        return config


@keras.saving.register_keras_serializable(package="t2t_relpos")
class StepEncoding(keras.layers.Layer):
    """The Universal Transformer's recurrence-step signal, the same at every position.

    Added together with the position signal at each step, P^t tells the shared block how deep it is
    (Dehghani et al. 2018, eq. 1-2). Two kinds, as in tensor2tensor's `step_timing_signal_type`:
    "sinusoid" (the paper's: the sinusoid of step t) and "learned" (tensor2tensor's default: a trained vector
    per step, `S[t] * sqrt(d)` with `S` initialised from N(0, 1/d), so it starts at unit variance like the
    sinusoid).

    Args:
        signal_type: "sinusoid" or "learned".
        num_steps: The number of steps (needed for "learned": the rows of `S`).
        min_timescale, max_timescale: Of the sinusoid.

    Call arguments:
        inputs: `[B, T, D]`.
        step: int scalar (or tensor), the recurrence step t (0-based).

    Returns:
        `[B, T, D]`.

    Example:

    >>> import numpy as np
    >>> tuple(StepEncoding()(np.zeros((2, 5, 8), "float32"), step=3).shape)
    (2, 5, 8)
    >>> tuple(StepEncoding("learned", num_steps=4)(np.zeros((2, 5, 8), "float32"), step=3).shape)
    (2, 5, 8)
    """

    SIGNAL_TYPES = ("sinusoid", "learned")

    def __init__(self, signal_type="sinusoid", num_steps=None, min_timescale=1.0, max_timescale=1.0e4, **kwargs):
        super().__init__(**kwargs)
        if signal_type not in self.SIGNAL_TYPES:
            raise ValueError(f"signal_type must be one of {self.SIGNAL_TYPES}, got {signal_type!r}")
        if signal_type == "learned" and not num_steps:
            raise ValueError("a learned step signal needs num_steps")
        self.signal_type = signal_type
        self.num_steps = num_steps
        self.min_timescale = min_timescale
        self.max_timescale = max_timescale

    def build(self, input_shape):
        if self.signal_type == "learned":
            channels = input_shape[-1]
            self.embeddings = self.add_weight(
                name="embeddings", shape=(self.num_steps, channels),
                initializer=keras.initializers.RandomNormal(stddev=channels ** -0.5))

    def call(self, inputs, step=0):
        shape = ops.shape(inputs)
        if self.signal_type == "learned":
            signal = ops.take(self.embeddings, ops.cast(step, "int32"), axis=0) * (self.embeddings.shape[-1] ** 0.5)
            return ops.broadcast_to(ops.cast(signal, self.compute_dtype), shape)
        signal = timing_signal(step, shape[-1], self.min_timescale, self.max_timescale,
                               dtype=self.compute_dtype)
        return ops.broadcast_to(signal, shape)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"signal_type": self.signal_type, "num_steps": self.num_steps,
                       "min_timescale": self.min_timescale, "max_timescale": self.max_timescale})
        return config
