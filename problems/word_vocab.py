"""A word vocabulary for already tokenized text: one id per whitespace-separated word, an unknown id for others.

Ids: 0 = PAD, 1 = EOS, 2 = UNK (a word outside the list; it decodes to `UNK`), then the words in the order given
from 3. LAMBADA's and the agreement data's text is tokenized and lowercased by their authors, so words are
split on whitespace and kept as written.

Example:

>>> encoder = WordEncoder(["the", "keys", "are"])
>>> encoder.encode("the keys is")
[3, 4, 2]
>>> encoder.decode([3, 4, 5, 1, 0])
'the keys are'
"""

import hashlib

from t2t_relpos.problems import problem

UNK = "<UNK>"
UNK_ID = problem.NUM_RESERVED_IDS
FIRST_ID = UNK_ID + 1


class WordEncoder(problem.TextEncoder):
    """Text <-> ids one whitespace-separated word at a time; a word outside `words` is `UNK_ID`.

    Args:
        words: Distinct non-empty strings without whitespace, in id order (ids from `FIRST_ID`); `UNK` among
            them is dropped (it is id `UNK_ID` already).
    """

    def __init__(self, words):
        words = tuple(w for w in words if w != UNK)
        for w in words:
            if not isinstance(w, str) or w.split() != [w]:
                raise ValueError(f"vocabulary words must be non-empty strings without whitespace, got {w!r}")
        if len(set(words)) != len(words):
            raise ValueError("vocabulary words must be distinct")
        self.words = words
        self._ids = {w: FIRST_ID + i for i, w in enumerate(words)}

    @property
    def vocab_size(self):
        return FIRST_ID + len(self.words)

    def id_of(self, word):
        """The id of one word (`UNK_ID` if it is not in the vocabulary)."""
        return self._ids.get(word, UNK_ID)

    def encode(self, text):
        return [self._ids.get(w, UNK_ID) for w in text.split()]

    def decode(self, ids):
        return " ".join(UNK if i == UNK_ID else self.words[i - FIRST_ID] for i in problem.strip_ids(ids))

    def fingerprint(self):
        return "sha256:" + hashlib.sha256("\n".join((UNK,) + self.words).encode("utf-8")).hexdigest()

    def graph_tokenizer(self):
        return _graph_tokenizer(self.words)


def _graph_tokenizer(words):
    """The same mapping as a `tf.Module` with `tokenize` and `detokenize` (see `TextEncoder.graph_tokenizer`)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel  # Listing problems must not load TF.

    class WordTokenizer(tf.Module):
        def __init__(self):
            super().__init__(name="word_tokenizer")
            self._words = tf.constant([""] * UNK_ID + [UNK] + list(words))
            ids = tf.range(FIRST_ID, FIRST_ID + len(words), dtype=tf.int64)
            self._table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(tf.constant(list(words), tf.string), ids), default_value=UNK_ID)

        def tokenize(self, texts):
            pieces = tf.strings.split(texts)
            return tf.cast(tf.ragged.map_flat_values(self._table.lookup, pieces), tf.int32)

        def detokenize(self, ids):
            ids = tf.cast(ids, tf.int32)
            before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, problem.EOS_ID), tf.int32), axis=1), 0)
            keep = tf.logical_and(before_eos, tf.not_equal(ids, problem.PAD_ID))
            pieces = tf.ragged.boolean_mask(tf.gather(self._words, tf.where(keep, ids, problem.PAD_ID)), keep)
            return tf.strings.reduce_join(pieces, axis=1, separator=" ")

    return WordTokenizer()
