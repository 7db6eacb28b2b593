"""Search: cached == uncached, beam 1 == greedy, scores and ranking, batching; checkpoint averaging."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from t2t_relpos.decoding import search
from t2t_relpos.models import Transformer
from t2t_relpos.training import averaging

VOCAB = 11


def small_model(position_encoding):
    model = Transformer(VOCAB, VOCAB, hidden_size=16, filter_size=32, num_heads=2, num_encoder_layers=1,
                        num_decoder_layers=1, position_encoding=position_encoding, max_relative_position=3)
    model.build()
    # Initialised weights make a model this small say the same token at every step for every source (then
    # batching or caching could not change an output): noise makes its outputs depend on the source and prefix.
    rng = np.random.default_rng(0)
    for w in model.weights:
        w.assign(w.numpy() + rng.normal(0.0, 3.0 * max(float(np.std(w.numpy())), 0.1), w.shape).astype(w.dtype))
    return model


_MODELS = {}


def shared_model(position_encoding):
    """One model per position encoding for the whole module, so that its compiled searches (`compiled`) are
    traced once and reused by every test."""
    if position_encoding not in _MODELS:
        _MODELS[position_encoding] = small_model(position_encoding)
    return _MODELS[position_encoding]


# Where the property depends on the model's attention and masking (cached == uncached, batching), every
# position encoding; where it is the search's own (ranking, EOS, limits, sampling), "both" (both code paths).
@pytest.fixture(scope="module", params=["sinusoid", "relative", "both"])
def model(request):
    return shared_model(request.param)


@pytest.fixture(scope="module")
def both_model():
    return shared_model("both")


_COMPILED = {}
_IDS = tf.TensorSpec([None, None], tf.int32)


def compiled(model, name, max_length, with_lengths=False, **settings):
    """`search.<name>(model, inputs, max_length, lengths=..., **settings)` as a `tf.function` over inputs of any
    shape: traced once per model and setting, then run as one graph (eager search is a Python loop of ops)."""
    key = (id(model), name, max_length, with_lengths, tuple(sorted(settings.items())))
    if key not in _COMPILED:
        run = getattr(search, name)
        if with_lengths:
            fn = tf.function(lambda x, lengths: run(model, x, max_length, lengths=lengths, **settings),
                             input_signature=[_IDS, tf.TensorSpec([None], tf.int32)], autograph=False)
        else:
            fn = tf.function(lambda x: run(model, x, max_length, **settings), input_signature=[_IDS],
                             autograph=False)
        _COMPILED[key] = (model, fn)  # The model too: its id stays unique while the entry lives.
    fn = _COMPILED[key][1]
    return lambda *args: [t.numpy() for t in fn(*(tf.constant(a, tf.int32) for a in args))]


def sources():
    """Three sources of different lengths (EOS-terminated, 0-padded)."""
    return np.array([[4, 5, 6, 7, 8, 9, 1], [3, 3, 2, 1, 0, 0, 0], [10, 1, 0, 0, 0, 0, 0]], np.int32)


def test_cached_greedy_equals_decoding_the_whole_prefix(model):
    inputs = sources()
    cached, _ = compiled(model, "greedy", 12)(inputs)
    assert len({tuple(row) for row in cached}) > 1 and len(set(cached.ravel()) - {0, 1}) > 1  # Not one token.
    decode = tf.function(lambda *args: model.decode(*args, training=False), reduce_retracing=True, autograph=False)
    uncached = search.greedy_full_prefix(model, inputs, 12, decode_fn=decode)
    np.testing.assert_array_equal(cached, ops.convert_to_numpy(uncached))


def test_cached_greedy_eagerly_and_under_xla(both_model):
    """The search run eagerly (a Python loop) and compiled by XLA decode as the graph the other tests run."""
    inputs = tf.constant(sources())
    eager, _ = search.greedy(both_model, inputs, 12)
    xla = tf.function(lambda x: search.greedy(both_model, x, 12), jit_compile=True, autograph=False)
    np.testing.assert_array_equal(ops.convert_to_numpy(eager), compiled(both_model, "greedy", 12)(inputs)[0])
    np.testing.assert_array_equal(xla(inputs)[0].numpy(), ops.convert_to_numpy(eager))


class EndsBy:
    """Wraps a model so that EOS becomes likely from step `step` on: random models rarely finish by themselves."""

    def __init__(self, model, step=4):
        self.model, self.step = model, step

    def encode(self, inputs, training=None):
        return self.model.encode(inputs, training=training)

    def init_cache(self, *args):
        return self.model.init_cache(*args)

    def decode_step(self, ids, cache, index):
        logits, cache = self.model.decode_step(ids, cache, index)
        boost = ops.where(ops.arange(VOCAB) == 1, ops.cast(ops.maximum(index - self.step + 1, 0), "float32") * 3.0, 0.0)
        return logits + boost, cache

    def __call__(self, features):
        logits = self.model(features)
        index = ops.arange(ops.shape(logits)[1])[:, None]
        boost = ops.where(ops.arange(VOCAB)[None] == 1,
                          ops.cast(ops.maximum(index - self.step + 1, 0), "float32") * 3.0, 0.0)
        return logits + boost


def sequence_log_prob(model, source, target):
    """log P(target | source) by teacher forcing, with padding excluded as in the search."""
    logits = model({"inputs": source[None], "targets": np.array([target], np.int32)})
    log_probs = ops.convert_to_numpy(search._log_probs(logits))[0]  # pylint: disable=protected-access
    return float(sum(log_probs[i, t] for i, t in enumerate(target)))


def strip(ids):
    ids = list(ids)
    return ids[:ids.index(0)] if 0 in ids else ids


@pytest.fixture(scope="module")
def ending_model(both_model):
    return EndsBy(both_model)


def test_beam_size_one_is_greedy(ending_model):
    inputs = sources()
    greedy_ids, greedy_scores = compiled(ending_model, "greedy", 10)(inputs)
    assert np.all(np.any(greedy_ids == 1, axis=1))  # Every sentence finished.
    beam_ids, beam_scores = compiled(ending_model, "beam_search", 10, beam_size=1, alpha=0.0)(inputs)
    np.testing.assert_array_equal(beam_ids[:, 0], greedy_ids)
    np.testing.assert_allclose(beam_scores[:, 0], greedy_scores, rtol=1e-5, atol=1e-5)


def test_beams_are_sorted_and_scored_by_normalised_log_probability(ending_model):
    inputs, alpha, model = sources(), 0.6, ending_model
    ids, scores = compiled(model, "beam_search", 8, beam_size=3, alpha=alpha)(inputs)
    assert np.all(np.diff(scores, axis=1) <= 1e-6)
    for row in range(len(inputs)):
        for beam in range(3):
            target = strip(ids[row, beam])
            expected = sequence_log_prob(model, inputs[row], target) / ((5 + len(target)) / 6) ** alpha
            assert scores[row, beam] == pytest.approx(expected, abs=1e-4)


def test_batched_results_equal_one_at_a_time(model):
    inputs = sources()
    greedy, beam = compiled(model, "greedy", 9), compiled(model, "beam_search", 9, beam_size=2)
    batch_greedy, _ = greedy(inputs)
    batch_beam, batch_scores = beam(inputs)
    for row, source in enumerate(inputs):
        alone = source[None, :max(1, int(np.count_nonzero(source)))]
        one_greedy, _ = greedy(alone)
        one_beam, one_scores = beam(alone)
        np.testing.assert_array_equal(one_greedy[0], batch_greedy[row])
        np.testing.assert_array_equal(one_beam[0], batch_beam[row])
        np.testing.assert_allclose(one_scores[0], batch_scores[row], atol=1e-4)


class ScriptedModel:
    """A decoder whose next-token distribution depends only on the step and the previous token.

    Vocabulary: 0 PAD, 1 EOS, 2 "a", 3 "b". "EOS" at once has probability 0.5; "a a a EOS" has 0.3 * 0.95^3:
    lower, but better once normalised by a strong length penalty.
    """

    vocab = 4

    def encode(self, inputs, training=None):
        del training
        return ops.zeros(ops.shape(inputs) + (1,)), ops.not_equal(inputs, 0)

    def init_cache(self, encoder_output, encoder_mask, max_length):
        del encoder_mask, max_length
        return {"self": ops.zeros((ops.shape(encoder_output)[0], 1))}

    def decode_step(self, ids, cache, index):
        table = np.full((8, self.vocab, self.vocab), 0.25, np.float32)  # [step, previous, next]
        table[0, 0] = [0.0, 0.5, 0.3, 0.2]
        table[1:3, 2] = [0.0, 0.03, 0.95, 0.02]
        table[3, 2] = [0.0, 0.95, 0.03, 0.02]
        probs = ops.take(ops.convert_to_tensor(table[:, :, :]), index, axis=0)
        probs = ops.take(probs, ids[:, 0], axis=0)
        return ops.log(ops.maximum(probs, 1e-9))[:, None, :], cache


@pytest.mark.parametrize("alpha, best", [(0.0, [1]), (0.6, [1]), (2.0, [2, 2, 2, 1])])
def test_length_penalty_changes_the_ranking(alpha, best):
    ids, scores = search.beam_search(ScriptedModel(), np.array([[2, 1]], np.int32), 6, beam_size=2, alpha=alpha)
    assert strip(ops.convert_to_numpy(ids)[0, 0]) == best
    expected = math.log(0.5) if best == [1] else (math.log(0.3) + 3 * math.log(0.95)) / (9 / 6) ** alpha
    assert float(ops.convert_to_numpy(scores)[0, 0]) == pytest.approx(expected, abs=1e-5)


def test_sampling_with_top_k_one_is_greedy(both_model):
    inputs = sources()
    greedy_ids, _ = compiled(both_model, "greedy", 9)(inputs)
    sampled, _ = search.greedy(both_model, inputs, 9, temperature=1.0, top_k=1, seed=3)
    np.testing.assert_array_equal(ops.convert_to_numpy(sampled), greedy_ids)


def test_averaging_two_checkpoints_gives_the_mean(tmp_path):
    model = small_model("relative")
    first = [w.numpy().copy() for w in model.weights]
    checkpoint = tf.train.Checkpoint(model=model)
    path_a = checkpoint.save(str(tmp_path / "ckpt"))
    for w in model.weights:
        w.assign(w.numpy() * 3.0 + 1.0)
    second = [w.numpy().copy() for w in model.weights]
    path_b = checkpoint.save(str(tmp_path / "ckpt"))
    for w in model.weights:
        w.assign(np.zeros(w.shape, w.dtype))
    averaging.average(model, [path_a, path_b])
    for w, a, b in zip(model.weights, first, second):
        np.testing.assert_allclose(w.numpy(), (a + b) / 2, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_rows_output_limit_is_its_own_source_length_plus_extra(both_model, beam_size):
    """Beside a long source, a short one may not decode longer than it would alone (nor the reverse)."""
    inputs = np.zeros((2, 12), np.int32)
    inputs[0, :3] = [4, 5, 1]
    inputs[1, :12] = [3, 4, 5, 6, 7, 8, 9, 10, 4, 5, 6, 1]
    extra = 2
    lengths = search.decode_lengths(inputs, extra)
    np.testing.assert_array_equal(ops.convert_to_numpy(lengths), [5, 14])

    def run(batch, max_length, row_lengths=None):
        settings = {} if beam_size == 1 else {"beam_size": beam_size}
        name = "greedy" if beam_size == 1 else "beam_search"
        args = (batch,) if row_lengths is None else (batch, row_lengths)
        ids = compiled(both_model, name, max_length, row_lengths is not None, **settings)(*args)[0]
        return ids if beam_size == 1 else ids[:, 0]

    together = run(inputs, 14, lengths)
    alone = run(inputs[:1, :3], 5)
    assert np.count_nonzero(together[0]) <= 5 and not together[0, 5:].any()
    np.testing.assert_array_equal(together[0, :5], alone[0])
    np.testing.assert_array_equal(together[1], run(inputs[1:], 14)[0])


def _tiny_translator_parts():
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    problem = registry.problem("algorithmic_reverse_decimal40")
    hparams = registry.hparams("transformer_tiny_rel").parse(
        "hidden_size=16,filter_size=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1")
    return problem, Transformer.from_hparams(hparams, *problem.vocab_sizes())  # Never called: not built.


@pytest.mark.parametrize("beam_size", [1, 2])
def test_translator_output_does_not_depend_on_batch_mates(beam_size):
    from t2t_relpos.decoding import translator as translator_lib  # pylint: disable=import-outside-toplevel

    problem, model = _tiny_translator_parts()
    model.build()
    translator = translator_lib.Translator(model, problem, beam_size=beam_size, extra_length=5)
    alone = translator.translate(["0123"])[0]
    assert translator.translate(["0123", "9" * 30])[0] == alone  # Batched 8 -> 32 wide.
    assert len(alone) <= 4 + 1 + 5  # Four digits, EOS, extra_length: untrained, it rambles to the limit.


def test_search_and_translator_build_a_model_that_was_never_called():
    from t2t_relpos.decoding import translator as translator_lib  # pylint: disable=import-outside-toplevel

    problem, model = _tiny_translator_parts()
    ids, _ = search.greedy(model, sources(), 4)
    assert ops.shape(ids) == (3, 4)
    problem, model = _tiny_translator_parts()
    assert isinstance(translator_lib.Translator(model, problem, beam_size=2).translate(["12"])[0], str)


@pytest.mark.parametrize("setting, pattern", [
    ({"beam_size": 0}, "'beam_size' must be >= 1, got 0"), ({"beam_size": -2}, "'beam_size' must be >= 1"),
    ({"batch_size": 0}, "'batch_size' must be >= 1"), ({"extra_length": -100}, "'extra_length' must be >= 0"),
    ({"top_k": -3}, "'top_k' must be >= 0"), ({"max_input_length": 0}, "'max_input_length' must be >= 2"),
    ({"temperature": 0.5, "beam_size": 2}, "sampling"),
])
def test_decoding_settings_that_cannot_work_are_refused(setting, pattern):
    from t2t_relpos import errors  # pylint: disable=import-outside-toplevel
    from t2t_relpos.decoding import translator as translator_lib  # pylint: disable=import-outside-toplevel

    with pytest.raises(errors.HParamsError, match=pattern):
        translator_lib.check_settings(**setting)


class CacheSizes:
    """`model` that never ends a sentence (so every search runs to `max_length`) and records the positions of
    the self-attention caches each decoding step is given. The search runs eagerly, step by step in Python; the
    model's step is a `tf.function` (traced once per cache capacity), eager TensorFlow being 0.1-0.4 s a step."""

    def __init__(self, model, step=None):
        self.model, self.sizes = model, []
        self.step = step or tf.function(model.decode_step, autograph=False)

    def encode(self, inputs, training=None):
        return self.model.encode(inputs, training=training)

    def init_cache(self, encoder_output, encoder_mask, max_length):
        return self.model.init_cache(encoder_output, encoder_mask, max_length)

    def decode_step(self, ids, cache, index):
        self.sizes.append(int(keras.tree.flatten(cache["self"])[0].shape[2]))  # Attention keys [B, H, S, d].
        logits, cache = self.step(ids, cache, index)
        return ops.where(ops.arange(ops.shape(logits)[-1]) == search.EOS_ID, -1.0e9, logits), cache


def test_cache_capacities_grow_with_the_output_to_the_longest():
    assert search.cache_capacities(20) == [20]
    longest = tf.constant(80)
    assert search.cache_capacities(longest) == [longest]  # Known only at run time (a SavedModel): one buffer.
    assert search.cache_capacities(80) == [32, 64, 80]
    assert search.cache_capacities(200) == [32, 64, 96, 160, 200]
    for longest in range(1, 3000, 7):
        sizes = search.cache_capacities(longest)
        assert sizes[-1] == longest and sizes == sorted(set(sizes))
        assert all(b <= max(1.5 * a + 32, 64) for a, b in zip(sizes, sizes[1:]))  # At most ~1.5x what is written.


# The Universal Transformer's caches (ACT's, the sepconv transition's) grow under greedy search. Beam search
# only adds a reorder of every cache entry, the same for any model (`search._reorder_caches`): its case here is
# the Transformer's (the UT's beam case took 35 s of a core).
@pytest.mark.parametrize("kind, beam_size", [("transformer", 0), ("transformer", 3), ("universal_sepconv", 0)])
def test_growing_caches_decode_exactly_as_one_buffer_of_the_longest_output(kind, beam_size, monkeypatch):
    from test_universal import tiny  # pylint: disable=import-outside-toplevel

    model = small_model("relative") if kind == "transformer" else tiny("act", "both", "sepconv")
    inputs = sources() if kind == "transformer" else np.array([[4, 5, 6, 1], [3, 2, 1, 0]], np.int32)
    lengths = np.array([40, 35, 9][:len(inputs)], np.int32)  # Rows that stop early, while others go on.

    def decode(wrapped):
        if beam_size:
            return search.beam_search(wrapped, inputs, 40, beam_size=beam_size, lengths=lengths)
        return search.greedy(wrapped, inputs, 40, lengths=lengths)

    growing = CacheSizes(model)
    ids, scores = decode(growing)
    assert growing.sizes == [32] * 32 + [40] * 8
    monkeypatch.setattr(search, "cache_capacities", lambda longest: [longest])  # One buffer, as before.
    fixed = CacheSizes(model, growing.step)
    fixed_ids, fixed_scores = decode(fixed)
    assert set(fixed.sizes) == {40}
    np.testing.assert_array_equal(ops.convert_to_numpy(ids), ops.convert_to_numpy(fixed_ids))
    np.testing.assert_allclose(ops.convert_to_numpy(scores), ops.convert_to_numpy(fixed_scores), rtol=1e-6)
