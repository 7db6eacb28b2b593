"""Pre-tokenised shards: a split's text shards encoded once with one vocabulary, read without tokenising.

Tokenising costs more than anything else the input pipeline does with an example (SentencePiece, 4096 pairs per
call: about 870k target tokens per CPU-second; the rest of the pipeline: several million; see
benchmarks/README.md, input pipeline), so tensor2tensor's datagen stored ids. Here the text shards stay the
source of truth (see `data.shards`), and once the vocabulary exists `t2t-relpos-datagen` writes beside them

    name-split-00000.ids-<digest>.tfrecord   tf.train.Examples, int64 features "inputs" and "targets": the ids of
                                             text shard 00000's pairs, in the same order, EOS appended
    name-split.ids.json                      the manifest, written last: the vocabulary's digest, the shards
                                             and a fingerprint of the text shard each was made from

where `<digest>` starts the SHA-256 of the vocabulary file. Shard i holds text shard i's pairs in order, so
reading the ids gives exactly the examples, in exactly the order, that tokenising the text gives. Ids never
outlive their vocabulary: a manifest whose digest is not that of the vocabulary file in use is ignored (the
pipeline tokenises the text instead), and datagen encodes a split again whole whenever its manifest is missing or
does not match (ids of another vocabulary, of text shards rewritten since, or of an interrupted run are removed
first): encoding is quick beside preparing the text (about 15k pairs per second).
"""

import glob
import hashlib
import os

import tensorflow as tf

from t2t_relpos.data import preparation, shards

_FORMAT = 1
_FEATURES = ("inputs", "targets")
# Hex digits of the vocabulary digest in a shard's file name.
_NAME_DIGEST = 12


def vocab_digest(vocab_path):
    """The SHA-256 (hex) of a vocabulary file: what a manifest of ids is checked against."""
    try:
        with open(vocab_path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError as e:
        raise preparation.read_error(e, "the vocabulary", vocab_path) from None


def text_fingerprint(path, edge=1 << 16):
    """Identifies the text shard an ids shard was made from: its size and the SHA-256 of its first and last
    64 KiB (shards are shuffled, so rewritten text differs there), cheap enough to check whenever data is read."""
    if not os.path.isfile(path):
        return None
    size = os.path.getsize(path)
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        digest.update(f.read(edge))
        if size > edge:
            f.seek(max(edge, size - edge))
            digest.update(f.read())
    return digest.hexdigest()


def manifest_path(data_dir, name, split):
    return os.path.join(data_dir, f"{name}-{split}.ids.json")


def shard_path(text_path, digest):
    """The ids shard of a text shard `.../name-split-00000.tfrecord`, for the vocabulary of `digest`."""
    return text_path[:-len(".tfrecord")] + f".ids-{digest[:_NAME_DIGEST]}.tfrecord"


def usable_paths(data_dir, name, split, digest):
    """The ids shards of a split encoded with the vocabulary of `digest`, in text-shard order; None if absent.

    None as well when the ids were written for another vocabulary, from text shards other than those there now
    (`text_fingerprint`), or a file is gone: the caller then tokenises the text.
    """
    path = manifest_path(data_dir, name, split)
    text = shards.load_manifest(data_dir, name, split)
    if text is None or not os.path.isfile(path):
        return None
    manifest = preparation.read_json(path, f"the ids manifest of {name}'s {split} split")
    if manifest is None or manifest.get("format") != _FORMAT or manifest.get("vocab_sha256") != digest:
        return None
    if [(s["examples"], s.get("text")) for s in manifest["shards"]] != [
            (s["examples"], text_fingerprint(os.path.join(data_dir, s["file"]))) for s in text["shards"]]:
        return None
    paths = [os.path.join(data_dir, s["file"]) for s in manifest["shards"]]
    return paths if all(os.path.isfile(p) for p in paths) else None


def write_split(data_dir, name, split, encode, digest):
    """Encodes every text shard of a finished split, then writes the manifest (nothing if it is there).

    Args:
        data_dir, name, split: Where the text shards are (`data.shards`).
        encode: A function of a parsed batch `{"inputs": tf.string [n], "targets": tf.string [n]}` to
            `{"inputs": ragged int [n, (len)], "targets": ...}`: the ids the pipeline would compute.
        digest: `vocab_digest` of the vocabulary `encode` applies.

    Returns:
        Examples encoded.
    """
    if usable_paths(data_dir, name, split, digest) is not None:
        return 0
    # Ids without a matching manifest belong to another vocabulary, to text shards since rewritten, or to an
    # interrupted run: none can be trusted, so the split is encoded again from its text.
    for stale in glob.glob(os.path.join(glob.escape(data_dir), f"{name}-{split}-*.ids-*.tfrecord")):
        preparation.remove(stale, "an ids shard of another vocabulary or text")
    text = shards.load_manifest(data_dir, name, split)
    entries, encoded = [], 0
    for shard in text["shards"]:
        source = os.path.join(data_dir, shard["file"])
        target = shard_path(source, digest)
        encoded += _write_shard(source, target, encode)
        entries.append({"file": os.path.basename(target), "examples": shard["examples"],
                        "text": text_fingerprint(source)})
    manifest = {"format": _FORMAT, "vocab_sha256": digest, "examples": text["examples"], "shards": entries}
    preparation.write_json(manifest_path(data_dir, name, split), manifest,
                           f"the ids manifest of {name}'s {split} split")
    return encoded


def _write_shard(source, target, encode):
    batches = shards.parse_pair_batches(tf.data.TFRecordDataset(source)).map(
        encode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(2)  # Beside the writing.
    count = 0
    with preparation.written(target, "an ids shard") as partial, tf.io.TFRecordWriter(partial) as writer:
        for batch in batches:
            rows = {key: (batch[key].flat_values.numpy().tolist(), batch[key].row_splits.numpy().tolist())
                    for key in _FEATURES}
            for i in range(len(rows[_FEATURES[0]][1]) - 1):
                feature = {key: tf.train.Feature(int64_list=tf.train.Int64List(value=values[splits[i]:splits[i + 1]]))
                           for key, (values, splits) in rows.items()}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
                count += 1
    return count


def parse_id_batches(records, batch_size=shards.PARSE_BATCH):
    """Serialised ids examples -> batches `{"inputs": int32 ragged [n, (len)], "targets": ...}`, in order.

    Ragged like the tokenizer's output (int64 row splits), so either can feed `batching.batch_chunks`.
    """
    spec = {key: tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int64) for key in _FEATURES}

    @tf.autograph.experimental.do_not_convert
    def parse(batch):
        parsed = tf.io.parse_example(batch, spec)
        return {key: tf.cast(parsed[key], tf.int32) for key in _FEATURES}

    return records.batch(batch_size).map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
