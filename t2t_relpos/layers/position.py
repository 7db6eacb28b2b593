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


POSITION_START_INDEX_TYPES = ("none", "random", "step")


@keras.saving.register_keras_serializable(package="t2t_relpos")
class PositionOffset(keras.layers.Layer):
    """Where the sinusoid's positions start in training: tensor2tensor's `position_start_index`.

    The Universal Transformer paper trained its algorithmic tasks "using positions starting with randomized
    offsets to further encourage the model to learn position-relative transformations" (Dehghani et al. 2018,
    §3.4), so that a model trained on strings of length 40 has met the sinusoids of positions up to 400. The
    offset o shifts the signal: positions o, o + 1, ..., o + T - 1 instead of 0 .. T - 1.

    Kinds, with tensor2tensor's semantics (`add_position_timing_signal`):

        "none": o = 0.
        "random": o uniform in [0, max_offset), drawn anew at every call; `max_offset=None` draws from
            [0, T) with T the length of the call's (padded) input, tensor2tensor's range, which its authors
            left as an open question.
        "step": o = floor(T * step / num_steps), growing with the recurrence step.

    Offsets are a training-time device here: with `training` not True the offset is 0, so decoding, caches and
    exported models read the plain signal. (tensor2tensor applied them at inference too, where "random" made
    decoding nondeterministic and "step" depended on the decoded prefix's length.)

    Args:
        start_index_type: "none", "random" or "step".
        max_offset: For "random": offsets are drawn from [0, max_offset); None: [0, T).
        seed: Seed of the draws (default: from Keras's global seed, `keras.utils.set_random_seed`).

    Call arguments:
        inputs: `[B, T, D]`; only its length T is read.
        step: int, the recurrence step t (0-based), for "step".
        num_steps: int, the number of recurrence steps, for "step".
        training: Offsets only when True.

    Returns:
        An int32 scalar, the offset o.

    Example:

    >>> import numpy as np
    >>> offset = PositionOffset("random", max_offset=400, seed=1)
    >>> x = np.zeros((2, 40, 8), "float32")
    >>> 0 <= int(offset(x, training=True)) < 400, int(offset(x, training=False))
    (True, 0)
    >>> int(PositionOffset("step")(x, step=3, num_steps=6, training=True))
    20
    """

    def __init__(self, start_index_type="none", max_offset=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        if start_index_type not in POSITION_START_INDEX_TYPES:
            raise ValueError(f"start_index_type must be one of {POSITION_START_INDEX_TYPES}, "
                             f"got {start_index_type!r}")
        if max_offset is not None and (isinstance(max_offset, bool) or not isinstance(max_offset, int)
                                       or max_offset < 1):
            raise ValueError(f"max_offset must be None or an int >= 1, got {max_offset!r}")
        self.start_index_type = start_index_type
        self.max_offset = max_offset
        self.seed = seed
        # Only "random" draws, so only it carries a generator's state (and a checkpointed variable).
        self.seed_generator = (keras.random.SeedGenerator(seed) if start_index_type == "random" else None)
        self.built = True

    def call(self, inputs, step=0, num_steps=1, training=None):
        if training is not True or self.start_index_type == "none":
            return ops.convert_to_tensor(0, "int32")
        length = ops.shape(inputs)[1]
        if self.start_index_type == "step":
            return ops.cast(ops.floor_divide(length * step, num_steps), "int32")
        high = length if self.max_offset is None else self.max_offset
        return ops.cast(keras.random.randint((), 0, high, dtype="int32", seed=self.seed_generator), "int32")

    def compute_output_spec(self, inputs, step=0, num_steps=1, training=None):
        return keras.KerasTensor((), dtype="int32")

    def get_config(self):
        config = super().get_config()
        config.update({"start_index_type": self.start_index_type, "max_offset": self.max_offset,
                       "seed": self.seed})
        return config
