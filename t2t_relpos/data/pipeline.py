"""The tf.data input pipeline: a problem's examples -> shuffled, length-bucketed, token-budget batches.

Training: shuffle, drop examples longer than `hparams.max_length`, bucket and batch by `hparams.batch_size`
tokens (per replica, as in tensor2tensor), prefetch. Evaluation: the same batching without shuffling or
dropping, the buckets extended to the problem's longest eval sequence, so every example is scored once.
"""

import numpy as np
import tensorflow as tf

from t2t_relpos import registry
from t2t_relpos.data import batching
from t2t_relpos.problems import problem as problem_lib

# File-based problems are shuffled when their data is prepared; this buffer only decorrelates neighbours.
DEFAULT_SHUFFLE_BUFFER = 1024
# Bucket extent for eval sets whose longest sequence the problem does not know. Longer examples are still
# kept, alone in their batch, at their own length (also with `pad_to_bucket_boundary`).
EVAL_FALLBACK_MAX_LENGTH = 2048


def input_dataset(problem, hparams, split, data_dir=None, seed=None, num_shards=1, shard_index=0,
                  shuffle_buffer=DEFAULT_SHUFFLE_BUFFER, pad_to_bucket_boundary=False):
    """Batches of a problem's split for training or evaluation.

    Args:
        problem: A `Problem` or a registered problem name.
        hparams: Reads `batch_size` (tokens per batch, padding included), `max_length` (longest training
            example; 0 or less means `batch_size`, as in tensor2tensor), `min_length_bucket` and
            `length_bucket_step`; the problem reads `task_repeats`.
        split: "train", "eval" or "test".
        data_dir: Directory of prepared data, for problems that read files.
        seed: Non-negative int making the train batches deterministic (the same batches in the same order on
            every run with the same TensorFlow global seed, which the trainer sets from the same value), or
            None for random ones.
        num_shards: Number of input workers; each shard yields distinct data (generated problems give every
            shard its own seed derived from (seed, shard_index); file problems split their examples).
        shard_index: This worker's shard, in [0, num_shards).
        shuffle_buffer: Training shuffle buffer in examples; 0 or 1 disables shuffling.
        pad_to_bucket_boundary: Pad batches to their bucket's length (static shapes for XLA).

    Returns:
        A `tf.data.Dataset` of `{"inputs": int32 [rows, length], "targets": int32 [rows, length]}` padded with
        PAD_ID, or of `{"targets": int32 [rows, length]}` alone for a problem without inputs (a language
        model's windows): infinite for "train", finite for "eval" and "test".
    """
    if isinstance(problem, str):
        problem = registry.problem(problem)
    problem_lib.check_split(split)
    # Problems that read examples in chunks (parsed or tokenized many at a time) hand them over as they are:
    # one example per element costs more than anything else the pipeline does with it.
    chunks = problem.example_chunks(split, data_dir=data_dir, seed=seed, num_shards=num_shards,
                                    shard_index=shard_index, hparams=hparams)
    examples = chunks if chunks is not None else problem.dataset(split, data_dir=data_dir, seed=seed,
                                                                 num_shards=num_shards, shard_index=shard_index,
                                                                 hparams=hparams)
    return batches_of(examples, hparams, training=split == "train", seed=seed, shard_index=shard_index,
                      shuffle_buffer=shuffle_buffer, pad_to_bucket_boundary=pad_to_bucket_boundary,
                      max_eval_length=problem.max_eval_length, chunked=chunks is not None)


def batches_of(examples, hparams, training, seed=None, shard_index=0, shuffle_buffer=DEFAULT_SHUFFLE_BUFFER,
               pad_to_bucket_boundary=False, max_eval_length=None, chunked=False):
    """The sequential tail of `input_dataset`: examples -> shuffled (training), bucketed, batched, prefetched.

    Args are those of `input_dataset`; `max_eval_length` is the problem's longest eval sequence, if known.
    `chunked`: `examples` come in ragged chunks (`Problem.example_chunks`), not one at a time; training then
    shuffles the examples within each chunk (of thousands) instead of through a `shuffle_buffer`.
    """
    max_length = hparams.max_length if hparams.max_length > 0 else hparams.batch_size
    shard_seed = _shuffle_seed(seed, shard_index)  # Seeds the example shuffle and the batches' order.
    shuffle = training and shuffle_buffer > 1
    if not training:
        max_length = max(max_length, max_eval_length or EVAL_FALLBACK_MAX_LENGTH)
    if not chunked:
        if shuffle:
            examples = examples.shuffle(shuffle_buffer, seed=shard_seed)
        examples = examples.ragged_batch(batching.CHUNK_EXAMPLES)
    batches = batching.batch_chunks(
        examples, hparams.batch_size, max_length, min_length=hparams.min_length_bucket,
        length_bucket_step=hparams.length_bucket_step, drop_long=training,
        pad_to_bucket_boundary=pad_to_bucket_boundary, shuffle_batches=training, seed=shard_seed,
        shuffle_examples=chunked and shuffle)
    options = tf.data.Options()
    # Order is part of reproducibility; only an unseeded training stream may trade it for speed.
    options.deterministic = not training or seed is not None
    return batches.with_options(options).prefetch(tf.data.AUTOTUNE)


def _shuffle_seed(seed, shard_index):
    """A shuffle seed per (seed, shard), so shards do not shuffle in lockstep; None stays None (random)."""
    if seed is None:
        return None
    return int(np.random.SeedSequence([seed, shard_index]).generate_state(1, np.uint32)[0] >> 1)
