"""Stacks of Transformer blocks with their position signal: the encoder and the decoder of the model.

They take embedded tokens, so they compose with any embedding: e.g. a text classifier can run
`TransformerEncoder(position_encoding="relative", ...)` over its own embeddings.
"""

import keras

from t2t_relpos.layers.checks import check_int, keras_mask
from t2t_relpos.layers.position import PositionOffset, SinusoidalPositionEncoding
from t2t_relpos.layers.transformer_block import TransformerDecoderBlock, TransformerEncoderBlock

POSITION_ENCODINGS = ("sinusoid", "relative", "both", "none")


def block_arguments(position_encoding, kernel_initializer, **kwargs):
    """A stack's arguments for its blocks: (their serialisable form for `get_config`, the form to build with).

    Blocks get relation tables only when `position_encoding` is "relative" or "both"; with "sinusoid" or
    "none", `max_relative_position` is not read (as an hparam that a set does not use).
    """
    if position_encoding not in POSITION_ENCODINGS:
        raise ValueError(f"position_encoding must be one of {POSITION_ENCODINGS}, got {position_encoding!r}")
    if position_encoding in ("relative", "both") and kwargs.get("max_relative_position") is None:
        raise ValueError(f"position_encoding={position_encoding!r} needs a clipping distance "
                         "max_relative_position >= 0 (None would give the model no positions)")
    config = {**kwargs,
              "kernel_initializer": keras.initializers.serialize(keras.initializers.get(kernel_initializer))}
    built = dict(config)
    if position_encoding not in ("relative", "both"):
        built["max_relative_position"] = None
    return config, built


def source_mask(encoder_output, encoder_mask=None):
    """A decoder cache's source mask: `encoder_mask`, else the Keras mask of `encoder_output`, else all True."""
    if encoder_mask is None:
        encoder_mask = keras_mask(encoder_output)
    if encoder_mask is None:
        encoder_mask = keras.ops.ones(keras.ops.shape(encoder_output)[:2], "bool")
    return encoder_mask


def self_caches(decoder, encoder_output, batch_size, max_length, make):
    """A decoder-only stack's self-attention caches, `make(batch_size)`, after checking its arguments."""
    if encoder_output is not None:
        raise ValueError(f"{decoder.name} has no cross-attention (use_cross_attention=False): init_cache takes "
                         "encoder_output=None and a batch_size")
    if batch_size is None:
        raise ValueError(f"{decoder.name} has no encoder to take the batch size from: pass batch_size")
    if not decoder.built:
        width = decoder.block_kwargs["hidden_size"]
        decoder.build((None, None, width))
    return make(batch_size)


def position_offset_layer(position_encoding, position_start_index, max_position_offset, dtype):
    """The stack's `PositionOffset`, or None where nothing is shifted (no offsets, or no absolute signal)."""
    layer = PositionOffset(position_start_index, max_position_offset, dtype=dtype, name="position_offset")
    if position_start_index == "none" or position_encoding not in ("sinusoid", "both"):
        return None  # Made all the same, so that its arguments are checked.
    return layer


class _StackBase(keras.layers.Layer):
    """Block arguments (see `TransformerEncoderBlock`) plus `num_layers` and `position_encoding`.

    `position_encoding`: "sinusoid" adds the absolute signal to the inputs (Vaswani et al.); "relative" uses
    relation-aware self-attention with clipping distance `max_relative_position` and no absolute signal (Shaw
    et al.); "both" does both; "none" gives the model no position information.

    `position_start_index` ("none" or "random", with `max_position_offset`; see `PositionOffset`) shifts the
    absolute signal by a random offset in training, drawn at every call; a caller that shares one offset
    between stacks passes it as the call argument `position_offset` instead. Without an absolute signal
    there is nothing to shift and they are not read.
    """

    block_class = None

    def __init__(self, num_layers, hidden_size, num_heads, filter_size, key_dim=None, value_dim=None,
                 position_encoding="sinusoid", max_relative_position=16, use_relative_keys=True,
                 use_relative_values=True, heads_share_relative_embeddings=False, dropout=0.0,
                 attention_dropout=0.0, relu_dropout=0.0, norm_position="post", norm_epsilon=1e-6,
                 kernel_initializer="glorot_uniform", position_start_index="none", max_position_offset=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_layers = check_int("num_layers", num_layers, 1)
        self.position_encoding = position_encoding
        if position_start_index == "step":
            raise ValueError('position_start_index="step" shifts positions by the recurrence step: it is for '
                             "Universal Transformers, not a stack of distinct layers")
        self.position_start_index = position_start_index
        self.max_position_offset = max_position_offset
        self.position_offset = position_offset_layer(position_encoding, position_start_index,
                                                     max_position_offset, self.dtype_policy)
        self.block_kwargs, block_kwargs = block_arguments(
            position_encoding, hidden_size=hidden_size, num_heads=num_heads, filter_size=filter_size,
            key_dim=key_dim, value_dim=value_dim, max_relative_position=max_relative_position,
            use_relative_keys=use_relative_keys, use_relative_values=use_relative_values,
            heads_share_relative_embeddings=heads_share_relative_embeddings, dropout=dropout,
            attention_dropout=attention_dropout, relu_dropout=relu_dropout, norm_position=norm_position,
            norm_epsilon=norm_epsilon, kernel_initializer=kernel_initializer)
        self.blocks = [self.block_class(**block_kwargs, **self.extra_block_arguments(), dtype=self.dtype_policy,
                                        name=f"layer_{i}")
                       for i in range(num_layers)]
        for block in self.blocks:  # tf.train.Checkpoint does not look inside Keras's tracked lists.
            setattr(self, block.name, block)
        self.position_signal = SinusoidalPositionEncoding(dtype=self.dtype_policy)
        self.input_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.final_norm = (keras.layers.LayerNormalization(epsilon=norm_epsilon, dtype=self.dtype_policy,
                                                           name="final_norm")
                           if norm_position == "pre" else None)

    def extra_block_arguments(self):
        """Block arguments of one kind of stack only (the decoder's `use_cross_attention`)."""
        return {}

    @property
    def uses_absolute_positions(self):
        return self.position_encoding in ("sinusoid", "both")

    def _prepare(self, x, start_index, training, position_offset=None):
        if self.uses_absolute_positions:
            if position_offset is None and self.position_offset is not None:
                position_offset = self.position_offset(x, training=training)
            if position_offset is not None:
                start_index = start_index + position_offset
            x = x + self.position_signal(x, start_index=start_index)
        return self.input_dropout(x, training=training)

    def _finish(self, x):
        return self.final_norm(x) if self.final_norm is not None else x

    def compute_output_shape(self, input_shape, *args, **kwargs):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(self.block_kwargs)
        config.update({"num_layers": self.num_layers, "position_encoding": self.position_encoding,
                       "position_start_index": self.position_start_index,
                       "max_position_offset": self.max_position_offset})
        return config


@keras.saving.register_keras_serializable(package="t2t_relpos")
class TransformerEncoder(_StackBase):
    """`num_layers` encoder blocks over embedded inputs.

    Call arguments:
        x: `[B, T, hidden_size]` embedded tokens.
        padding_mask: bool `[B, T]`, False at padding (default: the Keras mask of x).
        training: Enables dropout and position offsets.
        position_offset: int scalar added to the positions of the absolute signal (instead of the offset
            `position_start_index` draws).

    Returns:
        `[B, T, hidden_size]`.

    Example:

    >>> import numpy as np
    >>> encoder = TransformerEncoder(num_layers=2, hidden_size=16, num_heads=2, filter_size=32,
    ...                              position_encoding="relative", max_relative_position=4)
    >>> tuple(encoder(np.random.rand(2, 5, 16).astype("float32")).shape)
    (2, 5, 16)
    """

    block_class = TransformerEncoderBlock

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.supports_masking = True

    def build(self, x_shape):
        for block in self.blocks:
            block.build(x_shape)
        if self.final_norm is not None:
            self.final_norm.build(x_shape)

    def call(self, x, padding_mask=None, training=None, position_offset=None):
        if padding_mask is None:
            padding_mask = keras_mask(x)
        x = self._prepare(x, 0, training, position_offset)
        for block in self.blocks:
            x = block(x, padding_mask=padding_mask, training=training)
        return self._finish(x)


@keras.saving.register_keras_serializable(package="t2t_relpos")
class TransformerDecoder(_StackBase):
    """`num_layers` decoder blocks: causal self-attention, attention to the encoder, feed-forward.

    With `use_cross_attention=False` it is the decoder of a decoder-only language model: no attention to an
    encoder, `encoder_output` None, and `init_cache(None, max_length, batch_size=B)`.

    Call arguments:
        y: `[B, T, hidden_size]` embedded (right-shifted) targets.
        encoder_output: `[B, S, hidden_size]`; may be None when `cache` is given (always None without
            cross-attention).
        encoder_mask: bool `[B, S]`, False at source padding (default: the Keras mask of `encoder_output`).
        cache: from `init_cache`, for incremental decoding; then `cache_index` is the position of y's first
            step, and the updated cache is returned too.
        training: Enables dropout and position offsets.
        position_offset: int scalar added to the positions of the absolute signal (instead of the offset
            `position_start_index` draws).

    Returns:
        `[B, T, hidden_size]` (and the new cache).

    Example:

    >>> import numpy as np
    >>> decoder = TransformerDecoder(num_layers=2, hidden_size=16, num_heads=2, filter_size=32)
    >>> memory = np.random.rand(2, 7, 16).astype("float32")
    >>> cache = decoder.init_cache(memory, max_length=10)
    >>> y, cache = decoder(np.zeros((2, 1, 16), "float32"), None, cache=cache, cache_index=0)
    >>> tuple(y.shape)
    (2, 1, 16)
    """

    block_class = TransformerDecoderBlock

    def __init__(self, *args, use_cross_attention=True, **kwargs):
        self.use_cross_attention = bool(use_cross_attention)  # Read by the parent's __init__.
        super().__init__(*args, **kwargs)

    def extra_block_arguments(self):
        return {"use_cross_attention": self.use_cross_attention}

    def build(self, y_shape, encoder_output_shape=None):
        for block in self.blocks:
            block.build(y_shape, encoder_output_shape)
        if self.final_norm is not None:
            self.final_norm.build(y_shape)

    def init_cache(self, encoder_output, max_length, encoder_mask=None, batch_size=None):
        """Empty self-attention buffers of `max_length` steps and the encoder's keys/values, per layer.

        `encoder_mask` defaults to the Keras mask of `encoder_output`, else no source padding. Without
        cross-attention there is no encoder: pass `encoder_output=None` and the `batch_size`.
        """
        if not self.use_cross_attention:
            return {"self": self_caches(self, encoder_output, batch_size, max_length,
                                        lambda batch: [block.init_cache(batch, max_length) for block in self.blocks])}
        if not self.built:  # The encoder's keys/values need the cross-attention weights.
            width = encoder_output.shape[-1]
            self.build((None, None, self.block_kwargs["hidden_size"]), (None, None, width))
        batch = keras.ops.shape(encoder_output)[0]
        encoder_mask = source_mask(encoder_output, encoder_mask)
        return {
            "encoder_mask": encoder_mask,
            "self": [block.init_cache(batch, max_length) for block in self.blocks],
            "cross": [block.compute_cross_cache(encoder_output) for block in self.blocks],
        }

    def call(self, y, encoder_output=None, encoder_mask=None, cache=None, cache_index=None, training=None,
             position_offset=None):
        if not self.use_cross_attention:
            encoder_mask = None
        elif cache is not None:
            encoder_mask = cache["encoder_mask"]
        elif encoder_mask is None:
            encoder_mask = keras_mask(encoder_output)
        y = self._prepare(y, 0 if cache_index is None else cache_index, training, position_offset)
        new_self = []
        for i, block in enumerate(self.blocks):
            if cache is None:
                y = block(y, encoder_output, encoder_mask=encoder_mask, training=training)
            else:
                cross = cache["cross"][i] if "cross" in cache else None  # None: no cross-attention.
                y, layer_cache = block(y, encoder_mask=encoder_mask, self_cache=cache["self"][i],
                                       cross_cache=cross, cache_index=cache_index, training=training)
                new_self.append(layer_cache)
        y = self._finish(y)
        if cache is None:
            return y
        return y, {**cache, "self": new_self}

    def get_config(self):
        config = super().get_config()
        config["use_cross_attention"] = self.use_cross_attention
        return config
