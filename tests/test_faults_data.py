"""Data preparation under faults (issue 46): datagen killed and rerun on changed raw data, a full disk, a read-only
or misnamed --data_dir, damaged corpora and bAbI files, an unreadable vocabulary or data directory, lines too long
for SentencePiece. Each ends in one clear line (or, where nothing needs writing, in success), never in a traceback
or in data silently mixed or half-made.

CI runs as root, for whom `chmod` makes nothing unreadable or read-only: the faults are injected where the data
code meets the system (a write redirected to /dev/full, which fails with ENOSPC as a full disk does; errors that
a read-only file system or a missing permission gives, raised by the call that would meet them).
"""

import builtins
import errno
import gzip
import json
import os
import re

import pytest
import tensorflow as tf

import translation_data as data
from t2t_relpos import errors, registry
from t2t_relpos.data import id_shards, preparation, shards
from t2t_relpos.problems import babi_text
from test_cli import assert_usage_error, call_tool

NAME = "translate_local"
SETTINGS = {"vocab_size": 400, "examples_per_shard": 20}


def make_raw(directory, train=None):
    """Tiny translate_local raw data: 60 training pairs (3 shards of 20), 4 dev pairs in a TSV file."""
    train = train or data.pairs(60, seed=1)
    data.write_lines(directory / "train.src", [s for s, _ in train])
    data.write_lines(directory / "train.tgt", [t for _, t in train])
    data.write_lines(directory / "dev.tsv", [f"{s}\t{t}" for s, t in data.pairs(4, seed=2)])
    (directory / "translate_local.json").write_text(json.dumps(SETTINGS))
    return train


def datagen(data_dir, raw):
    return call_tool("t2t-relpos-datagen", f"--problem={NAME}", f"--data_dir={data_dir}", f"--tmp_dir={raw}")


def assert_one_line(result, *fragments):
    """Status 2 and one `error:` line, the last, holding `fragments` (progress lines may come before it)."""
    assert_usage_error(result)
    lines = result.stderr.strip().splitlines()
    assert [line for line in lines if "error:" in line] == lines[-1:], result.stderr
    for fragment in fragments:
        assert fragment in lines[-1], result.stderr


def partial_files(directory):
    return [n for n in os.listdir(directory) if preparation.PARTIAL in n or ".partial" in n]


def split_pairs(data_dir, split="train"):
    manifest = shards.load_manifest(str(data_dir), NAME, split)
    return [pair for shard in manifest["shards"] for pair in shards.read_pairs(os.path.join(data_dir, shard["file"]))]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    raw, data_dir = tmp_path_factory.mktemp("raw"), tmp_path_factory.mktemp("data")
    make_raw(raw)
    registry.problem(NAME).generate_data(str(data_dir), str(raw))
    return data_dir, raw


# -- faults injected ------------------------------------------------------------------------------------------
def _under(directory):
    root = os.path.abspath(directory) + os.sep
    return lambda path: isinstance(path, (str, os.PathLike)) and os.path.abspath(os.fspath(path)).startswith(root)


def _writing(mode):
    return any(c in mode for c in "wax+")


def fill_disk(monkeypatch, chosen):
    """Writes to the files `chosen(path)` picks go to /dev/full, which fails them with ENOSPC as a full disk
    does: Python's `open` for writing and TensorFlow's `TFRecordWriter` (its ResourceExhaustedError)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here to fail writes with ENOSPC")
    real_open, real_writer = builtins.open, tf.io.TFRecordWriter

    def open_(file, mode="r", *args, **kwargs):
        return real_open("/dev/full" if _writing(mode) and chosen(file) else file, mode, *args, **kwargs)

    def writer(path, *args, **kwargs):
        return real_writer("/dev/full" if chosen(path) else path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(tf.io, "TFRecordWriter", writer)


def full_from_the_start(monkeypatch, directory):
    """`directory` on a disk that is full before the tool starts: a file can still be made there (a full disk
    has inodes left, as a full tmpfs does), but nothing written into it: Python's files, TensorFlow's writer
    (`fill_disk`) and `os.pwrite` (the lock file's) fail with ENOSPC."""
    inside = _under(directory)
    fill_disk(monkeypatch, inside)
    real_pwrite = os.pwrite

    def pwrite(fd, data, offset):
        if data and inside(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)


def make_read_only(monkeypatch, directory):
    """Every call that would create, change or remove a file in `directory` fails as on a read-only file system
    (EROFS; TensorFlow's writer with its PermissionDeniedError); reading works."""
    inside = _under(directory)
    real = {name: getattr(os, name) for name in ("open", "remove", "replace", "rename", "mkdir", "unlink")}
    real_open, real_writer = builtins.open, tf.io.TFRecordWriter

    def refuse(path):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))

    def os_open(path, flags, *args, **kwargs):
        if inside(path) and flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR | os.O_TRUNC):
            refuse(path)
        return real["open"](path, flags, *args, **kwargs)

    def changing(name):
        def call(path, *args, **kwargs):
            if inside(path) or (args and inside(args[0])):
                refuse(path)
            return real[name](path, *args, **kwargs)
        return call

    def open_(file, mode="r", *args, **kwargs):
        if _writing(mode) and inside(file):
            refuse(file)
        return real_open(file, mode, *args, **kwargs)

    def writer(path, *args, **kwargs):
        if inside(path):
            raise tf.errors.PermissionDeniedError(None, None, f"{path}; Read-only file system")
        return real_writer(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    for name in ("remove", "replace", "rename", "mkdir", "unlink"):
        monkeypatch.setattr(os, name, changing(name))
    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(tf.io, "TFRecordWriter", writer)


def deny(monkeypatch, chosen, stat=False):
    """Opening the paths `chosen(path)` picks fails with EACCES, as for files the user may not read; with `stat`,
    looking them up fails too, as for the files of a directory the user may not search."""
    real_open, real_stat = builtins.open, os.stat

    def refuse(path):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))

    def open_(file, *args, **kwargs):
        if chosen(file):
            refuse(file)
        return real_open(file, *args, **kwargs)

    def stat_(path, *args, **kwargs):
        if chosen(path):
            refuse(path)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_)
    if stat:
        monkeypatch.setattr(os, "stat", stat_)


# -- case 2: killed, raw data changed, rerun --------------------------------------------------------------------
def test_a_split_begun_from_other_raw_data_is_prepared_again_not_mixed(tmp_path, monkeypatch):
    """A datagen killed after 2 of the 3 training shards, the raw files then swapped (German -> English) and
    datagen run again: before, shards 0-1 stayed English -> German, shard 2 was German -> English, the record took
    the new fingerprints, exit 0."""
    raw, data_dir = tmp_path / "raw", tmp_path / "data"
    train = make_raw(raw)
    write_shard = shards._write_shard  # pylint: disable=protected-access

    def killed_at_the_third(path, pairs):
        if path.endswith("-00002.tfrecord"):
            raise KeyboardInterrupt  # As a kill would end it: the first two shards are done.
        write_shard(path, pairs)

    monkeypatch.setattr(shards, "_write_shard", killed_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        preparation.prepare(registry.problem(NAME), str(data_dir), str(raw))
    monkeypatch.undo()
    assert os.path.isfile(data_dir / f"{NAME}-train-00001.tfrecord")

    os.rename(raw / "train.src", raw / "swap")
    os.rename(raw / "train.tgt", raw / "train.src")
    os.rename(raw / "swap", raw / "train.tgt")
    result = datagen(data_dir, raw)
    assert result.returncode == 0, result.stderr
    assert "preparing it again from the start (2 shard files removed)" in result.stderr, result.stderr
    assert sorted(split_pairs(data_dir)) == sorted((target, source) for source, target in train)
    record = json.loads((data_dir / f"{NAME}.datagen.json").read_text())
    source = registry.problem(NAME).raw_sources(str(raw), ["train"], SETTINGS)["train"]
    assert record["sources"]["train"] == source.fingerprint()


# -- case 7: a full disk ----------------------------------------------------------------------------------------
def test_a_full_disk_is_one_line_leaves_nothing_half_made_and_the_rerun_works(tmp_path, monkeypatch):
    """Each kind of file datagen writes meets a full disk in turn (a text shard and an ids shard through
    TensorFlow's writer, a manifest, the vocabulary): one line naming it, no partial file, nothing under its final
    name; the next run resumes."""
    raw, data_dir = tmp_path / "raw", tmp_path / "data"
    train = make_raw(raw)
    failures = [(f"{NAME}-train-00002.tfrecord", "a shard"),
                (f"{NAME}-train.json", f"the manifest of {NAME}'s train split"),
                (f"{NAME}.sentencepiece.model", "the vocabulary"),
                (f"{NAME}-train-00001.ids-", "an ids shard")]
    for name, what in failures:
        monkeypatch.undo()
        fill_disk(monkeypatch, lambda path, name=name: os.path.basename(os.fspath(path)).startswith(name))
        result = datagen(data_dir, raw)
        assert_one_line(result, f"cannot write {what} to {data_dir / name}", "no space left on the device")
        assert not partial_files(data_dir), os.listdir(data_dir)
        assert not [n for n in os.listdir(data_dir) if n.startswith(name)], os.listdir(data_dir)
    monkeypatch.undo()
    result = datagen(data_dir, raw)
    assert result.returncode == 0 and "writing the train, eval pairs as ids" in result.stderr, result.stderr
    assert sorted(split_pairs(data_dir)) == sorted(train)
    digest = id_shards.vocab_digest(str(data_dir / f"{NAME}.sentencepiece.model"))
    assert id_shards.usable_paths(str(data_dir), NAME, "train", digest)
    assert sum(1 for _ in registry.problem(NAME).dataset("eval", str(data_dir))) == 4


def test_a_disk_full_before_datagen_starts_is_one_line_or_nothing_to_write(prepared, tmp_path, monkeypatch):
    """Full before datagen starts (the lock file's first write, not a shard, meets it): a prepared --data_dir needs
    nothing written and is accepted; an empty one is one line. Before, `os.pwrite` in the lock: a traceback."""
    data_dir, raw = prepared
    full_from_the_start(monkeypatch, data_dir)
    result = datagen(data_dir, raw)
    assert result.returncode == 0 and "data already prepared" in result.stderr, result.stderr

    empty = tmp_path / "empty"
    empty.mkdir()
    full_from_the_start(monkeypatch, empty)
    assert_one_line(datagen(empty, raw), f"cannot write the datagen record to {empty / NAME}.datagen.json: "
                                         "no space left on the device")
    assert not partial_files(empty), os.listdir(empty)


# -- case 8: a read-only --data_dir ------------------------------------------------------------------------------
def test_datagen_on_prepared_read_only_data_succeeds_and_on_unprepared_says_why_not(prepared, tmp_path,
                                                                                      monkeypatch):
    """A read-only --data_dir (a shared copy mounted read-only, --generate_data on every worker): when everything
    is prepared there is nothing to write and nothing to refuse; otherwise the first file to write is one line.
    Before, the datagen lock's file was an OSError traceback either way."""
    data_dir, raw = prepared
    make_read_only(monkeypatch, data_dir)
    result = datagen(data_dir, raw)
    assert result.returncode == 0 and "data already prepared" in result.stderr, result.stderr

    empty = tmp_path / "empty"
    empty.mkdir()
    make_read_only(monkeypatch, empty)
    assert_one_line(datagen(empty, raw), f"cannot write the datagen record to {empty / NAME}.datagen.json: "
                                         "read-only file system")


# -- case 9: --data_dir names a file -----------------------------------------------------------------------------
def test_a_data_dir_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "file").write_text("not a directory\n")
    assert_one_line(datagen(tmp_path / "file", tmp_path), f"--data_dir={tmp_path / 'file'} is a file, not a directory")


# -- case 10: damaged gzip corpora -------------------------------------------------------------------------------
@pytest.mark.parametrize("damage, fragment", [
    (lambda zipped: zipped[:len(zipped) // 2], r"the gzip data ends early, (after line [\d,]+|before its first line) "
                                               r"\(a truncated copy or download\?\)"),
    (lambda zipped: zipped[:30] + bytes(b ^ 0x55 for b in zipped[30:60]) + zipped[60:],
     r"damaged gzip data (after line [\d,]+|before its first line) \(Error -3 while decompressing data"),
    (lambda zipped: gzip.decompress(zipped), r"not readable as gzip before its first line \(Not a gzipped file"),
], ids=["truncated", "corrupt", "not-gzip"])
def test_a_damaged_gzip_corpus_is_one_line_naming_the_file_and_line(tmp_path, damage, fragment):
    raw = tmp_path / "raw"
    train = make_raw(raw, data.pairs(400, seed=5))
    os.remove(raw / "train.tgt")
    zipped = gzip.compress("".join(t + "\n" for _, t in train).encode("utf-8"), mtime=0)
    (raw / "train.tgt.gz").write_bytes(damage(zipped))
    result = datagen(tmp_path / "data", raw)
    assert_one_line(result, f"{raw / 'train.tgt.gz'}: ")
    assert re.search(fragment, result.stderr), result.stderr


def test_unreadable_raw_files_are_one_line(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    make_raw(raw)
    deny(monkeypatch, lambda path: os.fspath(path) == str(raw / "train.tgt"))
    assert_one_line(datagen(tmp_path / "data", raw), f"cannot read {raw / 'train.tgt'}: Permission denied")


def test_raw_files_that_are_directories_or_pipes_say_so(tmp_path):
    """Before, a `train.src` that is a directory or a FIFO was "missing": "train.tgt has no partner: train.src is
    missing", as if there were nothing there."""
    from t2t_relpos.data import parallel_text  # pylint: disable=import-outside-toplevel

    raw = tmp_path / "raw"
    make_raw(raw)
    problem = registry.problem(NAME)
    os.remove(raw / "train.src")
    (raw / "train.src").mkdir()
    with pytest.raises(errors.DataError, match=f"^{raw / 'train.src'} is a directory, not a file; datagen reads"):
        problem.raw_sources(str(raw), ["train"], SETTINGS)
    with pytest.raises(errors.DataError, match=f"^{raw / 'train.src'} is a directory, not a file$"):
        next(parallel_text.read_lines(str(raw / "train.src")))
    os.rmdir(raw / "train.src")
    os.mkfifo(raw / "train.src")
    with pytest.raises(errors.DataError, match="train.src is not a regular file .a named pipe"):
        problem.raw_sources(str(raw), ["train"], SETTINGS)
    with pytest.raises(errors.DataError, match="names a train file that is not a regular file .a named pipe, a device "
                                               "or a socket.: .*train.src"):
        problem.raw_sources(str(raw), ["train"], {**SETTINGS, "train": ["train.src", "train.tgt"]})


# -- case 11: malformed bAbI files -------------------------------------------------------------------------------
def write_babi(root):
    """qa1 .. qa20, train and test, of one story each (qa1 gzipped), in root/en."""
    os.makedirs(root / "en")
    story = "1 Mary went to the garden.\n2 Where is Mary? \tgarden\t1\n"
    for task, name in babi_text.TASKS.items():
        for split in ("train", "test"):
            path = root / "en" / f"qa{task}_{name}_{split}.txt"
            if task == 1:
                (root / "en" / f"{path.name}.gz").write_bytes(gzip.compress(story.encode() * 40, mtime=0))
            else:
                path.write_text(story)


@pytest.mark.parametrize("damage, fragment", [
    (("qa2_two-supporting-facts_train.txt", lambda text: text.replace(b"Mary went", b"Mary\xe9 went", 1)),
     "qa2_two-supporting-facts_train.txt: line 1 is not valid UTF-8 (byte 0xe9 at column 7)"),
    (("qa3_three-supporting-facts_test.txt", lambda text: text.replace(b"\tgarden", b"\tthe garden")),
     "qa3_three-supporting-facts_test.txt: line 2 has the answer 'the garden', with a space"),
    (("qa1_single-supporting-fact_train.txt.gz", lambda zipped: zipped[:-12]),
     "qa1_single-supporting-fact_train.txt.gz: the gzip data ends early, after line "),
], ids=["not-utf8", "answer-with-a-space", "truncated-gz"])
def test_malformed_babi_files_are_one_line_naming_the_file_and_line(tmp_path, damage, fragment):
    write_babi(tmp_path)
    name, change = damage
    path = tmp_path / "en" / name
    path.write_bytes(change(path.read_bytes()))
    result = call_tool("t2t-relpos-datagen", "--problem=babi_qa_concat_all_tasks_1k", f"--data_dir={tmp_path}")
    assert_one_line(result, fragment)


# -- case 17 and the unreadable --data_dir -----------------------------------------------------------------------
def test_an_unreadable_vocabulary_is_one_line(prepared, monkeypatch):
    data_dir, raw = prepared
    vocabulary = str(data_dir / f"{NAME}.sentencepiece.model")
    real_open = builtins.open

    def open_(file, *args, **kwargs):
        if os.fspath(file) == vocabulary:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), vocabulary)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_)
    assert_one_line(datagen(data_dir, raw), f"cannot read the vocabulary {vocabulary}: Permission denied")
    with pytest.raises(errors.DataError, match=f"cannot read the vocabulary {vocabulary}: Permission denied"):
        registry.problem(NAME).feature_encoders(str(data_dir))


def test_an_unreadable_data_dir_is_not_said_to_lack_its_vocabulary(prepared, monkeypatch):
    """It said "no vocabulary ...; run t2t-relpos-datagen first": advice that prepares the data again, or fails."""
    data_dir, _ = prepared
    deny(monkeypatch, _under(data_dir), stat=True)
    with pytest.raises(errors.DataError, match=f"cannot read --data_dir={data_dir}: Permission denied"):
        registry.problem(NAME).feature_encoders(str(data_dir))


# -- lines too long for SentencePiece ----------------------------------------------------------------------------
def test_a_corpus_of_lines_too_long_for_sentencepiece_is_not_told_to_set_vocab_size(tmp_path):
    raw = tmp_path / "raw"
    make_raw(raw, [(" ".join(source for source, _ in data.pairs(300, seed=i)),
                    " ".join(target for _, target in data.pairs(300, seed=i))) for i in range(3)])
    result = datagen(tmp_path / "data", raw)
    assert_one_line(result, "every one of the 6 sampled lines is longer than SentencePiece's max_sentence_length, "
                            "4192 bytes")
    assert "vocab_size" not in result.stderr



# -- a vocab_size that cannot work --------------------------------------------------------------------------------
def test_a_vocab_size_below_sentencepieces_minimum_is_refused_before_anything_is_written(tmp_path):
    """It was refused only after the shards were written; then the vocab_size the message asked for was refused
    as "prepared with {'vocab_size': 100}"."""
    raw = tmp_path / "raw"
    make_raw(raw)
    (raw / "translate_local.json").write_text(json.dumps({**SETTINGS, "vocab_size": 100}))
    assert_one_line(datagen(tmp_path / "data", raw), "translate_local.json: vocab_size must be an integer >= 260 "
                                                     "(reserved ids, UNK and 256 byte pieces), got 100")
    assert not (tmp_path / "data").exists()


def test_a_vocab_size_too_small_for_the_corpus_can_be_raised_as_the_refusal_says(tmp_path):
    """SentencePiece needs a piece per character (on top of the byte pieces): that is known only once the text
    is read, after the shards are written. Raising vocab_size then prepares the vocabulary from those shards."""
    raw, data_dir = tmp_path / "raw", tmp_path / "data"
    characters = [chr(0x4E00 + i) for i in range(40)]  # 40 distinct characters: more than 262 - 259 pieces.
    make_raw(raw, [(" ".join(characters[i % 40:] + characters[:i % 40]), "".join(characters[::-1]))
                   for i in range(60)])
    (raw / "translate_local.json").write_text(json.dumps({**SETTINGS, "vocab_size": 262}))
    assert_one_line(datagen(data_dir, raw), "Vocabulary size is smaller than required_chars",
                    "set vocab_size in <tmp_dir>/translate_local.json")
    (raw / "translate_local.json").write_text(json.dumps({**SETTINGS, "vocab_size": 400}))
    result = datagen(data_dir, raw)
    assert result.returncode == 0, result.stderr
    assert "no vocabulary yet; making it with {'vocab_size': 400} (was {'vocab_size': 262})" in result.stderr
    assert "LOG(INFO)" not in result.stderr  # SentencePiece's C++ line as tensorflow-text loads the model.
    assert registry.problem(NAME).feature_encoders(str(data_dir))["inputs"].vocab_size > 262
    # Other settings than the vocabulary's still may not change under prepared shards.
    (raw / "translate_local.json").write_text(json.dumps({**SETTINGS, "vocab_size": 500, "examples_per_shard": 7}))
    assert_one_line(datagen(data_dir, raw), "was prepared for translate_local with")
