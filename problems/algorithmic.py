"""The Universal Transformer paper's algorithmic tasks: copy, reverse and addition of digit strings.

Examples are generated on the fly (nothing to download). Training strings have lengths uniform in
[1, train_length] (40), evaluation strings in [1, eval_length] (400): the length-generalisation protocol of
Dehghani et al. (2018), Table 4, as tensor2tensor generated it. Lengths count symbols, not the EOS that ends
every sequence, so a sequence is at most `length + 1` tokens. `algorithmic_reverse_decimal20` (this
package's, for `make demo`) halves the lengths: train up to 20, evaluate up to 200.

Vocabulary (one per base, shared by inputs and targets and by all three tasks): 0 = PAD, 1 = EOS, digit d
has id d + 2, and the addition separator (value `base`, written `+`) has id base + 2; vocab_size = base + 3.

ADDITION IS WRITTEN LEAST-SIGNIFICANT DIGIT FIRST, in both operands and in the sum. The input text
"29+3" means 92 + 3 and its target "59" means 95. This is tensor2tensor's convention: the carry then travels
in reading order, which is what makes the task learnable by a left-to-right decoder.

Data is reproducible across machines: streams come from numpy's PCG64 raw 64-bit words (frozen by numpy's
compatibility policy), mapped to digits here rather than by `Generator.integers` (whose mapping numpy may
change between versions). Training streams are seeded by the `seed` argument (and shard); eval and test sets by
the problem's name and split.
"""

import abc
import zlib

import numpy as np

from t2t_relpos import registry
from t2t_relpos.problems import problem

SEPARATOR = "+"

# Examples generated per numpy call: large enough to amortise the Python overhead, small enough to keep the
# first batch quick.
_CHUNK = 1024
_SPLIT_CODES = {"train": 0, "eval": 1, "test": 2}


def _bits(entropy):
    """A PCG64 bit generator for `entropy` (a list of non-negative ints), or a random one for None."""
    return np.random.PCG64(np.random.SeedSequence(entropy))


def _uniform(bits, high, size):
    """Ints uniform in [0, high) of shape `size`; `high` (int or array) broadcasts against `size`.

    The modulo's bias is below high / 2**64, far beneath anything measurable.
    """
    raw = bits.random_raw(size=size)
    return (raw % np.asarray(high, dtype=np.uint64)).astype(np.int64)


def random_digits(bits, base, lengths, width):
    """Random lower-endian numbers: row b has `lengths[b]` digits, the most significant one non-zero.

    A one-digit number may be 0 (as in tensor2tensor); a longer one never has a leading zero.

    Args:
        bits: A numpy BitGenerator.
        base: The number base.
        lengths: int [batch], each in [1, width].
        width: The number of columns.

    Returns:
        int64 [batch, width]: digits, zero beyond each row's length.
    """
    digits = _uniform(bits, base, (len(lengths), width))
    leading = 1 + _uniform(bits, base - 1, (len(lengths),))
    rows = np.arange(len(lengths))
    top = lengths - 1
    digits[rows, top] = np.where(lengths > 1, leading, digits[rows, top])
    return np.where(np.arange(width) < lengths[:, None], digits, 0)


def add_lower_endian(a, b, base):
    """Digit-wise sum with carries of lower-endian numbers.

    Args:
        a, b: int [batch, width] digits, least significant first, zero-padded.
        base: The number base.

    Returns:
        (digits int64 [batch, width + 1], lengths int64 [batch]): the sums without leading zeros (0 is "0").
    """
    total = np.zeros((a.shape[0], a.shape[1] + 1), np.int64)
    total[:, :-1] = a + b
    carry = np.zeros(a.shape[0], np.int64)
    for j in range(total.shape[1]):  # Carries run along the digits, so loop there, vectorised over rows.
        value = total[:, j] + carry
        total[:, j], carry = value % base, value // base
    nonzero = total != 0
    highest = total.shape[1] - 1 - np.argmax(nonzero[:, ::-1], axis=1)
    return total, np.where(nonzero.any(axis=1), highest + 1, 1)


def reverse_rows(symbols, lengths):
    """Reverses the first `lengths[b]` entries of each row; entries beyond stay zero. [batch, width]."""
    positions = np.arange(symbols.shape[1])
    source = np.clip(lengths[:, None] - 1 - positions, 0, symbols.shape[1] - 1)
    return np.where(positions < lengths[:, None], np.take_along_axis(symbols, source, axis=1), 0)


def to_ids(symbols, lengths):
    """Symbol values [batch, width] -> (ids int32 [batch, width + 1], lengths + 1): shifted past the reserved
    ids, EOS after each row's symbols, PAD after that."""
    positions = np.arange(symbols.shape[1] + 1)
    shifted = np.pad(symbols, ((0, 0), (0, 1))) + problem.NUM_RESERVED_IDS
    ends = lengths[:, None]
    ids = np.where(positions < ends, shifted, np.where(positions == ends, problem.EOS_ID, problem.PAD_ID))
    return ids.astype(np.int32), (lengths + 1).astype(np.int32)


class AlgorithmicProblem(problem.Problem):
    """Base of the digit-string tasks. Subclasses implement `generate`.

    Args:
        train_length: Longest training string (symbols, EOS not counted).
        eval_length: Longest eval/test string.
        num_eval_examples: Size of the eval and of the test set (default: the class attribute, which a test
            may lower).
        base: Number base, 2 to 10 (default: the class attribute `default_base`).
    """

    default_base = 10
    num_eval_examples = 1000  # Decoding 1000 strings of up to 400 symbols stays quick enough on a CPU.
    min_length = 1  # The shortest `train_length`/`eval_length` the task can generate.
    shared_vocab = True
    eval_metrics = ("accuracy", "accuracy_per_sequence", "neg_log_perplexity")
    decode_metric = "accuracy"

    def __init__(self, train_length=40, eval_length=400, num_eval_examples=None, base=None):
        self.base = self.default_base if base is None else int(base)
        if not 2 <= self.base <= 10:
            raise ValueError(f"base must be between 2 and 10 (digits are written 0-9), got {self.base}")
        for what, length in (("train_length", train_length), ("eval_length", eval_length)):
            if length < self.min_length:
                raise ValueError(f"{type(self).__name__} needs {what} >= {self.min_length}, got {length}")
        self.train_length = int(train_length)
        self.eval_length = int(eval_length)
        if num_eval_examples is not None:
            if num_eval_examples < 1:
                raise ValueError(f"num_eval_examples must be positive, got {num_eval_examples}")
            self.num_eval_examples = int(num_eval_examples)
        digits = "0123456789"[:self.base]
        self._encoder = problem.SymbolEncoder(digits + SEPARATOR)

    @abc.abstractmethod
    def generate(self, bits, max_length, count):
        """`count` random examples of strings up to `max_length` symbols.

        Args:
            bits: A numpy BitGenerator (the only source of randomness).
            max_length: Longest string, in symbols.
            count: Number of examples.

        Returns:
            (inputs, targets): each a pair (symbol values int64 [count, width], lengths int64 [count]), with
            digits as their values and the separator as `base`.
        """

    def feature_encoders(self, data_dir=None):
        del data_dir
        return {"inputs": self._encoder, "targets": self._encoder}

    @property
    def max_eval_length(self):
        return self.eval_length + 1  # The EOS.

    def _dataset(self, split, data_dir, seed, num_shards, shard_index):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel  # Listing problems must not load TF.

        del data_dir
        key = zlib.crc32(self.name.encode("utf-8"))  # Stable across processes, unlike hash().
        if split == "train":
            entropy = None if seed is None else [key, _SPLIT_CODES[split], seed, shard_index]
            chunks = self._chunks(entropy, self.train_length, count=None)
        else:
            chunks = self._chunks([key, _SPLIT_CODES[split]], self.eval_length, self.num_eval_examples)
        spec = (tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32))
        examples = tf.data.Dataset.from_generator(chunks, output_signature=(spec, spec)).unbatch()
        unpadded = tf.autograph.experimental.do_not_convert(  # Nothing to convert: AutoGraph would only cost time.
            lambda i, t: {"inputs": i[0][:i[1]], "targets": t[0][:t[1]]})
        examples = examples.map(unpadded, num_parallel_calls=tf.data.AUTOTUNE)
        if split != "train":
            examples = examples.apply(tf.data.experimental.assert_cardinality(self.num_eval_examples))
            # One fixed set, split between the workers (training shards get their own seeds instead).
            examples = examples.shard(num_shards, shard_index)
        return examples

    def _chunks(self, entropy, max_length, count):
        """A generator function yielding chunks of ((ids, lengths), (ids, lengths)) as `to_ids` returns.

        Each call starts a fresh bit generator, so every iteration of the dataset replays the same stream.
        `count=None` yields forever.
        """

        def chunks():
            bits = _bits(entropy)
            remaining = count
            while remaining is None or remaining > 0:
                # Always whole chunks, so a smaller eval set is a prefix of a larger one.
                (inputs, input_lengths), (targets, target_lengths) = self.generate(bits, max_length, _CHUNK)
                keep = _CHUNK if remaining is None else min(_CHUNK, remaining)
                yield (to_ids(inputs[:keep], input_lengths[:keep]),
                       to_ids(targets[:keep], target_lengths[:keep]))
                if remaining is not None:
                    remaining -= keep

        return chunks

    def _random_strings(self, bits, max_length, count):
        """Digit strings with lengths uniform in [1, max_length]: (symbols [count, max_length], lengths)."""
        lengths = 1 + _uniform(bits, max_length, (count,))
        digits = _uniform(bits, self.base, (count, max_length))
        return np.where(np.arange(max_length) < lengths[:, None], digits, 0), lengths


class AlgorithmicIdentity(AlgorithmicProblem):
    """Copy: the target is the input string."""

    def generate(self, bits, max_length, count):
        strings = self._random_strings(bits, max_length, count)
        return strings, strings


class AlgorithmicReverse(AlgorithmicProblem):
    """Reverse: the target is the input string backwards."""

    def generate(self, bits, max_length, count):
        symbols, lengths = self._random_strings(bits, max_length, count)
        return (symbols, lengths), (reverse_rows(symbols, lengths), lengths)


class AlgorithmicAddition(AlgorithmicProblem):
    """Addition, all numbers least-significant digit first: inputs `n1 + n2`, target their sum.

    The first operand has 1 to max_length // 2 digits, the second 1 to max_length - len(n1) - 1, so the whole
    input, separator included, is at most max_length symbols (as in tensor2tensor).
    """

    min_length = 3  # Two one-digit operands and the separator.

    def generate(self, bits, max_length, count):
        len1 = 1 + _uniform(bits, max_length // 2, (count,))
        len2 = 1 + _uniform(bits, max_length - len1 - 1, (count,))
        n1 = random_digits(bits, self.base, len1, max_length)
        n2 = random_digits(bits, self.base, len2, max_length)
        positions = np.arange(max_length)
        second = np.take_along_axis(n2, np.clip(positions - len1[:, None] - 1, 0, max_length - 1), axis=1)
        inputs = np.where(positions < len1[:, None], n1, np.where(positions == len1[:, None], self.base, second))
        input_lengths = len1 + 1 + len2
        inputs = np.where(positions < input_lengths[:, None], inputs, 0)
        return (inputs, input_lengths), add_lower_endian(n1, n2, self.base)


@registry.register_problem
class AlgorithmicIdentityBinary40(AlgorithmicIdentity):
    """Copy binary strings: train up to 40 symbols, evaluate up to 400."""

    default_base = 2


@registry.register_problem
class AlgorithmicIdentityDecimal40(AlgorithmicIdentity):
    """Copy decimal strings: train up to 40 symbols, evaluate up to 400."""

    default_base = 10


@registry.register_problem
class AlgorithmicReverseBinary40(AlgorithmicReverse):
    """Reverse binary strings: train up to 40 symbols, evaluate up to 400."""

    default_base = 2


@registry.register_problem
class AlgorithmicReverseDecimal40(AlgorithmicReverse):
    """Reverse decimal strings: train up to 40 symbols, evaluate up to 400."""

    default_base = 10


@registry.register_problem
class AlgorithmicReverseDecimal20(AlgorithmicReverse):
    """Reverse decimal strings: train up to 20 symbols, evaluate up to 200 (this package's, for `make demo`).

    The length-40 task at half the length, evaluated to ten times the training length as the length-40 tasks
    are: a CPU learns it in minutes (`transformer_demo_rel`: 900 steps). tensor2tensor has no such problem.
    """

    default_base = 10

    def __init__(self, train_length=20, eval_length=200, num_eval_examples=None, base=None):
        super().__init__(train_length, eval_length, num_eval_examples, base)


@registry.register_problem
class AlgorithmicAdditionBinary40(AlgorithmicAddition):
    """Add binary numbers (least-significant digit first): inputs up to 40 symbols in training, 400 in eval."""

    default_base = 2


@registry.register_problem
class AlgorithmicAdditionDecimal40(AlgorithmicAddition):
    """Add decimal numbers (least-significant digit first): inputs up to 40 symbols in training, 400 in eval."""

    default_base = 10
