"""Language-model problems (`problems/languagemodel.py`): windows of a packed stream, datagen of the local text
(SentencePiece and characters) and of Tiny Shakespeare (a small stand-in the tests write), targets-only batches,
and one-line errors for bad input."""

import gzip
import json

import numpy as np
import pytest
import tensorflow as tf

import translation_data as data
from t2t_relpos import errors, registry
from t2t_relpos.data import character_vocab, pipeline
from t2t_relpos.hparams import hparams_lib
from t2t_relpos.problems import languagemodel
from t2t_relpos.problems import problem as problem_lib

EOS = problem_lib.EOS_ID


def _windows(dataset, count=-1):
    return [e["targets"].tolist() for e in dataset.take(count).as_numpy_iterator()]


def _hparams(max_length, batch_size=256):
    return hparams_lib.HParams(max_length=max_length, batch_size=batch_size, min_length_bucket=8,
                               length_bucket_step=1.1)


def _one_line(error):
    message = str(error.value)
    assert message and "\n" not in message, message
    return message


# -- windows of a stream ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("num_shards", [1, 3])
def test_eval_windows_hold_every_token_once_in_order(num_shards):
    stream = np.arange(2, 1003)  # 1001 tokens: 15 windows of 64 and one of 41.
    shards = [_windows(languagemodel.windows(stream, 64, False, num_shards=num_shards, shard_index=i))
              for i in range(num_shards)]
    merged = [w for group in zip(*[s + [None] * (16 - len(s)) for s in shards]) for w in group if w is not None]
    assert [len(w) for w in merged] == [64] * 15 + [41]
    assert sum(merged, []) == stream.tolist()
    assert _windows(languagemodel.windows(stream, 64, False)) == merged  # The same on every call.


def test_training_epochs_are_shifted_shuffled_seeded_and_hold_every_token_once():
    n, window = 300, 32  # 10 windows an epoch: 9 of 32 and one of 12.
    stream = np.arange(n)
    taken = _windows(languagemodel.windows(stream, window, True, seed=5), 40)
    assert taken == _windows(languagemodel.windows(stream, window, True, seed=5), 40)
    assert taken != _windows(languagemodel.windows(stream, window, True, seed=6), 40)
    shifts = set()
    for epoch in range(4):
        windows = taken[10 * epoch:10 * (epoch + 1)]
        assert sorted(len(w) for w in windows) == [12] + [32] * 9
        assert sorted(sum(windows, [])) == stream.tolist()  # Every token once, across the ring's end too.
        assert all(np.all(np.diff(w) % n == 1) for w in windows)  # Contiguous in the ring.
        shifts.add(min(w[0] % window for w in windows if len(w) == window))
    assert len(shifts) > 1  # Boundaries move between epochs (all equal: a chance of 1 in 32 ** 3).
    # Two workers split each epoch between them.
    halves = [_windows(languagemodel.windows(stream, window, True, seed=5, num_shards=2, shard_index=i), 5)
              for i in range(2)]
    assert sorted(sum(halves[0] + halves[1], [])) == stream.tolist()


# -- local text -------------------------------------------------------------------------------------------------

TRAIN_DOCUMENTS = ["the cat sat\non the mat", "a dog ran", "über  alles,\n  spaced\tline"]
DEV_DOCUMENTS = ["the dog sat", "a cat ran on ß"]  # "ß" is not in the training text.


def _write_local(raw, train=TRAIN_DOCUMENTS, dev=DEV_DOCUMENTS):
    # Blank lines, several or of white space only, separate documents.
    data.write_lines(raw / "train.txt", "\n\n   \n\n".join(train).split("\n") + [""])
    data.write_lines(raw / "dev.txt.gz", "\n\n".join(dev).split("\n"))


@pytest.fixture(scope="module")
def characters(tmp_path_factory):
    raw, data_dir = tmp_path_factory.mktemp("raw"), str(tmp_path_factory.mktemp("data"))
    _write_local(raw)
    problem = registry.problem("languagemodel_local_characters")
    problem.generate_data(data_dir, str(raw))
    return problem, data_dir, raw


def test_character_datagen_packs_documents_with_eos_and_counts_unknown_characters(characters, capfd):
    problem, data_dir, raw = characters
    assert problem.characters and not problem.has_inputs
    encoder = problem.feature_encoders(data_dir)["targets"]
    assert set(problem.feature_encoders(data_dir)) == {"targets"} and set(problem.vocabulary(data_dir)) == {"targets"}
    assert "".join(encoder.characters) == "".join(sorted(set("".join(TRAIN_DOCUMENTS))))
    assert problem.vocab_sizes(data_dir) == (None, character_vocab.FIRST_ID + len(encoder.characters))
    for split, documents in (("train", TRAIN_DOCUMENTS), ("eval", DEV_DOCUMENTS)):
        expected = sum((encoder.encode(d) + [EOS] for d in documents), [])
        assert problem.tokens(split, data_dir).tolist() == expected
    stream = problem.tokens("eval", data_dir).tolist()
    assert stream.count(character_vocab.UNK_ID) == 1
    assert encoder.decode(stream) == DEV_DOCUMENTS[0]
    assert encoder.decode(stream[stream.index(EOS) + 1:]) == "a cat ran on \ufffd"
    with open(problem._record_path(data_dir), encoding="utf-8") as f:
        record = json.load(f)
    assert record["splits"]["eval"]["unknown"] == 1 and record["vocabulary"] == encoder.fingerprint()
    # The graph tokenizer gives the ids the encoder gives.
    text = "über the\nmat ß"
    assert encoder.graph_tokenizer().tokenize(tf.constant([text])).to_list() == [encoder.encode(text)]
    # A test split added later is prepared with the vocabulary as it is; then nothing is left to do.
    with pytest.raises(errors.DataError, match="has no test data"):
        problem.dataset("test", data_dir)
    data.write_lines(raw / "test.txt", ["the mat"])
    problem.generate_data(data_dir, str(raw))
    problem.generate_data(data_dir, str(raw))
    err = capfd.readouterr().err
    assert "prepared in" in err and "already prepared" in err
    assert encoder.decode(problem.tokens("test", data_dir)) == "the mat"
    assert problem.feature_encoders(data_dir)["targets"].fingerprint() == encoder.fingerprint()


def test_eval_windows_of_a_problem_have_the_hparams_length(characters):
    problem, data_dir, _ = characters
    windows = _windows(problem.dataset("eval", data_dir, hparams=_hparams(7)))
    assert [len(w) for w in windows[:-1]] == [7] * (len(windows) - 1) and 1 <= len(windows[-1]) <= 7
    assert sum(windows, []) == problem.tokens("eval", data_dir).tolist()
    # Without hparams, DEFAULT_WINDOW: longer than this training text, so each epoch is the whole ring once.
    stream = problem.tokens("train", data_dir).tolist()
    assert len(stream) < languagemodel.DEFAULT_WINDOW
    assert all(sorted(w) == sorted(stream) for w in _windows(problem.dataset("train", data_dir, seed=2), 3))


def test_the_pipeline_batches_targets_alone(characters):
    problem, data_dir, _ = characters
    hparams = _hparams(8, batch_size=32)
    train = list(pipeline.input_dataset(problem, hparams, "train", data_dir, seed=1).take(3).as_numpy_iterator())
    assert all(set(b) == {"targets"} and b["targets"].dtype == np.int32 and b["targets"].shape[1] <= 8
               and b["targets"].size <= 32 for b in train)
    evaluated = list(pipeline.input_dataset(problem, hparams, "eval", data_dir).as_numpy_iterator())
    assert all(set(b) == {"targets"} for b in evaluated)
    assert sum(int((b["targets"] != 0).sum()) for b in evaluated) == len(problem.tokens("eval", data_dir))


def test_changed_raw_text_is_refused(characters, tmp_path):
    _, _, raw = characters
    problem = registry.problem("languagemodel_local_characters")
    data_dir = str(tmp_path / "data")
    _write_local(tmp_path)
    problem.generate_data(data_dir, str(tmp_path))
    _write_local(tmp_path, train=TRAIN_DOCUMENTS + ["one more"])
    with pytest.raises(errors.DataError, match="prepared from other text") as error:
        problem.generate_data(data_dir, str(tmp_path))
    _one_line(error)


def test_sentencepiece_datagen_round_trips_the_documents(tmp_path):
    raw, data_dir = tmp_path / "raw", str(tmp_path / "data")
    train = [" ".join(data.sentences(data.ENGLISH, 3, seed)).replace(" the ", "\nthe ") for seed in range(60)]
    dev = ["the small dog\nreads a  book", "Größe 🙂 déjà"]  # Unseen characters: byte pieces, no loss.
    _write_local(raw, train, dev)
    (raw / "languagemodel_local.json").write_text(json.dumps({"vocab_size": 300}))
    problem = registry.problem("languagemodel_local")
    problem.generate_data(data_dir, str(raw))
    encoder = problem.feature_encoders(data_dir)["targets"]
    assert not problem.characters and set(problem.feature_encoders(data_dir)) == {"targets"}
    assert problem.vocab_sizes(data_dir)[0] is None and 260 < encoder.vocab_size <= 300
    stream = problem.tokens("eval", data_dir).tolist()
    first = stream.index(EOS)
    assert [encoder.decode(stream[:first]), encoder.decode(stream[first + 1:])] == dev and stream[-1] == EOS
    assert stream == sum((encoder.encode(d) + [EOS] for d in dev), [])
    batches = list(pipeline.input_dataset(problem, _hparams(16), "eval", data_dir).as_numpy_iterator())
    assert all(set(b) == {"targets"} for b in batches)


def test_shakespeare_is_one_document_split_90_10(tmp_path):
    text = "".join(f"SPEAKER {i}:\nWords, words.\n\n" for i in range(40))  # 1,040 characters.
    (tmp_path / "tinyshakespeare.txt.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    problem = registry.problem("languagemodel_shakespeare_characters")
    data_dir = str(tmp_path / "data")
    problem.generate_data(data_dir, str(tmp_path))
    encoder = problem.feature_encoders(data_dir)["targets"]
    cut = int(len(text) * 0.9)
    assert problem.characters and encoder.decode(problem.tokens("train", data_dir)) == text[:cut]
    assert problem.tokens("train", data_dir).tolist() == encoder.encode(text[:cut]) + [EOS]
    assert problem.tokens("eval", data_dir).tolist() == encoder.encode(text[cut:]) + [EOS]
    assert problem.tokens("test", data_dir).tolist() == problem.tokens("eval", data_dir).tolist()
    # nanoGPT's name for the file is read as well; two copies are one too many.
    (tmp_path / "input.txt").write_text(text)
    with pytest.raises(errors.DataError, match="keep one") as error:
        problem.generate_data(str(tmp_path / "other"), str(tmp_path))
    _one_line(error)


# -- errors ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, files, error, fragment", [
    ("languagemodel_local_characters", {"train.txt": b"\n  \n\n", "dev.txt": b"a\n"}, errors.DataError,
     r"train\.txt has no text"),
    ("languagemodel_local_characters", {"train.txt": b"a b\n"}, errors.DataError,
     r"no dev\.txt in .*; put train\.txt and dev\.txt"),
    ("languagemodel_local", {"train.txt.gz": b"not gzip", "dev.txt": b"a\n"}, errors.DataError,
     r"train\.txt\.gz: not readable as gzip"),
    ("languagemodel_local_characters", {"train.txt": b"a\n", "train.txt.gz": gzip.compress(b"a\n"),
                                        "dev.txt": b"a\n"}, errors.DataError, "keep one"),
    ("languagemodel_shakespeare_characters", {}, errors.DataError,
     r"copy tinyshakespeare\.txt\.gz there \(public: github\.com/karpathy/char-rnn"),
    ("languagemodel_shakespeare_characters", {"tinyshakespeare.txt.gz": gzip.compress(b"x" * 1000)[:-20]},
     errors.DataError, "tinyshakespeare.txt.gz: the gzip data ends early"),
    ("languagemodel_local", {"languagemodel_local.json": b'{"vocab_size": 10}'}, errors.DataError,
     "vocab_size must be an integer >= 260"),
])
def test_bad_raw_data_is_a_one_line_error(tmp_path, name, files, error, fragment):
    raw = tmp_path / "raw"
    raw.mkdir()
    for file_name, content in files.items():
        (raw / file_name).write_bytes(content)
    with pytest.raises(error, match=fragment) as raised:
        problem = registry.problem(name)
        problem.check_settings(str(raw))
        problem.generate_data(str(tmp_path / "data"), str(raw))
    _one_line(raised)


def test_a_window_below_one_and_unprepared_data_are_one_line_errors(characters, tmp_path):
    problem, data_dir, _ = characters
    with pytest.raises(errors.HParamsError, match="max_length=0: languagemodel_local_characters") as error:
        problem.dataset("eval", data_dir, hparams=_hparams(0))
    _one_line(error)
    with pytest.raises(errors.HParamsError, match="max_length=-3"):
        problem._dataset("eval", data_dir, None, 1, 0, window=-3)
    with pytest.raises(errors.DataError, match="run t2t-relpos-datagen --problem=languagemodel_local_characters"):
        problem.dataset("eval", str(tmp_path))
    with pytest.raises(errors.DataError, match="needs --data_dir"):
        problem.vocab_sizes(None)


def test_targets_alone_are_checked_against_has_inputs():
    targets = tf.data.Dataset.from_tensors({"targets": np.array([3, 1], np.int64)})
    both = tf.data.Dataset.from_tensors({"inputs": np.array([3], np.int32), "targets": np.array([3], np.int32)})
    checked = problem_lib._check_element_spec(targets, "X", has_inputs=False)
    assert checked.element_spec["targets"].dtype == tf.int32
    with pytest.raises(errors.DataError, match="'inputs' and 'targets'"):
        problem_lib._check_element_spec(targets, "X")
    with pytest.raises(errors.DataError, match="no 'inputs'"):
        problem_lib._check_element_spec(both, "X", has_inputs=False)
