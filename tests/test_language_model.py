"""Decoder-only models (language models): the Transformer and the Universal Transformer without an encoder.

Checked against the full pass: cached decoding, padding, a model made uniform, and a reload.
"""

import math

import keras
import numpy as np
import pytest

from t2t_relpos import errors, registry
from t2t_relpos.decoding import generation, lm_scoring
from t2t_relpos.models.transformer import Transformer, shift_right
from t2t_relpos.models.universal_transformer import UniversalTransformer
from t2t_relpos.training import losses
from t2t_relpos.training import trainer as trainer_lib

VOCAB = 11
KINDS = {
    "transformer": (Transformer, {"num_decoder_layers": 2}),
    "ut": (UniversalTransformer, {"num_rec_steps": 2}),
    "act": (UniversalTransformer, {"recurrence_type": "act", "act_max_steps": 3}),
}


def language_model(kind, position_encoding="relative", **overrides):
    cls, arguments = KINDS[kind]
    keras.utils.set_random_seed(1)
    return cls(None, VOCAB, hidden_size=16, filter_size=24, num_heads=2, position_encoding=position_encoding,
               max_relative_position=3, **{**arguments, **overrides})


def ids(batch=2, length=7, seed=0):
    return np.random.RandomState(seed).randint(2, VOCAB, (batch, length)).astype("int32")


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("position_encoding", ["relative", "sinusoid"])
def test_cached_steps_equal_the_full_pass(kind, position_encoding):
    model = language_model(kind, position_encoding)
    targets = ids()
    full = keras.ops.convert_to_numpy(model({"targets": targets}))
    decoder_inputs = keras.ops.convert_to_numpy(shift_right(targets))
    cache = model.init_cache(None, None, targets.shape[1], batch_size=2)
    # Steps of one token, then of three and two: multi-token steps are exact too.
    steps = [(0, 1), (1, 2), (2, 5), (5, 7)]
    cached = []
    for start, end in steps:
        logits, cache = model.decode_step(decoder_inputs[:, start:end], cache, start)
        cached.append(keras.ops.convert_to_numpy(logits))
    np.testing.assert_allclose(np.concatenate(cached, axis=1), full, atol=2e-5)


@pytest.mark.parametrize("kind", ["transformer", "act"])
def test_padding_changes_no_score(kind):
    model = language_model(kind)
    targets = ids(batch=1, length=5)
    padded = np.pad(targets, [[0, 0], [0, 4]])
    alone = keras.ops.convert_to_numpy(model({"targets": targets}))
    with_padding = keras.ops.convert_to_numpy(model({"targets": padded}))
    np.testing.assert_allclose(with_padding[:, :5], alone, atol=2e-5)
    num, den = losses.neg_log_perplexity(with_padding, padded)
    num_alone, den_alone = losses.neg_log_perplexity(alone, targets)
    assert float(den) == float(den_alone) == 5.0
    np.testing.assert_allclose(float(num), float(num_alone), rtol=1e-5)


def test_a_uniform_model_has_the_perplexity_of_its_vocabulary():
    model = language_model("transformer", shared_embedding_and_softmax_weights=True)
    model.build()
    model.target_embedding.embeddings.assign(np.zeros((VOCAB, 16), "float32"))  # Every logit 0.
    targets = ids(batch=3, length=6)
    num, den = losses.neg_log_perplexity(model({"targets": targets}), targets)
    assert math.exp(-float(num) / float(den)) == pytest.approx(VOCAB, rel=1e-5)


def test_a_decoder_only_model_has_no_encoder_and_reloads(tmp_path):
    model = language_model("act", "sinusoid")
    targets = ids()
    before = keras.ops.convert_to_numpy(model({"targets": targets}))
    assert model.encoder is None and model.input_embedding is None
    assert not any("cross_attention" in w.path for w in model.weights)
    assert sum(model.parameter_counts().values()) == model.count_params()
    details = model({"targets": targets}, return_details=True)
    assert sorted(details["ponder_times"]) == ["decoder"] and sorted(details["losses"]) == ["act_loss"]
    path = str(tmp_path / "lm.keras")
    model.save(path)
    after = keras.ops.convert_to_numpy(keras.saving.load_model(path)({"targets": targets}))
    np.testing.assert_array_equal(after, before)


def test_a_decoder_only_model_refuses_inputs_and_encoders():
    model = language_model("transformer")
    with pytest.raises(ValueError, match="no encoder"):
        model.encode(ids())
    with pytest.raises(ValueError, match="features lack 'targets'"):
        model({"inputs": ids()})
    with pytest.raises(ValueError, match="batch_size"):
        model.init_cache(None, None, 4)
    with pytest.raises(ValueError, match="no cross-attention"):
        model.decoder(np.zeros((1, 2, 16), "float32"), np.zeros((1, 3, 16), "float32"))


# -- generation --------------------------------------------------------------------------------------------
def scrambled(kind, position_encoding, seed=4):
    """A model whose random weights are large enough that greedy continuations vary from step to step (with
    seed 4 some end early, in EOS)."""
    model = language_model(kind, position_encoding)
    model.build()
    rng = np.random.RandomState(seed)
    for weight in model.weights:
        if len(weight.shape) > 1:  # Projections, embeddings and relation tables; norms stay as they are.
            weight.assign(rng.normal(0.0, 0.7, weight.shape).astype("float32"))
    return model


def full_pass_greedy(model, prompt, max_new_tokens):
    """Greedy continuation with no cache: the whole text through the model at every step."""
    text, out = list(prompt), []
    for _ in range(max_new_tokens):
        logits = keras.ops.convert_to_numpy(model({"targets": np.array([text + [2]], np.int32)}))[0, len(text)]
        logits[0] = -np.inf  # Decoding never emits padding.
        token = int(np.argmax(logits))
        if token == 1:
            break
        out.append(token)
        text.append(token)
    return out


PROMPTS = [[5, 6, 7], [], [4], [8, 9, 10, 3, 2], [5, 6, 7]]


@pytest.mark.parametrize("kind,position_encoding,seed", [("transformer", "relative", 4), ("act", "sinusoid", 1)])
def test_generation_equals_the_full_pass(kind, position_encoding, seed):
    model = scrambled(kind, position_encoding, seed)
    generated = generation.generate(model, PROMPTS, max_new_tokens=6, batch_size=2)
    assert [ids for ids, _ in generated] == [full_pass_greedy(model, p, 6) for p in PROMPTS]
    assert len({tuple(ids) for ids, _ in generated}) > 2  # Not one degenerate output.
    # Prompts of several lengths in one batch: the longer ones are forced through their prompts, exactly.
    batch = np.zeros((len(PROMPTS), 5), np.int32)
    for row, prompt in enumerate(PROMPTS):
        batch[row, :len(prompt)] = prompt
    ids, scores = generation.continue_prompts(model, batch, 6)
    for row, (expected, score) in enumerate(generated):
        assert [t for t in keras.ops.convert_to_numpy(ids)[row, 0] if t > 1] == expected
        assert float(keras.ops.convert_to_numpy(scores)[row, 0]) == pytest.approx(score, abs=1e-4)


def test_beam_search_and_sampling_continue_prompts():
    model = scrambled("transformer", "relative")
    greedy = generation.generate(model, [[5, 6, 7]], max_new_tokens=5)[0]
    beam = generation.generate(model, [[5, 6, 7]], max_new_tokens=5, beam_size=4)[0]
    assert beam[1] >= greedy[1] - 1e-5  # alpha = 0: the beam's best is at least as probable as greedy's.
    assert generation.generate(model, [[5, 6, 7]], max_new_tokens=5, temperature=1.0, top_k=1, seed=4)[0][0] \
        == greedy[0]
    samples = {tuple(generation.generate(model, [[5]], 6, temperature=2.0, seed=s)[0][0]) for s in range(6)}
    assert len(samples) > 1


def test_generation_refuses_what_cannot_be_continued():
    model = scrambled("transformer", "relative")
    with pytest.raises(ValueError, match="reserved id"):
        generation.generate(model, [[5, 1, 6]], 3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generation.generate(model, [[5]], -1)
    translator_model = Transformer(12, VOCAB, hidden_size=16, filter_size=24, num_heads=2)
    with pytest.raises(ValueError, match="decoder-only"):
        generation.generate(translator_model, [[5]], 3)


# -- scoring a text ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("window,stride", [(4, 1), (5, 3), (30, 30)])
def test_sliding_windows_score_every_token_once_with_the_windows_context(window, stride):
    model = scrambled("transformer", "relative")
    text = ids(batch=1, length=13, seed=5)[0]
    result = lm_scoring.score_ids(lm_scoring.model_scorer(model), text, window, stride, batch_size=2)
    # Reference: token j scored by the model reading the window that scores it, from that window's start.
    expected = 0.0
    for start, end, first in lm_scoring.windows(len(text), window, stride):
        log_probs = keras.ops.convert_to_numpy(keras.ops.log_softmax(model({"targets": text[None, start:end]})))
        expected -= sum(log_probs[0, j - start, text[j]] for j in range(first, end))
    assert result["tokens"] == len(text)
    assert result["nll"] == pytest.approx(expected, rel=1e-5)
    assert result["perplexity"] == pytest.approx(math.exp(expected / len(text)), rel=1e-5)
    covered = [j for _, end, first in lm_scoring.windows(len(text), window, stride) for j in range(first, end)]
    assert covered == list(range(len(text)))


def test_scoring_refuses_windows_that_cannot_score():
    with pytest.raises(ValueError, match="stride 5 is longer than the window 4"):
        lm_scoring.windows(10, 4, 5)
    with pytest.raises(ValueError, match="window must be an integer >= 1"):
        lm_scoring.windows(10, 0, 1)
    with pytest.raises(errors.DataError, match="no tokens"):
        lm_scoring.score_ids(lambda x: x, [], 4)


# -- training ------------------------------------------------------------------------------------------------
def test_a_tiny_language_model_learns_a_repeated_text_and_continues_it(tmp_path):
    raw, data = tmp_path / "raw", tmp_path / "data"
    raw.mkdir()
    verse = "the cat sat on the mat, the dog sat on the log. "
    for split in ("train", "dev"):
        (raw / f"{split}.txt").write_text(verse * 40 + "\n")
    problem = registry.problem("languagemodel_local_characters")
    problem.generate_data(str(data), str(raw))
    hparams = registry.hparams("transformer_lm_cpu_rel")
    hparams.parse("hidden_size=32,filter_size=64,num_decoder_layers=2,max_length=32,batch_size=256,"
                  "learning_rate=1.0,learning_rate_warmup_steps=50,max_relative_position=8")
    trainer = trainer_lib.Trainer(problem, hparams, str(tmp_path / "run"), data_dir=str(data), seed=1,
                                  eval_every=0, verbose=False)
    metrics = trainer.train(100)
    assert metrics["accuracy"] >= 0.85 and metrics["bits_per_character"] < 0.8, metrics
    assert metrics["perplexity"] == pytest.approx(math.exp(-metrics["neg_log_perplexity"]))
    encoder = problem.feature_encoders(str(data))["targets"]
    (continuation, _), = generation.generate(trainer.model, [encoder.encode("the dog sat on")], 12)
    assert encoder.decode(continuation) == " the log. th"
