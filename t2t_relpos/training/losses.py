"""Label-smoothed cross-entropy and the token-level metrics, over non-padding positions only.

Each function returns a `(sum, count)` pair, so that values aggregate exactly across batches, replicas and
gradient-accumulation steps (divide the totals at the end).

With logits z over V classes at one position, target t and smoothing eps, the smoothed target distribution is
q_t = 1 - eps and q_v = eps / (V - 1) elsewhere (tensor2tensor's), and

    loss = H(q, softmax z) - H(q) = lse(z) - sum_v q_v z_v - H(q),    lse(z) = log sum_v exp z_v
    d loss / d z = softmax(z) - q

(H(q) is a constant: a perfect prediction scores 0 whatever eps is). Every metric needs only four numbers per
position, lse(z), z_t, sum_v z_v and argmax_v z_v, so one fused pass over the `[B, T, V]` logits computes them,
and the gradient is written in one more (`softmax(z) - q`, scaled by the incoming gradient) instead of being
assembled from a log-softmax, a gather and their generic gradients (a scatter into a zero `[B, T, V]`
tensor): at a 4000-piece vocabulary those passes were half of a small model's training step.
"""

import math

from keras import ops

from t2t_relpos.layers.fused import fused

PAD_ID = 0


def _weights(targets):
    return ops.cast(ops.not_equal(targets, PAD_ID), "float32")


@fused
def _row_statistics(logits, targets):
    """float32 `[..., V]` logits, int `[...]` targets -> (lse, target logit, sum, argmax), each `[...]`.

    The argmax is the first index holding the maximum (as `argmax` breaks ties), found by a min-reduction,
    which XLA fuses with the others where its argmax reduction is a slower loop of its own.
    """
    top = ops.max(logits, axis=-1)
    lse = top + ops.log(ops.sum(ops.exp(logits - top[..., None]), axis=-1))
    target = ops.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    vocab = ops.shape(logits)[-1]
    first_top = ops.min(ops.where(logits >= top[..., None], ops.arange(vocab, dtype="int32"), vocab), axis=-1)
    return lse, target, ops.sum(logits, axis=-1), first_top


@fused
def _softmax_minus_targets(logits, targets, lse, upstream, on_value, off_value):
    """`upstream[..., None] * (softmax(logits) - q)`, q = `on_value` at the target, `off_value` elsewhere."""
    q = ops.one_hot(targets, ops.shape(logits)[-1], dtype="float32") * (on_value - off_value) + off_value
    return upstream[..., None] * (ops.exp(logits - lse[..., None]) - q)


def _check_shapes(logits, targets):
    """ValueError unless `[..., V]` logits and `[...]` targets have the same positions (where shapes are known).

    `take_along_axis` would broadcast a `[B, 1, V]` prediction against `[B, T]` targets, and the gradient,
    shaped like the targets, would then not fit the logits.
    """
    positions, wanted = tuple(logits.shape[:-1]), tuple(targets.shape)
    if len(positions) != len(wanted) or any(a is not None and b is not None and a != b
                                            for a, b in zip(positions, wanted)):
        raise ValueError(f"logits {tuple(logits.shape)} do not fit targets {wanted}: one row of logits per "
                         "target position")


def _statistics(logits, targets):
    """(float32 logits, int32 targets, their `_row_statistics`, which carry no gradient)."""
    _check_shapes(logits, targets)
    logits, targets = ops.cast(logits, "float32"), ops.cast(targets, "int32")
    return logits, targets, [ops.stop_gradient(x) for x in _row_statistics(logits, targets)]


def _per_token_cross_entropy(logits, targets, statistics, label_smoothing):
    """`[...]` smoothed cross-entropy minus H(q) from `_statistics`; its gradient is `softmax(z) - q`."""
    vocab = logits.shape[-1]
    low = label_smoothing / (vocab - 1) if label_smoothing > 0 else 0.0
    confidence = 1.0 - label_smoothing
    entropy = -(confidence * math.log(confidence) + label_smoothing * math.log(low)) if label_smoothing > 0 else 0.0

    @ops.custom_gradient
    def cross_entropy(z, t, lse, target, total):
        def grad(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            d_z = _softmax_minus_targets(z, t, lse, ops.cast(upstream, "float32"), confidence, low)
            return d_z, None, None, None, None

        return lse - (confidence - low) * target - low * total - entropy, grad

    lse, target, total, _ = statistics
    return cross_entropy(logits, targets, lse, target, total)


def cross_entropy_and_accuracy(logits, targets, label_smoothing=0.1):
    """`smoothed_cross_entropy` and `token_accuracy` from one pass over the logits: (loss sum, correct, count)."""
    weights = _weights(targets)
    logits, targets, statistics = _statistics(logits, targets)
    loss = _per_token_cross_entropy(logits, targets, statistics, label_smoothing)
    correct = ops.cast(ops.equal(statistics[3], targets), "float32")
    return ops.sum(loss * weights), ops.sum(correct * weights), ops.sum(weights)


def smoothed_cross_entropy(logits, targets, label_smoothing=0.1):
    """Cross-entropy against smoothed one-hot targets, as tensor2tensor computes it (see the module doc).

    Args:
        logits: float `[B, T, V]`.
        targets: int `[B, T]`, 0 at padding.
        label_smoothing: eps.

    Returns:
        (sum of per-token losses, number of non-padding tokens), float32 scalars.
    """
    loss, _, count = cross_entropy_and_accuracy(logits, targets, label_smoothing)
    return loss, count


def neg_log_perplexity(logits, targets):
    """(sum of log-likelihoods of the targets, token count): the mean is -log perplexity."""
    weights = _weights(targets)
    _, _, (lse, target, _, _) = _statistics(logits, targets)
    return ops.sum((target - lse) * weights), ops.sum(weights)


def _correct(logits, targets):
    """1.0 where the target is the argmax of the logits, else 0.0."""
    _, targets, statistics = _statistics(logits, targets)
    return ops.cast(ops.equal(statistics[3], targets), "float32")


def token_accuracy(logits, targets):
    """(correct non-padding tokens under argmax, token count)."""
    weights = _weights(targets)
    return ops.sum(_correct(logits, targets) * weights), ops.sum(weights)


def sequence_accuracy(logits, targets):
    """(sequences whose every non-padding token is right, number of non-empty sequences)."""
    weights = _weights(targets)
    wrong = 1.0 - _correct(logits, targets)
    all_right = ops.cast(ops.equal(ops.sum(wrong * weights, axis=-1), 0.0), "float32")
    non_empty = ops.cast(ops.sum(weights, axis=-1) > 0, "float32")
    return ops.sum(all_right * non_empty), ops.sum(non_empty)


METRICS = {
    "accuracy": token_accuracy,
    "accuracy_per_sequence": sequence_accuracy,
    "neg_log_perplexity": neg_log_perplexity,
}
