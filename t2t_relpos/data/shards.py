"""TFRecord shards of sentence pairs in a data directory: written atomically and resumably, read with tf.data.

For a problem `name` and a split, the data directory holds

    name-split-00000.tfrecord, name-split-00001.tfrecord, ...   tf.train.Examples, bytes features
                                                                 "inputs" and "targets" (UTF-8 text)
    name-split.json                                              the manifest, written last: the split is done

A shard is written as `<shard>.incomplete.<host>.<pid>` (see `data.preparation.partial_path`) and renamed
when complete, so a file under a shard's final name is always a finished shard, and two processes writing the
same shard never trip over each other's partial file. An interrupted run leaves at most one partial file
(removed by the next `data.preparation.prepare`); the next run skips the finished shards (reading past their
pairs without writing them) and carries on. The input must come in the same order on every run (it does for
files and archives).

Shards hold text, not ids, so they do not depend on the vocabulary; `data.id_shards` keeps the same pairs as ids
for one vocabulary, written once, so that training does not tokenise.
"""

import itertools
import os
import random

import tensorflow as tf

from t2t_relpos import errors
from t2t_relpos.data import preparation
from t2t_relpos.data import progress as progress_lib

_FORMAT = 1
_FEATURES = ("inputs", "targets")


def shard_name(name, split, index):
    return f"{name}-{split}-{index:05d}.tfrecord"


def manifest_path(data_dir, name, split):
    return os.path.join(data_dir, f"{name}-{split}.json")


def load_manifest(data_dir, name, split):
    """The manifest of a finished split (a dict), or None if the split is not (completely) written."""
    return preparation.read_json(manifest_path(data_dir, name, split), f"the manifest of {name}'s {split} split")


def _serialize(source, target):
    feature = {key: tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode("utf-8")]))
               for key, text in zip(_FEATURES, (source, target))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _write_shard(path, pairs):
    with preparation.written(path, "a shard") as partial:
        with tf.io.TFRecordWriter(partial) as writer:
            for source, target in pairs:
                writer.write(_serialize(source, target))


def write_split(pairs, data_dir, name, split, examples_per_shard, shuffle_seed=None, description=""):
    """Writes the pairs of one split as shards and then its manifest; a finished split is left as it is.

    Args:
        pairs: An iterable of (source, target) str, in the same order on every call.
        data_dir: The data directory.
        name: The problem's name (the files' prefix).
        split: "train", "eval" or "test".
        examples_per_shard: Pairs per shard (the last shard may have fewer).
        shuffle_seed: If not None, each shard's pairs are shuffled (deterministically for the seed).
        description: Where the pairs come from, recorded in the manifest.

    Returns:
        The manifest: {"examples": total, "shards": [{"file", "examples"}, ...], ...}.
    """
    manifest = load_manifest(data_dir, name, split)
    if manifest is not None:
        return manifest
    if examples_per_shard < 1:
        raise ValueError(f"examples_per_shard must be positive, got {examples_per_shard}")
    os.makedirs(data_dir, exist_ok=True)
    progress = progress_lib.Progress(f"{name} {split}", "pairs")
    stream = iter(pairs)
    shards, total = [], 0
    for index in itertools.count():
        path = os.path.join(data_dir, shard_name(name, split, index))
        chunk = itertools.islice(stream, examples_per_shard)
        if os.path.isfile(path):
            count = sum(1 for _ in chunk)  # Finished before: read past its pairs.
        else:
            chunk = list(chunk)
            count = len(chunk)
            if chunk:
                if shuffle_seed is not None:
                    random.Random(f"{shuffle_seed}/{split}/{index}").shuffle(chunk)
                _write_shard(path, chunk)
        if count == 0:
            break
        shards.append({"file": os.path.basename(path), "examples": count})
        total += count
        progress.update(total, f"{len(shards)} shards")
    progress.close(f"{len(shards)} shards")
    if not total:
        raise errors.DataError(f"{name}: the {split} data ({description or 'no source'}) has no sentence pairs")
    manifest = {"format": _FORMAT, "problem": name, "split": split, "examples": total, "shards": shards,
                "source": description}
    preparation.write_json(manifest_path(data_dir, name, split), manifest, f"the manifest of {name}'s {split} split")
    return manifest


def shard_paths(data_dir, name, split, missing_hint):
    """Paths of a finished split's shards; a `DataError` ending in `missing_hint` when it is not there."""
    manifest = load_manifest(data_dir, name, split) if data_dir else None
    if manifest is None:
        where = f"in {data_dir}" if data_dir else "(no --data_dir given)"
        raise errors.DataError(f"{name}: no prepared {split} data {where}; {missing_hint}")
    paths = [os.path.join(data_dir, shard["file"]) for shard in manifest["shards"]]
    absent = [p for p in paths if not os.path.isfile(p)]
    if absent:
        raise errors.DataError(f"{name}: {len(absent)} shard(s) listed in {manifest_path(data_dir, name, split)} "
                               f"are missing, e.g. {absent[0]}; {missing_hint}")
    return paths


# Records parsed (and, by the problems, tokenized) per call of a pipeline stage: one op call for hundreds of
# examples instead of one each, which is most of the per-example cost of those stages.
PARSE_BATCH = 256


def parse_pair_batches(records, batch_size=PARSE_BATCH):
    """Serialised examples -> batches `{"inputs": tf.string [n], "targets": tf.string [n]}`, n <= batch_size.

    In order (`unbatch()` gives the pairs one by one, as they were written), parsed in parallel.
    """
    spec = {key: tf.io.FixedLenFeature([], tf.string) for key in _FEATURES}
    parse = tf.autograph.experimental.do_not_convert(lambda batch: tf.io.parse_example(batch, spec))
    return records.batch(batch_size).map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def read_pairs(path, limit=None):
    """The first `limit` (all if None) pairs of one shard, as a list of (source, target) str."""
    pairs = []
    for record in tf.data.TFRecordDataset(path).take(-1 if limit is None else limit).as_numpy_iterator():
        example = tf.train.Example.FromString(record)
        pairs.append(tuple(example.features.feature[key].bytes_list.value[0].decode("utf-8")
                           for key in _FEATURES))
    return pairs


def sample_pairs(data_dir, manifest, count):
    """About `count` pairs of a written split, drawn from every shard in proportion to its size.

    The shards were shuffled when written, so a shard's first pairs are a random sample of it; reading only
    those keeps sampling a large corpus quick.
    """
    total = manifest["examples"]
    chosen = []
    for shard in manifest["shards"]:
        take = shard["examples"] if count >= total else max(1, round(count * shard["examples"] / total))
        chosen.extend(read_pairs(os.path.join(data_dir, shard["file"]), take))
    return chosen
