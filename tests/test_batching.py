"""Length bucketing and the input pipeline: the token budget, one bucket per batch, drops, determinism, shards."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_relpos import registry
from t2t_relpos.data import batching, pipeline
from t2t_relpos.problems import algorithmic

BUDGET = 128
MAX_LENGTH = 24  # Below the 41 tokens of the longest training example, so the filter has work to do.
NUM_EVAL = 30


@pytest.fixture(autouse=True)
def _small_eval_sets(monkeypatch):
    monkeypatch.setattr(algorithmic.AlgorithmicProblem, "num_eval_examples", NUM_EVAL)


@pytest.fixture
def hparams():
    hp = registry.hparams("transformer_tiny")
    hp.batch_size = BUDGET
    hp.max_length = MAX_LENGTH
    return hp


def _scheme(max_length=MAX_LENGTH, hp=None):
    if hp is None:
        return batching.batching_scheme(BUDGET, max_length)
    return batching.batching_scheme(hp.batch_size, max_length, hp.min_length_bucket, hp.length_bucket_step)


def _batches(ds, count=None):
    ds = ds if count is None else ds.take(count)
    return [{k: v.numpy() for k, v in batch.items()} for batch in ds]


def _row_lengths(batch):
    """Unpadded length of each row: its longest feature (ids are never PAD=0 inside a sequence)."""
    return np.max([np.count_nonzero(v, axis=1) for v in batch.values()], axis=0)


def _check_batch(batch, scheme):
    rows = batch["inputs"].shape[0]
    assert batch["targets"].shape[0] == rows
    padded = max(batch["inputs"].shape[1], batch["targets"].shape[1])
    assert rows * padded <= BUDGET or rows == 1, (rows, padded)
    lengths = _row_lengths(batch)
    assert padded == lengths.max()  # Padded to the batch's longest row, no further.
    buckets = np.searchsorted(scheme.boundaries, lengths, side="right")
    assert len(set(buckets.tolist())) == 1, (lengths, scheme.boundaries)
    return lengths


def test_bucket_boundaries_are_geometric_and_cover_max_length():
    assert batching.bucket_boundaries(20, min_length=8, length_bucket_step=1.5) == [8, 12, 18, 21]
    b = batching.bucket_boundaries(256)
    assert b[0] == 8 and b[-1] == 257 and all(x < y for x, y in zip(b, b[1:]))
    assert all(y <= max(x + 1, x * 1.1) for x, y in zip(b[:-2], b[1:-1]))
    assert batching.bucket_boundaries(5, min_length=8) == [6]  # max_length below the first boundary.
    with pytest.raises(ValueError, match="length_bucket_step"):
        batching.bucket_boundaries(64, length_bucket_step=1.0)


def test_batch_sizes_fill_but_never_exceed_the_budget():
    scheme = batching.batching_scheme(100, 300)
    assert len(scheme.batch_sizes) == len(scheme.boundaries) + 1 and scheme.batch_sizes[-1] == 1
    for rows, length in zip(scheme.batch_sizes, scheme.bucket_lengths()):
        assert rows * length <= 100 or rows == 1
        assert (rows + 1) * length > 100  # As many rows as fit.
    assert scheme.batch_sizes[-2] == 1  # Buckets longer than the budget: one example per batch.


def test_long_examples_are_kept_alone_when_not_dropped():
    lengths = [1, 3, 9, 30, 200, 7, 130, 64, 2, 100, 5, 129] * 3
    examples = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(
        [[2] * n + [1] for n in lengths], dtype=tf.int32)).map(
            lambda x: {"inputs": x, "targets": x[: tf.maximum(1, tf.shape(x)[0] // 2)]})
    batches = _batches(batching.batch_examples(examples, BUDGET, 64, drop_long=False))
    seen = np.concatenate([_check_batch(b, _scheme(64)) for b in batches])
    assert sorted(seen.tolist()) == sorted(n + 1 for n in lengths)
    for batch in batches:
        if _row_lengths(batch).max() > BUDGET:
            assert batch["inputs"].shape[0] == 1

    dropped = _batches(batching.batch_examples(examples, BUDGET, 64, drop_long=True))
    kept = np.concatenate([_row_lengths(b) for b in dropped])
    assert sorted(kept.tolist()) == sorted(n + 1 for n in lengths if n + 1 <= 64)


def test_training_batches_respect_budget_buckets_and_max_length(hparams):
    batches = _batches(pipeline.input_dataset("algorithmic_reverse_decimal40", hparams, "train", seed=5), 40)
    lengths = np.concatenate([_check_batch(b, _scheme(hp=hparams)) for b in batches])
    assert lengths.max() <= MAX_LENGTH and lengths.max() >= MAX_LENGTH - 3
    for batch in batches:
        assert batch["inputs"].dtype == np.int32
        # Reverse: each target row is its input row backwards (the pipeline keeps features paired).
        for x, y in zip(batch["inputs"], batch["targets"]):
            body = x[:np.count_nonzero(x) - 1]
            assert np.array_equal(y[:len(body)], body[::-1])


def test_eval_keeps_every_example_in_budget(hparams):
    p = registry.problem("algorithmic_addition_binary40")
    batches = _batches(pipeline.input_dataset(p, hparams, "eval"))
    scheme = _scheme(p.max_eval_length, hparams)
    lengths = np.concatenate([_check_batch(b, scheme) for b in batches])
    expected = [max(len(e["inputs"]), len(e["targets"])) for e in p.dataset("eval")]
    assert sorted(lengths.tolist()) == sorted(expected)  # All NUM_EVAL of them, long ones included.
    assert len(lengths) == NUM_EVAL and lengths.max() > MAX_LENGTH
    again = _batches(pipeline.input_dataset(p, hparams, "eval"))
    assert all(np.array_equal(a["inputs"], b["inputs"]) for a, b in zip(batches, again))


def test_pad_to_bucket_boundary_gives_bucket_shapes(hparams):
    batches = _batches(pipeline.input_dataset("algorithmic_identity_binary40", hparams, "train", seed=1,
                                              pad_to_bucket_boundary=True), 20)
    bucket_lengths = set(_scheme(hp=hparams).bucket_lengths())
    for batch in batches:
        assert batch["inputs"].shape[1] == batch["targets"].shape[1]
        assert batch["inputs"].shape[1] in bucket_lengths
        assert batch["inputs"].shape[0] * batch["inputs"].shape[1] <= BUDGET


def test_pad_to_bucket_boundary_leaves_one_label_targets_alone():
    """Class labels (one id per example, as bAbI's) stay `[rows, 1]` while the inputs get their bucket's
    length: padded to it, they no longer fit a classifier's one prediction per example (XLA training failed)."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 30, size=200)
    inputs = tf.ragged.constant([rng.integers(2, 50, size=n).tolist() for n in lengths], tf.int32)
    labels = tf.ragged.constant([[int(label)] for label in rng.integers(2, 9, size=200)], tf.int32)
    examples = tf.data.Dataset.from_tensor_slices({"inputs": inputs, "targets": labels})
    scheme = batching.batching_scheme(BUDGET, 32)
    batches = _batches(batching.batch_examples(examples, BUDGET, 32, pad_to_bucket_boundary=True))
    assert sum(len(b["targets"]) for b in batches) == 200
    for batch in batches:
        assert batch["targets"].shape == (len(batch["inputs"]), 1)
        assert batch["inputs"].shape[1] in scheme.bucket_lengths()


def test_seeded_training_batches_are_deterministic_and_shards_differ(hparams):
    def run(**kwargs):
        ds = pipeline.input_dataset("algorithmic_addition_decimal40", hparams, "train", shuffle_buffer=64,
                                    **kwargs)
        return [b["inputs"] for b in _batches(ds, 8)]

    def same(a, b):
        return all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))

    first = run(seed=11)
    assert same(first, run(seed=11))
    assert not same(first, run(seed=12))
    shards = [run(seed=11, num_shards=2, shard_index=i) for i in range(2)]
    assert not same(shards[0], shards[1])
    assert same(shards[1], run(seed=11, num_shards=2, shard_index=1))


def test_eval_keeps_examples_beyond_the_fallback_when_the_problem_does_not_know(hparams, monkeypatch):
    monkeypatch.setattr(algorithmic.AlgorithmicProblem, "max_eval_length", None)
    monkeypatch.setattr(pipeline, "EVAL_FALLBACK_MAX_LENGTH", 50)
    p = registry.problem("algorithmic_identity_decimal40")
    batches = _batches(pipeline.input_dataset(p, hparams, "eval"))
    lengths = np.concatenate([_check_batch(b, _scheme(50, hparams)) for b in batches])
    assert len(lengths) == NUM_EVAL and lengths.max() > 50


def _numbered_examples(count=600, seed=0):
    """Examples whose first id numbers them (ids >= 2), random lengths 1..40 per feature."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        inputs = [i + 2] + rng.integers(2, 50, rng.integers(0, 40)).tolist()
        targets = rng.integers(2, 50, rng.integers(1, 41)).tolist()
        rows.append((inputs, targets))
    return tf.data.Dataset.from_generator(
        lambda: iter(rows), output_signature=(tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32))
    ).map(lambda x, y: {"inputs": x, "targets": y})


def _as_set(batches):
    return sorted(tuple(tuple(row[row != 0].tolist()) for row in b["inputs"]) for b in batches)


@pytest.mark.parametrize("drop_long", [True, False])
def test_vectorised_bucketing_makes_the_batches_bucket_by_sequence_length_makes(drop_long):
    examples = _numbered_examples()
    scheme = batching.batching_scheme(BUDGET, MAX_LENGTH)
    reference = examples.filter(lambda e: batching.example_length(e) <= MAX_LENGTH) if drop_long else examples
    reference = reference.bucket_by_sequence_length(
        batching.example_length, list(scheme.boundaries), list(scheme.batch_sizes),
        padding_values={"inputs": 0, "targets": 0})
    ours = batching.batch_examples(examples, BUDGET, MAX_LENGTH, drop_long=drop_long, chunk_size=64)
    want, got = _batches(reference), _batches(ours)
    assert _as_set(got) == _as_set(want)  # The same examples together, in the same order within a batch.
    for a in got:  # And padded alike: each feature to its own longest row.
        assert a["targets"].shape[1] == np.count_nonzero(a["targets"], axis=1).max()


def test_an_endless_stream_gives_only_full_batches_in_a_seeded_order():
    examples = _numbered_examples(200).repeat()
    scheme = batching.batching_scheme(BUDGET, MAX_LENGTH)

    def run(seed):
        return _batches(batching.batch_examples(examples, BUDGET, MAX_LENGTH, shuffle_batches=True, seed=seed,
                                                chunk_size=64), 60)

    batches = run(7)
    for batch in batches:
        bucket = np.searchsorted(scheme.boundaries, _row_lengths(batch).max(), side="right")
        assert batch["inputs"].shape[0] == scheme.batch_sizes[bucket]
    assert [b["inputs"].tolist() for b in batches] == [b["inputs"].tolist() for b in run(7)]
    assert [b["inputs"].tolist() for b in batches] != [b["inputs"].tolist() for b in run(8)]


def test_chunks_shuffled_within_give_the_same_examples_in_another_seeded_order():
    examples = _numbered_examples(300)

    def run(shuffle, seed=5):
        # Chunks of uneven sizes, as a parser's last chunk is: 128, 128, 44.
        chunks = examples.ragged_batch(128)
        return _batches(batching.batch_chunks(chunks, BUDGET, MAX_LENGTH, drop_long=False, seed=seed,
                                              shuffle_examples=shuffle))

    plain, shuffled = run(False), run(True)
    unchunked = _batches(batching.batch_examples(examples, BUDGET, MAX_LENGTH, drop_long=False, chunk_size=128))
    assert [b["inputs"].tolist() for b in plain] == [b["inputs"].tolist() for b in unchunked]

    def rows(batches):
        return [tuple(row[row != 0].tolist()) for b in batches for row in b["inputs"]]

    assert sorted(rows(shuffled)) == sorted(rows(plain)) and len(rows(plain)) == 300
    assert rows(shuffled) != rows(plain)
    assert [b["inputs"].tolist() for b in shuffled] == [b["inputs"].tolist() for b in run(True)]
    assert [b["inputs"].tolist() for b in shuffled] != [b["inputs"].tolist() for b in run(True, seed=6)]


def test_a_stream_whose_examples_are_all_too_long_ends_in_an_error(monkeypatch):
    # Repeated, such a stream used to spin for ever without a batch (the trainer then ignored SIGTERM). Here a
    # finite stream: 3000 examples too long, then one that fits, which the stream used to batch in the end.
    monkeypatch.setattr(batching, "STARVED_AFTER", 2000)
    rows = [[2] * 9 + [1]] * 3000 + [[2, 1]]
    examples = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(rows, dtype=tf.int32)).map(
        lambda x: {"inputs": x, "targets": x})
    with pytest.raises(tf.errors.InvalidArgumentError, match="2000 examples in a row are longer than max_length=4"):
        _batches(batching.batch_examples(examples, BUDGET, 4, drop_long=True, chunk_size=64))
    # Kept when the stream does not drop long examples (evaluation), and under the limit.
    assert len(_batches(batching.batch_examples(examples, BUDGET, 4, drop_long=False, chunk_size=64))) > 1
    monkeypatch.setattr(batching, "STARVED_AFTER", 4000)
    assert [b["inputs"].tolist() for b in _batches(batching.batch_examples(examples, BUDGET, 4, chunk_size=64))] \
        == [[[2, 1]]]


@pytest.mark.parametrize("split", ["train", "eval"])
def test_building_a_pipeline_converts_no_function_with_autograph(hparams, split, autograph_conversions):
    # tf.data hands every map and scan function to AutoGraph unless told otherwise; ours have no control flow on
    # tensors to convert, and parsing their source took 1-2 s of each of a trainer's two pipelines.
    dataset = pipeline.input_dataset(algorithmic.AlgorithmicReverseDecimal40(), hparams, split, seed=1)
    assert _batches(dataset, 2) and not autograph_conversions, autograph_conversions
