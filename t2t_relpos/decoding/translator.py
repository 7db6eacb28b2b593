"""Text in, text out: encodes sentences, decodes them in length-sorted batches, and decodes the ids back.

For example:

    translator = Translator(model, problem, beam_size=4, alpha=0.6)
    translator.translate(["0123456789"])                      # -> ["9876543210"]
    translator.translate(["0123"], return_beams=True)         # -> [[("3210", -0.01), ("3201", -2.3), ...]]
                                                              #    (up to beam_size pairs: only real ones)
"""

import math
import warnings

import keras
import numpy as np
import tensorflow as tf

from t2t_relpos import errors
from t2t_relpos.decoding import search

EOS_ID = 1
NUM_RESERVED_IDS = 2


def check_settings(beam_size=1, alpha=0.0, extra_length=0, batch_size=1, max_input_length=2, temperature=0.0,
                   top_k=0, target_vocab_size=None):
    """Raises `HParamsError` (a ValueError) naming the first decoding setting that cannot work.

    The search's own settings follow `search.check_arguments` (given `target_vocab_size`, also `top_k` <= it),
    and beam search's length penalty must stay finite in float32 at the longest output these settings allow
    (`search.check_length_penalty`); the rest are the Translator's.
    """
    limits = {"batch_size": (batch_size, 1), "extra_length": (extra_length, 0),
              "max_input_length": (max_input_length, 2)}
    for name, (value, lowest) in limits.items():
        if not math.isfinite(value):
            raise errors.HParamsError(f"decoding setting {name!r} must be a finite number, got {value!r}")
        if value < lowest:
            why = " (at least one token and EOS)" if name == "max_input_length" else ""
            raise errors.HParamsError(f"decoding setting {name!r} must be >= {lowest}{why}, got {value!r}")
    search.check_arguments(beam_size, alpha, temperature, top_k, target_vocab_size)
    if beam_size > 1:
        search.check_length_penalty(alpha, _bucket(max_input_length) + extra_length)


class Translator:
    """Decodes text with a trained model and its problem's encoders.

    A model with `classify` (the encoder-only classifiers) answers each source with one label instead: the
    `beam_size` most probable labels (at most all of them) with their log-probabilities, normalised over the
    labels (the reserved ids PAD and EOS are not labels). A classifier is not sampled: `temperature` and
    `top_k` must be 0.

    Args:
        model: A model with `encode` / `init_cache` / `decode_step` (e.g. `Transformer`), or `classify`. Its
            `input_vocab_size` and `target_vocab_size` (where it has them) must be the problem's.
        problem: Its `Problem` (for the text encoders).
        data_dir: Where the problem's vocabulary lives, if it has one.
        beam_size: 1 decodes greedily; more runs beam search.
        alpha: Length-penalty exponent of beam search.
        extra_length: Each output may be this many tokens longer than its own source (whatever else is in
            its batch).
        batch_size: Sentences per batch (sentences are sorted by length first).
        max_input_length: Longer sources are truncated to this many tokens, EOS included (see `encode`), with a
            warning.
        temperature, top_k: Sample instead of searching when temperature > 0 (beam_size must be 1).
        seed: Seed of the sampling.
        jit_compile: Compile the search with XLA.

    Raises:
        ValueError: a setting that cannot work (`check_settings`), a model whose vocabulary sizes are not the
            problem's, or sampling settings for a classifier.
    """

    def __init__(self, model, problem, data_dir=None, beam_size=4, alpha=0.6, extra_length=50, batch_size=32,
                 max_input_length=1024, temperature=0.0, top_k=0, seed=None, jit_compile=False):
        encoders = problem.feature_encoders(data_dir)
        self.input_encoder, self.target_encoder = encoders["inputs"], encoders["targets"]
        self.classifies = hasattr(model, "classify")
        _check_vocab_sizes(model, self.input_encoder.vocab_size, self.target_encoder.vocab_size)
        if self.classifies and (temperature or top_k):
            raise errors.HParamsError(f"a classifier ({type(model).__name__}) answers with its most probable labels "
                                      f"and is not sampled: temperature and top_k must be 0, got "
                                      f"temperature={temperature}, top_k={top_k}")
        check_settings(beam_size, alpha, extra_length, batch_size, max_input_length, temperature, top_k,
                       None if self.classifies else self.target_encoder.vocab_size)
        self.model = model
        search.ensure_built(model)  # Before the search is traced.
        self.problem = problem
        self.beam_size = beam_size
        self.alpha = alpha
        self.extra_length = extra_length
        self.batch_size = batch_size
        self.max_input_length = max_input_length
        self.temperature = temperature
        self.top_k = top_k
        self._seed = keras.random.SeedGenerator(seed) if temperature > 0 else None
        self._search = tf.function(self._search_ids, reduce_retracing=True, jit_compile=jit_compile,
                                   autograph=False)

    def encode(self, text):
        """Source ids with EOS, and whether the text was cut to `max_input_length` tokens."""
        ids = list(self.input_encoder.encode(text))
        truncated = len(ids) + 1 > self.max_input_length
        if truncated:
            ids = ids[:self.max_input_length - 1]
        return ids + [EOS_ID], truncated

    def _search_ids(self, inputs, max_length):
        if self.classifies:
            logits = tf.cast(self.model.classify(inputs, training=False), tf.float32)
            reserved = tf.range(tf.shape(logits)[-1]) < NUM_RESERVED_IDS  # PAD and EOS are not labels.
            log_probs = tf.nn.log_softmax(tf.where(reserved, -float("inf"), logits), axis=-1)  # Over the labels.
            scores, labels = tf.math.top_k(log_probs, k=min(self.beam_size, log_probs.shape[-1] - NUM_RESERVED_IDS))
            return labels[..., None], scores
        lengths = search.decode_lengths(inputs, self.extra_length)  # Per source: batch-mates do not matter.
        if self.beam_size > 1:
            return search.beam_search(self.model, inputs, max_length, self.beam_size, self.alpha, lengths)
        ids, scores = search.greedy(self.model, inputs, max_length, self.temperature, self.top_k, self._seed,
                                    lengths)
        return ids[:, None], scores[:, None]

    def decode_ids(self, sources):
        """Decodes a list of source id lists (each EOS-terminated), in the given order.

        Returns:
            A list, per source, of `(target ids without EOS, score)` pairs, best first (one pair unless beam
            search): only the hypotheses the search found, fewer than `beam_size` where there are fewer
            distinct outputs (the search's empty slots, at score -inf, are left out: they are no outputs).
        """
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        results = [None] * len(sources)
        for start in range(0, len(order), self.batch_size):
            chosen = order[start:start + self.batch_size]
            width = _bucket(max(len(sources[i]) for i in chosen))
            batch = np.zeros((len(chosen), width), np.int32)
            for row, i in enumerate(chosen):
                batch[row, :len(sources[i])] = sources[i]
            max_length = width + self.extra_length
            ids, scores = self._search(tf.constant(batch), max_length)
            ids, scores = ids.numpy(), scores.numpy()
            for row, i in enumerate(chosen):
                results[i] = [(_strip(ids[row, beam]), float(scores[row, beam])) for beam in range(ids.shape[1])
                              if scores[row, beam] != -np.inf or beam == 0]
        return results

    def translate(self, texts, return_beams=False):
        """Decodes each text; with `return_beams`, a list of (text, score) pairs per input, best first.

        Args:
            texts: A list (or other iterable) of strings; a bare string is refused (TypeError).
            return_beams: Return every hypothesis (up to `beam_size` of them; a classifier's labels), not only
                the best. Only real ones: where the search finds fewer distinct outputs than the beam holds (a
                beam wider than the outputs a short sentence can have), the list is shorter, never padded. An
                empty (or blank) text is not decoded, and gets `[("", 0.0)]`: its only output, with
                probability 1.

        A text longer than `max_input_length` tokens (EOS included) is truncated, with a warning naming its index.
        """
        if isinstance(texts, (str, bytes)):
            raise TypeError(f"texts must be a list of strings, got a {type(texts).__name__}; wrap it: [text]")
        texts = list(texts)
        sources = []
        for index, text in enumerate(texts):
            ids, truncated = self.encode(text)
            if truncated:
                warnings.warn(f"texts[{index}] has more than {self.max_input_length} tokens (EOS included); "
                              f"truncated", stacklevel=2)
            sources.append(ids)
        outputs = []
        for text, hypotheses in zip(texts, self.decode_ids(sources)):
            hypotheses = hypotheses_of_text(text, hypotheses)
            decoded = [(self.target_encoder.decode(ids), score) for ids, score in hypotheses]
            outputs.append(decoded if return_beams else decoded[0][0])
        return outputs


def hypotheses_of_text(text, hypotheses):
    """`hypotheses` (as `decode_ids` gives them) for `text`; for an empty or blank text, which means nothing to
    translate, its only output: the empty one, with probability 1."""
    if text.strip():
        return hypotheses
    return [([], 0.0)]


def _check_vocab_sizes(model, input_vocab_size, target_vocab_size):
    """Refuses a model whose vocabulary sizes (where it says them) are not those of the problem's encoders."""
    for side, problem_size in (("input", input_vocab_size), ("target", target_vocab_size)):
        model_size = getattr(model, f"{side}_vocab_size", None)
        if model_size is not None and model_size != problem_size:
            raise ValueError(f"the model's {side} vocabulary has {model_size} ids but the problem's {side} encoder "
                             f"has {problem_size}: the model was not made for this problem (or this data_dir's "
                             f"vocabulary)")


def _bucket(length):
    """Pads source lengths to 8, 16, 32, ...: few shapes, so the search is traced a few times only."""
    return 8 * 2 ** max(0, math.ceil(math.log2(length / 8)))


def _strip(ids):
    """Ids up to (not including) the first EOS or padding."""
    out = []
    for token in ids.tolist():
        if token in (EOS_ID, 0):
            break
        out.append(token)
    return out
