"""Translation data preparation and reading on `translate_local`: files and settings, shards, resume, batches."""

import json
import os

import pytest

import translation_data as data
from t2t_relpos import errors, registry
from t2t_relpos.data import shards
from t2t_relpos.problems import problem as problem_lib

SETTINGS = {"vocab_size": 400, "examples_per_shard": 40}


def make_raw(directory, train_pairs=150, settings=SETTINGS):
    """translate_local's default layout: train.src + train.tgt.gz, dev.tsv, test.src + test.tgt."""
    train = data.pairs(train_pairs, seed=1)
    data.write_lines(directory / "train.src", [s for s, _ in train])
    data.write_lines(directory / "train.tgt.gz", [t for _, t in train])
    dev = data.pairs(12, seed=2) + [("  odd  spacing ", "Größe „über“  alles ")]
    data.write_lines(directory / "dev.tsv", [f"{s}\t{t}" for s, t in dev])
    test = data.pairs(10, seed=3) + [("a\ttab", " déjà\u00a0vu, cœur ")]
    data.write_lines(directory / "test.src", [s for s, _ in test])
    data.write_lines(directory / "test.tgt", [t for _, t in test])
    (directory / "translate_local.json").write_text(json.dumps(settings))
    return {"train": train, "eval": dev, "test": test}


def decoded(problem, split, data_dir, count=None):
    encoder = problem.feature_encoders(data_dir)["inputs"]
    examples = problem.dataset(split, data_dir, seed=3)
    out = []
    for example in examples.take(-1 if count is None else count).as_numpy_iterator():
        for key in ("inputs", "targets"):
            assert example[key][-1] == problem_lib.EOS_ID and problem_lib.EOS_ID not in example[key][:-1]
        out.append((encoder.decode(example["inputs"]), encoder.decode(example["targets"])))
    return out


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    raw, data_dir = tmp_path_factory.mktemp("raw"), tmp_path_factory.mktemp("data")
    text = make_raw(raw)
    problem = registry.problem("translate_local")
    problem.generate_data(str(data_dir), str(raw))
    return problem, str(data_dir), str(raw), text


def test_local_files_become_shards_and_read_back_exactly(prepared):
    problem, data_dir, _, text = prepared
    manifest = shards.load_manifest(data_dir, "translate_local", "train")
    assert manifest["examples"] == 150 and [s["examples"] for s in manifest["shards"]] == [40, 40, 40, 30]
    assert os.path.isfile(os.path.join(data_dir, "translate_local.sentencepiece.model"))
    source_vocab, target_vocab = problem.vocab_sizes(data_dir)
    assert source_vocab == target_vocab and 259 < source_vocab <= 400  # At most vocab_size on a tiny corpus.
    # Eval and test come back in file order, text exactly as written (odd spacing included).
    assert decoded(problem, "eval", data_dir) == text["eval"]
    assert decoded(problem, "test", data_dir) == text["test"]
    # Train repeats forever, shuffled, drawing only training pairs.
    drawn = decoded(problem, "train", data_dir, count=400)
    assert set(drawn) <= set(text["train"]) and len(set(drawn)) == len(set(text["train"]))
    assert drawn[:150] != text["train"]


def test_workers_read_distinct_examples(prepared):
    problem, data_dir, _, text = prepared

    def inputs(split, index, count=-1):
        examples = problem.dataset(split, data_dir, seed=1, num_shards=2, shard_index=index).take(count)
        return [tuple(e["inputs"]) for e in examples.as_numpy_iterator()]

    evaluated = [inputs("eval", i) for i in range(2)]
    assert len(evaluated[0]) + len(evaluated[1]) == len(text["eval"])
    assert not set(evaluated[0]) & set(evaluated[1])
    trained = [set(inputs("train", i, 300)) for i in range(2)]  # Four shards: two files each.
    assert sorted(map(len, trained)) == [70, 80] and not trained[0] & trained[1]  # Shards of 40, 40, 40, 30.


def test_pipeline_batches_shards_under_the_token_budget(prepared):
    from t2t_relpos.data import pipeline  # pylint: disable=import-outside-toplevel

    problem, data_dir, _, _ = prepared
    hparams = registry.hparams("transformer_cpu_rel").parse("batch_size=96,max_length=48")
    shapes = set()
    for batch in pipeline.input_dataset(problem, hparams, "train", data_dir, seed=1).take(30):
        rows, length = batch["inputs"].shape[0], max(batch["inputs"].shape[1], batch["targets"].shape[1])
        assert rows * length <= 96 or rows == 1
        assert length <= 48
        shapes.add(rows)
    assert len(shapes) > 1  # Short sentences come in more rows than long ones.
    evaluated = sum(int(b["inputs"].shape[0]) for b in pipeline.input_dataset(problem, hparams, "eval", data_dir))
    assert evaluated == 13


def test_second_run_does_nothing(prepared, capsys):
    problem, data_dir, raw, _ = prepared
    before = {n: os.stat(os.path.join(data_dir, n)).st_mtime_ns for n in os.listdir(data_dir)}
    problem.generate_data(data_dir, raw)
    assert "already prepared" in capsys.readouterr().err
    assert before == {n: os.stat(os.path.join(data_dir, n)).st_mtime_ns for n in os.listdir(data_dir)}


def test_interrupted_datagen_resumes_and_never_uses_a_partial_shard(tmp_path, monkeypatch):
    from t2t_relpos.data import preparation  # pylint: disable=import-outside-toplevel

    raw, data_dir, fresh_dir = tmp_path / "raw", tmp_path / "data", tmp_path / "fresh"
    make_raw(raw)
    write_shard = shards._write_shard  # pylint: disable=protected-access
    written = []

    def crash_on_third(path, pairs):
        if len(written) == 2:  # Dies half-way through the third shard, as a killed process would.
            with open(preparation.partial_path(path), "wb") as f:
                f.write(b"half a shard")
            raise KeyboardInterrupt
        written.append(path)
        write_shard(path, pairs)

    monkeypatch.setattr(shards, "_write_shard", crash_on_third)
    problem = registry.problem("translate_local")
    with pytest.raises(KeyboardInterrupt):
        problem.generate_data(str(data_dir), str(raw))
    assert sorted(os.listdir(data_dir)) == ["translate_local-train-00000.tfrecord",
                                            "translate_local-train-00001.tfrecord",
                                            os.path.basename(preparation.partial_path(
                                                str(data_dir / "translate_local-train-00002.tfrecord"))),
                                            "translate_local.datagen.json"]
    with pytest.raises(errors.DataError, match="no vocabulary"):
        problem.dataset("train", str(data_dir))
    with pytest.raises(errors.DataError, match="no prepared train data.*t2t-relpos-datagen --problem=translate_local"):
        shards.shard_paths(str(data_dir), "translate_local", "train", problem.datagen_hint(str(data_dir)))

    monkeypatch.setattr(shards, "_write_shard", write_shard)
    stats = {n: os.stat(data_dir / n) for n in written}
    preparation.prepare(registry.problem("translate_local"), str(data_dir), str(raw))
    for name, stat in stats.items():  # Finished shards were kept, not rewritten.
        assert os.stat(data_dir / name).st_mtime_ns == stat.st_mtime_ns
    assert not [n for n in os.listdir(data_dir) if ".incomplete" in n]  # The partial shard was removed.

    preparation.prepare(registry.problem("translate_local"), str(fresh_dir), str(raw))
    resumed, fresh = sorted(os.listdir(data_dir)), sorted(os.listdir(fresh_dir))
    assert resumed == fresh
    for name in fresh:
        if not name.endswith(".json"):
            assert (data_dir / name).read_bytes() == (fresh_dir / name).read_bytes(), name


def test_settings_file_names_files_and_checks_keys(tmp_path):
    raw = tmp_path / "raw"
    pairs = data.pairs(60, seed=4, other=data.FRENCH)
    data.write_lines(raw / "corpus" / "en.txt.gz", [s for s, _ in pairs[:50]])
    data.write_lines(raw / "corpus" / "fr.txt", [t for _, t in pairs[:50]])
    data.write_lines(raw / "valid.tsv", [f"{s}\t{t}" for s, t in pairs[50:]])
    settings = {"train": ["corpus/en.txt.gz", "corpus/fr.txt"], "dev": "valid.tsv", "vocab_size": 400}
    (raw / "translate_local.json").write_text(json.dumps(settings))
    problem = registry.problem("translate_local")
    problem.generate_data(str(tmp_path / "data"), str(raw))
    assert decoded(problem, "eval", str(tmp_path / "data")) == pairs[50:]
    assert shards.load_manifest(str(tmp_path / "data"), "translate_local", "test") is None  # Test is optional.
    with pytest.raises(errors.DataError, match="has no test data"):
        problem.dataset("test", str(tmp_path / "data"))

    (raw / "translate_local.json").write_text(json.dumps(dict(settings, vocab_size=500)))
    with pytest.raises(errors.DataError, match="was prepared for translate_local with"):
        problem.generate_data(str(tmp_path / "data"), str(raw))  # Even though everything is prepared.
    problem.generate_data(str(tmp_path / "data"), None)  # Without the raw data: what was prepared stands.
    (raw / "translate_local.json").write_text(json.dumps(dict(settings, vocab_sise=500)))
    with pytest.raises(errors.DataError, match=r"unknown settings \['vocab_sise'\]"):
        problem.generate_data(str(tmp_path / "other"), str(raw))
    (raw / "translate_local.json").write_text(json.dumps(dict(settings, dev=["valid.tsv", "absent.txt"])))
    with pytest.raises(errors.DataError, match="absent.txt"):
        problem.generate_data(str(tmp_path / "other"), str(raw))


@pytest.mark.parametrize("files, fragment", [
    ({}, "no train or dev data"),
    ({"train.src": ["a"], "dev.tsv": ["a\tb"]}, r"train.tgt \(or .gz\) is missing"),
    ({"train.src": ["a", "b"], "train.tgt": ["x"], "dev.tsv": ["a\tb"]}, "ends after 1 lines"),
    ({"train.tsv": ["a\tb", "no tab here"], "dev.tsv": ["a\tb"]}, "line 2 has 0 tabs"),
    ({"train.tsv": ["a\tb"], "train.src": ["a"], "train.tgt": ["b"], "dev.tsv": ["a\tb"]}, "keep one form"),
])
def test_bad_or_missing_local_data_is_a_clear_error(tmp_path, files, fragment):
    for name, lines in files.items():
        data.write_lines(tmp_path / "raw" / name, lines)
    os.makedirs(tmp_path / "raw", exist_ok=True)
    with pytest.raises(errors.DataError, match=fragment) as error:
        registry.problem("translate_local").generate_data(str(tmp_path / "data"), str(tmp_path / "raw"))
    if not files:
        assert "train.src + train.tgt" in str(error.value) and "translate_local.json" in str(error.value)


def test_invalid_utf8_names_file_and_line(tmp_path):
    raw = tmp_path / "raw"
    data.write_lines(raw / "dev.tsv", ["a\tb"])
    data.write_lines(raw / "train.src", ["fine", "also fine"])
    (raw / "train.tgt").write_bytes(b"gut\n\xff\xfekaputt\n")
    with pytest.raises(errors.DataError, match=r"train.tgt: line 2 is not valid UTF-8"):
        registry.problem("translate_local").generate_data(str(tmp_path / "data"), str(raw))


def test_unprepared_data_dir_says_how_to_prepare(tmp_path):
    problem = registry.problem("translate_local")
    with pytest.raises(errors.DataError, match="t2t-relpos-datagen --problem=translate_local"):
        problem.vocab_sizes(str(tmp_path))
    with pytest.raises(errors.DataError, match="needs --data_dir"):
        problem.vocab_sizes(None)


def test_tokenizing_in_batches_gives_each_record_its_own_ids_in_order(prepared):
    """The input pipeline parses and tokenizes records a batch at a time (shards.PARSE_BATCH), crossing batch
    boundaries and epochs: each example must still be its own record's text, tokenized alone, EOS appended."""
    from t2t_relpos.problems import translate  # pylint: disable=import-outside-toplevel

    problem, data_dir, _, _ = prepared
    encoder = problem.feature_encoders(data_dir)["inputs"]
    paths = shards.shard_paths(data_dir, problem.name, "train", "")
    count = 2 * shards.PARSE_BATCH + 37  # Past two batch boundaries and the end of the first epoch (150).
    records = translate._training_records(paths, 3, 1, 0).take(count)  # pylint: disable=protected-access
    want = []
    for record in records.as_numpy_iterator():
        example = shards.tf.train.Example.FromString(record)
        want.append(tuple(tuple(encoder.encode(example.features.feature[key].bytes_list.value[0].decode("utf-8")))
                          + (problem_lib.EOS_ID,) for key in ("inputs", "targets")))
    got = [(tuple(e["inputs"]), tuple(e["targets"]))
           for e in problem.dataset("train", data_dir, seed=3).take(count).as_numpy_iterator()]
    assert got == want


def _without_ids(data_dir, copy):
    """A copy of a prepared data directory as it was before ids shards existed."""
    import shutil  # pylint: disable=import-outside-toplevel

    shutil.copytree(data_dir, copy)
    for name in os.listdir(copy):
        if ".ids" in name:
            os.remove(os.path.join(copy, name))
    return str(copy)


def test_ids_shards_give_the_examples_and_batches_of_tokenizing_the_text(prepared, tmp_path, capsys):
    from t2t_relpos.data import id_shards, pipeline  # pylint: disable=import-outside-toplevel

    problem, data_dir, _, _ = prepared
    digest = id_shards.vocab_digest(problem.vocab_path(data_dir))
    assert len(id_shards.usable_paths(data_dir, problem.name, "train", digest)) == 4
    text_dir = _without_ids(data_dir, tmp_path / "text")
    assert id_shards.usable_paths(text_dir, problem.name, "train", digest) is None
    hparams = registry.hparams("transformer_cpu_rel").parse("batch_size=96,max_length=48")

    def read(directory):
        out = {}
        for split, count in (("train", 2 * shards.PARSE_BATCH + 37), ("eval", -1), ("test", -1)):
            examples = problem.dataset(split, directory, seed=3).take(count).as_numpy_iterator()
            out[split] = [(tuple(e["inputs"]), tuple(e["targets"])) for e in examples]
        batches = pipeline.input_dataset(problem, hparams, "train", directory, seed=1).take(12)
        out["batches"] = [(b["inputs"].numpy().tolist(), b["targets"].numpy().tolist()) for b in batches]
        return out

    from_ids, from_text = read(data_dir), read(text_dir)
    assert "no ids for this vocabulary" in capsys.readouterr().err  # Training without them says so.
    assert len(from_ids["train"]) == 2 * shards.PARSE_BATCH + 37 and len(from_ids["test"]) == 11
    assert from_ids == from_text


def test_ids_of_another_vocabulary_are_never_read_and_datagen_replaces_them(prepared, tmp_path, capsys):
    from t2t_relpos.data import id_shards  # pylint: disable=import-outside-toplevel

    problem, data_dir, raw, _ = prepared
    copy = _without_ids(data_dir, tmp_path / "data")
    capsys.readouterr()
    problem.generate_data(copy, raw)  # Prepared before ids shards existed: datagen adds them.
    assert "writing the train, eval, test pairs as ids" in capsys.readouterr().err
    digest = id_shards.vocab_digest(problem.vocab_path(copy))
    paths = id_shards.usable_paths(copy, problem.name, "train", digest)
    assert [os.path.basename(p) for p in paths] == [
        f"translate_local-train-{i:05d}.ids-{digest[:12]}.tfrecord" for i in range(4)]
    assert id_shards.usable_paths(copy, problem.name, "train", "0" * 64) is None

    # The ids of an earlier vocabulary: their manifest does not match, and their files go when datagen runs.
    manifest = id_shards.manifest_path(copy, problem.name, "train")
    with open(manifest, encoding="utf-8") as f:
        written = json.load(f)
    stale = os.path.join(copy, "translate_local-train-00000.ids-0123456789ab.tfrecord")
    with open(stale, "wb") as f:
        f.write(b"ids of another vocabulary")
    with open(manifest, "w", encoding="utf-8") as f:
        json.dump({**written, "vocab_sha256": "0123456789ab" + "0" * 52}, f)
    assert id_shards.usable_paths(copy, problem.name, "train", digest) is None
    want = [tuple(e["targets"]) for e in problem.dataset("test", copy).as_numpy_iterator()]
    problem.generate_data(copy, raw)
    assert "writing the train pairs as ids" in capsys.readouterr().err
    assert not os.path.exists(stale) and id_shards.usable_paths(copy, problem.name, "train", digest) == paths
    assert [tuple(e["targets"]) for e in problem.dataset("test", copy).as_numpy_iterator()] == want

    # Text rewritten since, with as many pairs per shard: its old ids are not read, and datagen replaces them.
    text_shard = os.path.join(copy, shards.load_manifest(copy, problem.name, "test")["shards"][0]["file"])
    records = list(shards.tf.data.TFRecordDataset(text_shard).as_numpy_iterator())
    with shards.tf.io.TFRecordWriter(text_shard) as writer:
        for record in reversed(records):
            writer.write(record)
    assert id_shards.usable_paths(copy, problem.name, "test", digest) is None
    assert [tuple(e["targets"]) for e in problem.dataset("test", copy).as_numpy_iterator()] == want[::-1]
    problem.generate_data(copy, raw)
    assert "writing the test pairs as ids" in capsys.readouterr().err
    assert [tuple(e["targets"]) for e in problem.dataset("test", copy).as_numpy_iterator()] == want[::-1]


def test_the_pipeline_batches_chunks_as_it_batched_examples_one_by_one(prepared):
    """`input_dataset` takes a translation problem's parsed chunks whole; unshuffled, the batches are those
    of the same examples fed one at a time, for eval and for the endless training stream."""
    from t2t_relpos.data import pipeline  # pylint: disable=import-outside-toplevel

    problem, data_dir, _, _ = prepared
    hparams = registry.hparams("transformer_cpu_rel").parse("batch_size=96,max_length=48")

    def listed(batches, count=-1):
        return [(b["inputs"].numpy().tolist(), b["targets"].numpy().tolist()) for b in batches.take(count)]

    for split, count in (("eval", -1), ("train", 40)):
        training = split == "train"
        chunked = pipeline.input_dataset(problem, hparams, split, data_dir, seed=1, shuffle_buffer=0)
        one_by_one = pipeline.batches_of(problem.dataset(split, data_dir, seed=1), hparams, training, seed=1,
                                         shuffle_buffer=0, max_eval_length=problem.max_eval_length)
        assert listed(chunked, count) == listed(one_by_one, count)
    # Shuffled, the training stream is another order of the same examples, fixed by the seed.
    first = listed(pipeline.input_dataset(problem, hparams, "train", data_dir, seed=1), 40)
    assert first == listed(pipeline.input_dataset(problem, hparams, "train", data_dir, seed=1), 40)
    assert first != listed(pipeline.input_dataset(problem, hparams, "train", data_dir, seed=1, shuffle_buffer=0), 40)


@pytest.mark.parametrize("num_shards", [1, 2, 3, 5])
def test_each_worker_reads_each_of_its_records_once_an_epoch(tmp_path, num_shards):
    """Four shard files of 30 records: every worker's epoch is its share, each record once, and the workers'
    shares make the whole (with more workers than files, of the stream's first epoch). Before, a worker with
    fewer files than the interleave's cycle opened one file in several slots at once (each record 2-4 times in a
    row) and one worker's epochs overlapped (12 of 120 twice)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from t2t_relpos.problems import translate  # pylint: disable=import-outside-toplevel

    paths = []
    for f in range(4):
        paths.append(str(tmp_path / f"shard-{f}"))
        with tf.io.TFRecordWriter(paths[-1]) as writer:
            for r in range(30 if f < 3 else 29):  # One file shorter: epochs whose length is no multiple.
                writer.write(f"{f}:{r}".encode())
    total = 4 * 30 - 1
    shares = []
    for index in range(num_shards):
        share = total // num_shards + (index < total % num_shards) if num_shards > len(paths) else \
            sum(30 if f < 3 else 29 for f in range(index, 4, num_shards))
        records = translate._training_records(paths, 7, num_shards, index)  # pylint: disable=protected-access
        first, second = [list(records.skip(e * share).take(share).as_numpy_iterator()) for e in (0, 1)]
        assert len(set(first)) == share, (index, len(set(first)), share)
        if num_shards <= len(paths):  # Files of its own: each epoch is the same share again.
            assert set(second) == set(first)
        shares.append(set(first))
    assert set().union(*shares) == {f"{f}:{r}".encode() for f in range(4) for r in range(30 if f < 3 else 29)}
    assert sum(len(s) for s in shares) == total


def test_a_byte_order_mark_is_not_text(tmp_path):
    """Windows editors start UTF-8 files with a byte-order mark: it was read as the first sentence's first
    characters (six ids instead of two for "A man") in training data, `--decode_from_file` and references."""
    import gzip  # pylint: disable=import-outside-toplevel

    from t2t_relpos.cli import decode_io  # pylint: disable=import-outside-toplevel
    from t2t_relpos.data import parallel_text  # pylint: disable=import-outside-toplevel

    text = "\ufeffA man\r\nein Mann \ufeff\n"  # A mark inside a line is text, and stays.
    plain, zipped = tmp_path / "a.txt", tmp_path / "a.txt.gz"
    plain.write_bytes(text.encode("utf-8"))
    zipped.write_bytes(gzip.compress(text.encode("utf-8")))
    for path in (plain, zipped):
        assert list(parallel_text.read_lines(str(path))) == ["A man", "ein Mann \ufeff"]
    assert decode_io.read_lines(str(plain)) == ["A man", "ein Mann \ufeff"]


def test_datagen_prepares_a_split_added_later_and_refuses_changed_raw_files(tmp_path, capsys):
    """Before, a prepared data_dir was "already prepared" whatever the raw files had become: a test set added
    later was never prepared (while reading it said to run datagen again), and replaced training or dev files
    left the old text in the shards without a word."""
    raw, data_dir = tmp_path / "raw", tmp_path / "data"
    make_raw(raw)
    test_files = {name: (raw / name).read_bytes() for name in ("test.src", "test.tgt")}
    for name in test_files:
        os.remove(raw / name)
    problem = registry.problem("translate_local")
    problem.generate_data(str(data_dir), str(raw))
    with pytest.raises(errors.DataError, match="has no test data"):
        problem.dataset("test", str(data_dir))
    vocabulary = (data_dir / "translate_local.sentencepiece.model").read_bytes()

    for name, content in test_files.items():
        (raw / name).write_bytes(content)
    problem.generate_data(str(data_dir), str(raw))
    assert "already prepared" not in capsys.readouterr().err
    assert sum(1 for _ in problem.dataset("test", str(data_dir))) == 11
    assert (data_dir / "translate_local.sentencepiece.model").read_bytes() == vocabulary  # Kept as it was.
    problem.generate_data(str(data_dir), str(raw))
    assert "already prepared" in capsys.readouterr().err

    data.write_lines(raw / "dev.tsv", ["other\tandere"])
    with pytest.raises(errors.DataError, match=r"translate_local's eval split prepared from other raw data than .* "
                                               r"\(.*dev.tsv changed\); use another --data_dir"):
        problem.generate_data(str(data_dir), str(raw))


def test_training_pairs_with_an_empty_side_are_left_out_and_counted(tmp_path, capsys):
    raw, data_dir = tmp_path / "raw", tmp_path / "data"
    make_raw(raw)
    train = data.pairs(150, seed=1) + [("", "nur Ziel"), ("only source", "  ")]
    data.write_lines(raw / "train.src", [s for s, _ in train])
    data.write_lines(raw / "train.tgt.gz", [t for _, t in train])
    registry.problem("translate_local").generate_data(str(data_dir), str(raw))
    assert "left out 2 training pairs with an empty side" in capsys.readouterr().err
    assert shards.load_manifest(str(data_dir), "translate_local", "train")["examples"] == 150


def test_reading_ids_or_text_converts_no_function_with_autograph(prepared, tmp_path, autograph_conversions):
    from t2t_relpos.data import pipeline  # pylint: disable=import-outside-toplevel

    problem, data_dir, _, _ = prepared
    hparams = registry.hparams("transformer_cpu_rel").parse("batch_size=96,max_length=48")
    for directory in (data_dir, _without_ids(data_dir, tmp_path / "text")):
        for split in ("train", "eval"):
            assert next(iter(pipeline.input_dataset(problem, hparams, split, directory, seed=1)))
        assert next(problem.dataset("train", directory, seed=1).as_numpy_iterator())
    assert not autograph_conversions, autograph_conversions
