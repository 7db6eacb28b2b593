"""RelationAwareMultiHeadAttention against the paper's equations, and its Keras contract."""

import itertools
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

import attention_reference
from attention_reference import layer_weights, materialized_attention, reference_attention, relation_labels
from t2t_relpos.layers import RelationAwareMultiHeadAttention

B, T, D, H, DK = 2, 6, 12, 3, 4


def make_layer(**kwargs):
    kwargs = {"num_heads": H, "key_dim": DK, "max_relative_position": 2, **kwargs}
    return RelationAwareMultiHeadAttention(**kwargs)


def random_inputs(batch=B, length=T, depth=D, seed=0):
    return np.random.default_rng(seed).normal(size=(batch, length, depth)).astype("float32")


def masks(kind, batch=B, length=T):
    """(call kwargs, reference mask [B, T, T])."""
    return attention_reference.masks(kind, batch, length)


@pytest.mark.parametrize("keys, values, shared", list(itertools.product([True, False], repeat=3)))
def test_matches_numpy_reference_of_eq_3_4(keys, values, shared):
    x = random_inputs()
    for k, mask_kind in itertools.product([0, 1, 3, T + 4], ["none", "padding", "causal", "both"]):
        layer = make_layer(max_relative_position=k, use_relative_keys=keys, use_relative_values=values,
                           heads_share_relative_embeddings=shared, use_bias=True,
                           bias_initializer="random_normal")
        kwargs, mask = masks(mask_kind)
        got = ops.convert_to_numpy(layer(x, **kwargs))
        labels = np.broadcast_to(relation_labels(T, T, k), (B, T, T))
        want = reference_attention(layer_weights(layer), x, x, mask, labels)
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5, err_msg=f"k={k}, mask={mask_kind}")


@pytest.mark.parametrize("keys, values, shared", [(True, True, False), (True, False, True),
                                                  (False, True, False)])
def test_edge_labels_match_reference(keys, values, shared):
    num_labels = 5
    x = random_inputs()
    labels = np.random.default_rng(1).integers(0, num_labels, size=(B, T, T)).astype("int32")
    layer = make_layer(max_relative_position=None, num_edge_labels=num_labels, use_relative_keys=keys,
                       use_relative_values=values, heads_share_relative_embeddings=shared)
    for mask_kind in ("none", "padding"):
        kwargs, mask = masks(mask_kind)
        got = ops.convert_to_numpy(layer(x, edge_labels=labels, **kwargs))
        want = reference_attention(layer_weights(layer), x, x, mask, labels)
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_edge_labels_from_distances_equal_clipped_positions():
    x = random_inputs()
    k = 2
    relative = make_layer(max_relative_position=k)
    graph = make_layer(max_relative_position=None, num_edge_labels=2 * k + 1)
    relative(x)
    graph(x, edge_labels=np.zeros((B, T, T), "int32"))
    graph.set_weights(relative.get_weights())
    labels = np.broadcast_to(relation_labels(T, T, k), (B, T, T)).astype("int32")
    np.testing.assert_allclose(ops.convert_to_numpy(graph(x, edge_labels=labels, use_causal_mask=True)),
                               ops.convert_to_numpy(relative(x, use_causal_mask=True)), atol=1e-6)


def test_cross_attention_is_plain_and_matches_reference():
    query, memory = random_inputs(length=4), random_inputs(length=7, seed=3)
    layer = make_layer(max_relative_position=None)
    memory_mask = np.arange(7)[None] < np.array([7, 5])[:, None]
    got = ops.convert_to_numpy(layer(query, memory, value_mask=memory_mask))
    assert layer.relative_key_embeddings is None and layer.relative_value_embeddings is None
    mask = np.broadcast_to(memory_mask[:, None, :], (B, 4, 7))
    want = reference_attention(layer_weights(layer), query, memory, mask, None)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("k, shared", [(0, False), (2, True), (3, False), (20, False)])
def test_custom_gradients_equal_autodiff_of_the_materialized_form(k, shared):
    x = tf.constant(random_inputs())
    layer = make_layer(max_relative_position=k, heads_share_relative_embeddings=shared)
    _, mask = masks("both")
    labels = np.broadcast_to(relation_labels(T, T, k), (B, T, T)).astype("int32")
    kwargs, _ = masks("both")
    weight = tf.constant(np.random.default_rng(5).normal(size=(B, T, D)).astype("float32"))
    valid = tf.constant(mask.any(-1)[..., None].astype("float32"))

    def gradients(fn):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(fn() * weight * valid)
        return tape.gradient(loss, [x] + [w.value for w in layer.trainable_weights])

    layer(x)
    ours = gradients(lambda: layer(x, **kwargs))
    naive = gradients(lambda: materialized_attention(layer, x, labels, mask))
    assert len(ours) == 1 + len(layer.trainable_weights) == 7
    for got, want, name in zip(ours, naive, ["input"] + [w.path for w in layer.trainable_weights]):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-5, rtol=1e-4, err_msg=name)


@pytest.mark.parametrize("k", [0, 2])
def test_gradients_with_unknown_shapes_match_eager(k):
    """Traced with unknown batch and length, the fused lookups compile per concrete shape; same result."""
    x = tf.constant(random_inputs())
    layer = make_layer(max_relative_position=k)
    layer(x)

    def gradients(inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss = tf.reduce_sum(layer(inputs, use_causal_mask=True) ** 2)
        return tape.gradient(loss, [inputs] + [w.value for w in layer.trainable_weights])

    dynamic = tf.function(gradients, input_signature=[tf.TensorSpec([None, None, D])], autograph=False)
    for inputs in (x, x[:1, :4]):
        for got, want in zip(dynamic(inputs), gradients(inputs)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position_kwargs", [{"max_relative_position": 2},
                                             {"max_relative_position": 0},
                                             {"max_relative_position": None}])
def test_incremental_decoding_equals_the_full_causal_pass(position_kwargs):
    length = 8
    x = random_inputs(length=length)
    layer = make_layer(**position_kwargs)
    full = ops.convert_to_numpy(layer(x, use_causal_mask=True))

    for chunk in (1, 3):
        cache = layer.init_cache(B, length)
        pieces = []
        for start in range(0, length, chunk):
            piece = x[:, start:start + chunk]
            out, cache = layer(piece, cache=cache, cache_index=start, use_causal_mask=True)
            pieces.append(ops.convert_to_numpy(out))
        np.testing.assert_allclose(np.concatenate(pieces, axis=1), full, atol=1e-5, err_msg=f"chunk={chunk}")


def test_cache_index_masks_unwritten_slots_without_causal_mask():
    x = random_inputs(length=5)
    layer = make_layer()
    cache = layer.init_cache(B, 9)
    out, _ = layer(x, cache=cache, cache_index=0)  # Bidirectional over the 5 written slots only.
    np.testing.assert_allclose(ops.convert_to_numpy(out), ops.convert_to_numpy(layer(x)), atol=1e-5)


def test_incremental_decoding_under_tf_function_with_xla():
    length = 6
    x = random_inputs(length=length)
    layer = make_layer()
    full = ops.convert_to_numpy(layer(x, use_causal_mask=True))

    @tf.function(jit_compile=True, autograph=False)
    def step(piece, cache, index):
        return layer(piece, cache=cache, cache_index=index, use_causal_mask=True)

    cache = layer.init_cache(B, length)
    outs = []
    for i in range(length):
        out, cache = step(x[:, i:i + 1], cache, tf.constant(i))
        outs.append(out.numpy())
    np.testing.assert_allclose(np.concatenate(outs, 1), full, atol=1e-5)


def test_static_cache_equals_recomputing_keys_and_values():
    query, memory = random_inputs(length=3), random_inputs(length=7, seed=2)
    layer = make_layer(max_relative_position=None)
    direct = layer(query, memory)
    cache = layer.compute_key_value(memory)
    cached, same_cache = layer(query, cache=cache)
    np.testing.assert_allclose(ops.convert_to_numpy(cached), ops.convert_to_numpy(direct), atol=1e-6)
    for name in ("key", "value"):  # A precomputed cache is passed through unchanged.
        np.testing.assert_array_equal(ops.convert_to_numpy(same_cache[name]), ops.convert_to_numpy(cache[name]))


def test_padding_invariance():
    x = random_inputs(length=5)
    layer = make_layer()
    out = layer(x, use_causal_mask=False)
    padded = np.concatenate([x, np.random.default_rng(9).normal(size=(B, 4, D)).astype("float32")], 1)
    mask = np.arange(9)[None].repeat(B, 0) < 5
    out_padded = layer(padded, query_mask=mask, value_mask=mask)
    np.testing.assert_allclose(ops.convert_to_numpy(out_padded)[:, :5], ops.convert_to_numpy(out), atol=1e-5)
    # Padded query rows attend to nothing and give zeros, never NaN.
    np.testing.assert_array_equal(ops.convert_to_numpy(out_padded)[:, 5:], 0.0)


def test_keras_masking_is_honoured():
    ids = np.array([[3, 4, 5, 0, 0], [6, 7, 0, 0, 0]])
    embed = keras.layers.Embedding(10, D, mask_zero=True)
    layer = make_layer()
    out_auto = layer(embed(ids))
    mask = ids != 0
    out_explicit = layer(embed(ids), query_mask=mask, value_mask=mask)
    np.testing.assert_allclose(ops.convert_to_numpy(out_auto), ops.convert_to_numpy(out_explicit))


def test_fully_masked_rows_and_empty_sequences_are_finite():
    x = random_inputs()
    layer = make_layer()
    nothing = np.zeros((B, T, T), bool)
    nothing[0, :3, :2] = True
    out = ops.convert_to_numpy(layer(x, attention_mask=nothing))
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out[1], 0.0)
    np.testing.assert_array_equal(out[0, 3:], 0.0)
    empty = layer(x[:, :0])
    assert tuple(empty.shape) == (B, 0, D)
    variable = tf.Variable(x)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(variable, attention_mask=nothing) ** 2)
    grads = tape.gradient(loss, [variable] + layer.trainable_weights)
    assert all(np.isfinite(ops.convert_to_numpy(g)).all() for g in grads)


def test_gradients_exist_and_are_finite_for_every_weight():
    layer = make_layer(use_bias=True, dropout=0.1)
    x = tf.Variable(random_inputs())
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(x, use_causal_mask=True, training=True) ** 2)
    grads = tape.gradient(loss, layer.trainable_weights)
    assert len(grads) == 10  # 4 kernels, 4 biases, 2 relation tables.
    for weight, grad in zip(layer.trainable_weights, grads):
        assert grad is not None, weight.path
        grad = ops.convert_to_numpy(grad)
        assert np.isfinite(grad).all() and np.abs(grad).sum() > 0, weight.path


def test_dropout_only_in_training():
    layer = make_layer(dropout=0.5, seed=3)
    x = random_inputs()
    a, b = layer(x), layer(x)
    np.testing.assert_array_equal(ops.convert_to_numpy(a), ops.convert_to_numpy(b))
    assert not np.allclose(ops.convert_to_numpy(layer(x, training=True)), ops.convert_to_numpy(a))


def test_return_attention_scores():
    layer = make_layer()
    out, scores = layer(random_inputs(), use_causal_mask=True, return_attention_scores=True)
    scores = ops.convert_to_numpy(scores)
    assert scores.shape == (B, H, T, T)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-6)
    assert np.all(np.triu(scores[0, 0], 1) == 0)


def test_get_config_round_trip_and_keras_file(tmp_path):
    layer = make_layer(heads_share_relative_embeddings=True, value_dim=5, output_dim=7, dropout=0.1,
                       use_bias=True, seed=4, name="rel_attention")
    inputs = keras.Input((None, D))
    model = keras.Model(inputs, layer(inputs, use_causal_mask=True))
    x = random_inputs()
    expected = ops.convert_to_numpy(model(x))
    assert expected.shape == (B, T, 7)

    clone = RelationAwareMultiHeadAttention.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()

    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_array_equal(ops.convert_to_numpy(restored(x)), expected)
    assert isinstance(restored.get_layer("rel_attention"), RelationAwareMultiHeadAttention)


def test_functional_model_with_masking_trains_under_jit_compile():
    ids = keras.Input((None,), dtype="int32")
    h = keras.layers.Embedding(20, D, mask_zero=True)(ids)
    h = make_layer()(h, use_causal_mask=True)
    logits = keras.layers.Dense(20)(h)
    model = keras.Model(ids, logits)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=True)
    data = np.random.default_rng(0).integers(1, 20, size=(8, T))
    history = model.fit(data, data, epochs=3, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert history.history["loss"][-1] < history.history["loss"][0]


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_masks_without_overflow(policy):
    x = random_inputs()
    reference_layer = make_layer()
    _, mask = masks("both")
    kwargs, _ = masks("both")
    want = ops.convert_to_numpy(reference_layer(x, **kwargs))
    layer = make_layer(dtype=policy)
    layer(x)
    layer.set_weights(reference_layer.get_weights())
    got = layer(x, **kwargs)
    assert ops.convert_to_numpy(got).dtype != np.float32
    got = ops.convert_to_numpy(ops.cast(got, "float32"))
    assert np.isfinite(got).all()
    tolerance = 5e-2 if policy == "mixed_bfloat16" else 1e-2
    np.testing.assert_allclose(got, want, atol=tolerance, rtol=tolerance)
    np.testing.assert_array_equal(got[1, T - 2:], 0.0)


def test_argument_validation():
    with pytest.raises(ValueError, match="max_relative_position must be an integer >= 0"):
        make_layer(max_relative_position=-1)
    with pytest.raises(ValueError, match="exclusive"):
        make_layer(max_relative_position=2, num_edge_labels=3)
    with pytest.raises(ValueError, match="pass edge_labels"):
        make_layer(max_relative_position=None, num_edge_labels=3)(random_inputs())


@pytest.mark.parametrize("labels, pattern", [
    (np.full((B, T, T), 3, "int32"), r"in \[0, num_edge_labels=3\), got 3"),
    (np.full((B, T, T), -1, "int32"), r"got -1"),
    (np.zeros((B, T, T), "float32"), r"must be integers.*float32"),
])
def test_edge_labels_that_cannot_be_read_are_refused(labels, pattern):
    layer = make_layer(max_relative_position=None, num_edge_labels=3)
    with pytest.raises(ValueError, match=pattern):
        layer(random_inputs(), edge_labels=labels)
    # Inside a compiled function the range is not checked (it would cost a host round trip), the dtype is.
    compiled = tf.function(lambda x, e: layer(x, edge_labels=e), autograph=False)
    if labels.dtype.kind == "f":
        with pytest.raises(ValueError, match=pattern):
            compiled(random_inputs(), labels)
    else:
        assert compiled(random_inputs(), labels).shape == (B, T, D)


def test_edge_labels_given_to_a_distance_layer_are_refused():
    labels = np.zeros((B, T, T), "int32")
    for layer in (make_layer(max_relative_position=2), make_layer(max_relative_position=None)):
        with pytest.raises(ValueError, match="would ignore them"):
            layer(random_inputs(), edge_labels=labels)


def test_relation_table_shapes():
    per_head = make_layer(max_relative_position=3)
    per_head(random_inputs())
    assert tuple(per_head.relative_key_embeddings.shape) == (H, 7, DK)
    shared = make_layer(max_relative_position=3, heads_share_relative_embeddings=True, value_dim=5)
    shared(random_inputs())
    assert tuple(shared.relative_value_embeddings.shape) == (7, 5)
    zero = make_layer(max_relative_position=0)
    zero(random_inputs())
    assert tuple(zero.relative_key_embeddings.shape) == (H, 1, DK)
