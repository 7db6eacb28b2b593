"""Decoder-only models (language models): the Transformer and the Universal Transformer without an encoder.

Checked against the full pass: cached decoding, padding, a model made uniform, and a reload.
"""

import math

import keras
import numpy as np
import pytest

from t2t_relpos.models.transformer import Transformer, shift_right
from t2t_relpos.models.universal_transformer import UniversalTransformer
from t2t_relpos.training import losses

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
