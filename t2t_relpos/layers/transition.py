"""The depthwise-separable convolution transition of the Universal Transformer (the alternative to the FFN)."""

import numbers

import keras
from keras import ops

from t2t_relpos.layers import cache_ops
from t2t_relpos.layers.checks import keras_mask
from t2t_relpos.layers.positionwise import at_positions


@keras.saving.register_keras_serializable(package="t2t_relpos")
class SeparableConvTransition(keras.layers.Layer):
    """`sepconv(hidden -> filter, relu) -> dropout -> sepconv(filter -> hidden)` along the positions.

    Each separable convolution is a depthwise convolution (one filter per channel, no bias) followed by a
    pointwise `Dense`:

        depthwise(x)[t, c] = sum_j kernel[j, c] * x[t + j - before, c],   j = 0 .. k - 1

    with `before = k - 1` when `causal=True` (a position sees itself and the k - 1 positions before it: the
    decoder) and `before = (k - 1) // 2` otherwise (a centred window, TensorFlow's "SAME": the encoder);
    positions outside the sequence read zeros. The two convolutions have widths 3 and 5 by default, as in
    tensor2tensor's Universal Transformer with `transformer_ffn_type="sepconv"` (its UT sets' default until
    September 2018). Padding positions are zeroed before each convolution, so their contents
    never reach valid positions.

    Incremental decoding (causal only): `init_cache` gives one buffer per convolution holding its inputs so
    far; passing it with `cache_index` computes the new positions exactly as the full pass does.

    Args:
        hidden_size: Input and output depth.
        filter_size: Depth between the two convolutions.
        kernel_size: The two convolutions' widths, `(first, second)`, or one int for both.
        causal: Causal (left) windows instead of centred ones.
        relu_dropout: Dropout rate after the ReLU.
        kernel_initializer: Initializer of the pointwise kernels (depthwise kernels use fan-in variance
            scaling, so each window sum keeps unit variance).

    Call arguments:
        x: `[B, T, hidden_size]`.
        padding_mask: bool `[B, T]`, False at padding (default: the Keras mask of x).
        cache: dict `{"inner": [B, S + first - 1, hidden_size], "outer": [B, S + second - 1, filter_size]}`
            from `init_cache`.
        cache_index: int scalar, the position of x's first step (with `cache`).

    Returns:
        `[B, T, hidden_size]`, and the updated cache when one was passed.

    Example:

    >>> import numpy as np
    >>> transition = SeparableConvTransition(hidden_size=16, filter_size=32, causal=True)
    >>> tuple(transition(np.random.rand(2, 5, 16).astype("float32")).shape)
    (2, 5, 16)
    """

    def __init__(self, hidden_size, filter_size, kernel_size=(3, 5), causal=False, relu_dropout=0.0,
                 kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        sizes = (kernel_size, kernel_size) if isinstance(kernel_size, numbers.Integral) else kernel_size
        if (isinstance(sizes, str) or not hasattr(sizes, "__len__") or len(sizes) != 2
                or not all(isinstance(k, numbers.Integral) and not isinstance(k, bool) and k >= 1 for k in sizes)):
            raise ValueError(f"kernel_size must be an int >= 1 or a pair of them, got {kernel_size!r}")
        sizes = tuple(int(k) for k in sizes)
        self.hidden_size = hidden_size
        self.filter_size = filter_size
        self.kernel_size = sizes
        self.causal = causal
        self.relu_dropout = relu_dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        common = {"kernel_initializer": self.kernel_initializer, "dtype": self.dtype_policy}
        self.inner = keras.layers.Dense(filter_size, activation="relu", name="inner_pointwise", **common)
        self.outer = keras.layers.Dense(hidden_size, name="outer_pointwise", **common)
        self.dropout = keras.layers.Dropout(relu_dropout, dtype=self.dtype_policy)
        self.supports_masking = True

    def build(self, input_shape):
        depthwise = keras.initializers.VarianceScaling(scale=1.0, mode="fan_in", distribution="uniform")
        first, second = self.kernel_size
        self.inner_depthwise = self.add_weight(name="inner_depthwise", shape=(first, self.hidden_size),
                                               initializer=depthwise)
        self.outer_depthwise = self.add_weight(name="outer_depthwise", shape=(second, self.filter_size),
                                               initializer=depthwise)
        self.inner.build(tuple(input_shape[:-1]) + (self.hidden_size,))
        self.outer.build(tuple(input_shape[:-1]) + (self.filter_size,))
        self.dropout.build(None)

    def init_cache(self, batch_size, max_length, dtype=None):
        """Zero input buffers for `max_length` positions (plus the `k - 1` before the first, per convolution)."""
        if not self.causal:
            raise ValueError("only a causal SeparableConvTransition decodes incrementally")
        dtype = dtype or self.compute_dtype
        first, second = self.kernel_size
        return {"inner": ops.zeros((batch_size, max_length + first - 1, self.hidden_size), dtype),
                "outer": ops.zeros((batch_size, max_length + second - 1, self.filter_size), dtype)}

    def _windows(self, x, k, buffer, cache_index):
        """x with the context its width-k windows need: `[B, T + k - 1, C]` (and the updated buffer)."""
        before = k - 1
        if buffer is not None:
            # Position p lives at p + before in the buffer; the windows of x start k - 1 earlier.
            buffer = cache_ops.write(buffer, ops.cast(x, buffer.dtype), cache_index + before, axis=1)
            shape = ops.shape(x)
            return ops.slice(buffer, [0, cache_index, 0], (shape[0], shape[1] + before, shape[2])), buffer
        if not self.causal:
            before = (k - 1) // 2
        return ops.pad(x, [[0, 0], [before, k - 1 - before], [0, 0]]), None

    def _depthwise(self, padded, kernel):
        """Valid depthwise convolution: `[B, T + k - 1, C]` -> `[B, T, C]` (k static, so static slices)."""
        k = kernel.shape[0]
        kernel = ops.cast(kernel, padded.dtype)
        out = 0
        for j in range(k):
            stop = j - (k - 1)
            out = out + padded[:, j:stop if stop else None] * kernel[j]
        return out

    def call(self, x, padding_mask=None, cache=None, cache_index=None, training=None):
        if cache is not None and (not self.causal or cache_index is None):
            raise ValueError("a transition cache needs causal=True and cache_index")
        if padding_mask is None:
            padding_mask = keras_mask(x)
        keep = None if padding_mask is None else ops.cast(padding_mask, x.dtype)[..., None]
        if keep is not None:
            x = x * keep
        first, second = self.kernel_size
        padded, inner_buffer = self._windows(x, first, None if cache is None else cache["inner"], cache_index)
        h = at_positions(self.inner, self._depthwise(padded, self.inner_depthwise))
        h = self.dropout(h, training=training)
        if keep is not None:
            h = h * keep
        padded, outer_buffer = self._windows(h, second, None if cache is None else cache["outer"], cache_index)
        y = at_positions(self.outer, self._depthwise(padded, self.outer_depthwise))
        if cache is None:
            return y
        return y, {"inner": inner_buffer, "outer": outer_buffer}

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "filter_size": self.filter_size,
            "kernel_size": list(self.kernel_size),
            "causal": self.causal,
            "relu_dropout": self.relu_dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        })
        return config
