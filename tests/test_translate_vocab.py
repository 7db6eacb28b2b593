"""The SentencePiece vocabulary: lossless German/French round trips, reserved ids, determinism, graph twin."""

import pytest

import translation_data as data
from t2t_relpos import errors
from t2t_relpos.data import sentencepiece_vocab
from t2t_relpos.problems import problem

VOCAB_SIZE = 400


def training_text():
    return (data.sentences(data.GERMAN, 300, seed=1) + data.sentences(data.FRENCH, 300, seed=2) +
            data.sentences(data.ENGLISH, 300, seed=3))


@pytest.fixture(scope="module")
def model():
    return sentencepiece_vocab.train_sentencepiece(training_text(), VOCAB_SIZE, seed=5)


@pytest.fixture(scope="module")
def encoder(model):
    return sentencepiece_vocab.SentencePieceEncoder(model)


def test_training_is_deterministic_for_a_seed(model):
    assert sentencepiece_vocab.train_sentencepiece(training_text(), VOCAB_SIZE, seed=5) == model


def test_reserved_ids_and_size(encoder):
    assert encoder.vocab_size == VOCAB_SIZE
    assert (encoder.piece(problem.PAD_ID), encoder.piece(problem.EOS_ID)) == ("<pad>", "</s>")
    assert encoder.piece(sentencepiece_vocab.UNK_ID) == "<unk>"
    assert encoder.piece(3) == "<0x00>"  # Then the 256 byte pieces.
    assert encoder.encode("") == [] and encoder.encode(" ") != []
    for text in data.HARD_TEXT:
        ids = encoder.encode(text)
        assert all(i >= problem.NUM_RESERVED_IDS and i != sentencepiece_vocab.UNK_ID for i in ids), (text, ids)


@pytest.mark.parametrize("text", data.HARD_TEXT + data.GERMAN + data.FRENCH)
def test_python_encoder_round_trips_exactly(encoder, text):
    assert encoder.decode(encoder.encode(text)) == text


def test_decode_stops_at_eos_and_skips_padding(encoder):
    ids = encoder.encode("über")
    assert encoder.decode(ids + [problem.EOS_ID] + encoder.encode("Spaß")) == "über"
    assert encoder.decode([problem.PAD_ID] + ids + [problem.PAD_ID]) == "über"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        encoder.decode([VOCAB_SIZE + 3])


def test_a_sentence_first_word_shares_pieces_with_inner_words(encoder):
    # The space the encoder puts in front makes "Mädchen" at the start use the same pieces as inside.
    first = encoder.encode("Mädchen")
    inner = encoder.encode("ein Mädchen")
    assert inner[-len(first):] == first


def test_graph_tokenizer_matches_and_round_trips(encoder, tmp_path):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    texts = list(data.HARD_TEXT + data.GERMAN)
    tokenizer = encoder.graph_tokenizer()
    ids = tokenizer.tokenize(tf.constant(texts))
    assert ids.dtype == tf.int32
    assert ids.to_list() == [encoder.encode(t) for t in texts]
    # As a model emits them: padded, EOS-terminated, junk after the EOS.
    width = max(len(row) for row in ids.to_list()) + 2
    rows = [row + [problem.EOS_ID] + [7] * (width - len(row) - 1) for row in ids.to_list()]
    decoded = tokenizer.detokenize(tf.constant(rows)).numpy().tolist()
    assert [t.decode("utf-8") for t in decoded] == texts

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.tokenizer = encoder.graph_tokenizer()

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def round_trip(self, strings):
            return self.tokenizer.detokenize(self.tokenizer.tokenize(strings).to_tensor())

    tf.saved_model.save(Module(), str(tmp_path / "saved"))
    reloaded = tf.saved_model.load(str(tmp_path / "saved"))
    assert [t.decode("utf-8") for t in reloaded.round_trip(tf.constant(texts)).numpy()] == texts


def test_too_small_vocabulary_and_unusable_model_file(tmp_path):
    with pytest.raises(ValueError, match="at least"):
        sentencepiece_vocab.train_sentencepiece(["a b c"], 100)
    path = tmp_path / "broken.model"
    path.write_bytes(b"not a model")
    with pytest.raises(errors.DataError, match="not a usable SentencePiece model"):
        sentencepiece_vocab.SentencePieceEncoder.from_file(str(path))
    with pytest.raises(errors.DataError, match="no vocabulary"):
        sentencepiece_vocab.SentencePieceEncoder.from_file(str(tmp_path / "absent.model"))
