"""Transformer encoder and decoder blocks built on relation-aware attention."""

import keras

from t2t_relpos.layers.checks import check_features, check_int, check_positive, keras_mask
from t2t_relpos.layers.positionwise import at_positions
from t2t_relpos.layers.relative_attention import RelationAwareMultiHeadAttention


@keras.saving.register_keras_serializable(package="t2t_relpos")
class FeedForward(keras.layers.Layer):
    """Position-wise feed-forward network: `Dense(filter_size, relu) -> dropout -> Dense(hidden_size)`.

    Call arguments:
        x: `[B, T, hidden_size]`.

    Returns:
        `[B, T, hidden_size]`.
    """

    def __init__(self, hidden_size, filter_size, relu_dropout=0.0, kernel_initializer="glorot_uniform",
                 **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.filter_size = filter_size
        self.relu_dropout = relu_dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        common = {"kernel_initializer": self.kernel_initializer, "dtype": self.dtype_policy}
        self.inner = keras.layers.Dense(filter_size, activation="relu", name="inner", **common)
        self.dropout = keras.layers.Dropout(relu_dropout, dtype=self.dtype_policy)
        self.outer = keras.layers.Dense(hidden_size, name="outer", **common)

    def build(self, input_shape):
        self.inner.build(input_shape)
        self.outer.build(tuple(input_shape[:-1]) + (self.filter_size,))

    def call(self, x, training=None):
        # Over the flattened positions: two 2-D matmuls (`positionwise`).
        return at_positions(lambda flat: self.outer(self.dropout(self.inner(flat), training=training)), x)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "filter_size": self.filter_size,
            "relu_dropout": self.relu_dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        })
        return config


class _BlockBase(keras.layers.Layer):
    """Arguments shared by the encoder and decoder blocks."""

    def __init__(self, hidden_size, num_heads, filter_size, key_dim=None, value_dim=None,
                 max_relative_position=None, use_relative_keys=True, use_relative_values=True,
                 heads_share_relative_embeddings=False, dropout=0.0, attention_dropout=0.0, relu_dropout=0.0,
                 norm_position="post", norm_epsilon=1e-6, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        hidden_size = check_int("hidden_size", hidden_size, 1)
        num_heads = check_int("num_heads", num_heads, 1)
        filter_size = check_int("filter_size", filter_size, 1)
        key_dim = check_int("key_dim", key_dim, 1, allow_none=True)
        value_dim = check_int("value_dim", value_dim, 1, allow_none=True)
        check_positive("norm_epsilon", norm_epsilon)
        if hidden_size % num_heads and not (key_dim and value_dim):
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.filter_size = filter_size
        self.key_dim = key_dim or hidden_size // num_heads
        self.value_dim = value_dim or self.key_dim
        self.max_relative_position = max_relative_position
        self.use_relative_keys = use_relative_keys
        self.use_relative_values = use_relative_values
        self.heads_share_relative_embeddings = heads_share_relative_embeddings
        self.dropout_rate = dropout
        self.attention_dropout = attention_dropout
        self.relu_dropout = relu_dropout
        self.norm_position = norm_position
        self.norm_epsilon = norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        if norm_position not in ("post", "pre"):
            raise ValueError(f"norm_position must be 'post' or 'pre', got {norm_position!r}")
        self.residual_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def _attention(self, name, relative):
        return RelationAwareMultiHeadAttention(
            num_heads=self.num_heads, key_dim=self.key_dim, value_dim=self.value_dim,
            output_dim=self.hidden_size,
            max_relative_position=self.max_relative_position if relative else None,
            use_relative_keys=self.use_relative_keys, use_relative_values=self.use_relative_values,
            heads_share_relative_embeddings=self.heads_share_relative_embeddings,
            dropout=self.attention_dropout, kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy, name=name)

    def check_input(self, name, x=None, shape=None):
        """Refuses an input (`x`, or its `shape` in `build`) that is not `[batch, length, hidden_size]`: the
        residual connections add it to the sublayers' outputs, which are `hidden_size` wide."""
        check_features(name, x, self.hidden_size,
                       hint=f"its depth must be hidden_size={self.hidden_size} (embed or project it to that)",
                       shape=shape)

    def _norm(self, name):
        return keras.layers.LayerNormalization(epsilon=self.norm_epsilon, dtype=self.dtype_policy, name=name)

    def _residual(self, x, norm, sublayer, training):
        """`post` (the paper): `norm(x + dropout(f(x)))`; `pre`: `x + dropout(f(norm(x)))`.

        Pre-norm trains deep stacks more stably; the stack then normalises its final output.
        `sublayer` returns y or (y, extra); extra (e.g. an updated cache) is passed through.
        """
        result = sublayer(norm(x) if self.norm_position == "pre" else x)
        y, extra = result if isinstance(result, tuple) else (result, None)
        x = x + self.residual_dropout(y, training=training)
        if self.norm_position == "post":
            x = norm(x)
        return x if extra is None else (x, extra)

    def _feed_forward(self):
        return FeedForward(self.hidden_size, self.filter_size, self.relu_dropout,
                           kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy,
                           name="feed_forward")

    def compute_output_shape(self, input_shape, *args, **kwargs):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "num_heads": self.num_heads,
            "filter_size": self.filter_size,
            "key_dim": self.key_dim,
            "value_dim": self.value_dim,
            "max_relative_position": self.max_relative_position,
            "use_relative_keys": self.use_relative_keys,
            "use_relative_values": self.use_relative_values,
            "heads_share_relative_embeddings": self.heads_share_relative_embeddings,
            "dropout": self.dropout_rate,
            "attention_dropout": self.attention_dropout,
            "relu_dropout": self.relu_dropout,
            "norm_position": self.norm_position,
            "norm_epsilon": self.norm_epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        })
        return config


@keras.saving.register_keras_serializable(package="t2t_relpos")
class TransformerEncoderBlock(_BlockBase):
    """Self-attention (relative positions when `max_relative_position` is set) and a feed-forward network.

    Args: see `RelationAwareMultiHeadAttention` for the attention arguments; `dropout` is tensor2tensor's
    `layer_prepostprocess_dropout` (on each sublayer's output), `attention_dropout` on the attention weights,
    `relu_dropout` inside the feed-forward network; `norm_position` is "post" (the paper) or "pre".

    Call arguments:
        x: `[B, T, hidden_size]`.
        padding_mask: bool `[B, T]`, False at padding (default: the Keras mask of x).
        edge_labels: int `[B, T, T]` for graph attention (see `RelationAwareMultiHeadAttention`).

    Returns:
        `[B, T, hidden_size]`.

    Example:

    >>> import numpy as np
    >>> block = TransformerEncoderBlock(hidden_size=16, num_heads=2, filter_size=32, max_relative_position=4)
    >>> tuple(block(np.random.rand(2, 5, 16).astype("float32")).shape)
    (2, 5, 16)
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.self_attention = self._attention("self_attention", relative=True)
        self.attention_norm = self._norm("attention_norm")
        self.feed_forward = self._feed_forward()
        self.feed_forward_norm = self._norm("feed_forward_norm")
        self.supports_masking = True

    def build(self, x_shape):
        self.check_input("x", shape=x_shape)
        self.self_attention.build(x_shape)
        for layer in (self.attention_norm, self.feed_forward, self.feed_forward_norm):
            layer.build(x_shape)

    def call(self, x, padding_mask=None, edge_labels=None, training=None):
        self.check_input("x", x)
        if padding_mask is None:
            padding_mask = keras_mask(x)

        def attend(h):
            return self.self_attention(h, query_mask=padding_mask, value_mask=padding_mask,
                                       edge_labels=edge_labels, training=training)

        x = self._residual(x, self.attention_norm, attend, training)
        return self._residual(x, self.feed_forward_norm, lambda h: self.feed_forward(h, training=training),
                              training)


@keras.saving.register_keras_serializable(package="t2t_relpos")
class TransformerDecoderBlock(_BlockBase):
    """Causal self-attention (relative when configured), plain attention to the encoder, feed-forward.

    With `use_cross_attention=False` the block has no attention to an encoder (the block of a decoder-only
    language model, tensor2tensor's `transformer` on a problem without inputs): self-attention and the
    feed-forward network only, and `encoder_output` must be None.

    Call arguments:
        x: `[B, T, hidden_size]` decoder states.
        encoder_output: `[B, S, hidden_size]`, or None when `cross_cache` holds its keys and values.
        encoder_mask: bool `[B, S]`, False at source padding (default: the Keras mask of `encoder_output`).
        self_cache: this block's self-attention cache (`init_cache`) for incremental decoding.
        cross_cache: precomputed encoder keys/values (`compute_cross_cache`).
        cache_index: int scalar, the position of x's first step (with `self_cache`).

    Returns:
        `[B, T, hidden_size]`, and the updated `self_cache` when one was passed.

    Example:

    >>> import numpy as np
    >>> block = TransformerDecoderBlock(hidden_size=16, num_heads=2, filter_size=32, max_relative_position=4)
    >>> memory = np.random.rand(2, 7, 16).astype("float32")
    >>> tuple(block(np.random.rand(2, 5, 16).astype("float32"), memory).shape)
    (2, 5, 16)
    """

    def __init__(self, *args, use_cross_attention=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.use_cross_attention = bool(use_cross_attention)
        self.self_attention = self._attention("self_attention", relative=True)
        self.self_attention_norm = self._norm("self_attention_norm")
        self.cross_attention = self.cross_attention_norm = None
        if self.use_cross_attention:
            self.cross_attention = self._attention("cross_attention", relative=False)
            self.cross_attention_norm = self._norm("cross_attention_norm")
        self.feed_forward = self._feed_forward()
        self.feed_forward_norm = self._norm("feed_forward_norm")

    def build(self, x_shape, encoder_output_shape=None):
        self.check_input("x", shape=x_shape)
        self.self_attention.build(x_shape)
        if self.use_cross_attention:
            self.cross_attention.build(x_shape, encoder_output_shape or x_shape)
            self.cross_attention_norm.build(x_shape)
        for layer in (self.self_attention_norm, self.feed_forward, self.feed_forward_norm):
            layer.build(x_shape)

    def init_cache(self, batch_size, max_length, dtype=None):
        return self.self_attention.init_cache(batch_size, max_length, dtype)

    def compute_cross_cache(self, encoder_output):
        """The encoder's keys and values for `cross_cache` (building the block first if it has no weights)."""
        self._check_encoder(encoder_output)
        if not self.built:
            self.build((None, None, self.hidden_size), (None, None, encoder_output.shape[-1]))
        return self.cross_attention.compute_key_value(encoder_output)

    def _check_encoder(self, encoder_output):
        if not self.use_cross_attention and encoder_output is not None:
            raise ValueError(f"{self.name} has no cross-attention (use_cross_attention=False): it attends to no "
                             "encoder_output; pass None")

    def cross_attend(self, x, attend_encoder, training):
        """The residual sublayer of attention to the encoder; `x` itself in a block without one."""
        if not self.use_cross_attention:
            return x
        return self._residual(x, self.cross_attention_norm, attend_encoder, training)

    def attend_encoder(self, h, encoder_output, encoder_mask, cross_cache, training):
        """Attention to the encoder: from its precomputed keys/values when `cross_cache` is given."""
        if cross_cache is not None:
            return self.cross_attention(h, value_mask=encoder_mask, cache=cross_cache, training=training)[0]
        return self.cross_attention(h, encoder_output, value_mask=encoder_mask, training=training)

    def call(self, x, encoder_output=None, encoder_mask=None, self_cache=None, cross_cache=None,
             cache_index=None, training=None):
        self.check_input("x", x)
        self._check_encoder(encoder_output)

        def attend_self(h):
            return self.self_attention(h, use_causal_mask=True, cache=self_cache, cache_index=cache_index,
                                       training=training)

        def attend_encoder(h):
            return self.attend_encoder(h, encoder_output, encoder_mask, cross_cache, training)

        result = self._residual(x, self.self_attention_norm, attend_self, training)
        x, new_cache = result if self_cache is not None else (result, None)
        x = self.cross_attend(x, attend_encoder, training)
        x = self._residual(x, self.feed_forward_norm, lambda h: self.feed_forward(h, training=training),
                           training)
        return x if new_cache is None else (x, new_cache)

    def get_config(self):
        config = super().get_config()
        config["use_cross_attention"] = self.use_cross_attention
        return config
