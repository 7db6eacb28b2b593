"""Label-smoothed cross-entropy and the token-level metrics, over non-padding positions only.

Each function returns a `(sum, count)` pair, so that values aggregate exactly across batches, replicas and
gradient-accumulation steps (divide the totals at the end).
"""

import math

from keras import ops

PAD_ID = 0


def _weights(targets):
    return ops.cast(ops.not_equal(targets, PAD_ID), "float32")


def smoothed_cross_entropy(logits, targets, label_smoothing=0.1):
    """Cross-entropy against smoothed one-hot targets, as tensor2tensor computes it.

    The true class gets `1 - eps`, every other class `eps / (V - 1)`. The entropy of that target distribution
    is subtracted, so a perfect prediction scores 0 whatever eps is.

    Args:
        logits: float `[B, T, V]`.
        targets: int `[B, T]`, 0 at padding.
        label_smoothing: eps.

    Returns:
        (sum of per-token losses, number of non-padding tokens), float32 scalars.
    """
    logits = ops.cast(logits, "float32")
    vocab = logits.shape[-1]
    log_probs = ops.log_softmax(logits, axis=-1)
    target_log_probs = ops.take_along_axis(log_probs, ops.cast(targets, "int32")[..., None], axis=-1)[..., 0]
    confidence = 1.0 - label_smoothing
    if label_smoothing > 0:
        low = label_smoothing / (vocab - 1)
        xent = -(confidence - low) * target_log_probs - low * ops.sum(log_probs, axis=-1)
        xent = xent + confidence * math.log(confidence) + label_smoothing * math.log(low)
    else:
        xent = -target_log_probs
    weights = _weights(targets)
    return ops.sum(xent * weights), ops.sum(weights)


def neg_log_perplexity(logits, targets):
    """(sum of log-likelihoods of the targets, token count): the mean is -log perplexity."""
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    target_log_probs = ops.take_along_axis(log_probs, ops.cast(targets, "int32")[..., None], axis=-1)[..., 0]
    weights = _weights(targets)
    return ops.sum(target_log_probs * weights), ops.sum(weights)


def token_accuracy(logits, targets):
    """(correct non-padding tokens under argmax, token count)."""
    correct = ops.cast(ops.equal(ops.argmax(logits, axis=-1), ops.cast(targets, "int64")), "float32")
    weights = _weights(targets)
    return ops.sum(correct * weights), ops.sum(weights)


def sequence_accuracy(logits, targets):
    """(sequences whose every non-padding token is right, number of non-empty sequences)."""
    weights = _weights(targets)
    wrong = (1.0 - ops.cast(ops.equal(ops.argmax(logits, axis=-1), ops.cast(targets, "int64")), "float32"))
    all_right = ops.cast(ops.equal(ops.sum(wrong * weights, axis=-1), 0.0), "float32")
    non_empty = ops.cast(ops.sum(weights, axis=-1) > 0, "float32")
    return ops.sum(all_right * non_empty), ops.sum(non_empty)


METRICS = {
    "accuracy": token_accuracy,
    "accuracy_per_sequence": sequence_accuracy,
    "neg_log_perplexity": neg_log_perplexity,
}
