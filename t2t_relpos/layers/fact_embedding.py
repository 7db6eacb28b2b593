"""Sentences as single vectors: word embeddings summed under a learned positional mask (Henaff et al. 2016)."""

import keras
import numpy as np
from keras import ops

MASK_INITIALIZERS = ("ones", "position_encoding")


def position_encoding(width, depth):
    """The position encoding of End-To-End Memory Networks (Sukhbaatar et al. 2015, §4.1), `[width, depth]`.

    Row j (word position, 1-based) and column k (1-based) hold l_kj = (1 - j/J) - (k/d)(1 - 2j/J) with J = width
    and d = depth: every word position weights the dimensions of its word differently, so a sum of masked words
    depends on their order. (The memory networks fixed J to each sentence's own length; as the initial value of
    a mask learned per position, J is the chunk width.)
    """
    j = np.arange(1, width + 1, dtype="float64")[:, None] / width
    k = np.arange(1, depth + 1, dtype="float64")[None, :] / depth
    return ((1.0 - j) - k * (1.0 - 2.0 * j)).astype("float32")


@keras.saving.register_keras_serializable(package="t2t_relpos")
class FactEmbedding(keras.layers.Layer):
    """Embeds each fixed-width chunk of ids (a sentence, a bAbI fact) as one vector.

    With the chunk's words `w_1 .. w_W` (ids padded to `fact_width` per sentence), the sentence vector is

        s = sum_k [w_k is a word] * (E[w_k] * sqrt(d)) ⊙ m_k

    where E is the word embedding (scaled as `TokenEmbedding` does) and m_k in R^d the learned multiplicative
    mask of word position k. Initialised to ones, the layer starts as a bag of words and must learn word order
    from there; initialised to the memory networks' position encoding (`position_encoding`), it tells word
    orders apart from the first step ("The office is north of the kitchen" from "The kitchen is north of the
    office"). This is the input
    encoding of the Universal Transformer's bAbI experiments (Dehghani et al. 2018, §3.1), after Henaff et al.
    (2016). Ids below `num_reserved_ids` (padding, end of sequence) are not words.

    Args:
        vocab_size: Number of ids.
        hidden_size: d, the width of the word and sentence vectors.
        fact_width: W, the ids per sentence.
        num_reserved_ids: Ids that are not words (0 = PAD, 1 = EOS in this package).
        mask_initializer: "ones" or "position_encoding", the masks' initial value (above).
        trainable_mask: False keeps the masks at their initial value (End-To-End Memory Networks fixed their
            position encoding): the word embeddings then learn alone, and tasks trained together cannot pull
            the shared word-order weights their own ways.

    Call arguments:
        ids: int `[B, F * W]` (a trailing partial chunk is padded) or `[B, F, W]`.

    Returns:
        (`[B, F, hidden_size]` sentence vectors, bool `[B, F]` mask: True where the chunk holds a word).

    Example:

    >>> import numpy as np
    >>> embed = FactEmbedding(vocab_size=20, hidden_size=8, fact_width=4)
    >>> facts, mask = embed(np.array([[5, 6, 7, 0, 8, 9, 0, 0, 1, 0, 0, 0]]))
    >>> tuple(facts.shape), keras.ops.convert_to_numpy(mask).tolist()
    ((1, 3, 8), [[True, True, False]])
    """

    def __init__(self, vocab_size, hidden_size, fact_width, num_reserved_ids=2, mask_initializer="ones",
                 trainable_mask=True, **kwargs):
        super().__init__(**kwargs)
        if fact_width < 1:
            raise ValueError(f"fact_width must be >= 1, got {fact_width}")
        if mask_initializer not in MASK_INITIALIZERS:
            raise ValueError(f"mask_initializer must be one of {MASK_INITIALIZERS}, got {mask_initializer!r}")
        self.mask_initializer = mask_initializer
        self.trainable_mask = bool(trainable_mask)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.fact_width = fact_width
        self.num_reserved_ids = num_reserved_ids

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.vocab_size, self.hidden_size),
            initializer=keras.initializers.RandomNormal(stddev=self.hidden_size ** -0.5))
        initializer = "ones"
        if self.mask_initializer == "position_encoding":
            value = position_encoding(self.fact_width, self.hidden_size)
            initializer = lambda shape, dtype=None: ops.convert_to_tensor(value, dtype)  # noqa: E731
        self.position_mask = self.add_weight(name="position_mask", shape=(self.fact_width, self.hidden_size),
                                             initializer=initializer, trainable=self.trainable_mask)

    def chunk(self, ids):
        """`[B, L]` ids -> `[B, ceil(L / W), W]`, the last chunk padded with zeros; `[B, F, W]` unchanged."""
        ids = ops.cast(ids, "int32")
        if len(ids.shape) == 3:
            return ids
        length = ops.shape(ids)[1]
        ids = ops.pad(ids, [[0, 0], [0, (-length) % self.fact_width]])
        return ops.reshape(ids, (ops.shape(ids)[0], -1, self.fact_width))

    def call(self, ids):
        ids = self.chunk(ids)
        words = ops.greater_equal(ids, self.num_reserved_ids)
        vectors = ops.take(self.embeddings, ops.where(words, ids, 0), axis=0)  # [B, F, W, d]
        scale = ops.cast(self.hidden_size ** 0.5, vectors.dtype)
        weights = ops.cast(words, vectors.dtype)[..., None] * ops.cast(self.position_mask, vectors.dtype) * scale
        return ops.sum(vectors * weights, axis=2), ops.any(words, axis=2)

    def compute_output_spec(self, ids):
        batch = ids.shape[0]
        facts = ids.shape[1] if len(ids.shape) == 3 else (
            None if ids.shape[1] is None else -(-ids.shape[1] // self.fact_width))
        return (keras.KerasTensor((batch, facts, self.hidden_size), dtype=self.compute_dtype),
                keras.KerasTensor((batch, facts), dtype="bool"))

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
                       "fact_width": self.fact_width, "num_reserved_ids": self.num_reserved_ids,
                       "mask_initializer": self.mask_initializer, "trainable_mask": self.trainable_mask})
        return config
