"""Learning to Execute (Zaremba & Sutskever 2014), as the Universal Transformer paper used it (§3.5, Tables 5, 6).

Six problems, generated on the fly (nothing to download); tensor2tensor had no such problems, these are this
package's, after the original's generator (`wojciechz/learning_to_execute`; see `learning_to_execute_programs`):

- program evaluation, at maximum length 5 and nesting 2 (Table 6): ``learning_to_execute_program`` (all six
  operations), ``learning_to_execute_control`` (this package's reading of the paper's "control": if-expressions
  and for-loops only) and ``learning_to_execute_addition`` (``print(a+b)``, a and b of the same length). The
  inputs are the program's text, newlines and spaces included; the targets what it prints (an integer).
- memorization, at maximum length 55 (Table 5): the original's memorization task and its two input variants,
  the target always being the digit string itself: ``learning_to_execute_copy`` (input: the string),
  ``learning_to_execute_double`` (input: the string written twice) and ``learning_to_execute_reverse`` (input:
  the string reversed; so the target is the input reversed).

Splits: "train" draws with the "mix" strategy at the paper's setting (lengths uniform in [1, 5] per number and
nesting uniform in [1, 2] per program; strings of 1 to 55 digits), without a curriculum, as the UT paper did.
"eval" is the paper's evaluation setting, the original's test one (every program at nesting 2 with numbers of up
to 5 digits, each addend of 5 digits; strings of exactly 55 digits). "test" goes beyond it: nesting 3 with numbers
of up to 6 digits (6-digit addends), strings of 56 to 70 digits. As in the original, a split keeps only the
examples whose text hashes to it (crc32 of input and target, modulo 3), so no eval example is ever trained on.

Lengths (characters, EOS not counted) at these settings: program and control inputs at most 76 (train and eval)
and 112 (test), targets at most 9 and 11; addition inputs 19 (test 21), targets 6 (7); copy and reverse 55 (test
70); double inputs 110 (test 140). One vocabulary of characters serves every problem, inputs and targets.

Written out, a program takes one line, its line breaks written as the two characters ``\\n`` (`escape`); the
encoder reads that form as well (`unescape`), so such a file decodes as it is:

    python -m t2t_relpos.cli.demo --problem=learning_to_execute_program --count=100 --output=lte/program
"""

import abc
import hashlib
import re
import zlib

from t2t_relpos import registry
from t2t_relpos.problems import learning_to_execute_programs as programs
from t2t_relpos.problems import problem

# Every character a program, an addition or a digit string can hold (the variables a-j, the loop's x, the words
# print, for, in, range, if, else).
ALPHABET = "".join(sorted(set("0123456789" + programs.VARIABLES + "printforxinrangeifelse" + "+-*()=;:<> \n")))
_SPLIT_CODES = {"train": 0, "eval": 1, "test": 2}
_CHUNK = 256
_ESCAPES = {"n": "\n", "\\": "\\"}


def escape(text):
    """`text` on one line: a backslash written ``\\\\``, a line break ``\\n``."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def unescape(line):
    """The inverse of `escape`; a backslash before another character is refused."""
    def replace(match):
        if match.group(1) not in _ESCAPES:
            raise ValueError(f"unknown escape \\{match.group(1)} in {line!r} (only \\n and \\\\ are written)")
        return _ESCAPES[match.group(1)]

    return re.sub(r"\\(.?)", replace, line, flags=re.DOTALL)


class ProgramEncoder(problem.TextEncoder):
    """Characters of `ALPHABET`, spaces and line breaks included; character `i` has id `NUM_RESERVED_IDS + i`.

    `encode` also reads a program escaped onto one line (see `escape`).

    Example:

    >>> enc = ProgramEncoder()
    >>> enc.encode("a=1\\nprint(a)") == enc.encode("a=1\\\\nprint(a)")
    True
    >>> enc.decode(enc.encode("a=1\\\\nprint(a)"))
    'a=1\\nprint(a)'
    """

    def __init__(self, alphabet=ALPHABET):
        self.alphabet = alphabet
        self._ids = {c: problem.NUM_RESERVED_IDS + i for i, c in enumerate(alphabet)}

    @property
    def vocab_size(self):
        return problem.NUM_RESERVED_IDS + len(self.alphabet)

    def encode(self, text):
        text = unescape(text) if "\\" in text else text
        try:
            return [self._ids[c] for c in text]
        except KeyError:
            bad = next(c for c in text if c not in self._ids)
            raise ValueError(f"character {bad!r} of {text!r} is not in the alphabet {self.alphabet!r}") from None

    def decode(self, ids):
        out = []
        for i in problem.strip_ids(ids):
            if not problem.NUM_RESERVED_IDS <= i < self.vocab_size:
                raise ValueError(f"id {i} is outside the vocabulary of size {self.vocab_size}")
            out.append(self.alphabet[i - problem.NUM_RESERVED_IDS])
        return "".join(out)

    def fingerprint(self):
        return "sha256:" + hashlib.sha256(self.alphabet.encode("utf-8")).hexdigest()

    def graph_tokenizer(self):
        return _graph_tokenizer(self.alphabet)


def _graph_tokenizer(alphabet):
    """`ProgramEncoder`'s mapping as TensorFlow ops: `SymbolTokenizer`'s, with whitespace kept as characters."""
    # pylint: disable=import-outside-toplevel  # Listing problems must not load TensorFlow.
    import tensorflow as tf

    from t2t_relpos.data import graph_text

    class ProgramTokenizer(graph_text.SymbolTokenizer):
        def tokenize(self, texts):
            texts = tf.strings.regex_replace(texts, r"\\n", "\n")  # The escaped form, as `encode` reads it.
            ids = tf.ragged.map_flat_values(self._table.lookup, tf.strings.unicode_split(texts, "UTF-8"))
            check = tf.debugging.assert_non_negative(ids.flat_values, message="a character outside the alphabet")
            with tf.control_dependencies([check]):
                return tf.cast(ids, tf.int32)

    return ProgramTokenizer(alphabet, by_character=True)


class LearningToExecuteProblem(problem.Problem):
    """Base of the six problems. Subclasses implement `generate`.

    Args:
        length: The paper's setting: the longest number (digits) or digit string of "train" and "eval".
        nesting: The paper's setting: the most operations a program chains (program evaluation only).
        test_length, test_nesting: The "test" split's, beyond the paper's.
        num_eval_examples: Size of the eval and of the test set (default: the class attribute).
    """

    length, nesting, test_length, test_nesting = 5, 2, 6, 3
    num_eval_examples = 1000
    shared_vocab = True
    eval_metrics = ("accuracy", "accuracy_per_sequence", "neg_log_perplexity")
    decode_metric = "accuracy"

    def __init__(self, length=None, nesting=None, test_length=None, test_nesting=None, num_eval_examples=None):
        for attribute, value in (("length", length), ("nesting", nesting), ("test_length", test_length),
                                 ("test_nesting", test_nesting), ("num_eval_examples", num_eval_examples)):
            if value is not None:
                if value < 1:
                    raise ValueError(f"{attribute} must be positive, got {value}")
                setattr(self, attribute, int(value))
        self._encoder = ProgramEncoder()
        self._max_eval_length = None

    @abc.abstractmethod
    def generate(self, draws, difficulty):
        """One random example: (input text, target text), with `draws` (a `Draws`) at `difficulty`."""

    def difficulty(self, split):
        """The `Difficulty` of a split: "train" mixes, "eval" is the paper's setting, "test" beyond it."""
        if split == "train":
            return programs.mix(self.length, self.nesting)
        if split == "eval":
            return programs.fixed(self.length, self.nesting)
        return programs.fixed(self.test_length, self.test_nesting)

    def examples(self, split, seed=None, shard_index=0, code=None):
        """The split's examples as text, (input, target), an endless iterator (the first `num_eval_examples` are
        the eval and test sets). `seed` (train only) fixes the stream; None draws a random one. `code` overrides
        the split's hash class (the demo draws from training's stream examples outside training's class)."""
        key = zlib.crc32(self.name.encode("utf-8"))  # Stable across processes, unlike hash().
        code = _SPLIT_CODES[split] if code is None else code
        if split == "train":
            draws = programs.Draws(None if seed is None else [key, _SPLIT_CODES[split], seed, shard_index])
        else:
            draws = programs.Draws([key, _SPLIT_CODES[split]])
        difficulty = self.difficulty(split)
        while True:
            source, target = self.generate(draws, difficulty)
            if zlib.crc32(f"{source}\0{target}".encode("utf-8")) % 3 == code:
                yield source, target

    def feature_encoders(self, data_dir=None):
        del data_dir
        return {"inputs": self._encoder, "targets": self._encoder}

    @property
    def max_eval_length(self):
        if self._max_eval_length is None:
            longest = 0
            for split in ("eval", "test"):
                examples = self.examples(split)
                for _ in range(self.num_eval_examples):
                    longest = max(longest, *map(len, next(examples)))
            self._max_eval_length = longest + 1  # The EOS.
        return self._max_eval_length

    def _dataset(self, split, data_dir, seed, num_shards, shard_index):
        import numpy as np  # pylint: disable=import-outside-toplevel
        import tensorflow as tf  # pylint: disable=import-outside-toplevel  # Listing problems must not load TF.

        del data_dir
        count = None if split == "train" else self.num_eval_examples

        def chunks():  # Each call replays the same stream (a fresh generator).
            examples = self.examples(split, seed, shard_index)
            remaining = count
            while remaining is None or remaining > 0:
                size = _CHUNK if remaining is None else min(_CHUNK, remaining)
                batch = [next(examples) for _ in range(size)]
                yield tuple(_padded([self._encoder.encode(text) for text in texts], np)
                            for texts in zip(*batch))
                if remaining is not None:
                    remaining -= size

        spec = (tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32))
        examples = tf.data.Dataset.from_generator(chunks, output_signature=(spec, spec)).unbatch()
        unpadded = tf.autograph.experimental.do_not_convert(
            lambda i, t: {"inputs": i[0][:i[1]], "targets": t[0][:t[1]]})
        examples = examples.map(unpadded, num_parallel_calls=tf.data.AUTOTUNE)
        if split != "train":
            examples = examples.apply(tf.data.experimental.assert_cardinality(count))
            examples = examples.shard(num_shards, shard_index)  # One fixed set, split between the workers.
        return examples


def _padded(rows, np):
    """Id lists -> (int32 [n, longest + 1] with EOS after each row and PAD after that, lengths + 1)."""
    lengths = np.array([len(r) + 1 for r in rows], np.int32)
    ids = np.full((len(rows), lengths.max()), problem.PAD_ID, np.int32)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = r
        ids[i, len(r)] = problem.EOS_ID
    return ids, lengths


class _Memorization(LearningToExecuteProblem):
    """Digit strings: train 1 to 55 digits, eval exactly 55, test 56 to 70."""

    length, nesting, test_length, test_nesting = 55, 1, 70, 1

    def difficulty(self, split):
        if split == "test":
            return programs.Difficulty((self.length + 1, max(self.length + 1, self.test_length)), (1, 1))
        return super().difficulty(split)


@registry.register_problem
class LearningToExecuteProgram(LearningToExecuteProblem):
    """Evaluate short Python programs (all six operations): numbers up to 5 digits, nesting 2 (UT paper, Table 6)."""

    def generate(self, draws, difficulty):
        return programs.program(draws, difficulty)


@registry.register_problem
class LearningToExecuteControl(LearningToExecuteProblem):
    """Evaluate programs of if-expressions and for-loops: numbers up to 5 digits, nesting 2 (UT paper, Table 6)."""

    def generate(self, draws, difficulty):
        return programs.program(draws, difficulty, programs.CONTROL_OPERATIONS)


@registry.register_problem
class LearningToExecuteAddition(LearningToExecuteProblem):
    """Add two numbers of the same number of digits, up to 5, written print(a+b) (UT paper, Table 6)."""

    def generate(self, draws, difficulty):
        return programs.addition(draws, difficulty)


@registry.register_problem
class LearningToExecuteCopy(_Memorization):
    """Copy a string of up to 55 digits (UT paper, Table 5)."""

    def generate(self, draws, difficulty):
        string = programs.digits(draws, difficulty)
        return string, string


@registry.register_problem
class LearningToExecuteDouble(_Memorization):
    """Read a string of up to 55 digits twice, write it once (input doubling; UT paper, Table 5)."""

    def generate(self, draws, difficulty):
        string = programs.digits(draws, difficulty)
        return string + string, string


@registry.register_problem
class LearningToExecuteReverse(_Memorization):
    """Read a string of up to 55 digits reversed, write it forwards (input reversing; UT paper, Table 5)."""

    def generate(self, draws, difficulty):
        string = programs.digits(draws, difficulty)
        return string[::-1], string
