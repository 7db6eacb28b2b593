"""The relation lookup and bucket sums against plain numpy, at query offsets, in 32 and 16 bits."""

import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from t2t_relpos.layers import relative_ops

B, H = 2, 3


def numpy_labels(query_positions, num_keys, k):
    distance = np.arange(num_keys)[None, :] - np.asarray(query_positions)[:, None]
    return np.clip(distance, -k, k) + k  # [Tq, Tk]


def numpy_bucket_sums(p, labels, num_labels):
    out = np.zeros(p.shape[:3] + (num_labels,), np.float64)
    for r in range(num_labels):
        out[..., r] = np.where(labels == r, p, 0.0).sum(-1)
    return out


@pytest.mark.parametrize("k", [0, 1, 3, 12])
@pytest.mark.parametrize("first, num_queries, num_keys", [(0, 7, 7), (4, 3, 9), (8, 1, 9)])
@pytest.mark.parametrize("causal", [False, True])
def test_clipped_lookup_and_bucket_sums_match_numpy(k, first, num_queries, num_keys, causal):
    rng = np.random.default_rng(k + first)
    positions = first + np.arange(num_queries)
    relations = relative_ops.ClippedRelativePositions(positions, num_keys, k, causal=causal)
    labels = numpy_labels(positions, num_keys, k)
    x = rng.normal(size=(B, H, num_queries, 2 * k + 1)).astype("float32")
    base = rng.normal(size=(B, H, num_queries, num_keys)).astype("float32")
    p = rng.normal(size=(B, H, num_queries, num_keys)).astype("float32")
    if causal:  # What a causal mask leaves: nothing at keys after the query.
        p *= np.arange(num_keys)[None, :] <= positions[:, None]
    looked_up = np.take_along_axis(x, np.broadcast_to(labels, base.shape), axis=-1)
    np.testing.assert_allclose(ops.convert_to_numpy(relations.add_gathered(base, x)), base + looked_up,
                               rtol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(relations.bucket_sums(p)),
                               numpy_bucket_sums(p, labels, 2 * k + 1), atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_bucket_sums_in_bfloat16_keep_small_edges(causal):
    """An edge much smaller than the row total survives 16 bits (it is summed, not differenced)."""
    n, k = 40, 2
    relations = relative_ops.ClippedRelativePositions(np.arange(n), n, k, causal=causal)
    distance = np.arange(n)[None, :] - np.arange(n)[:, None]
    p = np.full((1, 1, n, n), 1.0, "float32")
    small_edge = distance <= -k if causal else distance >= k
    p[..., small_edge] = 1e-3  # tiny weights on one side of the band
    if causal:
        p[..., distance > 0] = 0.0
    got = ops.convert_to_numpy(ops.cast(relations.bucket_sums(ops.cast(p, "bfloat16")), "float32"))
    want = numpy_bucket_sums(p, numpy_labels(np.arange(n), n, k), 2 * k + 1)
    edge = 0 if causal else -1
    np.testing.assert_allclose(got[..., edge], want[..., edge], rtol=2e-2)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=1e-3)


@pytest.mark.parametrize("make_relations", [
    lambda: relative_ops.ClippedRelativePositions(np.arange(2, 7), 8, 2),
    lambda: relative_ops.EdgeLabels(np.random.default_rng(0).integers(0, 4, size=(B, 5, 8)), 4),
], ids=["clipped", "edge_labels"])
def test_key_term_gradient_is_the_bucket_sums(make_relations):
    relations = make_relations()
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=(B, H, 5, relations.num_labels)).astype("float32"))
    base = tf.constant(rng.normal(size=(B, H, 5, 8)).astype("float32"))
    upstream = tf.constant(rng.normal(size=(B, H, 5, 8)).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch([x, base])
        loss = tf.reduce_sum(relative_ops.relative_logits(base, x, relations) * upstream)
    d_base, d_x = tape.gradient(loss, [base, x])
    np.testing.assert_allclose(d_base.numpy(), upstream.numpy())
    np.testing.assert_allclose(d_x.numpy(), relations.bucket_sums(upstream).numpy(), atol=1e-5)
    # The lookup and the bucket sums are adjoint: <lookup(x), p> == <x, bucket_sums(p)>.
    looked_up = relations.add_gathered(tf.zeros_like(upstream), x)
    np.testing.assert_allclose(tf.reduce_sum(looked_up * upstream).numpy(),
                               tf.reduce_sum(x * relations.bucket_sums(upstream)).numpy(), rtol=1e-5)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_value_term_and_its_gradients_match_autodiff_of_the_plain_form(shared, causal):
    """relative_values' hand-written gradients == autodiff of p @ v + (one-hot bucket sums) @ a."""
    num_queries, num_keys, k, depth = 5, 8, 2, 4
    positions = np.arange(3, 3 + num_queries)
    relations = relative_ops.ClippedRelativePositions(positions, num_keys, k, causal=causal)
    labels = numpy_labels(positions, num_keys, k)
    rng = np.random.default_rng(2)
    p = rng.uniform(size=(B, H, num_queries, num_keys)).astype("float32")
    if causal:
        p *= np.arange(num_keys)[None, :] <= positions[:, None]  # zero at keys after the query
    p, v = tf.constant(p), tf.constant(rng.normal(size=(B, H, num_keys, depth)).astype("float32"))
    a = tf.constant(rng.normal(size=((2 * k + 1, depth) if shared else (H, 2 * k + 1, depth))).astype("float32"))
    upstream = tf.constant(rng.normal(size=(B, H, num_queries, depth)).astype("float32"))
    one_hot = tf.one_hot(labels, 2 * k + 1)  # [Tq, Tk, R]

    def plain(p, v, a):
        per_relation = tf.einsum("bhqk,qkr->bhqr", p, one_hot)
        return tf.matmul(p, v) + tf.matmul(per_relation, a)

    results = []
    for fn in (lambda *t: relative_ops.relative_values(*t, relations), plain):
        with tf.GradientTape() as tape:
            tape.watch([p, v, a])
            out = fn(p, v, a)
            loss = tf.reduce_sum(out * upstream)
        results.append([out] + tape.gradient(loss, [p, v, a]))
    for got, want, name in zip(*results, ["out", "d_weights", "d_values", "d_table"]):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5, rtol=1e-5, err_msg=name)
