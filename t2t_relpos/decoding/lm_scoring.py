"""Scoring a whole text with a language model: sliding windows, each token scored once.

A model reads at most `window` tokens at a time. The text's ids x_0 .. x_{N-1} are read in windows starting
every `stride` tokens, `[b, b + window)` for b = 0, stride, 2 stride, ...; a window scores only the tokens no
earlier window scored (the first scores all of its own), so every token is scored exactly once, and after the
first window each with at least `window - stride` tokens of context (the evaluation of Transformer-XL (Dai et
al. 2019) and ALiBi (Press et al. 2022); stride = window: disjoint windows, as the eval split is read).
Within a window the model sees the start symbol and then the window's tokens, as in training:

    -log P(text) = sum_k sum_{j in scored(k)} -log p(x_j | x_{b_k} .. x_{j-1})

Perplexity is exp of the mean over the tokens scored; bits per character, for a character-level text, is the
mean in bits.
"""

import math

import numpy as np
from keras import ops

from t2t_relpos import errors


def windows(length, window, stride):
    """The windows that score a text of `length` tokens: a list of `(start, end, first_scored)`, tokens
    `[start, end)` read and `[first_scored, end)` scored.

    >>> windows(10, 4, 2)
    [(0, 4, 0), (2, 6, 4), (4, 8, 6), (6, 10, 8)]
    >>> windows(5, 4, 4)
    [(0, 4, 0), (4, 5, 4)]
    """
    for name, value in (("window", window), ("stride", stride)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise errors.HParamsError(f"{name} must be an integer >= 1, got {value!r}")
    if stride > window:
        raise errors.HParamsError(f"stride {stride} is longer than the window {window}: the tokens between two "
                                  "windows would never be scored")
    out, start, scored_to = [], 0, 0
    while scored_to < length:
        end = min(start + window, length)
        out.append((start, end, scored_to))
        scored_to, start = end, start + stride
    return out


def score_ids(logits_fn, ids, window, stride=None, batch_size=16):
    """Sliding-window negative log-likelihood of a text.

    Args:
        logits_fn: `[B, T]` int32 ids -> float logits `[B, T, V]` where position t predicts ids[:, t] from the
            start symbol and ids[:, :t] (a decoder-only model's call on `{"targets": ids}`; see `model_scorer`).
        ids: The text's ids, a 1-D sequence (documents separated by EOS, as the problem packs them).
        window: Tokens the model reads at a time.
        stride: Tokens between window starts (default `window`: disjoint windows).
        batch_size: Windows per call.

    Returns:
        `{"tokens": N scored, "nll": the sum of -log p in nats, "log_perplexity": nll / N,
        "perplexity": exp(nll / N), "bits_per_token": nll / N / ln 2}`.
    """
    ids = np.asarray(ids, np.int32).reshape(-1)
    if not len(ids):
        raise errors.DataError("the text to score has no tokens")
    stride = window if stride is None else stride
    spans = windows(len(ids), window, stride)
    nll = 0.0
    # Windows of one length share a batch (all but the last are `window` long).
    by_length = {}
    for span in spans:
        by_length.setdefault(span[1] - span[0], []).append(span)
    for group in by_length.values():
        for first in range(0, len(group), batch_size):
            chunk = group[first:first + batch_size]
            batch = np.stack([ids[start:end] for start, end, _ in chunk])
            log_probs = ops.convert_to_numpy(ops.log_softmax(ops.cast(logits_fn(batch), "float32"), axis=-1))
            picked = np.take_along_axis(log_probs, batch[:, :, None], axis=-1)[:, :, 0]  # [rows, length]
            for row, (start, _, scored_from) in enumerate(chunk):
                nll -= float(picked[row, scored_from - start:].astype(np.float64).sum())
    tokens = len(ids)
    mean = nll / tokens
    return {"tokens": tokens, "nll": nll, "log_perplexity": mean, "perplexity": math.exp(min(mean, 700.0)),
            "bits_per_token": mean / math.log(2.0)}


def model_scorer(model, jit_compile=False):
    """`logits_fn` for `score_ids` from a decoder-only model, compiled with `tf.function` (one trace per window
    length)."""
    if not getattr(model, "decoder_only", False):
        raise errors.HParamsError(f"{type(model).__name__} reads inputs: scoring a text needs a decoder-only model "
                                  "(a language model, input_vocab_size=None)")
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    @tf.function(jit_compile=jit_compile, reduce_retracing=True, autograph=False)
    def logits(ids):
        return model({"targets": ids}, training=False)

    return lambda ids: logits(tf.constant(ids))
