"""Text <-> ids as TensorFlow ops: in input pipelines, and in exported models (tokenization inside the graph)."""

import contextlib
import os
import sys

import tensorflow as tf

from t2t_relpos.problems.problem import EOS_ID, NUM_RESERVED_IDS, PAD_ID


class SymbolTokenizer(tf.Module):
    """The graph twin of `SymbolEncoder`: a fixed alphabet, symbol `i` has id `NUM_RESERVED_IDS + i`.

    Args:
        symbols: The alphabet, in id order.
        by_character: Read text character by character (whitespace ignored); else split it on whitespace.

    Example:

    >>> tokenizer = SymbolTokenizer("01+", by_character=True)
    >>> tokenizer.tokenize(tf.constant(["10+1"])).to_list()
    [[3, 2, 4, 3]]
    >>> tokenizer.detokenize(tf.constant([[3, 2, 1, 0]])).numpy().tolist()
    [b'10']
    """

    def __init__(self, symbols, by_character=True, name=None):
        super().__init__(name=name)
        symbols = list(symbols)
        self.by_character = by_character
        self._symbols = tf.constant([""] * NUM_RESERVED_IDS + symbols)
        ids = tf.range(NUM_RESERVED_IDS, NUM_RESERVED_IDS + len(symbols), dtype=tf.int64)
        self._table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(tf.constant(symbols), ids),
                                                default_value=-1)

    def tokenize(self, texts):
        """strings `[B]` -> int32 RaggedTensor `[B, (n)]` (no EOS); an unknown symbol is an InvalidArgument error."""
        if self.by_character:
            pieces = tf.strings.unicode_split(texts, "UTF-8")
            pieces = tf.ragged.boolean_mask(pieces, tf.logical_not(tf.strings.regex_full_match(pieces, r"\s")))
        else:
            pieces = tf.strings.split(texts)
        ids = tf.ragged.map_flat_values(self._table.lookup, pieces)
        check = tf.debugging.assert_non_negative(ids.flat_values, message="a symbol outside the alphabet")
        with tf.control_dependencies([check]):
            return tf.cast(ids, tf.int32)

    def detokenize(self, ids):
        """int ids `[B, n]` -> strings `[B]`: symbols up to the first EOS, padding skipped."""
        ids = tf.cast(ids, tf.int32)
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1), 0)
        keep = tf.logical_and(before_eos, tf.not_equal(ids, PAD_ID))
        pieces = tf.gather(self._symbols, tf.where(keep, ids, PAD_ID))
        pieces = tf.where(keep, pieces, "")
        if self.by_character:
            return tf.strings.reduce_join(pieces, axis=1)
        ragged = tf.ragged.boolean_mask(pieces, keep)
        return tf.strings.reduce_join(ragged, axis=1, separator=" ")


class CharacterTokenizer(tf.Module):
    """The graph twin of `character_vocab.CharacterEncoder`: one id per character, whitespace included.

    Characters have ids from `NUM_RESERVED_IDS + 1`; a character outside the vocabulary is `NUM_RESERVED_IDS`
    (UNK), which detokenizes to U+FFFD.

    Args:
        characters: The vocabulary's characters, in id order.

    Example:

    >>> tokenizer = CharacterTokenizer(["\\n", " ", "a", "b"])
    >>> tokenizer.tokenize(tf.constant(["ab a\\n", "c"])).to_list()
    [[5, 6, 4, 5, 3], [2]]
    >>> tokenizer.detokenize(tf.constant([[5, 2, 3, 1, 4]])).numpy()[0].decode("utf-8")
    'a�\\n'
    """

    def __init__(self, characters, name=None):
        super().__init__(name=name)
        characters = list(characters)
        unk = NUM_RESERVED_IDS
        self._characters = tf.constant([""] * NUM_RESERVED_IDS + ["\ufffd"] + characters)
        ids = tf.range(unk + 1, unk + 1 + len(characters), dtype=tf.int64)
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(characters, tf.string), ids), default_value=unk)

    def tokenize(self, texts):
        """strings `[B]` -> int32 RaggedTensor `[B, (n)]` (no EOS), unknown characters as UNK."""
        pieces = tf.strings.unicode_split(texts, "UTF-8")
        return tf.cast(tf.ragged.map_flat_values(self._table.lookup, pieces), tf.int32)

    def detokenize(self, ids):
        """int ids `[B, n]` -> strings `[B]`: characters up to the first EOS, padding skipped."""
        ids = tf.cast(ids, tf.int32)
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1), 0)
        keep = tf.logical_and(before_eos, tf.not_equal(ids, PAD_ID))
        pieces = tf.where(keep, tf.gather(self._characters, tf.where(keep, ids, PAD_ID)), "")
        return tf.strings.reduce_join(pieces, axis=1)


class SentencePieceTokenizer(tf.Module):
    """The graph twin of `SentencePieceEncoder`, with tensorflow-text's SentencePiece op (savable).

    Like the encoder it prepends one space to a non-empty text before tokenizing and removes one leading space
    after detokenizing (see `t2t_relpos.data.sentencepiece_vocab`), so both give the same ids and the same text.

    Args:
        model_proto: The serialised SentencePiece model (bytes).
    """

    def __init__(self, model_proto, name=None):
        super().__init__(name=name)
        import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel  # Only for this vocabulary.

        with _native_logs_hidden():
            self._tokenizer = tf_text.SentencepieceTokenizer(model=model_proto, out_type=tf.int32)

    def tokenize(self, texts):
        """strings `[B]` -> int32 RaggedTensor `[B, (n)]` (no EOS); a scalar string gives int32 `[n]`."""
        texts = tf.convert_to_tensor(texts, tf.string)
        prefixed = tf.where(tf.equal(texts, ""), texts, tf.strings.join([" ", texts]))
        return self._tokenizer.tokenize(prefixed)

    def detokenize(self, ids):
        """int ids `[B, n]` -> strings `[B]`: pieces up to the first EOS, padding skipped."""
        ids = tf.cast(ids, tf.int32)
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1), 0)
        keep = tf.logical_and(before_eos, tf.not_equal(ids, PAD_ID))
        texts = self._tokenizer.detokenize(tf.ragged.boolean_mask(ids, keep))
        return tf.strings.regex_replace(texts, "^ ", "")


@contextlib.contextmanager
def _native_logs_hidden():
    """File descriptor 2 on /dev/null while tensorflow-text loads a SentencePiece model: the SentencePiece
    compiled into it logs `normalizer.cc(51) LOG(INFO) precompiled_charsmap is empty. use identity
    normalization.` as it does, on stderr, and has no setting to stop it (`sentencepiece.set_min_log_level`
    sets that of the Python module's own copy). Shown, as TensorFlow's own lines are, where
    TF_CPP_MIN_LOG_LEVEL=0 (a tool's `--tf_log`)."""
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0":
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # No file descriptor 2: nothing to hide.
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
