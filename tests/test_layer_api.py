"""The layers composed in a user's own Keras model: masks of the wrong shape, Keras masks carried between
layers, caches, argument checks and precision. Each case was once silently wrong or a backend traceback."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from attention_reference import layer_weights, reference_attention, relation_labels
from t2t_relpos.layers import (
    AdaptiveComputationTime,
    RelationAwareMultiHeadAttention,
    SeparableConvTransition,
    TokenEmbedding,
    TransformerDecoder,
    TransformerEncoder,
    TransformerEncoderBlock,
    UniversalTransformerDecoder,
    UniversalTransformerEncoder,
)

SMALL = {"hidden_size": 16, "num_heads": 2, "filter_size": 32, "position_encoding": "relative",
         "max_relative_position": 2}
SOURCE = np.array([[3, 4, 5, 6, 0, 0], [7, 8, 0, 0, 0, 0]])


def numpy(x):
    return ops.convert_to_numpy(x)


def attention(**kwargs):
    return RelationAwareMultiHeadAttention(**{"num_heads": 2, "key_dim": 4, "max_relative_position": 2, **kwargs})


# -- masks and labels of another shape than the call's --------------------------------------------------------
def test_a_key_padding_mask_passed_as_attention_mask_is_refused_not_broadcast():
    # Batch size = query length: [B, Tk] would broadcast as [1, B, Tk], giving query i the padding of example i.
    x = np.random.default_rng(0).random((3, 3, 8)).astype("float32")
    padding = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0]], bool)
    layer = attention()
    with pytest.raises(ValueError, match=r"attention_mask must be \[B, Tq, Tk\] = \[3, 3, 3\].*got shape \[3, 3\]"
                                         r".*`value_mask`"):
        layer(x, query_mask=padding, attention_mask=padding)
    with pytest.raises(ValueError, match=r"attention_mask must be .*got shape \[3, 3\]"):
        layer(x, attention_mask=np.tril(np.ones((3, 3), bool)))


@pytest.mark.parametrize("argument, value, message", [
    ("value_mask", np.ones((2, 4), bool), r"value_mask must be \[B, Tk\] = \[2, 5\].*got shape \[2, 4\]"),
    ("query_mask", np.ones((2, 5, 1), bool), r"query_mask must be \[B, Tq\].*got shape \[2, 5, 1\]"),
    ("attention_mask", np.ones((2, 4, 5), bool), r"attention_mask must be.*got shape \[2, 4, 5\]"),
])
def test_masks_of_another_size_are_refused(argument, value, message):
    with pytest.raises(ValueError, match=message):
        attention()(np.zeros((2, 5, 8), "float32"), **{argument: value})


def test_edge_labels_of_another_shape_are_refused():
    layer = attention(max_relative_position=None, num_edge_labels=3)
    x = np.zeros((2, 5, 8), "float32")
    for labels in (np.zeros((5, 5), "int32"), np.zeros((1, 5, 5), "int32")):
        with pytest.raises(ValueError, match=r"edge_labels must be \[B, Tq, Tk\] = \[2, 5, 5\]"):
            layer(x, edge_labels=labels)


def test_broadcast_masks_equal_the_full_mask():
    x = np.random.default_rng(1).random((2, 5, 8)).astype("float32")
    layer = attention()
    keys = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]], bool)
    causal = np.tril(np.ones((5, 5), bool))
    full = numpy(layer(x, attention_mask=keys[:, None, :] & causal[None]))
    np.testing.assert_allclose(numpy(layer(x, value_mask=keys, attention_mask=causal[None])), full, atol=1e-6)
    np.testing.assert_allclose(numpy(layer(x, attention_mask=keys[:, None, :], use_causal_mask=True)), full,
                               atol=1e-6)


@pytest.mark.parametrize("call, message", [
    (lambda layer: layer(np.zeros((8,), "float32")), r"query must be \[batch, length, depth\], got shape \[8\]"),
    (lambda layer: layer(np.zeros((5, 8), "float32")), r"query must be \[batch, length, depth\], got shape \[5, 8\]"),
    (lambda layer: layer(np.zeros((2, 5, 8), "float32"), np.zeros((5, 8), "float32")),
     r"value must be \[batch, length, depth\], got shape \[5, 8\]"),
], ids=["query_rank_1", "query_rank_2", "value_rank_2"])
def test_an_input_of_another_rank_is_refused_naming_it(call, message):
    with pytest.raises(ValueError, match=message):
        call(attention())


def test_an_input_of_another_depth_than_the_layer_was_built_for_is_refused():
    layer = attention()
    layer(np.zeros((2, 5, 8), "float32"))
    with pytest.raises(ValueError, match=r"query must be \[batch, length, depth\] = \[\?, \?, 8\].*\[2, 5, 6\]"):
        layer(np.zeros((2, 5, 6), "float32"))


@pytest.mark.parametrize("make", [
    lambda: TransformerEncoder(num_layers=1, **SMALL),
    lambda: UniversalTransformerEncoder(num_rec_steps=1, **SMALL),
    lambda: TransformerDecoder(num_layers=1, **SMALL),
], ids=["transformer", "universal", "decoder"])
def test_a_stack_refuses_inputs_narrower_than_hidden_size_built_or_not(make):
    narrow, right = np.zeros((2, 3, 8), "float32"), np.zeros((2, 3, 16), "float32")
    message = r"x must be \[batch, length, depth\] = \[\?, \?, 16\], got shape \[2, 3, 8\]; .*hidden_size=16"
    decoder = isinstance(make(), TransformerDecoder)
    with pytest.raises(ValueError, match=message):
        make()(narrow, right) if decoder else make()(narrow)
    layer = make()
    layer(right, right) if decoder else layer(right)
    with pytest.raises(ValueError, match=message):
        layer(narrow, right) if decoder else layer(narrow)


# -- Keras masks carried from layer to layer --------------------------------------------------------------------
def _masked_memory():
    keras.utils.set_random_seed(0)
    embedded = keras.layers.Embedding(20, 16, mask_zero=True)(SOURCE)
    return TransformerEncoder(num_layers=1, **SMALL)(embedded)  # Carries the Keras mask of SOURCE != 0.


def _decode_step_by_step(decoder, y, memory):
    cache = decoder.init_cache(memory, y.shape[1])
    steps = []
    for i in range(y.shape[1]):
        out, cache = decoder(y[:, i:i + 1], cache=cache, cache_index=i)
        steps.append(numpy(out))
    return np.concatenate(steps, axis=1)


@pytest.mark.parametrize("make_decoder", [
    lambda: TransformerDecoder(num_layers=1, **SMALL),
    lambda: UniversalTransformerDecoder(num_rec_steps=2, **SMALL),
    lambda: UniversalTransformerDecoder(num_rec_steps=2, recurrence_type="act", act_max_steps=3, **SMALL),
], ids=["transformer", "universal", "universal_act"])
def test_decoders_leave_out_the_source_padding_a_keras_mask_marks_full_and_cached(make_decoder):
    memory = _masked_memory()
    y = np.random.default_rng(0).standard_normal((2, 4, 16)).astype("float32")
    decoder = make_decoder()
    want = numpy(decoder(y, memory, encoder_mask=SOURCE != 0))
    np.testing.assert_allclose(numpy(decoder(y, memory)), want, atol=1e-5)
    np.testing.assert_allclose(_decode_step_by_step(decoder, y, memory), want, atol=1e-5)


def test_an_unbuilt_decoder_makes_its_cache_and_an_unbuilt_attention_says_what_to_do():
    memory = np.random.default_rng(0).random((2, 7, 16)).astype("float32")
    y = np.random.default_rng(1).random((2, 3, 16)).astype("float32")
    decoder = TransformerDecoder(num_layers=2, hidden_size=16, num_heads=2, filter_size=32)
    stepped = _decode_step_by_step(decoder, y, memory)  # init_cache comes first: it builds the decoder.
    np.testing.assert_allclose(stepped, numpy(decoder(y, memory)), atol=1e-5)
    with pytest.raises(ValueError, match="call it once, or build it"):
        attention(max_relative_position=None).compute_key_value(memory)


def test_padding_reaches_no_valid_position_through_keras_masks_in_a_functional_model():
    keras.utils.set_random_seed(0)
    ids = keras.Input((None,), dtype="int32")
    conv = keras.Model(ids, SeparableConvTransition(8, 16)(keras.layers.Embedding(20, 8, mask_zero=True)(ids)))
    ids = keras.Input((None,), dtype="int32")
    encoder = keras.Model(ids, TransformerEncoder(num_layers=1, **{**SMALL, "hidden_size": 8, "filter_size": 16})(
        TokenEmbedding(20, 8, mask_padding=True)(ids)))
    for model in (conv, encoder):
        short = model.predict(np.array([[3, 4, 5]]), verbose=0)
        padded = model.predict(np.array([[3, 4, 5, 0, 0]]), verbose=0)
        np.testing.assert_allclose(padded[:, :3], short, atol=1e-5)


def test_token_embedding_gives_a_keras_mask_only_when_asked():
    ids = np.array([[0, 3, 0]])  # A decoder's shifted targets start with the pad id.
    assert TokenEmbedding(12, 8).compute_mask(ids) is None
    np.testing.assert_array_equal(numpy(TokenEmbedding(12, 8, mask_padding=True).compute_mask(ids)),
                                  [[False, True, False]])
    assert TokenEmbedding.from_config(TokenEmbedding(12, 8, mask_padding=True).get_config()).mask_padding


def test_universal_decoder_gives_its_ponder_times_in_a_functional_model():
    y, memory = keras.Input((None, 16)), keras.Input((None, 16))
    decoder = UniversalTransformerDecoder(num_rec_steps=2, recurrence_type="act", act_max_steps=3, **SMALL)
    out, ponder = decoder(y, memory, return_ponder_times=True)
    model = keras.Model([y, memory], [out, ponder])
    got = model.predict([np.zeros((2, 4, 16), "float32"), np.ones((2, 5, 16), "float32")], verbose=0)
    assert got[0].shape == (2, 4, 16) and got[1].shape == (2, 4)


# -- caches ---------------------------------------------------------------------------------------------------
def test_decoding_past_the_cache_is_an_error_where_the_index_is_known():
    x = np.random.default_rng(0).random((1, 6, 16)).astype("float32")
    layer = attention(key_dim=8)
    layer(x)
    with pytest.raises(ValueError, match=r"positions 3\.\.5 into a cache of 4 positions"):
        layer(x[:, :3], use_causal_mask=True, cache=layer.init_cache(1, 4), cache_index=3)
    with pytest.raises(ValueError, match="into a cache of"):
        layer(x[:, :1], use_causal_mask=True, cache=layer.init_cache(1, 4), cache_index=tf.constant(4))
    conv = SeparableConvTransition(16, 32, causal=True)
    conv(x)
    with pytest.raises(ValueError, match="into a cache of"):
        conv(x[:, :2], cache=conv.init_cache(1, 4), cache_index=3)
    # The last positions still fit.
    layer(x[:, :1], use_causal_mask=True, cache=layer.init_cache(1, 4), cache_index=3)


# -- arguments -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, message", [
    (lambda: TransformerEncoder(num_layers=2, **{**SMALL, "max_relative_position": None}),
     "needs a clipping distance"),
    (lambda: UniversalTransformerEncoder(num_rec_steps=2, **{**SMALL, "position_encoding": "both",
                                                              "max_relative_position": None}),
     "needs a clipping distance"),
    (lambda: TransformerEncoder(num_layers=0, **SMALL), "num_layers must be an integer >= 1"),
    (lambda: attention(value_dim=0), "value_dim must be an integer >= 1 or None"),
    (lambda: attention(output_dim=0), "output_dim must be an integer >= 1 or None"),
    (lambda: attention(max_relative_position=2.5), "max_relative_position must be an integer >= 0 or None"),
    (lambda: attention(num_heads=2.5), "num_heads must be an integer >= 1"),
    (lambda: attention(max_relative_position=-1), "max_relative_position must be an integer >= 0"),
    (lambda: TransformerEncoderBlock(hidden_size=16, num_heads=0, filter_size=32), "num_heads must be"),
    (lambda: TransformerEncoderBlock(hidden_size=16, num_heads=2, filter_size=32, norm_epsilon=-1.0),
     "norm_epsilon must be a finite number > 0"),
    (lambda: TransformerEncoderBlock(hidden_size=16, num_heads=2, filter_size=32, norm_epsilon=float("nan")),
     "norm_epsilon must be a finite number > 0"),
    (lambda: UniversalTransformerEncoder(num_rec_steps=2.5, **SMALL), "num_rec_steps must be an integer"),
    (lambda: UniversalTransformerEncoder(num_rec_steps=2, act_type="bogus", **SMALL), "act_type must be one of"),
    (lambda: UniversalTransformerEncoder(num_rec_steps=2, act_max_steps=0, **SMALL), "act_max_steps must be"),
    (lambda: AdaptiveComputationTime(max_steps=2.7), "max_steps must be an integer >= 1"),
])
def test_arguments_that_cannot_be_meant_are_refused_when_the_layer_is_made(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# -- precision -------------------------------------------------------------------------------------------------
def test_a_float64_layer_computes_in_float64():
    x = np.random.default_rng(0).standard_normal((2, 6, 8))
    layer = attention(dtype="float64")
    got = numpy(layer(x, use_causal_mask=True))
    assert got.dtype == np.float64
    mask = np.broadcast_to(np.tril(np.ones((6, 6), bool)), (2, 6, 6))
    labels = np.broadcast_to(relation_labels(6, 6, 2), (2, 6, 6))
    np.testing.assert_allclose(got, reference_attention(layer_weights(layer), x, x, mask, labels), atol=1e-12)

    # ACT's halting and output mix: float64 too (against the same recurrence in float64 numpy).
    act = AdaptiveComputationTime(max_steps=3, act_type="basic", dtype="float64")
    states = np.random.default_rng(1).standard_normal((2, 4, 8))
    result = act(states, step_fn=lambda t, h: (h, ops.tanh(h)))
    w, b = (numpy(v) for v in act.halting_unit.weights)
    h, cumulative, output, running = states, np.zeros((2, 4)), np.zeros_like(states), np.ones((2, 4))
    for step in range(3):
        p = 1.0 / (1.0 + np.exp(-(h @ w[:, 0] + b[0])))
        halts = running if step == 2 else running * (cumulative + p > 1.0 - act.epsilon)
        weight = (running - halts) * p + halts * (1.0 - cumulative)
        h = np.tanh(h)
        output = weight[..., None] * h + (1.0 - weight[..., None]) * output
        cumulative, running = cumulative + weight, running - halts
    assert numpy(result["output"]).dtype == np.float64
    np.testing.assert_allclose(numpy(result["output"]), output, atol=1e-12)
