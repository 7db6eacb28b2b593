"""The shared base of the translation problems: sentence pairs -> TFRecord shards + one SentencePiece vocabulary.

A subclass says where its raw sentence pairs are (`raw_sources`); the base prepares and reads the data:

- `generate_data(data_dir, tmp_dir)` (what `t2t-relpos-datagen` runs) writes, in `data_dir`, the text shards of
  each split (`<name>-train-00000.tfrecord`, ..., the train split shuffled; see `t2t_relpos.data.shards`) and
  then one vocabulary shared by source and target, `<name>.sentencepiece.model`, trained on a sample of the
  training pairs (deterministic for the seed). It is idempotent: a finished split or vocabulary is kept, an
  interrupted run resumes.
- then, with the vocabulary, every split once more as ids (`t2t_relpos.data.id_shards`: EOS appended, the
  same pairs in the same order), so that training does not tokenise: SentencePiece is the most expensive stage
  of the input pipeline.
- `_dataset` reads the ids shards when they were written with the vocabulary in `data_dir`; otherwise (data
  prepared before ids shards existed, a vocabulary replaced or text rewritten since) it reads the text shards and
  maps text to ids inside the tf.data graph with tensorflow-text's SentencePiece op (the same op an exported model
  uses), appending EOS. Both give the same examples in the same order.

Ids: 0 = PAD, 1 = EOS, 2 = UNK (rare: byte fallback spells unknown characters in bytes), no BOS.

Settings (class attributes, overridable per run in an optional `<tmp_dir>/<name>.json`, e.g.
`{"vocab_size": 8000}`): `vocab_size` (pieces, 32000), `vocab_sample_pairs` (training pairs sampled for the
vocabulary, both sides used), `examples_per_shard` (training pairs per shard) and `seed`. They are recorded
in `<data_dir>/<name>.datagen.json`; resuming with different ones is an error. So are raw files that changed
since their split was prepared (each file's size and SHA-256, of its first and last MiB where it is larger than
16 MiB, are recorded there too): the shards would otherwise hold the old text without a word. A split whose
raw data appeared since (a test set added later) is prepared on the next run, with the vocabulary as it is. A
split that an interrupted run began from other raw files than there are now is prepared again from the start
(the shards it wrote are removed), never resumed with shards of both.
"""

import abc
import dataclasses
import glob
import hashlib
import json
import os
import sys

from t2t_relpos import errors
from t2t_relpos.problems import problem

SETTINGS = ("vocab_size", "vocab_sample_pairs", "examples_per_shard", "seed")


@dataclasses.dataclass(frozen=True)
class RawSource:
    """Where one split's raw sentence pairs come from.

    Attributes:
        description: For messages and the shard manifest, e.g. "train.de-en.en + train.de-en.de".
        pairs: A callable returning an iterator of (source, target) str, the same sequence on every call.
        files: The raw files it reads, whose fingerprints tell a changed source (none: not checked).
    """

    description: str
    pairs: object
    files: tuple = ()

    def fingerprint(self):
        """Each file's size and SHA-256 (of its first and last MiB beyond 16 MiB), or None without files."""
        return [_file_fingerprint(path) for path in self.files] or None


_WHOLE = 16 << 20
_PART = 1 << 20


def _file_fingerprint(path):
    digest = hashlib.sha256()
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            if size <= _WHOLE:
                for block in iter(lambda: f.read(_PART), b""):
                    digest.update(block)
            else:
                digest.update(f.read(_PART))
                f.seek(size - _PART)
                digest.update(f.read(_PART))
    except OSError as e:
        raise errors.DataError(f"cannot read {path}: {e.strerror or e}") from None
    return f"{size}:{digest.hexdigest()}"


class TranslateProblem(problem.Problem):
    """Base of the translation problems. Subclasses implement `raw_sources`.

    Attributes:
        source_language, target_language: Language codes, for messages and documentation.
        required_splits: Splits whose raw data must exist (others are prepared when present).
    """

    shared_vocab = True
    eval_metrics = ("accuracy", "neg_log_perplexity")
    decode_metric = "bleu"
    source_language = "en"
    target_language = "de"
    required_splits = problem.SPLITS

    vocab_size = 32000
    vocab_sample_pairs = 500_000
    examples_per_shard = 100_000
    seed = 1

    @abc.abstractmethod
    def raw_sources(self, tmp_dir, splits, settings):
        """Finds the raw data of `splits`, quickly (no reading of whole corpora, no download unless allowed).

        Args:
            tmp_dir: The raw-data directory (--tmp_dir); may be None.
            splits: The splits wanted.
            settings: The run's settings (`settings(tmp_dir)`).

        Returns:
            {split: RawSource} for every wanted split that has data.

        Raises:
            DataError: listing every missing file, where to put it and how else to get it, when a split of
                `required_splits` among `splits` has no data.
        """

    # -- settings ----------------------------------------------------------------------------------------
    def settings_path(self, tmp_dir):
        return os.path.join(tmp_dir, f"{self.name}.json") if tmp_dir else None

    def extra_setting_names(self):
        """Names a subclass accepts in its settings file besides `SETTINGS`."""
        return ()

    def settings(self, tmp_dir):
        """The class's settings, overridden by `<tmp_dir>/<name>.json` where that file exists."""
        values = {name: getattr(self, name) for name in SETTINGS}
        path = self.settings_path(tmp_dir)
        if path and os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as f:
                    given = json.load(f)
            except (OSError, ValueError) as e:
                raise errors.DataError(f"{path}: not a JSON object of settings ({e})") from None
            known = SETTINGS + tuple(self.extra_setting_names())
            if not isinstance(given, dict) or set(given) - set(known):
                unknown = sorted(set(given) - set(known)) if isinstance(given, dict) else given
                raise errors.DataError(f"{path}: unknown settings {unknown}; known: {', '.join(known)}")
            from t2t_relpos.data import sentencepiece_vocab  # pylint: disable=import-outside-toplevel

            for name in SETTINGS:
                # Checked here, before anything is written: SentencePiece refused it only after the shards were.
                lowest = {"seed": 0, "vocab_size": sentencepiece_vocab.MIN_VOCAB_SIZE}.get(name, 1)
                if name in given and (not isinstance(given[name], int) or isinstance(given[name], bool)
                                      or given[name] < lowest):
                    why = " (reserved ids, UNK and 256 byte pieces)" if name == "vocab_size" else ""
                    raise errors.DataError(f"{path}: {name} must be an integer >= {lowest}{why}, got "
                                           f"{given[name]!r}")
            values.update(given)
        return values

    def check_settings(self, tmp_dir):
        """Raises `DataError` for a settings file that cannot work (`settings`), before `prepare` writes anything."""
        self.settings(tmp_dir)

    # -- files in data_dir -------------------------------------------------------------------------------
    def vocab_path(self, data_dir):
        return os.path.join(data_dir, f"{self.name}.sentencepiece.model")

    def _record_path(self, data_dir):
        return os.path.join(data_dir, f"{self.name}.datagen.json")

    def datagen_hint(self, data_dir=None):
        return (f"run t2t-relpos-datagen --problem={self.name} --data_dir={data_dir or '...'} --tmp_dir=... first "
                "(or give the trainer --generate_data)")

    # -- preparation -------------------------------------------------------------------------------------
    def generate_data(self, data_dir, tmp_dir):
        from t2t_relpos.data import shards  # pylint: disable=import-outside-toplevel  # Imports TensorFlow.

        if not data_dir:
            raise errors.DataError(f"{self.name} needs --data_dir: where its shards and vocabulary go")
        record = _read_json(self._record_path(data_dir))
        settings = self.settings(tmp_dir)
        chosen = {k: settings[k] for k in SETTINGS}
        if record and tmp_dir and record["settings"] != chosen:
            record = self._vocab_settings_changed(data_dir, record, chosen)
        if record and tmp_dir and record["settings"] != chosen:
            raise errors.DataError(f"{data_dir} was prepared for {self.name} with {record['settings']}, now asked "
                                   f"for {chosen}; use another --data_dir or delete its {self.name}* files")
        present = self._present_sources(tmp_dir, settings) if record else {}
        now = {split: source.fingerprint() for split, source in present.items()}  # Read once: files up to 16 MiB.
        recorded = (record or {}).get("sources", {})
        self._check_unchanged(data_dir, tmp_dir, present, now, recorded)
        added = [s for s in present if s not in record["splits"]] if record else []
        if record and not added and os.path.isfile(self.vocab_path(data_dir)) and all(
                shards.load_manifest(data_dir, self.name, split) for split in record["splits"]):
            if self._write_ids(data_dir, record["splits"]) == 0:
                print(f"{self.name}: data already prepared in {data_dir}", file=sys.stderr, flush=True)
            return
        if record:
            settings.update(record["settings"])
        todo = [s for s in problem.SPLITS if not shards.load_manifest(data_dir, self.name, s)]
        sources = self.raw_sources(tmp_dir, todo, settings)
        splits = sorted(set(record["splits"] if record else ()) | set(sources) |
                        {s for s in problem.SPLITS if s not in todo}, key=problem.SPLITS.index)
        if "train" not in splits:
            raise errors.DataError(f"{self.name}: no training data found in {tmp_dir}")
        os.makedirs(data_dir, exist_ok=True)
        fingerprints = {**recorded, **now, **{s: sources[s].fingerprint() for s in sources if s not in now}}
        for split in todo:  # Before the record takes the new fingerprints: a kill in between must not hide them.
            if split in sources:
                self._discard_if_changed(data_dir, split, sources[split], recorded.get(split), fingerprints[split])
        _write_json(self._record_path(data_dir), {
            "settings": {k: settings[k] for k in SETTINGS}, "splits": splits,
            "sources": {s: f for s, f in fingerprints.items() if f and s in splits}})
        for split in todo:
            if split in sources:
                self._write_split(data_dir, split, sources[split], settings)
        self._generate_vocab(data_dir, settings)
        self._write_ids(data_dir, splits)
        counts = ", ".join(f"{s} {shards.load_manifest(data_dir, self.name, s)['examples']:,}" for s in splits)
        vocab = self.feature_encoders(data_dir)["inputs"].vocab_size
        print(f"{self.name}: prepared in {data_dir}: {counts} pairs; vocabulary of {vocab} pieces",
              file=sys.stderr, flush=True)

    def _vocab_settings_changed(self, data_dir, record, chosen):
        """`record` taking `chosen`'s vocabulary settings where only those changed and no vocabulary was made yet
        (SentencePiece refused the earlier ones, e.g. a vocab_size too small for the corpus's characters, after
        the shards were written): the shards do not depend on them, and the refusal said to change them."""
        vocab_settings = ("vocab_size", "vocab_sample_pairs")
        others = [k for k in SETTINGS if k not in vocab_settings]
        if (os.path.isfile(self.vocab_path(data_dir))
                or any(record["settings"].get(k) != chosen[k] for k in others)):
            return record
        changed = {k: chosen[k] for k in vocab_settings if record["settings"].get(k) != chosen[k]}
        print(f"{self.name}: {data_dir} has no vocabulary yet; making it with {changed} (was "
              f"{ {k: record['settings'].get(k) for k in changed} })", file=sys.stderr, flush=True)
        return {**record, "settings": {**record["settings"], **changed}}

    def _present_sources(self, tmp_dir, settings):
        """The raw sources `tmp_dir` has now, found without downloading; none where it has no raw data."""
        if not tmp_dir:
            return {}
        allowed = getattr(self, "allow_download", False)
        self.allow_download = False
        try:
            found = {}
            for split in problem.SPLITS:
                try:
                    found.update(self.raw_sources(tmp_dir, [split], settings))
                except errors.DataError:  # Not there (any more): the prepared split stands.
                    pass
            return found
        finally:
            self.allow_download = allowed

    def _check_unchanged(self, data_dir, tmp_dir, present, now, recorded):
        """Raises `DataError` for a prepared split whose raw files in `tmp_dir` (`present`, fingerprinted as
        `now`) differ from those it was prepared from (`recorded` in `<name>.datagen.json` since fingerprints
        were). A split whose shards were removed is prepared again from what is there now."""
        from t2t_relpos.data import shards  # pylint: disable=import-outside-toplevel

        for split, source in present.items():
            if (recorded.get(split) and now[split] and now[split] != recorded[split]
                    and shards.load_manifest(data_dir, self.name, split)):
                raise errors.DataError(
                    f"{data_dir} holds {self.name}'s {split} split prepared from other raw data than {tmp_dir} has "
                    f"now ({source.description} changed); use another --data_dir, or delete its {self.name}* "
                    "files to prepare them again")

    def _discard_if_changed(self, data_dir, split, source, recorded, now):
        """Removes the shards an interrupted datagen wrote of an unfinished `split` unless its raw files are those
        it began from (`recorded`, in `<name>.datagen.json`): resuming would add shards of the new text to those
        of the old (a kill, then train.src and train.tgt swapped: shards 0-1 English->German, 2-5 the reverse).
        Without a recorded fingerprint nothing tells what they were made from, so they go as well."""
        from t2t_relpos.data import preparation  # pylint: disable=import-outside-toplevel

        if now is None or recorded == now:  # Unchanged, or raw data without files (a tensorflow-datasets build).
            return
        shard = f"{glob.escape(self.name)}-{split}-{'[0-9]' * 5}*.tfrecord"  # Text and ids shards.
        begun = sorted(glob.glob(os.path.join(glob.escape(data_dir), shard)))
        if not begun:
            return
        print(f"{self.name}: the {split} raw data ({source.description}) is not what an interrupted datagen began "
              f"the {split} split from; preparing it again from the start ({len(begun)} shard files removed)",
              file=sys.stderr, flush=True)
        for path in begun:
            preparation.remove(path, "a shard of an interrupted datagen")

    def _write_split(self, data_dir, split, source, settings):
        from t2t_relpos.data import shards  # pylint: disable=import-outside-toplevel

        training = split == "train"
        pairs = source.pairs()
        dropped = [0]
        if training:  # A pair with an empty side teaches nothing (tensorflow-datasets drops them too).
            def non_empty(pairs):
                for pair in pairs:
                    if pair[0].strip() and pair[1].strip():
                        yield pair
                    else:
                        dropped[0] += 1

            pairs = non_empty(pairs)
        shards.write_split(pairs, data_dir, self.name, split, settings["examples_per_shard"],
                           shuffle_seed=settings["seed"] if training else None, description=source.description)
        if dropped[0]:
            print(f"{self.name}: left out {dropped[0]:,} training pairs with an empty side", file=sys.stderr,
                  flush=True)

    def _generate_vocab(self, data_dir, settings):
        from t2t_relpos.data import preparation, sentencepiece_vocab, shards  # pylint: disable=import-outside-toplevel

        path = self.vocab_path(data_dir)
        if os.path.isfile(path):
            return
        manifest = shards.load_manifest(data_dir, self.name, "train")
        pairs = shards.sample_pairs(data_dir, manifest, settings["vocab_sample_pairs"])
        print(f"{self.name}: training a vocabulary of {settings['vocab_size']} pieces on {len(pairs):,} pairs",
              file=sys.stderr, flush=True)
        sentences = [text for pair in pairs for text in pair]
        try:
            model = sentencepiece_vocab.train_sentencepiece(sentences, settings["vocab_size"], seed=settings["seed"])
        except sentencepiece_vocab.SentencesTooLongError as e:
            raise errors.DataError(f"{self.name}: {e}") from None
        except ValueError as e:
            raise errors.DataError(f"{self.name}: {e} (set vocab_size in <tmp_dir>/{self.name}.json)") from None
        with preparation.written(path, "the vocabulary") as partial:
            with open(partial, "wb") as f:
                f.write(model)

    def _write_ids(self, data_dir, splits):
        """Writes the ids shards of `splits` that are missing for the vocabulary; the examples encoded."""
        from t2t_relpos.data import id_shards  # pylint: disable=import-outside-toplevel

        digest = id_shards.vocab_digest(self.vocab_path(data_dir))
        todo = [s for s in splits if id_shards.usable_paths(data_dir, self.name, s, digest) is None]
        if not todo:
            return 0
        print(f"{self.name}: writing the {', '.join(todo)} pairs as ids", file=sys.stderr, flush=True)
        encode = _encoder(self.feature_encoders(data_dir)["inputs"].graph_tokenizer())
        return sum(id_shards.write_split(data_dir, self.name, s, encode, digest) for s in todo)

    # -- reading -----------------------------------------------------------------------------------------
    def feature_encoders(self, data_dir=None):
        from t2t_relpos.data import sentencepiece_vocab  # pylint: disable=import-outside-toplevel

        if not data_dir:
            raise errors.DataError(f"{self.name} needs --data_dir (where t2t-relpos-datagen put its vocabulary)")
        path = self.vocab_path(data_dir)
        cache = self.__dict__.setdefault("_encoders", {})
        if path not in cache:
            try:
                os.stat(path)
            except FileNotFoundError:
                raise errors.DataError(f"{self.name}: no vocabulary {path}; {self.datagen_hint(data_dir)}") from None
            except OSError as e:  # Not the vocabulary missing: the directory cannot be searched, or is a file.
                raise errors.DataError(f"{self.name}: cannot read --data_dir={data_dir}: {e.strerror or e}") from None
            cache[path] = sentencepiece_vocab.SentencePieceEncoder.from_file(path)
        encoder = cache[path]
        return {"inputs": encoder, "targets": encoder}

    def _dataset(self, split, data_dir, seed, num_shards, shard_index):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        from t2t_relpos.data import shards  # pylint: disable=import-outside-toplevel

        chunks = self._example_chunks(split, data_dir, seed, num_shards, shard_index, shards.PARSE_BATCH)
        # One example per element, in order. Unbatched ragged rows are typed as (flat) RaggedTensors; a map
        # receives them as the plain tensors they are.
        return chunks.unbatch().map(tf.autograph.experimental.do_not_convert(lambda example: example),
                                    num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    def _example_chunks(self, split, data_dir, seed, num_shards, shard_index, chunk_size=None):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel  # Listing problems must not load TF.

        from t2t_relpos.data import batching, id_shards, shards  # pylint: disable=import-outside-toplevel

        record = _read_json(self._record_path(data_dir))
        if record and split not in record["splits"]:
            raise errors.DataError(f"{self.name}: {data_dir} has no {split} data (its raw data had none when it "
                                   "was prepared); add it there and run t2t-relpos-datagen again")
        encoder = self.feature_encoders(data_dir)["inputs"]
        paths = shards.shard_paths(data_dir, self.name, split, self.datagen_hint(data_dir))
        ids = id_shards.usable_paths(data_dir, self.name, split, id_shards.vocab_digest(self.vocab_path(data_dir)))
        # Ids shard i holds text shard i's pairs in order: either list of files gives the same examples.
        files = paths if ids is None else ids
        if split == "train":
            records = _training_records(files, seed, num_shards, shard_index)
        else:
            records = tf.data.TFRecordDataset(files).shard(num_shards, shard_index)
        chunk_size = chunk_size or batching.CHUNK_EXAMPLES
        if ids is not None:
            return id_shards.parse_id_batches(records, chunk_size)
        if split == "train":
            print(f"{self.name}: no ids for this vocabulary in {data_dir}: tokenizing the text as it is read (slower; "
                  f"t2t-relpos-datagen --problem={self.name} --data_dir={data_dir} writes them)", file=sys.stderr,
                  flush=True)
        # Tokenized a chunk at a time, in parallel.
        return shards.parse_pair_batches(records, chunk_size).map(
            _encoder(encoder.graph_tokenizer()), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _encoder(tokenizer):
    """A batch of text pairs -> ids with EOS appended, ragged `[n, (length)]` per side."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    def encode(pairs):
        encoded = {}
        for key in ("inputs", "targets"):
            ids = tokenizer.tokenize(pairs[key])
            eos = tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], tf.constant(problem.EOS_ID, ids.dtype)))
            encoded[key] = tf.concat([ids, eos], axis=1)
        return encoded

    return tf.autograph.experimental.do_not_convert(encode)  # No control flow on tensors to convert.


def _training_records(paths, seed, num_shards, shard_index, cycle_length=16):
    """Training records, forever: shard files in a seeded random order each epoch, several read at a time.

    Each worker reads its own files when there are enough of them, else every worker reads all files in the
    same order and keeps its share of the records. Every epoch reads each of its files once: the interleave
    opens at most the files this worker has, and the next epoch starts when this one's files are read (with
    the files repeated before the interleave, a worker with fewer files than the cycle read the same file in
    several slots at once, every record 2-4 times in a row, and epochs overlapped).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    files = tf.data.Dataset.from_tensor_slices(paths)
    by_file = len(paths) >= num_shards
    count = len(paths)
    if by_file:
        files = files.shard(num_shards, shard_index)
        count = len(range(shard_index, len(paths), num_shards))
    elif seed is None:
        seed = 0  # Workers sharing files must see them in the same order.
    files = files.shuffle(count, seed=seed, reshuffle_each_iteration=True)
    records = files.interleave(tf.data.TFRecordDataset, cycle_length=min(count, cycle_length),
                               num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).repeat()
    return records if by_file else records.shard(num_shards, shard_index)


def _read_json(path):
    from t2t_relpos.data import preparation  # pylint: disable=import-outside-toplevel

    return preparation.read_json(path, "the datagen record")


def _write_json(path, value):
    from t2t_relpos.data import preparation  # pylint: disable=import-outside-toplevel

    preparation.write_json(path, value, "the datagen record")
