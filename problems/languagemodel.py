"""Language models: problems without inputs, whose examples are windows of one packed stream of text.

As tensor2tensor's `languagemodel_*` problems, these have `has_inputs = False`: their examples are
`{"targets": int32 [length]}` alone, and the Transformer and the Universal Transformer run their decoder alone
on them. A split's text is a sequence of documents; each is encoded and followed by EOS, and the documents
joined make one stream of ids, cut into windows of `hparams.max_length` tokens (`DEFAULT_WINDOW` when the
problem is read without hparams). A window ends in EOS only where a document does; a document may span windows
and a window may hold several documents.

- eval and test: windows from the stream's start, one after the other, the last one shorter: every token
  exactly once, in order, the same on every call.
- train: forever, one epoch after another. Each epoch moves the window boundaries by a random shift in
  [0, window) and takes its windows in a random order; the stream is read as a ring (its end, an EOS, joins
  its start), so every epoch still holds every token exactly once, in windows of full length but one. Both
  draws are seeded by (seed, epoch): the same seed gives the same windows.

Data: `t2t-relpos-datagen` reads the raw text from --tmp_dir and writes, in --data_dir, the vocabulary, each
split's stream of ids (`<name>-<split>.ids.npy`, int32) and `<name>.datagen.json` (settings, the raw files'
fingerprints, counts). Training and decoding read data_dir only; a split is held in memory (4 bytes a token).
Running datagen again does nothing; a split whose raw file appeared since (a test.txt) is added, with the
vocabulary as it is; raw text that changed since it was prepared is refused.

The problems (registered in their own modules):

- `languagemodel_local`: your own text, a SentencePiece vocabulary (as `translate_local` makes one), and
  `languagemodel_local_characters`: the same files, one id per character (`languagemodel_local`).
- `languagemodel_shakespeare_characters`: Tiny Shakespeare, one id per character, as nanoGPT splits it
  (`languagemodel_shakespeare`).

A problem of another corpus derives from `SentencePieceLanguageModel` or `CharacterLanguageModel` and says
where its raw text is (`raw_texts`).
"""

import abc
import dataclasses
import os
import random
import sys

import numpy as np

from t2t_relpos import errors, files
from t2t_relpos.problems import problem

# The window, in tokens, when a problem is read without hparams (hparams give `max_length`).
DEFAULT_WINDOW = 256


def documents_of(lines):
    """Documents from lines: runs of lines between blank ones (empty or white space only), joined by newlines."""
    block = []
    for line in lines:
        if line.strip():
            block.append(line)
        elif block:
            yield "\n".join(block)
            block = []
    if block:
        yield "\n".join(block)


@dataclasses.dataclass(frozen=True)
class RawText:
    """Where one split's raw text comes from.

    Attributes:
        description: For messages, e.g. the file's path.
        documents: A callable returning an iterator of str, the split's documents, the same on every call.
        files: The raw files it reads, whose fingerprints tell a changed source.
    """

    description: str
    documents: object
    files: tuple = ()

    def fingerprint(self):
        """Each file's size and SHA-256 (of its first and last MiB beyond 16 MiB), as translation records them."""
        from t2t_relpos.problems import translate  # pylint: disable=import-outside-toplevel

        return translate.RawSource(self.description, None, self.files).fingerprint()


class LanguageModelProblem(problem.Problem):
    """Base of the language-model problems (see the module docstring). Subclasses implement `raw_texts`,
    `vocab_path`, `_make_vocabulary` and `_load_encoder` (or derive from `SentencePieceLanguageModel` or
    `CharacterLanguageModel`, which implement the last three).

    Attributes:
        characters: Whether an id is one character (the trainer can then report bits per character).
        required_splits: Splits whose raw text must exist (others are prepared when present).
        default_window: The window in tokens when the problem is read without hparams.
        setting_names: The settings its `<tmp_dir>/<name>.json` may give (class attributes of the same names).
    """

    has_inputs = False
    eval_metrics = ("accuracy", "neg_log_perplexity")
    decode_metric = "perplexity"
    characters = False
    required_splits = ("train", "eval")
    default_window = DEFAULT_WINDOW
    setting_names = ()

    def documents_of_text(self, text):
        """The documents of a text, read as this problem reads its raw files: runs of lines between blank lines
        (a problem whose text is one document says so by overriding this)."""
        return documents_of(line.rstrip("\r") for line in text.split("\n"))

    def text_ids(self, text, encoder):
        """A text's ids packed as datagen packs a split: each document encoded and followed by EOS.

        Returns:
            int32 `[n]` (empty where the text holds no document).
        """
        parts = [np.asarray(encoder.encode(d) + [problem.EOS_ID], np.int32) for d in self.documents_of_text(text) if d]
        return np.concatenate(parts) if parts else np.zeros([0], np.int32)

    @abc.abstractmethod
    def raw_texts(self, tmp_dir, required=True):
        """{split: RawText} for every split whose raw text is in `tmp_dir`.

        Raises:
            DataError: where `required` and a split of `required_splits` has no raw text (saying what to put
                where), or where what is there cannot be read.
        """

    @abc.abstractmethod
    def vocab_path(self, data_dir):
        """Where datagen writes the vocabulary."""

    @abc.abstractmethod
    def _make_vocabulary(self, data_dir, train, settings):
        """Writes the vocabulary from the training text (`train`: a `RawText`)."""

    @abc.abstractmethod
    def _load_encoder(self, path):
        """The `TextEncoder` of the vocabulary at `path`."""

    # -- settings ----------------------------------------------------------------------------------------
    def settings_path(self, tmp_dir):
        return os.path.join(tmp_dir, f"{self.name}.json") if tmp_dir else None

    def settings(self, tmp_dir):
        """The class's settings, overridden by `<tmp_dir>/<name>.json` where that file exists."""
        from t2t_relpos.data import preparation, sentencepiece_vocab  # pylint: disable=import-outside-toplevel

        values = {name: getattr(self, name) for name in self.setting_names}
        path = self.settings_path(tmp_dir)
        given = preparation.read_json(path, "the settings") if path and os.path.isfile(path) else {}
        if not isinstance(given, dict) or set(given) - set(self.setting_names):
            unknown = sorted(set(given) - set(self.setting_names)) if isinstance(given, dict) else given
            raise errors.DataError(f"{path}: unknown settings {unknown}; known: "
                                   f"{', '.join(self.setting_names) or 'none'}")
        for name, value in given.items():
            lowest = {"seed": 0, "vocab_size": sentencepiece_vocab.MIN_VOCAB_SIZE}.get(name, 1)
            if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
                raise errors.DataError(f"{path}: {name} must be an integer >= {lowest}, got {value!r}")
        return {**values, **given}

    def check_settings(self, tmp_dir):
        """Raises `DataError` for a settings file that cannot work, before datagen writes anything."""
        self.settings(tmp_dir)

    # -- files in data_dir -------------------------------------------------------------------------------
    def ids_path(self, data_dir, split):
        return os.path.join(data_dir, f"{self.name}-{split}.ids.npy")

    def _record_path(self, data_dir):
        return os.path.join(data_dir, f"{self.name}.datagen.json")

    def datagen_hint(self, data_dir=None):
        return (f"run t2t-relpos-datagen --problem={self.name} --data_dir={data_dir or '...'} --tmp_dir=... first "
                "(or give the trainer --generate_data)")

    # -- preparation -------------------------------------------------------------------------------------
    def generate_data(self, data_dir, tmp_dir):
        from t2t_relpos.data import preparation  # pylint: disable=import-outside-toplevel

        if not data_dir:
            raise errors.DataError(f"{self.name} needs --data_dir: where its vocabulary and token ids go")
        settings = self.settings(tmp_dir)
        record = preparation.read_json(self._record_path(data_dir), "the datagen record") or {}
        if record and record.get("vocabulary") != self._vocabulary_fingerprint(data_dir):
            record = {}  # An interrupted first run, or a vocabulary replaced by hand: everything again.
        if record and tmp_dir and record["settings"] != settings:
            raise errors.DataError(f"{data_dir} was prepared for {self.name} with {record['settings']}, now asked "
                                   f"for {settings}; use another --data_dir or delete its {self.name}* files")
        sources = self.raw_texts(tmp_dir, required=not record)
        prepared = record.get("splits", {})
        for split, source in sources.items():
            if split in prepared and prepared[split]["source"] != source.fingerprint():
                raise errors.DataError(
                    f"{data_dir} holds {self.name}'s {split} split prepared from other text than {tmp_dir} has now "
                    f"({source.description} changed); use another --data_dir, or delete its {self.name}* files")
        gone = [s for s in prepared if s not in sources and not os.path.isfile(self.ids_path(data_dir, s))]
        if gone:
            raise errors.DataError(f"{self.ids_path(data_dir, gone[0])} is missing; give datagen the raw text "
                                   "in --tmp_dir to write it again")
        todo = [s for s in sources if s not in prepared or not os.path.isfile(self.ids_path(data_dir, s))]
        if not todo:
            print(f"{self.name}: data already prepared in {data_dir}", file=sys.stderr, flush=True)
            return
        if not record:
            if "train" not in sources:
                raise errors.DataError(f"{self.name}: no training text in --tmp_dir={tmp_dir}")
            os.makedirs(data_dir, exist_ok=True)
            self._make_vocabulary(data_dir, sources["train"], settings)
            record = {"settings": settings, "vocabulary": self._vocabulary_fingerprint(data_dir), "splits": {}}
        encoder = self.feature_encoders(data_dir)["targets"]
        for split in todo:
            record["splits"][split] = self._write_ids(data_dir, split, sources[split], encoder)
        preparation.write_json(self._record_path(data_dir), record, "the datagen record")
        counts = ", ".join(f"{s} {record['splits'][s]['tokens']:,}" for s in problem.SPLITS if s in record["splits"])
        unit = "characters" if self.characters else "pieces"
        print(f"{self.name}: prepared in {data_dir}: {counts} tokens; vocabulary of {encoder.vocab_size} {unit}",
              file=sys.stderr, flush=True)

    def _vocabulary_fingerprint(self, data_dir):
        self.__dict__.pop("_encoders", None)  # A vocabulary written since must be read again.
        if not os.path.isfile(self.vocab_path(data_dir)):
            return None
        return self.feature_encoders(data_dir)["targets"].fingerprint()

    def _write_ids(self, data_dir, split, source, encoder):
        """Encodes a split's documents, EOS after each, into `ids_path`; returns what the record keeps of it."""
        import numpy as np  # pylint: disable=import-outside-toplevel

        from t2t_relpos.data import preparation  # pylint: disable=import-outside-toplevel

        parts, documents, unknown, distinct = [], 0, 0, set()
        count_unknown = getattr(encoder, "unknown", None)
        for document in source.documents():
            if not document:
                continue
            parts.append(np.asarray(encoder.encode(document) + [problem.EOS_ID], np.int32))
            documents += 1
            if count_unknown is not None:
                missing, which = count_unknown(document)
                unknown, distinct = unknown + missing, distinct | set(which)
        if not documents:
            raise errors.DataError(f"{self.name}: {source.description} has no text; a language model's {split} "
                                   "split needs some")
        if unknown:
            shown = " ".join(repr(c) for c in sorted(distinct)[:10]) + (" ..." if len(distinct) > 10 else "")
            print(f"{self.name}: {unknown:,} characters of the {split} text ({len(distinct)} distinct: {shown}) "
                  "are not in the training text's vocabulary; they are the unknown id", file=sys.stderr, flush=True)
        stream = np.concatenate(parts)
        with preparation.written(self.ids_path(data_dir, split), f"the {split} ids") as partial:
            with open(partial, "wb") as f:
                np.save(f, stream)
        return {"source": source.fingerprint(), "description": source.description, "documents": documents,
                "tokens": int(stream.size), "unknown": unknown}

    # -- reading -----------------------------------------------------------------------------------------
    def feature_encoders(self, data_dir=None):
        if not data_dir:
            raise errors.DataError(f"{self.name} needs --data_dir (where t2t-relpos-datagen put its vocabulary)")
        path = self.vocab_path(data_dir)
        cache = self.__dict__.setdefault("_encoders", {})
        if path not in cache:
            try:
                os.stat(path)
            except FileNotFoundError:
                raise errors.DataError(f"{self.name}: no vocabulary {path}; {self.datagen_hint(data_dir)}") from None
            except OSError as e:
                raise errors.DataError(f"{self.name}: cannot read --data_dir={data_dir}: {e.strerror or e}") from None
            cache[path] = self._load_encoder(path)
        return {"targets": cache[path]}

    def tokens(self, split, data_dir):
        """The split's stream of ids, int32 `[n]`: each document's ids followed by EOS."""
        import numpy as np  # pylint: disable=import-outside-toplevel

        from t2t_relpos.data import preparation  # pylint: disable=import-outside-toplevel

        problem.check_split(split)
        self.feature_encoders(data_dir)  # A missing vocabulary says how to prepare the data.
        path = self.ids_path(data_dir, split)
        try:
            return np.load(path).astype(np.int32, copy=False)
        except FileNotFoundError:
            record = preparation.read_json(self._record_path(data_dir), "the datagen record")
            if record and split not in record["splits"]:
                raise errors.DataError(f"{self.name}: {data_dir} has no {split} data (its raw text had none when it "
                                       "was prepared); add it there and run t2t-relpos-datagen again") from None
            raise errors.DataError(f"{self.name}: no {split} data {path}; {self.datagen_hint(data_dir)}") from None
        except (OSError, ValueError) as e:
            raise errors.DataError(f"{self.name}: cannot read {path}: {getattr(e, 'strerror', None) or e}") from None

    def dataset_options(self, split, hparams):
        """The window is `hparams.max_length` (`default_window` without hparams)."""
        del split
        return {"window": hparams.get("max_length") if hparams is not None else None}

    def _dataset(self, split, data_dir, seed, num_shards, shard_index, window=None):
        window = self.default_window if window is None else window
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise errors.HParamsError(f"max_length={window!r}: {self.name} cuts its text into windows of max_length "
                                      "tokens, so it must be at least 1")
        return windows(self.tokens(split, data_dir), window, split == "train", seed, num_shards, shard_index)


def windows(tokens, window, training, seed=None, num_shards=1, shard_index=0):
    """A stream of ids cut into windows (see the module docstring).

    Args:
        tokens: The stream, ints `[n]` (n >= 1).
        window: Tokens per window, >= 1.
        training: Infinite, shifted and shuffled epochs; else the windows in order, once.
        seed: Non-negative int fixing the training windows, or None for random ones.
        num_shards: Input workers; each takes every num_shards-th window (of an epoch's order in training).
        shard_index: This worker's, in [0, num_shards).

    Returns:
        A `tf.data.Dataset` of `{"targets": int32 [length]}`, length <= window.
    """
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    n = len(tokens)
    stream = tf.constant(np.asarray(tokens, np.int32))
    do_not_convert = tf.autograph.experimental.do_not_convert
    if not training:
        starts = tf.data.Dataset.range(0, n, window).shard(num_shards, shard_index)
        return starts.map(do_not_convert(lambda start: {"targets": stream[start:start + window]}))
    count = -(-n // window)
    if count < num_shards:
        raise errors.DataError(f"the training text has {n:,} tokens: {count} windows of max_length={window}, "
                               f"fewer than the {num_shards} input workers")
    if seed is None:  # Workers that share the stream must draw the same epochs.
        seed = 0 if num_shards > 1 else random.SystemRandom().randrange(2 ** 31)

    def epoch(index):
        seed_of = lambda draw: tf.stack([tf.constant(seed, tf.int64), 2 * index + draw])
        shift = tf.random.stateless_uniform([], seed=seed_of(0), minval=0, maxval=min(window, n), dtype=tf.int64)
        order = tf.random.experimental.stateless_shuffle(tf.range(count, dtype=tf.int64), seed=seed_of(1))
        first = order[shard_index::num_shards] * window  # Of this worker's windows, before the shift.
        length = tf.minimum(tf.constant(window, tf.int64), n - first)
        return tf.data.Dataset.from_tensor_slices((shift + first, length))

    def cut(start, length):
        return {"targets": tf.gather(stream, (start + tf.range(length, dtype=tf.int64)) % n)}

    return tf.data.Dataset.counter().flat_map(do_not_convert(epoch)).map(
        do_not_convert(cut), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def find_file(tmp_dir, names):
    """The one of `names` (in `tmp_dir`) that exists, or None; two of them, or one that is not a regular file,
    is a `DataError`."""
    paths = [os.path.join(tmp_dir, name) for name in names]
    for path in paths:
        reason = files.not_a_file(path) if os.path.lexists(path) else None
        if reason:
            raise errors.DataError(f"{path} {reason}; datagen reads the raw text from regular files")
    found = [p for p in paths if os.path.isfile(p)]
    if len(found) > 1:
        raise errors.DataError(f"both {found[0]} and {found[1]} exist; keep one")
    return found[0] if found else None


class SentencePieceLanguageModel(LanguageModelProblem):
    """A language model with a SentencePiece vocabulary trained on its training text's lines (as translation
    trains one: byte fallback, text kept as written). A newline inside a document is encoded as part of it
    (SentencePiece spells it with its byte piece).

    Settings (`<tmp_dir>/<name>.json`, e.g. `{"vocab_size": 8000}`): `vocab_size` (pieces, 32000),
    `vocab_sample_lines` (training lines sampled for the vocabulary) and `seed`.
    """

    setting_names = ("vocab_size", "vocab_sample_lines", "seed")
    vocab_size = 32000
    vocab_sample_lines = 1_000_000
    seed = 1

    def vocab_path(self, data_dir):
        return os.path.join(data_dir, f"{self.name}.sentencepiece.model")

    def _make_vocabulary(self, data_dir, train, settings):
        from t2t_relpos.data import preparation, sentencepiece_vocab  # pylint: disable=import-outside-toplevel

        lines = _sample((line for document in train.documents() for line in document.split("\n")),
                        settings["vocab_sample_lines"], settings["seed"])
        print(f"{self.name}: training a vocabulary of {settings['vocab_size']} pieces on {len(lines):,} lines",
              file=sys.stderr, flush=True)
        try:
            model = sentencepiece_vocab.train_sentencepiece(lines, settings["vocab_size"], seed=settings["seed"])
        except sentencepiece_vocab.SentencesTooLongError as e:
            raise errors.DataError(f"{self.name}: {e}") from None
        except ValueError as e:
            raise errors.DataError(f"{self.name}: {e} (set vocab_size in <tmp_dir>/{self.name}.json)") from None
        with preparation.written(self.vocab_path(data_dir), "the vocabulary") as partial:
            with open(partial, "wb") as f:
                f.write(model)

    def _load_encoder(self, path):
        from t2t_relpos.data import sentencepiece_vocab  # pylint: disable=import-outside-toplevel

        return sentencepiece_vocab.SentencePieceEncoder.from_file(path)


def _sample(items, count, seed):
    """Up to `count` of the non-empty `items`, a uniform sample (reservoir), the same for the same seed."""
    rng, chosen = random.Random(seed), []
    for seen, item in enumerate((i for i in items if i), 1):
        if len(chosen) < count:
            chosen.append(item)
        else:
            slot = rng.randrange(seen)
            if slot < count:
                chosen[slot] = item
    return chosen


class CharacterLanguageModel(LanguageModelProblem):
    """A language model with one id per character: the characters of the training text (ids from 3 in code point
    order; 2 is the unknown id of a character other text has and the training text has not, counted and
    reported by datagen). See `t2t_relpos.data.character_vocab`."""

    characters = True

    def vocab_path(self, data_dir):
        return os.path.join(data_dir, f"{self.name}.characters.json")

    def _make_vocabulary(self, data_dir, train, settings):
        from t2t_relpos.data import character_vocab  # pylint: disable=import-outside-toplevel

        del settings
        characters = character_vocab.characters_of(train.documents())
        character_vocab.CharacterEncoder(characters).save(self.vocab_path(data_dir))

    def _load_encoder(self, path):
        from t2t_relpos.data import character_vocab  # pylint: disable=import-outside-toplevel

        return character_vocab.CharacterEncoder.load(path)
