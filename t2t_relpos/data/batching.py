"""Length bucketing under a token budget, as tensor2tensor batched: `batch_size` counts tokens, not rows.

Examples are grouped by length into geometric buckets; a bucket whose sequences are at most `m` tokens long
gets `batch_size // m` rows, so every batch holds at most `batch_size` tokens, padding included (the length
of an example is that of its longest feature, whatever features it has: "inputs" and "targets", or "targets"
alone). Short sentences thus come in many rows, long ones in few, and little compute is spent on padding.
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


# Examples bucketed together in one vectorised pass. tf.data's group_by_window (bucket_by_sequence_length)
# runs a function per example and builds a small dataset per batch, sequential work that capped a pipeline at
# about 600k target tokens/s of WMT-like text per core; bucketing ragged chunks (`ragged_batch`) with a few
# vectorised ops per chunk runs at about 950k (benchmarks/input_pipeline.py, the "tail" rows).
CHUNK_EXAMPLES = 4096


def batch_examples(examples, batch_size, max_length, min_length=8, length_bucket_step=1.1, drop_long=True,
                   pad_to_bucket_boundary=False, shuffle_batches=False, seed=None, chunk_size=CHUNK_EXAMPLES):
    """Groups examples into padded, length-bucketed batches of at most `batch_size` tokens.

    Each batch holds the rows of one bucket (`batching_scheme`), as many as the bucket's share of the budget:
    what tensorflow's `bucket_by_sequence_length` gives, computed a chunk of `chunk_size` examples at a time.
    A bucket's examples wait (in arrival order) until they fill a batch; when a finite dataset ends, every
    bucket's last, partial batch is emitted, so every example is in exactly one batch.

    Args:
        examples: A dataset of dicts of 1-D tensors (e.g. {"inputs": int32 [None], "targets": int32 [None]},
            or {"targets": int32 [None]} alone).
        batch_size: Token budget per batch: rows x padded length <= batch_size, except a single example longer
            than the budget, which forms a batch alone.
        max_length: Buckets cover lengths up to this.
        min_length: First bucket boundary.
        length_bucket_step: Geometric growth of the boundaries.
        drop_long: Drop examples longer than `max_length` (training). Otherwise they are kept, one per batch.
        pad_to_bucket_boundary: Pad every batch to its bucket's longest length, so that the shapes come from a
            small fixed set (one XLA compilation per bucket). An example longer than `max_length` (kept with
            `drop_long=False`) is a batch of its own length. A feature of one id per example is left `[rows, 1]`.
        shuffle_batches: Emit the batches completed by a chunk in random order (training), else by bucket.
        seed: Makes `shuffle_batches` deterministic (with the chunk's index), or None for random.
        chunk_size: Examples bucketed per pass.

    Returns:
        A dataset of dicts of [rows, padded_length] tensors padded with PAD_ID; rows in a batch come from one
        bucket, in the order they arrived; all features of a batch share the padded length only with
        `pad_to_bucket_boundary`, except those of one id per example (class labels), which stay `[rows, 1]`.
    """
    return batch_chunks(examples.ragged_batch(chunk_size), batch_size, max_length, min_length=min_length,
                        length_bucket_step=length_bucket_step, drop_long=drop_long,
                        pad_to_bucket_boundary=pad_to_bucket_boundary, shuffle_batches=shuffle_batches, seed=seed)


# Nothing that `batch_chunks` maps or scans has Python control flow on tensors: AutoGraph, which tf.data applies to
# every such function unless told not to, would only re-parse their source (about 1 s of each pipeline's build).
@tf.autograph.experimental.do_not_convert
def batch_chunks(chunks, batch_size, max_length, min_length=8, length_bucket_step=1.1, drop_long=True,
                 pad_to_bucket_boundary=False, shuffle_batches=False, seed=None, shuffle_examples=False):
    """`batch_examples` for examples that arrive in chunks already (as a parser or tokenizer gives them).

    Args:
        chunks: A dataset of dicts of ragged `[n, (length)]` tensors with int64 row splits, chunks of any
            sizes; `batch_examples` is this on `examples.ragged_batch(chunk_size)`.
        shuffle_examples: Put each chunk's examples in random order first (seeded by `seed` and the chunk's
            index): for training, a shuffle that costs a few vectorised ops per chunk where a shuffle buffer
            costs a step per example.
        Others: as for `batch_examples`.

    Returns:
        What `batch_examples` returns.
    """
    scheme = batching_scheme(batch_size, max_length, min_length, length_bucket_step)
    names = sorted(chunks.element_spec)

    def prepare(index, chunk):
        if shuffle_examples:
            count = tf.shape(chunk[names[0]].row_splits, out_type=tf.int64)[0] - 1
            order = (tf.random.shuffle(tf.range(count)) if seed is None else
                     tf.random.experimental.stateless_shuffle(tf.range(count), seed=[seed, index]))
            chunk = {name: tf.gather(rows, order) for name, rows in chunk.items()}
        if not drop_long:
            return chunk
        fits = _lengths(chunk) <= max_length
        return _keep(chunk, fits), tf.reduce_sum(tf.cast(tf.logical_not(fits), tf.int64))

    if shuffle_examples or drop_long:
        chunks = chunks.enumerate().map(prepare, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if drop_long:
        chunks = _starvation_checked(chunks, max_length)
    # A last, empty chunk flags the end of a finite dataset: it flushes the partial batches.
    spec = chunks.element_spec
    end = {name: tf.RaggedTensor.from_row_lengths(tf.zeros([0], spec[name].dtype),
                                                  tf.zeros([0], spec[name].row_splits_dtype)) for name in names}
    flagged = chunks.map(lambda chunk: (chunk, False)).concatenate(tf.data.Dataset.from_tensors((end, True)))
    bucketer = _Bucketer(scheme, shuffle_batches, seed)
    batches = flagged.scan((_parts(end), tf.constant(0, tf.int64)), bucketer.step).unbatch()
    return batches.map(lambda batch: _padded(batch, scheme, pad_to_bucket_boundary),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


# A training stream that has dropped this many examples in a row as too long ends in an error: a repeated
# stream where no example fits `max_length` would otherwise spin forever without a batch (or a way to stop it
# but SIGKILL: the trainer waits in the input pipeline, where signals are not handled).
STARVED_AFTER = 100_000
STARVED_MESSAGE = "examples in a row are longer than max_length"


def _starvation_checked(chunks, max_length):
    """(kept examples, how many were dropped) chunks -> the kept examples' chunks, failing once
    `STARVED_AFTER` examples in a row were dropped as too long."""
    names = sorted(chunks.element_spec[0])

    def count(dropped_in_a_row, element):
        chunk, dropped = element
        kept = tf.shape(chunk[names[0]].row_splits, out_type=tf.int64)[0] - 1
        dropped_in_a_row = tf.where(kept > 0, dropped, dropped_in_a_row + dropped)
        tf.debugging.assert_less(dropped_in_a_row, tf.constant(STARVED_AFTER, tf.int64),
                                 message=f"{STARVED_AFTER} {STARVED_MESSAGE}={max_length}")
        return dropped_in_a_row, chunk

    return chunks.scan(tf.constant(0, tf.int64), count)


def _lengths(chunk):
    """int64 `[n]`: each example's length, that of its longest feature."""
    return tf.reduce_max(tf.stack([chunk[name].row_lengths() for name in sorted(chunk)]), axis=0)


def _keep(chunk, mask):
    return {name: tf.ragged.boolean_mask(rows, mask) for name, rows in chunk.items()}


def _parts(ragged):
    """Ragged rows as (values, row lengths): `Dataset.scan` cannot carry RaggedTensors in its state."""
    return {name: (rows.flat_values, rows.row_lengths()) for name, rows in ragged.items()}


class _Bucketer:
    """The state machine of `batch_examples`: a pool of waiting examples in, complete batches out."""

    def __init__(self, scheme, shuffle_batches, seed):
        self.boundaries = tf.constant(scheme.boundaries, tf.int64)
        self.rows = tf.constant(scheme.batch_sizes, tf.int64)
        self.shuffle_batches = shuffle_batches
        self.seed = seed

    def step(self, state, element):
        """(waiting examples, chunk index), (chunk, end) -> new state, batches `{name: [b, (rows), (len)]}`."""
        waiting, index = state
        chunk, end = element
        # Row lengths here are right by construction: no run-time checks (`validate=False`), which also took a
        # fifth of this function's tracing.
        pool = {name: tf.concat([tf.RaggedTensor.from_row_lengths(*waiting[name], validate=False), chunk[name]],
                                axis=0) for name in chunk}
        # Bucket i holds lengths in [boundaries[i - 1], boundaries[i]), as in bucket_by_sequence_length.
        bucket = tf.searchsorted(self.boundaries, _lengths(pool), side="right", out_type=tf.int64)
        order = tf.argsort(bucket, stable=True)  # By bucket, arrival order within one.
        bucket = tf.gather(bucket, order)
        position = tf.range(tf.size(bucket, out_type=tf.int64))
        first = tf.searchsorted(bucket, bucket, side="left", out_type=tf.int64)  # Where its bucket starts.
        group = (position - first) // tf.gather(self.rows, bucket)  # Its batch within the bucket.
        key = bucket * (tf.size(bucket, out_type=tf.int64) + 1) + group  # One value per (bucket, group).
        starts = tf.not_equal(key, tf.concat([[-1], key[:-1]], axis=0)[:tf.size(key)])  # First of a batch.
        batch = tf.cumsum(tf.cast(starts, tf.int64)) - 1  # Each example's batch, counting from 0.
        count = tf.reduce_sum(tf.cast(starts, tf.int64))
        rows = tf.math.unsorted_segment_sum(tf.ones_like(batch), batch, count)
        batch_bucket = tf.gather(bucket, tf.boolean_mask(position, starts))
        full = tf.logical_or(end, tf.equal(rows, tf.gather(self.rows, batch_bucket)))
        ready = tf.gather(full, batch)  # Per example: its batch goes out now, else it waits.
        emitted = tf.boolean_mask(tf.range(count), full)
        if self.shuffle_batches:
            emitted = (tf.random.shuffle(emitted) if self.seed is None else
                       tf.random.experimental.stateless_shuffle(emitted, seed=[self.seed, index]))
        # The examples of the emitted batches, batch after batch, as ragged [batches, (rows)] of positions.
        members = tf.RaggedTensor.from_value_rowids(position, batch, nrows=count, validate=False)
        members = tf.gather(members, emitted)
        take = tf.gather(order, members.flat_values)
        out = {name: tf.RaggedTensor.from_row_lengths(tf.gather(pool[name], take), members.row_lengths(),
                                                      validate=False) for name in pool}
        out["bucket"] = tf.gather(batch_bucket, emitted)
        left = tf.gather(order, tf.boolean_mask(position, tf.logical_not(ready)))
        return (_parts({name: tf.gather(pool[name], left) for name in pool}), index + 1), out


def _padded(batch, scheme, pad_to_bucket_boundary):
    """A batch of ragged rows -> dense `[rows, length]` PAD-padded tensors (the bucket's length if asked).

    A feature of one id per example (a class label) stays `[rows, 1]` even so: it has one shape already, and
    a model that predicts one label per example gives one prediction to compare it with.
    """
    bucket = batch["bucket"]
    dense = {name: rows.to_tensor(default_value=tf.constant(PAD_ID, rows.dtype))
             for name, rows in batch.items() if name != "bucket"}
    if pad_to_bucket_boundary:
        # The open bucket past max_length (kept examples, drop_long=False) has no boundary: left as it is.
        length = tf.gather(tf.constant(scheme.bucket_lengths() + (0,), tf.int32), bucket)
        widths = {name: tf.shape(t)[1] for name, t in dense.items()}
        dense = {name: tf.pad(t, [[0, 0], [0, tf.maximum(tf.where(widths[name] > 1, length, widths[name])
                                                         - widths[name], 0)]],
                              constant_values=PAD_ID)
                 for name, t in dense.items()}
    return dense
