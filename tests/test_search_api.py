"""The Python API of the search and the Translator: arguments checked up front, vocabularies matched, beams filled.

Audit 17's findings F4 (vocabularies), F7 (search arguments), F8 (`translate`'s inputs), F9 (classifiers) and
F11 (filler hypotheses).
"""

import math
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from t2t_relpos import errors, registry
from t2t_relpos.decoding import search
from t2t_relpos.decoding import translator as translator_lib
from t2t_relpos.models import Transformer
from t2t_relpos.models.encoder_classifier import TransformerEncoderClassifier
from t2t_relpos.problems import problem as problem_lib

TINY = {"hidden_size": 16, "filter_size": 32, "num_heads": 2, "num_encoder_layers": 1, "num_decoder_layers": 1}


def tiny(input_vocab, target_vocab=None):
    keras.utils.set_random_seed(0)
    model = Transformer(input_vocab, target_vocab or input_vocab, **TINY)
    model.build()
    return model


@pytest.fixture(scope="module")
def model():
    return tiny(12)


@pytest.fixture(scope="module")
def decimal():
    return registry.problem("algorithmic_reverse_decimal40")  # Vocabulary 13 on both sides.


def sources():
    return np.array([[5, 6, 7, 8, 9, 1], [3, 4, 1, 0, 0, 0]], np.int32)


# F4: the model's vocabularies against the problem's.

@pytest.mark.parametrize("sizes, side, pattern", [
    ((5, 13), "input", "model's input vocabulary has 5 ids but the problem's input encoder has 13"),
    ((13, 5), "target", "model's target vocabulary has 5 ids but the problem's target encoder has 13"),
    ((13, 40), "target", "model's target vocabulary has 40 ids but the problem's target encoder has 13"),
])
def test_translator_refuses_a_model_made_for_other_vocabularies(decimal, sizes, side, pattern):
    del side
    with pytest.raises(ValueError, match=pattern):
        translator_lib.Translator(tiny(*sizes), decimal, beam_size=1, extra_length=3, jit_compile=True)


def test_translator_refuses_a_classifier_made_for_other_labels():
    classifier = TransformerEncoderClassifier(8, 9, hidden_size=16, filter_size=32, num_heads=2,
                                              num_encoder_layers=1)
    with pytest.raises(ValueError, match="target vocabulary has 9 ids but the problem's target encoder has 5"):
        translator_lib.Translator(classifier, Labels(), beam_size=1)


# F7: the search's own arguments, checked before anything runs.

@pytest.mark.parametrize("call, pattern", [
    (lambda m: search.greedy(m, sources(), 5, top_k=1), "'top_k' only applies when sampling"),
    (lambda m: search.greedy(m, sources(), 5, temperature=-1.0), "'temperature' must be >= 0, got -1.0"),
    (lambda m: search.greedy(m, sources(), 5, temperature=float("inf")), "'temperature' must be a finite"),
    (lambda m: search.greedy(m, sources(), 5, temperature=1.0, top_k=-2), "'top_k' must be >= 0, got -2"),
    (lambda m: search.greedy(m, sources(), 5, temperature=1.0, top_k=2.0), "'top_k' must be an integer"),
    (lambda m: search.greedy(m, sources(), 5, temperature=1.0, top_k=50), "'top_k' must be <= the target "
                                                                          "vocabulary size 12, got 50"),
    (lambda m: search.greedy(m, sources(), -3), "'max_length' must be an integer >= 0"),
    (lambda m: search.greedy(m, sources(), 10.0), "'max_length' must be an integer >= 0"),
    (lambda m: search.greedy(m, sources(), 5, lengths=[4, 4, 4]), r"'lengths' must have shape \[B\].*B = 2.*"
                                                                  r"\(3,\)"),
    (lambda m: search.greedy(m, sources(), 5, lengths=np.array([[4], [4]])), "'lengths' must have shape"),
    (lambda m: search.beam_search(m, sources(), 5, beam_size=0), "'beam_size' must be >= 1, got 0"),
    (lambda m: search.beam_search(m, sources(), 5, beam_size=2.0), "'beam_size' must be an integer"),
    (lambda m: search.beam_search(m, sources(), 5, alpha=float("nan")), "'alpha' must be a finite number"),
    (lambda m: search.beam_search(m, sources(), 5, alpha=-0.5), "'alpha' must be >= 0, got -0.5"),
    (lambda m: search.beam_search(m, sources(), -1), "'max_length' must be an integer >= 0"),
    # Issue 46: > 0 and finite in Python, not in the search's float32 (1e-320 sampled ids outside the vocabulary).
    (lambda m: search.greedy(m, sources(), 5, temperature=1e-320), r"'temperature' must be 0 \(no sampling\) or at "
                                                                   r"least 1.175e-38 \(the smallest normal float32"),
    (lambda m: search.greedy(m, sources(), 5, temperature=1e-40), r"'temperature' must be 0 \(no sampling\) or"),
    (lambda m: search.greedy(m, sources(), 5, temperature=1e39), r"'temperature' must be at most 3.403e\+38"),
    (lambda m: search.beam_search(m, sources(), 5, alpha=1e39), r"'alpha' must be at most 3.403e\+38"),
    (lambda m: search.beam_search(m, sources(), 5, alpha=200.0), r"'alpha' = 200.0 makes the length penalty "
                                                                 r"\(\(5 \+ length\) / 6\) \*\* alpha overflow float32 "
                                                                 r"at length 5"),
    (lambda m: search.beam_search(m, sources(), 5, lengths=tf.constant([3, 3, 3])), "'lengths' must have shape"),
])
def test_search_arguments_that_cannot_work_are_refused_by_name(model, call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call(model)


@pytest.mark.parametrize("temperature, log_probs, allowed", [
    # Tiny: every token's log-prob / temperature overflows to -inf unless the best is moved to 0 first.
    (1.2e-38, [-1e9, -50.0, -60.0, -70.0], {1}),
    # Huge: padding's -1e9 / temperature came near 0, as likely as any token, unless masked after the division.
    (1e30, [-1e9, -1.0, -2.0, -3.0], {1, 2, 3}),
])
def test_sampling_at_extreme_temperatures_stays_in_the_vocabulary(temperature, log_probs, allowed):
    rows = ops.convert_to_tensor(np.array([log_probs] * 256, np.float32))
    sample = search._sample  # pylint: disable=protected-access
    drawn = ops.convert_to_numpy(sample(rows, temperature, 0, keras.random.SeedGenerator(1)))
    assert set(drawn.tolist()) <= allowed, sorted(set(drawn.tolist()))


def test_search_arguments_are_the_translators_rules():
    """One set of rules: `check_settings` refuses what the search refuses, with the same message."""
    for settings in ({"beam_size": 0}, {"alpha": float("nan")}, {"temperature": -1.0}, {"top_k": 3},
                     {"temperature": 1.0, "beam_size": 2}, {"temperature": 1e-320}, {"alpha": 1e39}):
        with pytest.raises(errors.HParamsError) as searched:
            search.check_arguments(**settings)
        with pytest.raises(errors.HParamsError) as translated:
            translator_lib.check_settings(**settings)
        assert str(searched.value) == str(translated.value)


def test_tensor_arguments_are_left_to_the_ops(model):
    """A tensor `max_length` / `lengths` (traced, as in `decoding.export`) runs as before: nothing to check."""
    inputs = tf.constant(sources())
    lengths = search.decode_lengths(inputs, 2)
    expected_greedy = ops.convert_to_numpy(search.greedy(model, inputs, 8, lengths=lengths)[0])
    expected_beam = ops.convert_to_numpy(search.beam_search(model, inputs, 8, beam_size=2, lengths=lengths)[0])
    spec = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32), tf.TensorSpec([None], tf.int32)]
    greedy = tf.function(lambda x, n, rows: search.greedy(model, x, n, lengths=rows), input_signature=spec,
                         autograph=False)
    beam = tf.function(lambda x, n, rows: search.beam_search(model, x, n, beam_size=2, lengths=rows),
                       input_signature=spec, autograph=False)
    np.testing.assert_array_equal(greedy(inputs, tf.constant(8), lengths)[0].numpy(), expected_greedy)
    np.testing.assert_array_equal(beam(inputs, tf.constant(8), lengths)[0].numpy(), expected_beam)


# F8: translate's inputs and outputs.

@pytest.fixture(scope="module")
def translator(decimal):
    return translator_lib.Translator(tiny(13), decimal, beam_size=3, extra_length=3)


def test_translate_refuses_a_bare_string(translator):
    with pytest.raises(TypeError, match=r"texts must be a list of strings, got a str; wrap it: \[text\]"):
        translator.translate("123")


def test_an_empty_input_gets_its_only_hypothesis_and_others_beam_size(translator):
    beams = translator.translate(["", "12", "  "], return_beams=True)
    assert [len(b) for b in beams] == [1, 3, 1]
    assert beams[0] == beams[2] == [("", 0.0)]
    assert all(math.isfinite(score) for _, score in beams[1])
    assert translator.translate(["", "12"]) == ["", translator.translate(["12"])[0]]


def test_translate_takes_any_iterable_of_strings(translator):
    assert translator.translate(iter(["12", "3"])) == translator.translate(["12", "3"])


def test_truncation_warns_with_the_inputs_index(decimal):
    cut = translator_lib.Translator(tiny(13), decimal, beam_size=1, extra_length=3, max_input_length=3)
    with pytest.warns(UserWarning, match=r"texts\[1\] has more than 3 tokens \(EOS included\); truncated") as got:
        cut.translate(["12", "123456", "1"])
    assert len([w for w in got if issubclass(w.category, UserWarning)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        cut.translate(["12"])  # Two tokens and EOS: not cut.


# F9: a classifier's labels.

class Labels(problem_lib.Problem):
    """Inputs a-f, three labels: vocabularies 8 and 5 (PAD and EOS reserved)."""

    def feature_encoders(self, data_dir=None):
        return {"inputs": problem_lib.SymbolEncoder("abcdef"),
                "targets": problem_lib.SymbolEncoder(["yes", "no", "maybe"])}

    def _dataset(self, *args):
        raise NotImplementedError


@pytest.fixture(scope="module")
def classifier():
    keras.utils.set_random_seed(0)
    return TransformerEncoderClassifier(8, 5, hidden_size=16, filter_size=32, num_heads=2, num_encoder_layers=1)


def test_classifier_label_scores_are_log_probabilities_over_the_labels(classifier):
    beams = translator_lib.Translator(classifier, Labels(), beam_size=3).translate(["abc", "fed"],
                                                                                   return_beams=True)
    for labels in beams:
        assert sorted(label for label, _ in labels) == ["maybe", "no", "yes"]
        assert sum(math.exp(score) for _, score in labels) == pytest.approx(1.0, abs=1e-5)
        assert [score for _, score in labels] == sorted((score for _, score in labels), reverse=True)


@pytest.mark.parametrize("settings", [{"temperature": 5.0}, {"temperature": 1.0, "top_k": 2}])
def test_a_classifier_is_not_sampled(classifier, settings):
    with pytest.raises(ValueError, match="not sampled: temperature and top_k must be 0"):
        translator_lib.Translator(classifier, Labels(), beam_size=1, **settings)


# F11: no filler hypotheses.

class NoVocabAttribute:
    """A model wrapper that does not say its vocabulary: the search reads it from the logits."""

    def __init__(self, model):
        self.model = model

    def encode(self, inputs, training=None):
        return self.model.encode(inputs, training=training)

    def init_cache(self, *args):
        return self.model.init_cache(*args)

    def decode_step(self, ids, cache, index):
        return self.model.decode_step(ids, cache, index)


@pytest.mark.parametrize("wrap", [False, True])
def test_slots_beyond_the_hypotheses_there_are_are_empty_not_filler(wrap):
    model = tiny(4)  # PAD, EOS and two symbols: three outputs of one token.
    model = NoVocabAttribute(model) if wrap else model
    ids, scores = search.beam_search(model, np.array([[2, 3, 1]], np.int32), max_length=1, beam_size=4, alpha=0.0)
    ids, scores = ops.convert_to_numpy(ids)[0], ops.convert_to_numpy(scores)[0]
    assert np.all(np.isfinite(scores[:3])) and len({tuple(row) for row in ids[:3]}) == 3
    assert scores[3] == -math.inf and not ids[3].any()
    # Two tokens give more hypotheses than the beam holds: every slot is a real, distinct one.
    ids, scores = search.beam_search(model, np.array([[2, 3, 1]], np.int32), max_length=2, beam_size=4, alpha=0.0)
    ids, scores = ops.convert_to_numpy(ids)[0], ops.convert_to_numpy(scores)[0]
    assert np.all(np.isfinite(scores)) and len({tuple(row) for row in ids}) == 4


def test_return_beams_gives_only_real_hypotheses_when_the_beam_is_wider_than_the_outputs():
    """Outputs of up to 2 tokens over 3 symbols: 1 + 3 + 9 = 13 exist; a beam of 20 returned 7 placeholders
    ("", -inf) beside them, read as hypotheses."""
    binary = registry.problem("algorithmic_reverse_binary40")  # Vocabulary 5: EOS and three symbols.
    beams = translator_lib.Translator(tiny(5), binary, beam_size=20, extra_length=0).translate(
        ["1"], return_beams=True)[0]
    assert 1 <= len(beams) <= 13 and len({text for text, _ in beams}) == len(beams)
    assert all(math.isfinite(score) for _, score in beams)


def test_a_beam_wider_than_the_vocabulary_decodes_longer_outputs():
    binary = registry.problem("algorithmic_reverse_binary40")  # Vocabulary 5: four ids besides padding.
    beams = translator_lib.Translator(tiny(5), binary, beam_size=6, extra_length=2).translate(
        ["10"], return_beams=True)[0]
    assert len(beams) == 6 and len({text for text, _ in beams}) == 6
    assert all(math.isfinite(score) for _, score in beams)


@pytest.mark.parametrize("vocab, beam_size, max_length", [(4, 3, 1), (4, 3, 2), (5, 4, 1), (3, 2, 1), (6, 5, 3)])
def test_the_widest_beam_of_distinct_hypotheses_is_filled(vocab, beam_size, max_length):
    ids, scores = search.beam_search(tiny(vocab), np.array([[2, 1]], np.int32), max_length, beam_size, alpha=0.0)
    ids, scores = ops.convert_to_numpy(ids)[0], ops.convert_to_numpy(scores)[0]
    assert np.all(scores > -1e6), scores
    assert len({tuple(row) for row in ids}) == beam_size


def test_a_row_that_decodes_nothing_has_one_hypothesis_and_empty_slots(model):
    ids, scores = search.beam_search(model, sources(), 5, beam_size=3, lengths=np.array([0, 4], np.int32))
    ids, scores = ops.convert_to_numpy(ids), ops.convert_to_numpy(scores)
    assert not ids[0].any()
    assert scores[0].tolist() == [0.0, -math.inf, -math.inf]
    assert np.all(np.isfinite(scores[1]))
    _, none = search.beam_search(model, sources(), 0, beam_size=2)
    assert ops.convert_to_numpy(none).tolist() == [[0.0, -math.inf], [0.0, -math.inf]]
