"""The algorithmic tasks: correct examples, the length protocol, reproducible data, and the encoders."""

import numpy as np
import pytest

from t2t_relpos import registry
from t2t_relpos.problems import algorithmic
from t2t_relpos.problems import problem as problem_lib

NAMES = [f"algorithmic_{task}_{base}40" for task in ("identity", "reverse", "addition")
         for base in ("binary", "decimal")]
NUM_EVAL = 40
# The first eval string of algorithmic_identity_decimal40 (its first 12 digits).
_FROZEN_EVAL_PREFIX = "553170777714"


@pytest.fixture(autouse=True)
def _small_eval_sets(monkeypatch):
    monkeypatch.setattr(algorithmic.AlgorithmicProblem, "num_eval_examples", NUM_EVAL)


def _examples(p, split, count=None, **kwargs):
    ds = p.dataset(split, **kwargs)
    if count is not None:
        ds = ds.take(count)
    return [(ex["inputs"].numpy(), ex["targets"].numpy()) for ex in ds]


def _symbols(ids, vocab_size):
    """Checks EOS-termination and the id range; returns the symbol values (ids - 2)."""
    assert ids.dtype == np.int32
    assert ids[-1] == problem_lib.EOS_ID
    body = ids[:-1]
    assert len(body) >= 1
    assert np.all((body >= problem_lib.NUM_RESERVED_IDS) & (body < vocab_size)), ids
    return [int(i) - problem_lib.NUM_RESERVED_IDS for i in body]


def _number(lower_endian_digits, base):
    return sum(d * base**i for i, d in enumerate(lower_endian_digits))


def _check_example(p, inputs, targets):
    vocab = p.vocab_sizes()[0]
    x, y = _symbols(inputs, vocab), _symbols(targets, vocab)
    name = p.name
    if "addition" in name:
        assert x.count(p.base) == 1 and y.count(p.base) == 0
        cut = x.index(p.base)
        n1, n2 = x[:cut], x[cut + 1:]
        for digits in (n1, n2, y):
            assert digits and (len(digits) == 1 or digits[-1] != 0), "leading zero in " + str(digits)
        assert _number(y, p.base) == _number(n1, p.base) + _number(n2, p.base)
    else:
        assert max(x) < p.base and max(y) < p.base  # No separator outside addition.
        assert y == (x if "identity" in name else x[::-1])
    return len(x)


@pytest.mark.parametrize("name", NAMES)
def test_examples_are_correct_and_respect_the_length_protocol(name):
    p = registry.problem(name)
    assert p.name == name
    assert p.vocab_sizes() == (p.base + 3, p.base + 3) and p.shared_vocab
    assert p.base == (2 if "binary" in name else 10)
    assert p.max_eval_length == 401
    assert p.decode_metric == "accuracy"
    assert p.eval_metrics == ("accuracy", "accuracy_per_sequence", "neg_log_perplexity")

    train_lengths = [_check_example(p, i, t) for i, t in _examples(p, "train", 300, seed=1)]
    assert max(train_lengths) <= 40 and min(train_lengths) >= 1
    assert max(train_lengths) >= 30  # Lengths spread over the range, not stuck short.

    eval_lengths = [_check_example(p, i, t) for i, t in _examples(p, "eval")]
    assert len(eval_lengths) == NUM_EVAL
    assert max(eval_lengths) <= 400
    assert sum(n > 40 for n in eval_lengths) > NUM_EVAL // 2  # Mostly longer than anything trained on.


def test_the_demo_problem_is_reversal_at_half_the_lengths():
    p = registry.problem("algorithmic_reverse_decimal20")
    assert (p.name, p.base, p.train_length, p.eval_length, p.max_eval_length) == (
        "algorithmic_reverse_decimal20", 10, 20, 200, 201)
    train_lengths = [_check_example(p, i, t) for i, t in _examples(p, "train", 300, seed=1)]
    assert min(train_lengths) >= 1 and 15 <= max(train_lengths) <= 20
    eval_lengths = [_check_example(p, i, t) for i, t in _examples(p, "eval")]
    assert len(eval_lengths) == NUM_EVAL and max(eval_lengths) <= 200
    assert sum(n > 20 for n in eval_lengths) > NUM_EVAL // 2  # Mostly longer than anything trained on.


def test_eval_and_test_sets_are_fixed_and_distinct():
    first = _examples(registry.problem("algorithmic_reverse_decimal40"), "eval")
    again = _examples(registry.problem("algorithmic_reverse_decimal40"), "eval", seed=7)  # Seed: train only.
    test = _examples(registry.problem("algorithmic_reverse_decimal40"), "test")
    assert len(first) == len(test) == NUM_EVAL
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(first, again))
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(first, test))


def test_eval_set_is_frozen_across_machines():
    # PCG64's raw stream is fixed by numpy's compatibility policy, so this prefix may never change.
    p = registry.problem("algorithmic_identity_decimal40")
    inputs, _ = _examples(p, "eval", 1)[0]
    assert p.feature_encoders()["inputs"].decode(inputs)[:12] == _FROZEN_EVAL_PREFIX
    assert len(inputs) == 217



def test_training_streams_follow_the_seed():
    p = registry.problem("algorithmic_addition_decimal40")

    def stream(seed, **kwargs):
        return [np.concatenate(ex) for ex in _examples(p, "train", 20, seed=seed, **kwargs)]

    a, b, c = stream(1), stream(1), stream(2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a, c))
    shard = stream(1, num_shards=2, shard_index=1)
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a, shard))
    unseeded = [stream(None), stream(None)]
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(*unseeded))


def test_the_train_split_repeats_and_bad_arguments_are_refused():
    p = registry.problem("algorithmic_identity_binary40")
    assert len(_examples(p, "train", 3000, seed=0)) == 3000  # Beyond one generated chunk.
    with pytest.raises(ValueError, match="valid splits: train, eval, test"):
        p.dataset("dev")
    with pytest.raises(ValueError, match="seed"):
        p.dataset("train", seed=-1)
    with pytest.raises(ValueError, match="shard"):
        p.dataset("train", num_shards=2, shard_index=2)
    with pytest.raises(ValueError, match="base"):
        algorithmic.AlgorithmicReverse(base=16)
    with pytest.raises(ValueError, match="train_length >= 3"):
        algorithmic.AlgorithmicAddition(train_length=2)


def test_lengths_and_eval_size_are_parameters():
    p = algorithmic.AlgorithmicReverse(base=3, train_length=5, eval_length=9, num_eval_examples=7)
    train = _examples(p, "train", 100, seed=3)
    assert {len(i) - 1 for i, _ in train} == set(range(1, 6))  # Uniform over [1, 5]: all of them appear.
    evals = _examples(p, "eval")
    assert len(evals) == 7 and all(len(i) <= 10 for i, _ in evals)
    for inputs, targets in train + evals:
        _check_example(p, inputs, targets)


def test_encoders_round_trip_and_name_bad_characters():
    decimal = registry.problem("algorithmic_addition_decimal40").feature_encoders()["inputs"]
    binary = registry.problem("algorithmic_identity_binary40").feature_encoders()["targets"]
    assert decimal.vocab_size == 13 and binary.vocab_size == 5
    assert decimal.encode("29+3") == [4, 11, 12, 5]
    assert decimal.decode(decimal.encode("29+3") + [problem_lib.EOS_ID, 7, 0]) == "29+3"  # Stops at EOS.
    assert decimal.decode(np.array([4, 0, 11, 1, 0], np.int32)) == "29"  # PAD skipped.
    assert binary.encode("1 0 1\n") == binary.encode("101") == [3, 2, 3]
    assert binary.decode(binary.encode("0110+1")) == "0110+1"
    with pytest.raises(ValueError, match=r"character '2' \(at character 1 of '120'\) is not in the alphabet"):
        binary.encode("120")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        binary.decode([5])


def test_addition_is_least_significant_digit_first():
    # The documented example: "29+3" means 92 + 3, and the target "59" means 95.
    digits, lengths = algorithmic.add_lower_endian(np.array([[2, 9, 0]]), np.array([[3, 0, 0]]), 10)
    assert digits[0, :lengths[0]].tolist() == [5, 9]
    digits, lengths = algorithmic.add_lower_endian(np.array([[1, 1], [0, 0]]), np.array([[1, 0], [0, 0]]), 2)
    assert digits[0, :lengths[0]].tolist() == [0, 0, 1] and lengths[1] == 1  # 3 + 1 = 4; 0 + 0 = "0".


def test_symbol_encoder_with_tokens():
    encoder = problem_lib.SymbolEncoder(["ab", "c"])
    assert encoder.encode("ab  c ab") == [2, 3, 2]
    assert encoder.decode([2, 3, 2, 1]) == "ab c ab"
    with pytest.raises(ValueError, match="token 'x'"):
        encoder.encode("ab x")
    with pytest.raises(ValueError, match="distinct"):
        problem_lib.SymbolEncoder("aa")
