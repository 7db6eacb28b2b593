"""WMT14 problems on small fake data in the real layouts: archives (TFDS manual_dir names and members), extracted
plain text, tensorflow-datasets (faked); and the immediate error that lists the files when nothing is there."""

import hashlib
import json
import os
import sys
import time
import types

import pytest

import translation_data as data
from t2t_relpos import errors, registry
from t2t_relpos.data import archives, shards
from t2t_relpos.problems import translate_wmt

SETTINGS = {"vocab_size": 400, "examples_per_shard": 50}
TRAIN_ARCHIVES = ("training-parallel-europarl-v7.tgz", "training-parallel-commoncrawl.tgz",
                  "training-parallel-nc-v9.tgz")


def lines(pairs, side):
    return "".join(p[side] + "\n" for p in pairs).encode("utf-8")


def make_archives(directory, monkeypatch, corrupt=None):
    """The four de-en archives of tensorflow-datasets' wmt14_translate/de-en, with small contents and decoy
    members, registered (size, SHA-256) in place of the real ones. Returns the pairs of each split."""
    corpora = {name: data.pairs(30 + 10 * i, seed=10 + i) for i, name in enumerate(TRAIN_ARCHIVES)}
    members = {
        "training-parallel-europarl-v7.tgz": ("training/europarl-v7.de-en.{}", "training/europarl-v7.fr-en.fr"),
        "training-parallel-commoncrawl.tgz": ("commoncrawl.de-en.{}", "commoncrawl.ru-en.ru"),
        "training-parallel-nc-v9.tgz": ("training/news-commentary-v9.de-en.{}", "training/README"),
    }
    for name, (pattern, decoy) in members.items():
        pairs = corpora[name]
        data.write_tar(directory / name, {decoy: b"decoy\n", pattern.format("de"): lines(pairs, 1),
                                          pattern.format("en"): lines(pairs, 0)})
    dev, test = data.pairs(15, seed=20), data.pairs(12, seed=21)
    data.write_tar(directory / "dev.tgz", {
        "dev/newstest2013.de": lines(dev, 1), "dev/newstest2013.en": lines(dev, 0),
        "dev/newstest2013.fr": b"decoy\n",
        "dev/newstest2014-deen-src.de.sgm": data.sgm([t for _, t in test], "de").encode("utf-8"),
        "dev/newstest2014-deen-ref.en.sgm": data.sgm([s for s, _ in test], "en").encode("utf-8")})
    for name in TRAIN_ARCHIVES + ("dev.tgz",):
        content = (directory / name).read_bytes()
        digest = hashlib.sha256(content).hexdigest() if name != corrupt else "0" * 64
        monkeypatch.setitem(translate_wmt.ARCHIVES, name, archives.Archive(
            name, translate_wmt.ARCHIVES[name].url, len(content), digest))
    train = [pair for name in TRAIN_ARCHIVES for pair in corpora[name]]
    return {"train": train, "eval": dev, "test": test}


def write_settings(raw, problem="wmt14_ende"):
    (raw / f"{problem}.json").write_text(json.dumps(SETTINGS))


def read_split(problem, split, data_dir):
    encoder = problem.feature_encoders(data_dir)["inputs"]
    return [(encoder.decode(e["inputs"]), encoder.decode(e["targets"]))
            for e in problem.dataset(split, data_dir).as_numpy_iterator()]


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the test tried the network")

    monkeypatch.setattr(translate_wmt, "network_reachable", refuse)


def test_builds_from_original_archives_in_both_directions(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    raw.mkdir()
    text = make_archives(raw, monkeypatch)
    write_settings(raw)
    write_settings(raw, "wmt14_deen")
    ende = registry.problem("wmt14_ende")
    ende.generate_data(str(tmp_path / "ende"), str(raw))
    assert shards.load_manifest(str(tmp_path / "ende"), "wmt14_ende", "train")["examples"] == len(text["train"])
    assert read_split(ende, "eval", str(tmp_path / "ende")) == text["eval"]
    assert read_split(ende, "test", str(tmp_path / "ende")) == text["test"]  # From the SGML files.
    extracted = raw / "wmt14_extracted" / "training-parallel-europarl-v7.tgz" / "training"
    assert sorted(os.listdir(extracted)) == ["europarl-v7.de-en.de", "europarl-v7.de-en.en"]

    deen = registry.problem("wmt14_deen")
    deen.generate_data(str(tmp_path / "deen"), str(raw))
    assert read_split(deen, "eval", str(tmp_path / "deen")) == [(t, s) for s, t in text["eval"]]


def test_french_adds_the_un_and_giga_fren_archives(tmp_path, monkeypatch):
    import gzip  # pylint: disable=import-outside-toplevel

    raw = tmp_path / "raw"
    raw.mkdir()
    parts = {"training-parallel-europarl-v7.tgz": "training/europarl-v7.fr-en.{}",
             "training-parallel-commoncrawl.tgz": "commoncrawl.fr-en.{}",
             "training-parallel-nc-v9.tgz": "training/news-commentary-v9.fr-en.{}",
             "training-parallel-un.tgz": "un/undoc.2000.fr-en.{}"}
    train = []
    for i, (name, pattern) in enumerate(parts.items()):
        pairs = data.pairs(10 + i, seed=50 + i, other=data.FRENCH)
        data.write_tar(raw / name, {pattern.format("fr"): lines(pairs, 1), pattern.format("en"): lines(pairs, 0)})
        train += pairs
    giga = data.pairs(20, seed=60, other=data.FRENCH)  # An uncompressed tar of gzipped text, as the original.
    data.write_tar(raw / "training-giga-fren.tar", {
        "giga-fren.release2.fixed.fr.gz": gzip.compress(lines(giga, 1)),
        "giga-fren.release2.fixed.en.gz": gzip.compress(lines(giga, 0))})
    train += giga
    dev, test = data.pairs(4, seed=61, other=data.FRENCH), data.pairs(3, seed=62, other=data.FRENCH)
    data.write_tar(raw / "dev.tgz", {
        "dev/newstest2013.fr": lines(dev, 1), "dev/newstest2013.en": lines(dev, 0),
        "dev/newstest2014-fren-src.fr.sgm": data.sgm([t for _, t in test], "fr").encode("utf-8"),
        "dev/newstest2014-fren-ref.en.sgm": data.sgm([s for s, _ in test], "en").encode("utf-8")})
    for name in list(parts) + ["training-giga-fren.tar", "dev.tgz"]:
        content = (raw / name).read_bytes()
        monkeypatch.setitem(translate_wmt.ARCHIVES, name, archives.Archive(
            name, translate_wmt.ARCHIVES[name].url, len(content), hashlib.sha256(content).hexdigest()))
    write_settings(raw, "wmt14_fren")
    problem = registry.problem("wmt14_fren")
    problem.generate_data(str(tmp_path / "data"), str(raw))
    assert shards.load_manifest(str(tmp_path / "data"), "wmt14_fren", "train")["examples"] == len(train)
    assert read_split(problem, "test", str(tmp_path / "data")) == [(t, s) for s, t in test]


def test_wrong_checksum_or_size_is_an_error_naming_the_archive(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    raw.mkdir()
    make_archives(raw, monkeypatch, corrupt="dev.tgz")
    write_settings(raw)
    with pytest.raises(errors.DataError, match=r"dev.tgz has SHA-256 [0-9a-f]{64}, the original dev.tgz has 0000"):
        registry.problem("wmt14_ende").generate_data(str(tmp_path / "data"), str(raw))
    with open(raw / "training-parallel-nc-v9.tgz", "ab") as f:
        f.write(b"trailing junk")
    began = time.perf_counter()
    with pytest.raises(errors.DataError, match=r"training-parallel-nc-v9.tgz  \[wrong size; for train\]"):
        registry.problem("wmt14_ende").generate_data(str(tmp_path / "other"), str(raw))
    assert time.perf_counter() - began < 1.0


def test_builds_from_plain_text_and_mixes_with_an_archive(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    raw.mkdir()
    text = make_archives(raw, monkeypatch)
    for name in TRAIN_ARCHIVES:
        os.remove(raw / name)
    train = data.pairs(80, seed=30)
    data.write_lines(raw / "train.de-en.en.gz", [s for s, _ in train])
    data.write_lines(raw / "train.de-en.de", [t for _, t in train])
    write_settings(raw)
    problem = registry.problem("wmt14_ende")
    problem.generate_data(str(tmp_path / "data"), str(raw))  # Train from text, eval and test from dev.tgz.
    manifest = shards.load_manifest(str(tmp_path / "data"), "wmt14_ende", "train")
    assert manifest["examples"] == 80 and "train.de-en.de" in manifest["source"]
    assert read_split(problem, "test", str(tmp_path / "data")) == text["test"]

    test = data.pairs(5, seed=31)
    data.write_lines(raw / "newstest2014.de-en.en", [s for s, _ in test])
    data.write_lines(raw / "newstest2014.de-en.de", [t for _, t in test])
    for name in ("wmt14_ende-test.json", "wmt14_ende-test-00000.tfrecord"):  # What changed raw data needs.
        os.remove(tmp_path / "data" / name)
    problem.generate_data(str(tmp_path / "data"), str(raw))  # Plain text comes first.
    assert read_split(problem, "test", str(tmp_path / "data")) == test


def test_missing_data_fails_at_once_listing_every_file(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "dev.tgz").write_bytes(b"too short")
    problem = registry.problem("wmt14_ende")
    began = time.perf_counter()
    with pytest.raises(errors.DataError) as error:
        problem.generate_data(str(tmp_path / "data"), str(raw))
    assert time.perf_counter() - began < 1.0
    message = str(error.value)
    assert "no WMT14 de-en data for train, eval, test" in message
    for name in TRAIN_ARCHIVES:
        assert f"{name}  [missing; for train]  http://www.statmt.org/" in message
    assert "dev.tgz  [wrong size; for eval, test]  http://data.statmt.org/wmt19/translation-task/dev.tgz" in message
    for name in ("train.de-en.en + train.de-en.de", "newstest2013.de-en.en + newstest2013.de-en.de",
                 "newstest2014.de-en.en + newstest2014.de-en.de", "--download"):
        assert name in message
    assert not os.path.exists(tmp_path / "data" / "wmt14_ende-train-00000.tfrecord")

    fr = registry.problem("wmt14_enfr")
    with pytest.raises(errors.DataError, match="training-giga-fren.tar  \\[missing; for train\\]"):
        fr.generate_data(str(tmp_path / "data"), str(raw))


def test_a_download_asked_for_that_fails_says_so_and_where_to_put_the_files(tmp_path, monkeypatch):
    """Offline, `datagen --download` was told "(c) pass --download", which it had passed: it says the download
    could not happen and where to put the files instead; so does a download that starts and fails."""
    from test_cli import assert_usage_error, call_tool  # pylint: disable=import-outside-toplevel

    raw = tmp_path / "raw"
    raw.mkdir()
    monkeypatch.setattr(translate_wmt, "network_reachable", lambda *a, **k: False)
    result = call_tool("t2t-relpos-datagen", "--problem=wmt14_ende", f"--data_dir={tmp_path / 'data'}",
                       f"--tmp_dir={raw}", "--download")
    assert_usage_error(result, "--download was given but www.statmt.org cannot be reached; download the files where "
                       f"it can be and put either (a) the original archives in {raw}", "or (b) extracted text in")
    assert "pass --download" not in result.stderr and "(c)" not in result.stderr
    without = call_tool("t2t-relpos-datagen", "--problem=wmt14_ende", f"--data_dir={tmp_path / 'data'}",
                        f"--tmp_dir={raw}")
    assert_usage_error(without, "or (c) pass --download to build")  # Not asked for: the download is offered.
    problem = registry.problem("wmt14_ende")
    problem.allow_download = True
    with pytest.raises(errors.DataError, match=r"(?s)needs --tmp_dir: .*or \(c\) give --tmp_dir with --download: it "
                       r"builds tensorflow-datasets' wmt14_translate/de-en in TMP_DIR/tensorflow_datasets"):
        problem.generate_data(str(tmp_path / "data"), None)

    class FailingBuilder:  # Reachable, but the download itself fails.
        def __init__(self, name, data_dir):
            pass

        def is_prepared(self):
            return False

        def download_and_prepare(self, download_dir, download_config):
            raise ConnectionError("Connection reset by peer\n(more lines)")

    monkeypatch.setitem(sys.modules, "tensorflow_datasets", types.SimpleNamespace(
        builder=FailingBuilder, download=types.SimpleNamespace(DownloadConfig=lambda **kwargs: kwargs)))
    monkeypatch.setattr(translate_wmt, "network_reachable", lambda *a, **k: True)
    write_settings(raw)
    with pytest.raises(errors.DataError) as info:
        problem.generate_data(str(tmp_path / "data"), str(raw))
    message = str(info.value)
    assert message.startswith("wmt14_ende: --download was given but the download failed (ConnectionError: "
                              "Connection reset by peer); get the files another way and put either (a) the "
                              f"original archives in {raw}"), message
    assert "(b) extracted text" in message and "(c)" not in message


def test_download_is_tried_only_when_asked_and_reachable(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    raw.mkdir()
    problem = registry.problem("wmt14_ende")
    problem.allow_download = True
    monkeypatch.setattr(translate_wmt, "network_reachable", lambda *a, **k: False)
    with pytest.raises(errors.DataError, match="--download was given but www.statmt.org cannot be reached"):
        problem.generate_data(str(tmp_path / "data"), str(raw))

    calls = {}
    text = {"train": data.pairs(40, seed=40), "validation": data.pairs(6, seed=41), "test": data.pairs(6, seed=42)}

    class FakeBuilder:
        prepared = False

        def __init__(self, name, data_dir):
            calls["builder"] = (name, data_dir)

        def is_prepared(self):
            return FakeBuilder.prepared

        def download_and_prepare(self, download_dir, download_config):
            calls["config"] = download_config
            FakeBuilder.prepared = True

        def as_dataset(self, split):
            examples = [{"en": s.encode(), "de": t.encode()} for s, t in text[split]]
            return types.SimpleNamespace(as_numpy_iterator=lambda: iter(examples))

    fake_tfds = types.SimpleNamespace(builder=FakeBuilder, download=types.SimpleNamespace(
        DownloadConfig=lambda **kwargs: kwargs))
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", fake_tfds)
    monkeypatch.setattr(translate_wmt, "network_reachable", lambda *a, **k: True)
    write_settings(raw)
    problem.generate_data(str(tmp_path / "data"), str(raw))
    assert calls["builder"] == ("wmt14_translate/de-en", str(raw / "tensorflow_datasets"))
    assert calls["config"] == {"manual_dir": str(raw), "try_download_gcs": False}
    assert read_split(problem, "eval", str(tmp_path / "data")) == text["validation"]
