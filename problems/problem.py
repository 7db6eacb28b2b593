"""The problem API: where examples come from, how their text maps to ids, and how they are judged.

A problem yields examples `{"inputs": int32 [length], "targets": int32 [length]}`, each sequence ending in
`EOS_ID` (a classification problem's targets are one label id, `[label]`, without EOS), for the splits "train"
(infinite), "eval" and "test" (finite and the same on every call). The ids 0 and 1 are reserved in every
vocabulary: 0 pads batches, 1 ends a sequence. A problem without inputs (`has_inputs = False`: a language
model, see `t2t_relpos.problems.languagemodel`) yields `{"targets": int32 [length]}` alone, windows of a text
that end in EOS only where a document does, and has a "targets" encoder alone.

Subclasses implement `feature_encoders` and `_dataset`; the rest has sensible defaults:

    @registry.register_problem
    class MyCopy(problem.Problem):
        def feature_encoders(self, data_dir=None):
            encoder = problem.SymbolEncoder("abc")
            return {"inputs": encoder, "targets": encoder}

        def _dataset(self, split, data_dir, seed, num_shards, shard_index):
            ...  # a tf.data.Dataset of {"inputs", "targets"}; infinite for "train"
"""

import abc
import hashlib
import numbers

PAD_ID = 0
EOS_ID = 1
NUM_RESERVED_IDS = 2

SPLITS = ("train", "eval", "test")


def check_split(split):
    """Returns `split` if it is one of `SPLITS`, else raises a ValueError that lists them."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    return split


def strip_ids(ids):
    """The ids before the first EOS, without PADs: what a decoder's output means.

    Args:
        ids: A sequence of ints (list, numpy array or 1-D tensor), e.g. a row of a batch [length].

    Returns:
        A list of Python ints.
    """
    if hasattr(ids, "numpy"):
        ids = ids.numpy()
    out = []
    for i in ids:
        i = int(i)
        if i == EOS_ID:
            break
        if i != PAD_ID:
            out.append(i)
    return out


class TextEncoder(abc.ABC):
    """Maps text to ids and back. Ids below `NUM_RESERVED_IDS` are PAD and EOS in every vocabulary."""

    @property
    @abc.abstractmethod
    def vocab_size(self):
        """The number of ids, reserved ones included."""

    @abc.abstractmethod
    def encode(self, text):
        """Text -> list of ids, without the EOS (the problem appends it)."""

    @abc.abstractmethod
    def decode(self, ids):
        """Ids -> text, stopping at the first EOS and skipping PADs."""

    def fingerprint(self):
        """A string that changes whenever the mapping changes (None: unknown, only sizes are compared).

        Runs record it so that decoding with another vocabulary of the same size is refused.
        """
        return None

    @abc.abstractmethod
    def graph_tokenizer(self):
        """The same mapping as TensorFlow ops in a `tf.Module` (for exported models).

        Returns:
            An object with `tokenize(strings [B]) -> int32 RaggedTensor [B, (n)]` and
            `detokenize(ids int32 [B, n]) -> strings [B]`, savable in a SavedModel.
        """


class SymbolEncoder(TextEncoder):
    """A fixed alphabet; symbol `i` has id `NUM_RESERVED_IDS + i`.

    With single-character symbols, text is read character by character and whitespace between symbols is
    ignored ("1 0 1" == "101"). With multi-character symbols (tokens), text is split on whitespace and
    decoding joins tokens with a space.

    Example:

    >>> enc = SymbolEncoder("01+")
    >>> enc.encode("10+1")
    [3, 2, 4, 3]
    >>> enc.decode([3, 2, 4, 3, EOS_ID, PAD_ID])
    '10+1'
    """

    def __init__(self, symbols):
        symbols = tuple(symbols)
        if not symbols:
            raise ValueError("SymbolEncoder needs at least one symbol")
        for s in symbols:
            if not isinstance(s, str) or not s or any(c.isspace() for c in s):
                raise ValueError(f"symbols must be non-empty strings without whitespace, got {s!r}")
        if len(set(symbols)) != len(symbols):
            raise ValueError(f"symbols must be distinct, got {symbols}")
        self.symbols = symbols
        self._ids = {s: NUM_RESERVED_IDS + i for i, s in enumerate(symbols)}
        self._characters = all(len(s) == 1 for s in symbols)

    @property
    def vocab_size(self):
        return NUM_RESERVED_IDS + len(self.symbols)

    def encode(self, text):
        pieces = [c for c in text if not c.isspace()] if self._characters else text.split()
        ids = []
        for position, piece in enumerate(pieces):
            try:
                ids.append(self._ids[piece])
            except KeyError:
                what = "character" if self._characters else "token"
                raise ValueError(
                    f"{what} {piece!r} (at {what} {position} of {text!r}) is not in the alphabet "
                    f"{' '.join(self.symbols)}") from None
        return ids

    def fingerprint(self):
        return "sha256:" + hashlib.sha256("\n".join(self.symbols).encode("utf-8")).hexdigest()

    def decode(self, ids):
        pieces = []
        for i in strip_ids(ids):
            if not NUM_RESERVED_IDS <= i < self.vocab_size:
                raise ValueError(f"id {i} is outside the vocabulary of size {self.vocab_size}")
            pieces.append(self.symbols[i - NUM_RESERVED_IDS])
        return ("" if self._characters else " ").join(pieces)

    def graph_tokenizer(self):
        from t2t_relpos.data import graph_text  # pylint: disable=import-outside-toplevel  # Imports TensorFlow.

        return graph_text.SymbolTokenizer(self.symbols, by_character=self._characters)


class Problem(abc.ABC):
    """Base class of problems. See the module docstring for what a subclass provides.

    Attributes:
        shared_vocab: True when inputs and targets use one vocabulary (the model may then tie embeddings).
        eval_metrics: Names of the metrics computed on teacher-forced evaluation.
        decode_metric: The metric of decoded output that judges the model ("accuracy", "bleu",
            "answer_accuracy", or "perplexity" for a language model, which is judged by its likelihood).
        allow_download: Whether `generate_data` may download raw data that is not in `tmp_dir`.
        has_tasks: Whether the training data mixes tasks that `hparams.task_repeats` can weigh (bAbI's joint
            problems); problems without refuse the hparam.
        has_inputs: False for a problem without inputs (a language model): its examples and its
            `feature_encoders` have "targets" alone, `vocab_sizes` gives `(None, target_vocab_size)`, and the
            models run their decoder alone.
    """

    has_inputs = True
    shared_vocab = False
    eval_metrics = ("accuracy", "accuracy_per_sequence", "neg_log_perplexity")
    decode_metric = "accuracy"
    # May `generate_data` fetch missing raw data from the internet? Off unless asked for (the tools'
    # --download flag), so that a machine without the data fails at once instead of retrying downloads.
    allow_download = False
    has_tasks = False

    @property
    def name(self):
        """The name this problem's class is registered under (its snake_case class name by default)."""
        from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

        for name in registry.PROBLEMS.names():
            if registry.PROBLEMS.get(name) is type(self):
                return name
        return registry.default_name(type(self))

    @abc.abstractmethod
    def feature_encoders(self, data_dir=None):
        """Returns `{"inputs": TextEncoder, "targets": TextEncoder}`, or `{"targets": TextEncoder}` alone where
        `has_inputs` is False (vocabularies may live in `data_dir`)."""

    def vocab_sizes(self, data_dir=None):
        """Returns `(input_vocab_size, target_vocab_size)`, reserved ids included; the input size is None for a
        problem without an "inputs" encoder (`has_inputs` False)."""
        encoders = self.feature_encoders(data_dir)
        inputs = encoders["inputs"].vocab_size if "inputs" in encoders else None
        return inputs, encoders["targets"].vocab_size

    def model_arguments(self, data_dir=None):
        """Model constructor arguments that the data fixes (e.g. `{"fact_width": 12}` for bAbI's facts layout).

        A model that does not accept them cannot read this problem's inputs, and fails when it is built.
        """
        del data_dir
        return {}

    def vocabulary(self, data_dir=None):
        """What a run records of its vocabularies: `{feature: {"size": int, "fingerprint": str or None}}`."""
        return {feature: {"size": encoder.vocab_size, "fingerprint": encoder.fingerprint()}
                for feature, encoder in self.feature_encoders(data_dir).items()}

    @property
    def max_eval_length(self):
        """The longest eval/test sequence in tokens (EOS included), or None if unknown.

        The input pipeline extends its length buckets to this so that no evaluation example is dropped.
        """
        return None

    def generate_data(self, data_dir, tmp_dir):
        """Prepares files (vocabularies, TFRecords) in `data_dir` from raw data in `tmp_dir`.

        The default has nothing to prepare: problems generated on the fly need no files.
        """
        del data_dir, tmp_dir

    def check_hparams(self, hparams):
        """Raises `HParamsError` where `hparams` ask for data this problem cannot give (`task_repeats` without
        tasks), rather than train on other data than asked. The trainer calls it before it writes the run."""
        if hparams is not None and hparams.get("task_repeats") and not self.has_tasks:
            from t2t_relpos import errors  # pylint: disable=import-outside-toplevel

            raise errors.HParamsError(f"task_repeats={hparams.task_repeats}: {self.name} has no tasks to repeat "
                                      "(only joint multi-task problems such as babi_qa_facts_all_tasks_1k do)")

    def dataset(self, split, data_dir=None, seed=None, num_shards=1, shard_index=0, hparams=None):
        """Examples of one split.

        Args:
            split: "train", "eval" or "test".
            data_dir: Directory of prepared data, for problems that read files.
            seed: Non-negative int fixing the training stream, or None for a random one. Eval and test data
                do not depend on it.
            num_shards: Number of input workers; each gets distinct data.
            shard_index: This worker's shard, in [0, num_shards).
            hparams: The run's hyperparameters, for the few that choose training data (`task_repeats`, which
                only joint multi-task problems accept); None: the problem's defaults.

        Returns:
            A `tf.data.Dataset` of `{"inputs": int32 [None], "targets": int32 [None]}`, each sequence ending
            in EOS_ID, or of `{"targets": int32 [None]}` alone for a problem without inputs (`has_inputs`).
            The train split repeats forever; eval and test are finite and deterministic.
        """
        seed = _checked(split, seed, num_shards, shard_index)
        self.check_hparams(hparams)
        examples = self._dataset(split, data_dir, seed, num_shards, shard_index,
                                 **self.dataset_options(split, hparams))
        return _check_element_spec(examples, type(self).__name__, self.has_inputs)

    def dataset_options(self, split, hparams):
        """Extra keyword arguments for `_dataset` that a problem reads from the run's `hparams` (none here)."""
        del split, hparams
        return {}

    def example_chunks(self, split, data_dir=None, seed=None, num_shards=1, shard_index=0, hparams=None):
        """The examples of `dataset`, many per element, or None if the problem gives them one at a time.

        Problems that parse or tokenize examples in batches return those batches as they are, and the input
        pipeline buckets them without taking them apart: per element, tf.data costs about as much as parsing.

        The arguments are those of `dataset`.

        Returns:
            None, or a `tf.data.Dataset` of `{"inputs": int32 ragged [n, (length)], "targets": ...}` (int64
            row splits; n varies; "targets" alone without inputs): the examples `dataset` gives, in the same
            order for eval and test.
        """
        seed = _checked(split, seed, num_shards, shard_index)
        self.check_hparams(hparams)
        return self._example_chunks(split, data_dir, seed, num_shards, shard_index)

    @abc.abstractmethod
    def _dataset(self, split, data_dir, seed, num_shards, shard_index):
        """What `dataset` returns, after argument checks. Shards must hold distinct data."""

    def _example_chunks(self, split, data_dir, seed, num_shards, shard_index):
        """What `example_chunks` returns, after argument checks; None: the pipeline batches `dataset`."""
        del split, data_dir, seed, num_shards, shard_index
        return None


def _checked(split, seed, num_shards, shard_index):
    """`seed` as an int (or None) after checking the arguments of `Problem.dataset`."""
    check_split(split)
    if seed is not None and (not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0):
        raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
    if not 0 <= shard_index < num_shards:
        raise ValueError(f"need 0 <= shard_index < num_shards, got shard {shard_index} of {num_shards}")
    return None if seed is None else int(seed)


def _check_element_spec(examples, owner, has_inputs=True):
    """Fails early, naming the problem, if a subclass yields something the pipeline cannot batch: dicts with
    "inputs" and "targets", or, without inputs (`has_inputs` False), "targets" and no "inputs".

    Integer ids of another dtype (e.g. int64 from numpy) are cast to int32.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel  # Listing problems must not load TF.

    from t2t_relpos import errors  # pylint: disable=import-outside-toplevel

    spec = examples.element_spec
    keys = isinstance(spec, dict) and ({"inputs", "targets"} <= set(spec) if has_inputs
                                       else "targets" in spec and "inputs" not in spec)
    ok = keys and all(
        isinstance(s, tf.TensorSpec) and s.dtype.is_integer and s.shape.rank == 1 for s in spec.values())
    if not ok:
        wanted = "'inputs' and 'targets'" if has_inputs else "'targets' (and no 'inputs': it has none)"
        raise errors.DataError(f"{owner}._dataset must yield dicts with {wanted} as integer [None] tensors, got "
                               f"{spec}")
    if any(s.dtype != tf.int32 for s in spec.values()):
        examples = examples.map(tf.autograph.experimental.do_not_convert(
            lambda example: {k: tf.cast(v, tf.int32) for k, v in example.items()}))
    return examples
