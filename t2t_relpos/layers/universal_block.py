"""The Universal Transformer's shared blocks: Transformer blocks whose transition is an FFN or a separable conv."""

import keras

from t2t_relpos.layers.checks import keras_mask
from t2t_relpos.layers.transformer_block import TransformerDecoderBlock, TransformerEncoderBlock
from t2t_relpos.layers.transition import SeparableConvTransition

TRANSITION_TYPES = ("ffn", "sepconv")


def _check_transition(transition_type):
    if transition_type not in TRANSITION_TYPES:
        raise ValueError(f"transition_type must be one of {TRANSITION_TYPES}, got {transition_type!r}")


def _sepconv(block, causal):
    return SeparableConvTransition(block.hidden_size, block.filter_size, causal=causal,
                                   relu_dropout=block.relu_dropout, kernel_initializer=block.kernel_initializer,
                                   dtype=block.dtype_policy, name="transition")


@keras.saving.register_keras_serializable(package="t2t_relpos")
class UniversalEncoderBlock(TransformerEncoderBlock):
    """`TransformerEncoderBlock` with a choice of transition: "ffn" (position-wise) or "sepconv" (centred
    depthwise-separable convolutions over the positions, see `SeparableConvTransition`).

    Args: those of `TransformerEncoderBlock`, and `transition_type`.

    Call arguments and returns: as `TransformerEncoderBlock`.

    Example:

    >>> import numpy as np
    >>> block = UniversalEncoderBlock(hidden_size=16, num_heads=2, filter_size=32, transition_type="sepconv")
    >>> tuple(block(np.random.rand(2, 5, 16).astype("float32")).shape)
    (2, 5, 16)
    """

    def __init__(self, *args, transition_type="ffn", **kwargs):
        _check_transition(transition_type)
        self.transition_type = transition_type  # Read by _feed_forward, which the parent's __init__ calls.
        super().__init__(*args, **kwargs)

    def _feed_forward(self):
        if self.transition_type == "ffn":
            return super()._feed_forward()
        return _sepconv(self, causal=False)

    def call(self, x, padding_mask=None, edge_labels=None, training=None):
        self.check_input("x", x)
        if padding_mask is None:
            padding_mask = keras_mask(x)

        def attend(h):
            return self.self_attention(h, query_mask=padding_mask, value_mask=padding_mask,
                                       edge_labels=edge_labels, training=training)

        def transition(h):
            if self.transition_type == "ffn":
                return self.feed_forward(h, training=training)
            return self.feed_forward(h, padding_mask=padding_mask, training=training)

        x = self._residual(x, self.attention_norm, attend, training)
        return self._residual(x, self.feed_forward_norm, transition, training)

    def get_config(self):
        config = super().get_config()
        config["transition_type"] = self.transition_type
        return config


@keras.saving.register_keras_serializable(package="t2t_relpos")
class UniversalDecoderBlock(TransformerDecoderBlock):
    """`TransformerDecoderBlock` with a choice of transition: "ffn" or "sepconv" (causal convolutions).

    The self-attention cache (`init_cache`) also holds the convolutions' input buffers with "sepconv":
    `{"key", "value"}` plus `"transition"`.

    Args: those of `TransformerDecoderBlock`, and `transition_type`.

    Call arguments and returns: as `TransformerDecoderBlock`.

    Example:

    >>> import numpy as np
    >>> block = UniversalDecoderBlock(hidden_size=16, num_heads=2, filter_size=32, transition_type="sepconv")
    >>> memory = np.random.rand(2, 7, 16).astype("float32")
    >>> tuple(block(np.random.rand(2, 5, 16).astype("float32"), memory).shape)
    (2, 5, 16)
    """

    def __init__(self, *args, transition_type="ffn", **kwargs):
        _check_transition(transition_type)
        self.transition_type = transition_type
        super().__init__(*args, **kwargs)

    def _feed_forward(self):
        if self.transition_type == "ffn":
            return super()._feed_forward()
        return _sepconv(self, causal=True)

    def init_cache(self, batch_size, max_length, dtype=None):
        cache = dict(self.self_attention.init_cache(batch_size, max_length, dtype))
        if self.transition_type == "sepconv":
            cache["transition"] = self.feed_forward.init_cache(batch_size, max_length, dtype)
        return cache

    def call(self, x, encoder_output=None, encoder_mask=None, self_cache=None, cross_cache=None,
             cache_index=None, training=None):
        self.check_input("x", x)
        self._check_encoder(encoder_output)
        attention_cache = None
        if self_cache is not None:
            attention_cache = {"key": self_cache["key"], "value": self_cache["value"]}

        def attend_self(h):
            return self.self_attention(h, use_causal_mask=True, cache=attention_cache, cache_index=cache_index,
                                       training=training)

        def attend_encoder(h):
            return self.attend_encoder(h, encoder_output, encoder_mask, cross_cache, training)

        def transition(h):
            if self.transition_type == "ffn":
                return self.feed_forward(h, training=training)
            if self_cache is None:
                return self.feed_forward(h, training=training)
            return self.feed_forward(h, cache=self_cache["transition"], cache_index=cache_index,
                                     training=training)

        result = self._residual(x, self.self_attention_norm, attend_self, training)
        x, new_cache = result if self_cache is not None else (result, None)
        x = self.cross_attend(x, attend_encoder, training)
        result = self._residual(x, self.feed_forward_norm, transition, training)
        if self_cache is None:
            return result
        if self.transition_type == "sepconv":
            x, new_cache["transition"] = result
        else:
            x = result
        return x, new_cache

    def get_config(self):
        config = super().get_config()
        config["transition_type"] = self.transition_type
        return config
