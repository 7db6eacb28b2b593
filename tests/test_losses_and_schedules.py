"""Loss, metrics and learning-rate schedules against hand computations."""

import math

import numpy as np
import pytest

from t2t_relpos import errors, registry
from t2t_relpos.training import losses, optimizers, schedules


def hand_made():
    logits = np.log(np.array([[[0.7, 0.1, 0.1, 0.1], [0.1, 0.1, 0.2, 0.6], [0.25, 0.25, 0.25, 0.25]],
                              [[0.1, 0.6, 0.2, 0.1], [0.3, 0.3, 0.3, 0.1], [0.1, 0.1, 0.1, 0.7]]], "float32"))
    targets = np.array([[2, 3, 0], [1, 2, 0]])
    return logits, targets


def test_cross_entropy_without_smoothing_is_the_nll_of_non_padding_tokens():
    logits, targets = hand_made()
    total, count = losses.smoothed_cross_entropy(logits, targets, label_smoothing=0.0)
    want = -(math.log(0.1) + math.log(0.6) + math.log(0.6) + math.log(0.3))
    assert float(count) == 4
    np.testing.assert_allclose(float(total), want, rtol=1e-5)


def test_label_smoothing_matches_the_formula():
    logits, targets = hand_made()
    eps, vocab = 0.1, 4
    total, _ = losses.smoothed_cross_entropy(logits, targets, label_smoothing=eps)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    want = 0.0
    for b in range(2):
        for t in range(3):
            if targets[b, t] == 0:
                continue
            soft = np.full(vocab, eps / (vocab - 1))
            soft[targets[b, t]] = 1 - eps
            want += -(soft * np.log(probs[b, t])).sum() + (soft * np.log(soft)).sum()
    np.testing.assert_allclose(float(total), want, rtol=1e-5)


def test_perfect_prediction_scores_zero_with_smoothing():
    vocab, eps = 5, 0.1
    soft = np.full(vocab, eps / (vocab - 1))
    soft[3] = 1 - eps
    logits = np.log(soft)[None, None].astype("float32")
    total, _ = losses.smoothed_cross_entropy(logits, np.array([[3]]), eps)
    assert abs(float(total)) < 1e-5


def test_metrics():
    logits, targets = hand_made()
    correct, count = losses.token_accuracy(logits, targets)
    assert (float(correct), float(count)) == (2.0, 4.0)  # argmax 0, 3 | 1, 0 against 2, 3 | 1, 2.
    right, sequences = losses.sequence_accuracy(logits, targets)
    assert (float(right), float(sequences)) == (0.0, 2.0)
    exact = np.array([[2, 3, 0], [0, 0, 0]])
    right, sequences = losses.sequence_accuracy(np.log(np.eye(4)[[[2, 3, 1], [0, 0, 0]]] + 1e-6), exact)
    assert (float(right), float(sequences)) == (1.0, 1.0)  # The empty row does not count.
    log_likelihood, count = losses.neg_log_perplexity(logits, targets)
    np.testing.assert_allclose(float(log_likelihood) / float(count),
                               (math.log(0.1) + math.log(0.6) + math.log(0.6) + math.log(0.3)) / 4, rtol=1e-5)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_the_loss_gradient_is_softmax_minus_the_smoothed_targets(eps):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    logits, targets = hand_made()
    logits = logits * np.float32(1.7) + np.random.default_rng(0).normal(size=logits.shape).astype("float32")
    logits_tensor = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(logits_tensor)
        total, _ = losses.smoothed_cross_entropy(logits_tensor, targets, label_smoothing=eps)
    grad = tape.gradient(total, logits_tensor).numpy()
    vocab = logits.shape[-1]
    q = np.full(logits.shape, eps / (vocab - 1))
    np.put_along_axis(q, targets[..., None], 1 - eps, axis=-1)
    want = (_softmax(logits) - q) * (targets != 0)[..., None]
    np.testing.assert_allclose(grad, want, atol=1e-6)


def test_one_pass_loss_and_accuracy_match_the_separate_ones_and_ties_go_to_the_first_class():
    logits, targets = hand_made()
    total, correct, count = losses.cross_entropy_and_accuracy(logits, targets, 0.1)
    np.testing.assert_allclose(float(total), float(losses.smoothed_cross_entropy(logits, targets, 0.1)[0]), rtol=1e-6)
    assert (float(correct), float(count)) == (2.0, 4.0)
    tied = np.array([[[1.0, 3.0, 3.0, 0.0], [1.0, 3.0, 3.0, 0.0]]], "float32")
    assert float(losses.token_accuracy(tied, np.array([[1, 2]]))[0]) == 1.0  # argmax is 1, as np.argmax says.


def test_logits_and_targets_of_different_positions_are_refused():
    """One prediction `[B, 1, V]` against targets padded to `[B, T]` once broadcast into a loss whose gradient
    did not fit the logits (an XLA error deep in the training step); now it is a ValueError naming both."""
    logits = np.zeros((2, 1, 5), "float32")
    with pytest.raises(ValueError, match=r"logits \(2, 1, 5\) do not fit targets \(2, 3\)"):
        losses.cross_entropy_and_accuracy(logits, np.array([[3, 0, 0], [4, 0, 0]]), 0.1)
    with pytest.raises(ValueError, match="do not fit"):
        losses.smoothed_cross_entropy(logits, np.array([3, 4]), 0.1)
    total, _, count = losses.cross_entropy_and_accuracy(logits, np.array([[3], [4]]), 0.0)
    np.testing.assert_allclose([float(total), float(count)], [2 * math.log(5), 2.0], rtol=1e-6)


def test_the_training_loss_neither_scatters_into_nor_argmaxes_the_logits():
    """Its gradient is written in one fused pass, not as a gather's scatter into a zero [B, T, V] tensor, and
    accuracy comes from the same pass (a graph-mode argmax over the logits cost as much as the loss)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    logits, targets = hand_made()
    @tf.function
    def step():
        logits_tensor = tf.constant(logits)
        with tf.GradientTape() as tape:
            tape.watch(logits_tensor)
            total, correct, _ = losses.cross_entropy_and_accuracy(logits_tensor, targets, 0.1)
        return tape.gradient(total, logits_tensor), correct

    graph = step.get_concrete_function().graph
    kinds = {op.type for op in graph.get_operations()}
    assert not kinds & {"UnsortedSegmentSum", "ScatterNd", "TensorScatterAdd", "ArgMax", "LogSoftmax"}, kinds


def test_noam_schedule_values():
    schedule = schedules.NoamSchedule(hidden_size=512, multiplier=1.0, warmup_steps=4000)
    value = lambda step: float(schedule(step - 1))  # Optimizer iteration k is update number k + 1.
    assert value(1) == pytest.approx(512 ** -0.5 * 4000 ** -1.5)
    assert value(4000) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)  # The peak, about 7.0e-4.
    assert value(16000) == pytest.approx(512 ** -0.5 * 16000 ** -0.5)
    assert value(4000) > value(3999) and value(4000) > value(4001)


def test_other_schedules_and_unknown_name():
    hp = registry.hparams("transformer_tiny").parse("learning_rate_schedule=rsqrt_decay,learning_rate=2.0,"
                                                    "learning_rate_warmup_steps=100")
    schedule = schedules.from_hparams(hp)
    assert float(schedule(0)) == pytest.approx(2.0 / 10.0)
    assert float(schedule(399)) == pytest.approx(2.0 / 20.0)
    hp.learning_rate_schedule = "linear_warmup_constant"
    assert float(schedules.from_hparams(hp)(49)) == pytest.approx(1.0)
    hp.learning_rate_schedule = "noan"
    with pytest.raises(errors.UnknownNameError, match="did you mean 'noam'"):
        schedules.from_hparams(hp)


def test_optimizer_from_hparams():
    hp = registry.hparams("transformer_base")
    optimizer = optimizers.from_hparams(hp)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    wrapped = optimizers.from_hparams(hp, mixed_precision="mixed_float16")
    assert wrapped.__class__.__name__ == "LossScaleOptimizer"


def test_transformer_base_v3_schedule_is_tensor2tensors():
    """tensor2tensor's v3 schedule "constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size" (constant 2.0, 8000
    warm-up steps) is this package's noam schedule with multiplier 2.0: the sets that derive from
    transformer_base_v3 (transformer_tiny, the UT sets) train at tensor2tensor's rates."""
    for name in ("transformer_base_v3", "transformer_tiny", "universal_transformer_tiny"):
        hp = registry.hparams(name)
        schedule = schedules.from_hparams(hp)
        for iteration in (0, 99, 4000, 7999, 8000, 50000):
            step = iteration + 1.0  # The first update is step 1.
            t2t = 2.0 * min(1.0, step / 8000) * max(step, 8000) ** -0.5 * hp.hidden_size ** -0.5
            assert abs(float(schedule(iteration)) - t2t) <= 1e-6 * t2t, (name, iteration)
