"""SeparableConvTransition against a numpy reference of its two separable convolutions."""

import keras
import numpy as np
import pytest
from keras import ops

from t2t_relpos.layers import SeparableConvTransition

HIDDEN, FILTER = 6, 10


def depthwise_reference(x, kernel, causal):
    """out[t, c] = sum_j kernel[j, c] * x[t + j - before, c], zeros outside the sequence."""
    k, length = kernel.shape[0], x.shape[1]
    before = k - 1 if causal else (k - 1) // 2
    out = np.zeros_like(x)
    for t in range(length):
        for j in range(k):
            s = t + j - before
            if 0 <= s < length:
                out[:, t] += kernel[j] * x[:, s]
    return out


def transition_reference(layer, x, keep):
    """The layer's equation in numpy: zero padding, sepconv + ReLU, zero padding, sepconv."""
    w = {v.path.split("/")[-2] + "/" + v.name if v.name in ("kernel", "bias") else v.name: v.numpy()
         for v in layer.weights}
    x = x * keep
    h = depthwise_reference(x, w["inner_depthwise"], layer.causal) @ w["inner_pointwise/kernel"]
    h = np.maximum(h + w["inner_pointwise/bias"], 0.0) * keep
    return depthwise_reference(h, w["outer_depthwise"], layer.causal) @ w["outer_pointwise/kernel"] + \
        w["outer_pointwise/bias"]


def random_layer(kernel_size, causal, seed=0):
    layer = SeparableConvTransition(HIDDEN, FILTER, kernel_size=kernel_size, causal=causal)
    layer.build((None, None, HIDDEN))
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.normal(0.0, 0.5, weight.shape).astype("float32"))
    return layer


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kernel_size", [(3, 5), (1, 4), 2])
def test_matches_the_numpy_reference(kernel_size, causal):
    layer = random_layer(kernel_size, causal)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 7, HIDDEN)).astype("float32")
    mask = np.array([[True] * 7, [True] * 4 + [False] * 3])
    got = ops.convert_to_numpy(layer(x, padding_mask=mask))
    expected = transition_reference(layer, x, mask[..., None].astype("float32"))
    # Padding positions' outputs are not used; the valid ones must match.
    np.testing.assert_allclose(got[mask], expected[mask], rtol=1e-5, atol=1e-5)


def test_default_widths_are_tensor2tensors():
    layer = random_layer((3, 5), causal=False)
    default = SeparableConvTransition(HIDDEN, FILTER)
    default.build((None, None, HIDDEN))
    assert default.kernel_size == (3, 5)
    assert tuple(default.inner_depthwise.shape) == (3, HIDDEN)
    assert tuple(default.outer_depthwise.shape) == (5, FILTER)
    assert layer.get_config()["kernel_size"] == [3, 5]


def test_centred_windows_reach_two_positions_each_way_through_the_second_convolution():
    """Widths 3 then 5, centred: position t depends on t - 3 .. t + 3 and nothing further."""
    layer = random_layer((3, 5), causal=False)
    x = np.zeros((1, 11, HIDDEN), "float32")
    base = ops.convert_to_numpy(layer(x))
    x[0, 5] = 1.0
    changed = np.abs(ops.convert_to_numpy(layer(x)) - base).max(axis=-1)[0] > 1e-6
    assert changed.tolist() == [False, False, True, True, True, True, True, True, True, False, False]


def test_cached_steps_equal_the_full_pass_with_unequal_widths():
    layer = random_layer((3, 5), causal=True)
    x = np.random.default_rng(2).normal(size=(2, 6, HIDDEN)).astype("float32")
    full = ops.convert_to_numpy(layer(x))
    cache = layer.init_cache(2, 6)
    assert tuple(cache["inner"].shape) == (2, 8, HIDDEN) and tuple(cache["outer"].shape) == (2, 10, FILTER)
    steps = []
    for start, stop in [(0, 1), (1, 4), (4, 6)]:  # one position, then several at once
        y, cache = layer(x[:, start:stop], cache=cache, cache_index=start)
        steps.append(ops.convert_to_numpy(y))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-5, atol=1e-5)


def test_config_round_trip_keeps_the_widths_and_a_single_width_still_loads():
    layer = SeparableConvTransition(HIDDEN, FILTER, kernel_size=(3, 5), causal=True)
    again = SeparableConvTransition.from_config(layer.get_config())
    assert again.kernel_size == (3, 5) and again.causal
    config = layer.get_config()
    config["kernel_size"] = 3  # a layer saved before the widths were a pair
    assert SeparableConvTransition.from_config(config).kernel_size == (3, 3)


@pytest.mark.parametrize("kernel_size", [0, (3,), (3, 0), (3, 5, 7), "3", "35", (True, 3), 2.5])
def test_bad_widths_are_refused(kernel_size):
    with pytest.raises(ValueError, match="kernel_size"):
        SeparableConvTransition(HIDDEN, FILTER, kernel_size=kernel_size)


def test_numpy_widths_are_taken_as_ints():
    assert SeparableConvTransition(HIDDEN, FILTER, kernel_size=np.int64(4)).kernel_size == (4, 4)
    assert SeparableConvTransition(HIDDEN, FILTER, kernel_size=np.array([3, 5])).kernel_size == (3, 5)


def test_serialises_inside_a_model(tmp_path):
    inputs = keras.Input((None, HIDDEN))
    model = keras.Model(inputs, SeparableConvTransition(HIDDEN, FILTER, kernel_size=(3, 5))(inputs))
    x = np.random.default_rng(3).normal(size=(1, 5, HIDDEN)).astype("float32")
    path = str(tmp_path / "transition.keras")
    model.save(path)
    np.testing.assert_allclose(ops.convert_to_numpy(keras.models.load_model(path)(x)),
                               ops.convert_to_numpy(model(x)), atol=1e-6)
