"""Length bucketing under a token budget, as tensor2tensor batched: `batch_size` counts tokens, not rows.

Examples are grouped by length into geometric buckets; a bucket whose sequences are at most `m` tokens long
gets `batch_size // m` rows, so every batch holds at most `batch_size` tokens, padding included (the length
of an example is that of its longest feature). Short sentences thus come in many rows, long ones in few,
and little compute is spent on padding.
"""

import dataclasses

import tensorflow as tf

from t2t_relpos.problems.problem import PAD_ID


def bucket_boundaries(max_length, min_length=8, length_bucket_step=1.1):
    """Geometric bucket boundaries, tensor2tensor's sequence extended to cover `max_length`.

    Boundaries are exclusive upper bounds on length (`tf.data`'s convention): bucket i holds lengths in
    [boundaries[i-1], boundaries[i]). They start at `min_length` and grow by at least one and by about
    `length_bucket_step` each; the last is `max_length + 1`, so every length up to `max_length` falls in a
    bucket of bounded size.

    Args:
        max_length: Longest length the buckets must hold.
        min_length: First boundary (bucket 0 holds all shorter examples).
        length_bucket_step: Growth factor, > 1.

    Returns:
        A strictly increasing list of ints.

    Example:

    >>> bucket_boundaries(20, min_length=8, length_bucket_step=1.5)
    [8, 12, 18, 21]
    """
    if length_bucket_step <= 1.0:
        raise ValueError(f"length_bucket_step must be > 1, got {length_bucket_step}")
    if max_length < 1:
        raise ValueError(f"max_length must be positive, got {max_length}")
    boundaries = []
    x = max(1, min_length)
    while x <= max_length:
        boundaries.append(x)
        x = max(x + 1, int(x * length_bucket_step))
    boundaries.append(max_length + 1)
    return boundaries


@dataclasses.dataclass(frozen=True)
class BatchingScheme:
    """Buckets and their rows per batch, in the form `tf.data.Dataset.bucket_by_sequence_length` takes.

    Attributes:
        boundaries: Exclusive upper length bounds, one per bounded bucket.
        batch_sizes: Rows per batch, one per bucket plus one for the open bucket of lengths >=
            boundaries[-1]. That last one is 1: an example too long for the budget still forms a batch.
    """

    boundaries: tuple
    batch_sizes: tuple

    def bucket_lengths(self):
        """The longest length each bounded bucket holds (also what `pad_to_bucket_boundary` pads to)."""
        return tuple(b - 1 for b in self.boundaries)


def batching_scheme(batch_size, max_length, min_length=8, length_bucket_step=1.1):
    """Buckets covering [0, max_length] with rows per batch such that rows x bucket length <= batch_size.

    Args:
        batch_size: Token budget per batch (padding included).
        max_length: Longest length the bounded buckets must hold.
        min_length: First bucket boundary.
        length_bucket_step: Geometric growth of the boundaries.

    Returns:
        A `BatchingScheme`. A bucket whose length exceeds `batch_size` gets one row per batch.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size (tokens per batch) must be positive, got {batch_size}")
    boundaries = bucket_boundaries(max_length, min_length, length_bucket_step)
    sizes = [max(1, batch_size // max(1, b - 1)) for b in boundaries]
    return BatchingScheme(tuple(boundaries), tuple(sizes) + (1,))


def example_length(example):
    """The length that decides an example's bucket: that of its longest feature. Scalar int32."""
    return tf.reduce_max(tf.stack([tf.shape(v)[0] for v in tf.nest.flatten(example)]))


def batch_examples(examples, batch_size, max_length, min_length=8, length_bucket_step=1.1, drop_long=True,
                   pad_to_bucket_boundary=False):
    """Groups examples into padded, length-bucketed batches of at most `batch_size` tokens.

    Args:
        examples: A dataset of dicts of 1-D tensors (e.g. {"inputs": int32 [None], "targets": int32 [None]}).
        batch_size: Token budget per batch: rows x padded length <= batch_size, except a single example longer
            than the budget, which forms a batch alone.
        max_length: Buckets cover lengths up to this.
        min_length: First bucket boundary.
        length_bucket_step: Geometric growth of the boundaries.
        drop_long: Drop examples longer than `max_length` (training). Otherwise they are kept, one per batch.
        pad_to_bucket_boundary: Pad every batch to its bucket's longest length, so that the shapes come from a
            small fixed set (one XLA compilation per bucket). All examples must then be <= max_length.

    Returns:
        A dataset of dicts of [rows, padded_length] tensors padded with PAD_ID; rows in a batch come from one
        bucket; all features of a batch share the padded length only with `pad_to_bucket_boundary`.
    """
    scheme = batching_scheme(batch_size, max_length, min_length, length_bucket_step)
    if drop_long:
        examples = examples.filter(lambda example: example_length(example) <= max_length)
    padding = tf.nest.map_structure(lambda spec: tf.constant(PAD_ID, spec.dtype), examples.element_spec)
    return examples.bucket_by_sequence_length(
        element_length_func=example_length,
        bucket_boundaries=list(scheme.boundaries),
        bucket_batch_sizes=list(scheme.batch_sizes),
        padding_values=padding,
        pad_to_bucket_boundary=pad_to_bucket_boundary)
