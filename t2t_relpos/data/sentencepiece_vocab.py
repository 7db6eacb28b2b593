"""A SentencePiece vocabulary: training it on sample text, and the `TextEncoder` that applies it.

The model is trained so that its ids match the package's reserved ids (0 = PAD, 1 = EOS; then 2 = UNK; no
BOS) and so that text round-trips exactly: identity normalisation (no NFKC: "ﬁ", full-width forms and
combining accents stay as written), spaces kept as written (`remove_extra_whitespaces=False`), and byte
fallback (a character outside the vocabulary becomes its UTF-8 bytes, never UNK).

SentencePiece's own dummy prefix (a space added before the text, removed on decoding) is done here instead:
tensorflow-text's detokenizer strips every leading space, not just the added one, which would lose a text's
own leading spaces. Encoders and the graph tokenizer therefore prepend one space to a non-empty text and
remove one leading space from the decoded text; a sentence's first word then shares its pieces with the same
word inside a sentence, and an empty text has no ids.

    model = train_sentencepiece(["Größe über alles", "déjà vu"] * 100, vocab_size=300)
    encoder = SentencePieceEncoder(model)
    encoder.decode(encoder.encode("  Größe,  déjà ")) == "  Größe,  déjà "   # True
"""

import hashlib
import io
import os

import sentencepiece as spm

from t2t_relpos import errors
from t2t_relpos.problems import problem

UNK_ID = 2
# SentencePiece splits its EM work into this many fixed chunks; the model depends on the number, so it is
# fixed rather than taken from the machine's core count (the same model on every machine for a seed).
_TRAINER_THREADS = 16
# SentencePiece's max_sentence_length (its default): longer training sentences are left out of the vocabulary's
# training (they are still encoded whole).
MAX_SENTENCE_BYTES = 4192
# The reserved ids, UNK, the 256 byte pieces and at least one piece of text.
MIN_VOCAB_SIZE = problem.NUM_RESERVED_IDS + 1 + 256 + 1


class SentencesTooLongError(ValueError):
    """Every training sentence is longer than `MAX_SENTENCE_BYTES`: SentencePiece has nothing to learn from."""


def train_sentencepiece(sentences, vocab_size, seed=0, character_coverage=0.9999):
    """Trains a unigram SentencePiece model on `sentences`; deterministic for the same inputs and seed.

    Args:
        sentences: An iterable of str (e.g. a sample of both sides of a parallel corpus).
        vocab_size: The number of pieces wanted, reserved ids and the 256 byte pieces included; on a corpus
            too small for it the model has fewer.
        seed: Seed of SentencePiece's random generator.
        character_coverage: Share of the characters (by frequency) that get their own piece; the rarest rest
            is spelled with byte pieces.

    Returns:
        The serialised model (bytes).

    Raises:
        SentencesTooLongError: every sentence is longer than `MAX_SENTENCE_BYTES` in UTF-8.
        ValueError: too small a `vocab_size`, or SentencePiece could not train one so large on these sentences.
    """
    if vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(f"vocab_size must be at least {MIN_VOCAB_SIZE} (reserved ids, UNK and 256 byte pieces), "
                         f"got {vocab_size}")
    sentences = list(sentences)
    too_long = sum(1 for s in sentences if len(s.encode("utf-8")) + 1 > MAX_SENTENCE_BYTES)  # + the added space
    if sentences and too_long == len(sentences):
        raise SentencesTooLongError(
            f"every one of the {len(sentences):,} sampled lines is longer than SentencePiece's max_sentence_length, "
            f"{MAX_SENTENCE_BYTES} bytes, so there is nothing to train a vocabulary on: the corpus must have one "
            "sentence per line (are its line ends lost, or its lines whole documents?)")
    spm.set_random_generator_seed(int(seed))
    model = io.BytesIO()
    try:
        _train(sentences, vocab_size, character_coverage, model)
    except RuntimeError as e:  # SentencePiece reports bad settings (e.g. too few pieces) this way.
        skipped = (f"; {too_long:,} of the {len(sentences):,} lines were left out for being longer than its "
                   f"max_sentence_length, {MAX_SENTENCE_BYTES} bytes" if too_long else "")
        raise ValueError(f"SentencePiece could not train a vocabulary of {vocab_size}: {e}{skipped}") from None
    return model.getvalue()


def _train(sentences, vocab_size, character_coverage, model):
    spm.SentencePieceTrainer.train(
        sentence_iterator=(" " + s for s in sentences), model_writer=model, vocab_size=int(vocab_size),
        model_type="unigram", character_coverage=character_coverage, byte_fallback=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=False,
        pad_id=problem.PAD_ID, eos_id=problem.EOS_ID, unk_id=UNK_ID, bos_id=-1,
        input_sentence_size=0, shuffle_input_sentence=False, hard_vocab_limit=False,
        max_sentence_length=MAX_SENTENCE_BYTES,
        num_threads=_TRAINER_THREADS, minloglevel=2)


class SentencePieceEncoder(problem.TextEncoder):
    """Text <-> ids with a SentencePiece model trained by `train_sentencepiece`.

    Args:
        model_proto: The serialised model (bytes).
    """

    def __init__(self, model_proto):
        self.model_proto = bytes(model_proto)
        self._processor = spm.SentencePieceProcessor(model_proto=self.model_proto)
        if (self._processor.pad_id(), self._processor.eos_id()) != (problem.PAD_ID, problem.EOS_ID):
            raise ValueError(f"a SentencePiece model for this package has PAD = {problem.PAD_ID} and EOS = "
                             f"{problem.EOS_ID}; this one has {self._processor.pad_id()} and "
                             f"{self._processor.eos_id()}")

    @classmethod
    def from_file(cls, path):
        """Loads `path`; a missing or unreadable model is a `DataError`."""
        if not os.path.exists(path):
            raise errors.DataError(f"no vocabulary at {path}")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:  # Not permitted, a directory, an I/O error.
            raise errors.DataError(f"cannot read the vocabulary {path}: {e.strerror or e}") from None
        try:
            return cls(data)
        except (RuntimeError, ValueError) as e:
            raise errors.DataError(f"{path} is not a usable SentencePiece model: {e}") from None

    @property
    def vocab_size(self):
        return self._processor.get_piece_size()

    def fingerprint(self):
        return "sha256:" + hashlib.sha256(self.model_proto).hexdigest()

    def encode(self, text):
        return self._processor.encode(" " + text if text else text)

    def decode(self, ids):
        ids = problem.strip_ids(ids)
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"id {i} is outside the vocabulary of size {self.vocab_size}")
        text = self._processor.decode(ids)
        return text[1:] if text.startswith(" ") else text

    def piece(self, i):
        """The piece of id `i` (e.g. "▁Haus", "<0xC3>"), for inspection."""
        return self._processor.id_to_piece(int(i))

    def graph_tokenizer(self):
        from t2t_relpos.data import graph_text  # pylint: disable=import-outside-toplevel  # Imports TensorFlow.

        return graph_text.SentencePieceTokenizer(self.model_proto)
