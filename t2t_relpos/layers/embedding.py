"""Token embeddings scaled by sqrt(d_model), whose matrix can double as the softmax weights."""

import keras
from keras import ops

from t2t_relpos.layers.checks import concrete
from t2t_relpos.layers.positionwise import at_positions


@keras.saving.register_keras_serializable(package="t2t_relpos")
class TokenEmbedding(keras.layers.Layer):
    """Embeds ids as `E[id] * sqrt(hidden_size)`; `logits(x)` multiplies by `E^T` (tied softmax).

    The matrix is initialised with standard deviation `hidden_size ** -0.5`, so scaled embeddings start with
    unit variance, as in tensor2tensor. Padding (`pad_id`) embeds to zeros.

    Args:
        vocab_size: Number of ids.
        hidden_size: Width of the embeddings.
        pad_id: The padding id.
        mask_padding: Give the output a Keras mask, False at `pad_id`, so that layers reading Keras masks
            (`TransformerEncoder`, `RelationAwareMultiHeadAttention`, ...) leave padding out without a
            `padding_mask`. Off by default, as in `keras.layers.Embedding`: a decoder's right-shifted targets
            start with the pad id, and that position is not padding.

    Call arguments:
        ids: int `[B, T]`, in `[0, vocab_size)` (checked in eager calls; inside `tf.function` / `jax.jit`
            XLA would clamp an id out of range).

    Returns:
        `[B, T, hidden_size]`.

    Example:

    >>> import numpy as np
    >>> embed = TokenEmbedding(vocab_size=12, hidden_size=8)
    >>> x = embed(np.array([[3, 4, 0]]))
    >>> tuple(embed.logits(x).shape)
    (1, 3, 12)
    """

    def __init__(self, vocab_size, hidden_size, pad_id=0, mask_padding=False, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.pad_id = pad_id
        self.mask_padding = mask_padding

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.vocab_size, self.hidden_size),
            initializer=keras.initializers.RandomNormal(stddev=self.hidden_size ** -0.5))

    def call(self, ids):
        ids = ops.cast(ids, "int32")
        values = concrete(ids)
        if values is not None and values.size and not 0 <= values.min() <= values.max() < self.vocab_size:
            bad = values.min() if values.min() < 0 else values.max()
            # Unchecked, a negative id would read row vocab_size + id, and XLA would clamp one too large.
            raise ValueError(f"ids must be in [0, vocab_size={self.vocab_size}), got {bad}")
        x = ops.take(self.embeddings, ids, axis=0)
        keep = ops.cast(ops.not_equal(ids, self.pad_id), x.dtype)[..., None]
        return x * ops.cast(self.hidden_size ** 0.5, x.dtype) * keep

    def compute_mask(self, ids, mask=None):
        return ops.not_equal(ids, self.pad_id) if self.mask_padding else None

    def logits(self, x):
        """`[B, T, hidden_size]` -> `[B, T, vocab_size]`."""
        table = ops.transpose(ops.cast(self.embeddings, x.dtype))
        return at_positions(lambda flat: ops.matmul(flat, table), x)  # A 2-D matmul (`positionwise`).

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "hidden_size": self.hidden_size, "pad_id": self.pad_id,
                       "mask_padding": self.mask_padding})
        return config
