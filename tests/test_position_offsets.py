"""Randomized position offsets in training (tensor2tensor's `position_start_index`, the UT paper's §3.4)."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from t2t_relpos import errors
from t2t_relpos.hparams import checks, defaults
from t2t_relpos.layers import PositionOffset, UniversalTransformerEncoder
from t2t_relpos.models.transformer import Transformer
from t2t_relpos.models.universal_transformer import UniversalTransformer

X = np.zeros((2, 7, 8), "float32")
SMALL = dict(hidden_size=16, filter_size=32, num_heads=2, layer_prepostprocess_dropout=0.0,
             attention_dropout=0.0, relu_dropout=0.0)
FEATURES = {"inputs": np.array([[5, 6, 7, 8, 1], [9, 4, 1, 0, 0]]),
            "targets": np.array([[8, 7, 6, 5, 1], [4, 9, 1, 0, 0]])}


def draws(layer, n=20, x=X):
    return [int(layer(x, training=True)) for _ in range(n)]


def test_random_offsets_cover_their_range_and_vary_from_call_to_call():
    got = draws(PositionOffset("random", max_offset=5, seed=3), n=60)
    assert set(got) == set(range(5))
    # tensor2tensor's range: [0, the call's length).
    assert set(draws(PositionOffset("random", seed=3), n=60)) == set(range(X.shape[1]))


def test_step_offsets_follow_tensor2tensors_formula():
    layer = PositionOffset("step")
    got = [int(layer(X, step=t, num_steps=4, training=True)) for t in range(4)]
    assert got == [7 * t // 4 for t in range(4)] == [0, 1, 3, 5]


@pytest.mark.parametrize("kind", ["random", "step"])
def test_no_offset_outside_training(kind):
    layer = PositionOffset(kind, max_offset=50, seed=1)
    assert {int(layer(X, step=3, num_steps=4, training=t)) for t in (None, False) for _ in range(5)} == {0}


def test_offsets_are_reproducible_under_the_global_seed():
    def run(seed):
        keras.utils.set_random_seed(seed)
        return draws(PositionOffset("random", max_offset=1000))

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_a_compiled_step_draws_a_new_offset_every_batch():
    layer = PositionOffset("random", max_offset=1000, seed=2)
    step = tf.function(lambda x: layer(x, training=True), autograph=False)
    assert len({int(step(X)) for _ in range(10)}) > 5


def encoder(**kwargs):
    return UniversalTransformerEncoder(num_rec_steps=1, hidden_size=8, num_heads=2, filter_size=16,
                                       **kwargs)


def test_a_random_offset_shifts_the_encoders_positions_by_a_draw_in_range():
    keras.utils.set_random_seed(1)
    layer = encoder(position_start_index="random", max_position_offset=6)
    x = np.random.RandomState(0).rand(2, 7, 8).astype("float32")
    trained = ops.convert_to_numpy(layer(x, training=True))
    candidates = [ops.convert_to_numpy(layer(x, position_offset=k)) for k in range(6)]
    matches = [k for k, c in enumerate(candidates) if np.allclose(trained, c, atol=1e-5)]
    assert len(matches) == 1
    # At inference the signal starts at 0.
    np.testing.assert_allclose(ops.convert_to_numpy(layer(x, training=False)), candidates[0], atol=1e-6)


def pair(model_class, **kwargs):
    """The model with offsets and the same weights without them."""
    keras.utils.set_random_seed(4)
    shifted = model_class(12, 12, **SMALL, **kwargs)
    shifted(FEATURES)
    plain = model_class(12, 12, **SMALL, **{k: v for k, v in kwargs.items()
                                          if k not in ("position_start_index", "position_offset_shared",
                                                       "max_position_offset")})
    plain(FEATURES)
    plain.set_weights([w for w in shifted.get_weights() if w.dtype != np.uint32 and w.ndim])
    return shifted, plain


UT = dict(num_rec_steps=2, num_encoder_layers=1, num_decoder_layers=1)


@pytest.mark.parametrize("model_class, kwargs", [
    (Transformer, dict(num_encoder_layers=1, num_decoder_layers=1)),
    (UniversalTransformer, UT),
    (UniversalTransformer, dict(UT, recurrence_type="act", act_max_steps=3)),
])
def test_offsets_change_training_only_and_cached_decoding_still_equals_the_full_pass(model_class, kwargs):
    shifted, plain = pair(model_class, position_start_index="random", max_position_offset=300, **kwargs)
    same = ops.convert_to_numpy(plain(FEATURES, training=True))
    assert not np.allclose(ops.convert_to_numpy(shifted(FEATURES, training=True)), same, atol=1e-4)
    full = ops.convert_to_numpy(shifted(FEATURES, training=False))
    np.testing.assert_allclose(full, ops.convert_to_numpy(plain(FEATURES, training=False)), atol=1e-5)
    encoder_output, mask = shifted.encode(FEATURES["inputs"], training=False)
    cache = shifted.init_cache(encoder_output, mask, max_length=5)
    decoder_inputs = np.pad(FEATURES["targets"], [[0, 0], [1, 0]])[:, :-1]
    steps = []
    for i in range(5):
        logits, cache = shifted.decode_step(decoder_inputs[:, i:i + 1], cache, i)
        steps.append(ops.convert_to_numpy(logits))
    valid = FEATURES["targets"] != 0  # With ACT the full pass does not run target padding.
    np.testing.assert_allclose(np.concatenate(steps, axis=1)[valid], full[valid], atol=1e-4)


def test_a_shared_offset_is_one_draw_for_the_encoder_the_decoder_and_every_step():
    shifted, plain = pair(UniversalTransformer, position_start_index="random", max_position_offset=4,
                          position_offset_shared=True, **UT)
    trained = ops.convert_to_numpy(shifted(FEATURES, training=True))

    def with_offset(k):
        encoder_output, mask = plain.encode(FEATURES["inputs"], position_offset=k)
        return ops.convert_to_numpy(plain.decode(np.pad(FEATURES["targets"], [[0, 0], [1, 0]])[:, :-1],
                                                 encoder_output, mask, position_offset=k))

    assert sum(np.allclose(trained, with_offset(k), atol=1e-5) for k in range(4)) == 1


@pytest.mark.parametrize("shared", [False, True])
def test_relative_models_do_not_read_offsets(shared):
    shifted, plain = pair(UniversalTransformer, position_encoding="relative", max_relative_position=4,
                          position_start_index="random", position_offset_shared=shared, **UT)
    assert len(shifted.weights) == len(plain.weights)  # No generator state either.
    np.testing.assert_allclose(ops.convert_to_numpy(shifted(FEATURES, training=True)),
                               ops.convert_to_numpy(plain(FEATURES, training=True)), atol=1e-6)


@pytest.mark.parametrize("values, fragment", [
    (dict(position_offset_shared=True), "'position_start_index' must be \"random\" with position_offset_shared"),
    (dict(position_start_index="step"), "'position_start_index' must be \"none\" or \"random\" for a Transformer"),
    (dict(max_position_offset=-1), "'max_position_offset' must be >= 0"),
])
def test_settings_that_cannot_work_are_refused(values, fragment):
    hp = defaults.default_hparams()
    for name, value in values.items():
        hp.set_hparam(name, value)
    with pytest.raises(errors.HParamsError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        checks.check(hp)


def test_the_layers_keep_their_offsets_in_their_config():
    layer = encoder(position_start_index="step", max_position_offset=9)
    clone = UniversalTransformerEncoder.from_config(layer.get_config())
    assert (clone.position_start_index, clone.max_position_offset) == ("step", 9)
    offset = PositionOffset.from_config(PositionOffset("random", max_offset=3, seed=5).get_config())
    assert (offset.start_index_type, offset.max_offset, offset.seed) == ("random", 3, 5)
