"""Greedy search, sampling and beam search over any model with `encode`, `init_cache` and `decode_step`.

Written with keras.ops (so it runs on any backend); wrap the calls in `tf.function` on TensorFlow (the
`Translator` does). The encoder runs once; every step feeds one token per hypothesis and reuses the
model's key/value caches. Caches are dicts whose `"self"` entry holds the per-hypothesis decoding state
(reordered between beams); every other entry (encoder keys/values, masks) is the same for all beams of a
sentence.

The `"self"` caches grow with the output (`cache_capacities`): the search runs one loop per capacity, 32
positions first, and zero-pads the caches between loops, so a step's attention and beam reorder touch at most
about 1.5x the positions written, not all `max_length`. Every capacity is a static shape (XLA compiles each
loop); the outputs are those of one `max_length` buffer. (A tensor `max_length` decodes with one buffer.)

Sequences are returned without the start symbol; positions after EOS are 0 (padding).

Both searches check their Python-valued arguments first (`check_arguments`, the rules the `Translator` applies
too, and `max_length` / `lengths`) and raise a ValueError naming the argument; tensor arguments (e.g. a
`max_length` under `tf.function`) are left to the ops.
"""

import math
import numbers

import keras
import numpy as np
from keras import ops

from t2t_relpos import errors
from t2t_relpos.layers.checks import static_shape

EOS_ID = 1
PAD_ID = 0
_NEG_INF = -1.0e9
# The searches compute scores, the length penalty and sampling logits in float32 (whatever the model's
# dtype): a Python float setting must mean the same there. The smallest temperature is float32's smallest
# normal number: a smaller one is 0 there (1e-320), or a subnormal that TensorFlow's CPU kernels and GPUs may
# flush to 0.
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)


def _number(name, value):
    """`value` as a Python number to check now, or None for a tensor (checked only by the ops that use it)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, numbers.Number):
        return value
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return None
    raise errors.HParamsError(f"decoding setting {name!r} must be a number, got {value!r}")


def check_arguments(beam_size=1, alpha=0.0, temperature=0.0, top_k=0, target_vocab_size=None):
    """Raises `errors.HParamsError` (a ValueError) naming the first search setting that cannot work.

    The rules of `greedy`, `beam_search` and the `Translator` (whose `check_settings` adds its own settings):
    `beam_size` an int >= 1; `alpha` and `temperature` finite and >= 0 (NaN passes every comparison: alpha=nan
    gives NaN scores; a negative alpha breaks beam search's stopping bound), and so in float32, the type the
    search computes in: at most float32's largest number, and a temperature > 0 at least its smallest normal
    one (1e-320 > 0 in Python, but 0 in float32); `top_k` an int >= 0, only when sampling (temperature > 0),
    which needs beam_size=1. Given `target_vocab_size`, also `top_k` <= it. Tensors are not checked.
    """
    values = {"beam_size": (beam_size, 1), "top_k": (top_k, 0), "temperature": (temperature, 0),
              "alpha": (alpha, 0)}
    values = {name: (_number(name, value), lowest) for name, (value, lowest) in values.items()}
    for name, (value, lowest) in values.items():
        if value is None:
            continue
        if not math.isfinite(value):
            raise errors.HParamsError(f"decoding setting {name!r} must be a finite number, got {value!r}")
        if name in ("beam_size", "top_k") and not isinstance(value, numbers.Integral):
            raise errors.HParamsError(f"decoding setting {name!r} must be an integer, got {value!r}")
        if value < lowest:
            raise errors.HParamsError(f"decoding setting {name!r} must be >= {lowest}, got {value!r}")
        if name in ("alpha", "temperature") and value > _FLOAT32_MAX:
            raise errors.HParamsError(f"decoding setting {name!r} must be at most {_FLOAT32_MAX:.4g} (the largest "
                                      f"float32, the type the search computes in), got {value!r}")
        if name == "temperature" and 0 < value < _FLOAT32_TINY:
            raise errors.HParamsError(f"decoding setting 'temperature' must be 0 (no sampling) or at least "
                                      f"{_FLOAT32_TINY:.4g} (the smallest normal float32, the type the search "
                                      f"computes in: a smaller one is 0 there, or flushed to 0), got {value!r}")
    beam_size, top_k, temperature = (values[name][0] for name in ("beam_size", "top_k", "temperature"))
    if temperature is not None and beam_size is not None and temperature > 0 and beam_size > 1:
        raise errors.HParamsError("sampling (temperature > 0) needs beam_size=1")
    if top_k is not None and temperature is not None and top_k > 0 and temperature <= 0:  # Search would ignore it.
        raise errors.HParamsError(f"decoding setting 'top_k' only applies when sampling (temperature > 0), got "
                                  f"top_k={top_k} with temperature={temperature}")
    if isinstance(target_vocab_size, numbers.Integral):
        if top_k is not None and top_k > target_vocab_size:
            raise errors.HParamsError(f"decoding setting 'top_k' must be <= the target vocabulary size "
                                      f"{target_vocab_size}, got {top_k}")


def check_length_penalty(alpha, max_length):
    """Raises `errors.HParamsError` when `length_penalty(max_length, alpha)` is not finite in float32: every
    score of a hypothesis that long would be -0.0, and beam search would rank them as ties. (Python numbers
    only; tensors are not checked.)"""
    alpha, max_length = _number("alpha", alpha), _number("max_length", max_length)
    if alpha is None or max_length is None or not math.isfinite(alpha) or alpha <= 0 or max_length < 0:
        return
    if alpha * math.log((5.0 + max_length) / 6.0) >= math.log(_FLOAT32_MAX):
        raise errors.HParamsError(f"decoding setting 'alpha' = {alpha!r} makes the length penalty "
                                  f"((5 + length) / 6) ** alpha overflow float32 at length {max_length} (every "
                                  f"score would be -0.0); use a smaller alpha (0.6-1.0 is usual)")


def _check_call(model, inputs, max_length, lengths, **settings):
    """`check_arguments` with the model's `target_vocab_size` (where it has one), then `max_length` (an int >= 0
    when it is a Python number), the length penalty at `max_length` (beam search), and `lengths` (shape `[B]`
    where its shape is static)."""
    check_arguments(target_vocab_size=getattr(model, "target_vocab_size", None), **settings)
    value = _number("max_length", max_length)
    if value is not None and (not isinstance(value, numbers.Integral) or value < 0):
        raise errors.HParamsError(f"decoding setting 'max_length' must be an integer >= 0 (or an int tensor), "
                                  f"got {max_length!r}")
    if "alpha" in settings:
        check_length_penalty(settings["alpha"], max_length)
    if lengths is None:
        return
    shape, inputs_shape = static_shape(lengths), static_shape(inputs)
    if shape is None:
        return
    batch = inputs_shape[0] if inputs_shape else None
    if len(shape) != 1 or None not in (batch, shape[0]) and shape[0] != batch:
        raise errors.HParamsError(f"decoding setting 'lengths' must have shape [B] (one limit per source), B = "
                                  f"{batch} here, got shape {shape}")


def _log_probs(logits):
    """Log-softmax over the vocabulary with the padding id excluded: decoding never emits padding."""
    vocab = ops.shape(logits)[-1]
    logits = ops.where(ops.arange(vocab) == PAD_ID, _NEG_INF, ops.cast(logits, "float32"))
    return ops.log_softmax(logits, axis=-1)


def length_penalty(length, alpha):
    """GNMT's length normalisation: `((5 + |Y|) / 6) ** alpha` (alpha = 0: none)."""
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


def source_lengths(inputs):
    """int `[B]`: the length of each source without its padding (EOS included)."""
    return ops.sum(ops.cast(ops.not_equal(inputs, PAD_ID), "int32"), axis=-1)


def max_decode_length(inputs, extra_length):
    """The longest source (without padding) + `extra_length`: the longest output of the batch."""
    return ops.max(source_lengths(inputs)) + extra_length


def decode_lengths(inputs, extra_length):
    """int `[B]`: each source's own output limit, its length (without padding) + `extra_length`.

    Pass it as `lengths` to `greedy` / `beam_search` so that a sentence decodes the same whatever it is
    batched with (the batch's padded width would let a short sentence ramble on beside a long one).
    """
    return source_lengths(inputs) + extra_length


_FIRST_CAPACITY = 32  # Positions; capacities grow in multiples of it.


def cache_capacities(max_length):
    """The self-attention cache sizes of the search's segments: 32, 64, 96, then about 1.5x, then `max_length`.

    The search decodes positions `[0, c_1)` with caches of `c_1` positions, `[c_1, c_2)` with `c_2`, and so on:
    every step attends over (and beam search reorders) at most about 1.5x the positions written so far, not the
    whole `max_length`, so its cost grows with the length decoded, not with the longest allowed.

    A `max_length` known only when the search runs (a tensor, as in `decoding.export`) gets one buffer.
    """
    if not isinstance(max_length, numbers.Integral):
        return [max_length]
    sizes, size = [], _FIRST_CAPACITY
    while size < max_length:
        sizes.append(size)
        size += max(_FIRST_CAPACITY, -(-size // 2 // _FIRST_CAPACITY) * _FIRST_CAPACITY)
    return sizes + [max_length]


def _grow_self_cache(model, cache, encoder_output, encoder_mask, capacity):
    """`cache` with its `"self"` buffers zero-padded to `capacity` positions.

    The model's `init_cache` says where each buffer's positions axis is: it is the axis whose size differs
    between a buffer of `cache` and the same buffer made for `capacity` positions (made for an empty batch, so
    it costs nothing). Leaves of the same size (e.g. a running state) are kept as they are.
    """
    fresh = model.init_cache(encoder_output[:0], encoder_mask[:0], capacity)["self"]

    def grow(old, new):
        widths = [[0, 0] for _ in old.shape]
        for axis in range(1, len(old.shape)):
            if old.shape[axis] != new.shape[axis]:
                widths[axis][1] = new.shape[axis] - old.shape[axis]
                return ops.pad(old, widths)
        return old

    return {**cache, "self": keras.tree.map_structure(grow, cache["self"], fresh)}


def _while_in_segments(cond, body, state, max_length, grow_cache, cache_slot):
    """`ops.while_loop(cond, body, state)` over steps `0 .. max_length - 1` (`state[0]` is the step), run as one
    loop per capacity of `cache_capacities`, the cache (`state[cache_slot]`) grown between them."""
    start = 0
    for capacity in cache_capacities(max_length):
        if start:
            state = (*state[:cache_slot], grow_cache(state[cache_slot], capacity), *state[cache_slot + 1:])
        state = ops.while_loop(lambda *s, end=capacity: ops.logical_and(s[0] < end, cond(*s)), body, state,
                               maximum_iterations=capacity - start)
        start = capacity
    return state


def ensure_built(model):
    """Builds a model made with `from_hparams` but never called: its caches need the weights' shapes.

    Call it outside `tf.function` when the search is traced (variables are made once, eagerly).
    """
    if getattr(model, "built", True) is False:
        model.build()


def _row_lengths(lengths, batch, max_length):
    if lengths is None:
        return ops.full((batch,), max_length, "int32")
    return ops.minimum(ops.cast(lengths, "int32"), max_length)


def greedy(model, inputs, max_length, temperature=0.0, top_k=0, seed=None, lengths=None):
    """Decodes the most probable token at each step (or samples, when `temperature > 0`).

    Args:
        model: Has `encode(inputs)`, `init_cache(enc, mask, max_length)`, `decode_step(ids, cache, index)`.
        inputs: int `[B, S]` source ids (0-padded, EOS-terminated).
        max_length: the longest output: a Python int (static: the caches grow to it, `cache_capacities`), or
            an int scalar tensor (one cache of that size).
        temperature: 0 for greedy decoding; > 0 samples from softmax(logits / temperature).
        top_k: When sampling, only from the k most probable tokens (0: all).
        seed: int or `keras.random.SeedGenerator` for sampling.
        lengths: Optional int `[B]`, the longest output of each row (at most `max_length`), e.g.
            `decode_lengths(inputs, extra_length)`; default `max_length` for every row.

    Returns:
        (ids `[B, max_length]`, log-probabilities of the sequences `[B]`).

    Raises:
        ValueError (`errors.HParamsError`): an argument that cannot work (`check_arguments`; `max_length` not an
            int >= 0; `lengths` not of shape `[B]`), before anything runs.
    """
    _check_call(model, inputs, max_length, lengths, temperature=temperature, top_k=top_k)
    ensure_built(model)
    encoder_output, encoder_mask = model.encode(inputs, training=False)
    capacities = cache_capacities(max_length)
    cache = model.init_cache(encoder_output, encoder_mask, capacities[0])
    batch = ops.shape(inputs)[0]
    lengths = _row_lengths(lengths, batch, max_length)
    seed = keras.random.SeedGenerator(seed) if temperature > 0 and not isinstance(
        seed, keras.random.SeedGenerator) else seed

    def cond(i, token, cache, out, finished, score):  # pylint: disable=unused-argument
        return ops.logical_and(i < max_length, ops.logical_not(ops.all(finished)))

    def body(i, token, cache, out, finished, score):
        logits, cache = model.decode_step(token[:, None], cache, i)
        # For models without `target_vocab_size`: the logits' static size.
        check_arguments(temperature=temperature, top_k=top_k, target_vocab_size=logits.shape[-1])
        log_probs = _log_probs(logits[:, 0])
        if temperature > 0:
            nxt = _sample(log_probs, temperature, top_k, seed)
        else:
            nxt = ops.cast(ops.argmax(log_probs, axis=-1), "int32")
        nxt = ops.where(finished, PAD_ID, nxt)
        gained = ops.take_along_axis(log_probs, nxt[:, None], axis=-1)[:, 0]
        score = score + ops.where(finished, 0.0, gained)
        out = ops.slice_update(out, [0, i], nxt[:, None])
        finished = ops.logical_or(ops.logical_or(finished, ops.equal(nxt, EOS_ID)), i + 1 >= lengths)
        return i + 1, nxt, cache, out, finished, score

    state = (ops.convert_to_tensor(0, "int32"), ops.zeros((batch,), "int32"), cache,
             ops.zeros((batch, max_length), "int32"), lengths <= 0, ops.zeros((batch,)))
    grow = lambda cache, capacity: _grow_self_cache(model, cache, encoder_output, encoder_mask, capacity)
    _, _, _, out, _, score = _while_in_segments(cond, body, state, max_length, grow, cache_slot=2)
    return out, score


def _sample(log_probs, temperature, top_k, seed):
    """Samples from softmax(log_probs / temperature): each row's best token at 0 before the division, so the
    logits stay finite where the best one matters (a small temperature sends the others to -inf, not every
    token), and the padding id masked after it (a large temperature would bring its -1e9 near 0)."""
    logits = (log_probs - ops.max(log_probs, axis=-1, keepdims=True)) / temperature
    logits = ops.where(ops.arange(ops.shape(logits)[-1]) == PAD_ID, _NEG_INF, logits)
    if top_k:
        kth = ops.top_k(logits, top_k)[0][:, -1:]
        logits = ops.where(logits < kth, _NEG_INF, logits)
    return ops.cast(keras.random.categorical(logits, 1, seed=seed)[:, 0], "int32")


def beam_search(model, inputs, max_length, beam_size=4, alpha=0.6, lengths=None):
    """Beam search with GNMT length normalisation, keeping `beam_size` alive and finished hypotheses.

    A hypothesis finishes when it emits EOS; its score is `log P(Y) / length_penalty(|Y|, alpha)`. A sentence's
    search stops when no alive hypothesis can beat the worst finished one (log-probabilities only decrease),
    or at its length limit.

    Args:
        model, inputs, max_length, lengths: as for `greedy`.
        beam_size: Hypotheses kept per sentence.
        alpha: Length-penalty exponent (0.6 in the paper).

    Returns:
        (ids `[B, beam_size, max_length]`, scores `[B, beam_size]`), best first. Every slot holds a distinct
        hypothesis while there are enough of them; the slots left when there are fewer (a beam wider than the
        target vocabulary's usable ids and outputs of one token, or a row whose length limit is 0: only the
        empty output exists there) are empty (all padding), with score -inf.

    Raises:
        ValueError (`errors.HParamsError`): an argument that cannot work, before anything runs: as for
            `greedy`.
    """
    _check_call(model, inputs, max_length, lengths, beam_size=beam_size, alpha=alpha)
    ensure_built(model)
    encoder_output, encoder_mask = model.encode(inputs, training=False)
    batch = ops.shape(inputs)[0]
    k = beam_size
    tile = lambda x: ops.repeat(x, k, axis=0)  # [B, ...] -> [B * k, ...], beams of a sentence adjacent.
    cache = model.init_cache(tile(encoder_output), tile(encoder_mask), cache_capacities(max_length)[0])
    lengths = _row_lengths(lengths, batch, max_length)
    max_penalty = length_penalty(lengths, alpha)  # [B]

    def cond(i, alive_seq, alive_log_probs, last, cache, fin_seq, fin_scores, fin_flags):
        del alive_seq, last, cache, fin_seq
        # The best any alive hypothesis could still reach, against the worst finished hypothesis kept.
        best_alive = alive_log_probs[:, 0] / max_penalty
        worst_finished = ops.min(ops.where(fin_flags, fin_scores, 0.0), axis=1)
        worst_finished = ops.where(ops.any(fin_flags, axis=1), worst_finished, _NEG_INF)
        settled = ops.logical_and(ops.all(fin_flags, axis=1), worst_finished > best_alive)
        done = ops.logical_or(i >= lengths, settled)
        return ops.logical_and(i < max_length, ops.logical_not(ops.all(done)))

    def body(i, alive_seq, alive_log_probs, last, cache, fin_seq, fin_scores, fin_flags):
        before = (alive_seq, alive_log_probs, last, fin_seq, fin_scores, fin_flags)
        logits, cache = model.decode_step(ops.reshape(last, (-1, 1)), cache, i)
        vocab = ops.shape(logits)[-1]
        log_probs = ops.reshape(_log_probs(logits[:, 0]), (batch, k, vocab))
        log_probs = log_probs + alive_log_probs[:, :, None]
        flat = ops.reshape(log_probs, (batch, k * vocab))
        # 2k candidates: even if k of them end in EOS, k can stay alive.
        cand_log_probs, cand_index = ops.top_k(flat, 2 * k)
        cand_beam = cand_index // vocab
        cand_token = ops.cast(cand_index % vocab, "int32")
        cand_seq = ops.take_along_axis(alive_seq, cand_beam[:, :, None], axis=1)
        cand_seq = ops.slice_update(cand_seq, [0, 0, i], cand_token[:, :, None])
        ends = ops.equal(cand_token, EOS_ID)

        # Alive: the best k candidates that did not just end.
        alive_rank = ops.where(ends, _NEG_INF, cand_log_probs)
        new_alive_log_probs, chosen = ops.top_k(alive_rank, k)
        alive_seq = ops.take_along_axis(cand_seq, chosen[:, :, None], axis=1)
        last = ops.take_along_axis(cand_token, chosen, axis=1)
        source_beam = ops.take_along_axis(cand_beam, chosen, axis=1)  # [B, k]
        rows = ops.reshape(source_beam + ops.arange(batch, dtype=source_beam.dtype)[:, None] * k, (-1,))
        cache = {**cache, "self": _reorder_caches(cache["self"], rows)}

        # Finished: merge the candidates that just ended with those kept so far. As in fairseq, only an
        # ending among the k best candidates counts, so beam search with k = 1 is greedy search.
        ends = ops.logical_and(ends, ops.arange(2 * k) < k)
        cand_scores = cand_log_probs / length_penalty(i + 1, alpha)
        cand_scores = ops.where(ends, cand_scores, _NEG_INF)
        all_seq = ops.concatenate([fin_seq, cand_seq], axis=1)
        all_scores = ops.concatenate([ops.where(fin_flags, fin_scores, _NEG_INF), cand_scores], axis=1)
        all_flags = ops.concatenate([fin_flags, ends], axis=1)
        fin_scores, kept = ops.top_k(all_scores, k)
        fin_seq = ops.take_along_axis(all_seq, kept[:, :, None], axis=1)
        fin_flags = ops.take_along_axis(all_flags, kept, axis=1)
        # A sentence at its length limit keeps its hypotheses as they are while longer ones go on.
        after = (alive_seq, new_alive_log_probs, last, fin_seq, fin_scores, fin_flags)
        active = i < lengths
        (alive_seq, new_alive_log_probs, last, fin_seq, fin_scores, fin_flags) = (
            ops.where(ops.reshape(active, (-1,) + (1,) * (len(ops.shape(now)) - 1)), now, was)
            for now, was in zip(after, before))
        return i + 1, alive_seq, new_alive_log_probs, last, cache, fin_seq, fin_scores, fin_flags

    grow = lambda cache, capacity: _grow_self_cache(model, cache, encoder_output, encoder_mask, capacity)
    alive_log_probs = ops.tile(ops.convert_to_tensor([[0.0] + [_NEG_INF] * (k - 1)]), (batch, 1))
    state = (ops.convert_to_tensor(0, "int32"), ops.zeros((batch, k, max_length), "int32"), alive_log_probs,
             ops.zeros((batch, k), "int32"), cache, ops.zeros((batch, k, max_length), "int32"),
             ops.full((batch, k), _NEG_INF), ops.zeros((batch, k), "bool"))
    (_, alive_seq, alive_log_probs, _, _, fin_seq, fin_scores,
     fin_flags) = _while_in_segments(cond, body, state, max_length, grow, cache_slot=4)
    # Finished hypotheses first (by score); unfinished ones fill the slots that are left, then empty slots.
    alive_lengths = ops.sum(ops.cast(ops.not_equal(alive_seq, PAD_ID), "int32"), axis=-1)
    alive_scores = alive_log_probs / length_penalty(alive_lengths, alpha)
    all_seq = ops.concatenate([fin_seq, alive_seq], axis=1)
    all_scores = ops.concatenate([fin_scores, alive_scores], axis=1)
    groups = ops.concatenate([ops.where(fin_flags, 0, 2), ops.ones_like(fin_flags, "int32")], axis=1)
    order = _first_by_group_then_score(groups, all_scores, k)
    scores = ops.take_along_axis(all_scores, order, axis=1)
    # With fewer distinct hypotheses than slots, the dead initial beams (score -1e9) fill the rest: empty them.
    filler = scores <= _NEG_INF / 2
    seq = ops.take_along_axis(all_seq, order[:, :, None], axis=1)
    return ops.where(filler[:, :, None], PAD_ID, seq), ops.where(filler, float("-inf"), scores)


def _reorder_caches(self_cache, rows):
    """The per-hypothesis caches with row r taken from row `rows[r]`: each beam gets its parent's history."""
    return keras.tree.map_structure(lambda t: ops.take(t, rows, axis=0), self_cache)


def _first_by_group_then_score(groups, scores, k):
    """Indices `[B, k]` of the first k entries in the order (group ascending, score descending, index).

    Each entry's place is the number of entries that precede it, so the order is exact and the same on every
    backend. (Folding the group into the score, e.g. adding -1e9 to unfinished hypotheses, loses scores of
    about -6 to float32 rounding, and `top_k` then breaks the ties in a backend-specific order.)

    Args:
        groups: int `[B, n]`, lower first.
        scores: float `[B, n]`, higher first within a group.
        k: how many indices to return (k <= n).
    """
    n = ops.shape(scores)[1]
    index = ops.arange(n, dtype="int32")
    g_i, g_j = groups[:, :, None], groups[:, None, :]
    s_i, s_j = scores[:, :, None], scores[:, None, :]
    later_index = (index[None, :] < index[:, None])[None]  # [1, i, j]: j comes before i on equal keys.
    precedes = ops.logical_or(g_j < g_i, ops.logical_and(ops.equal(g_j, g_i), ops.logical_or(
        s_j > s_i, ops.logical_and(ops.equal(s_j, s_i), later_index))))  # [B, i, j]: j before i
    place = ops.sum(ops.cast(precedes, "int32"), axis=2)  # [B, n], a permutation of 0 .. n - 1
    at_place = ops.equal(place[:, None, :], ops.arange(k, dtype="int32")[None, :, None])  # [B, k, n]
    return ops.cast(ops.argmax(ops.cast(at_place, "int32"), axis=-1), "int32")


def greedy_full_prefix(model, inputs, max_length, decode_fn=None):
    """Greedy decoding without a cache: re-runs the whole decoder on the growing prefix at every step.

    The baseline that cached decoding is checked and benchmarked against (O(n^2) decoder work). A Python
    loop; pass `decode_fn` (e.g. `tf.function(model.decode, reduce_retracing=True)`) to compile the steps.

    Returns:
        ids `[B, max_length]`.
    """
    decode_fn = decode_fn or (lambda *args: model.decode(*args, training=False))
    encoder_output, encoder_mask = model.encode(inputs, training=False)
    batch = ops.shape(inputs)[0]
    out = ops.zeros((batch, 0), "int32")
    finished = ops.zeros((batch,), "bool")
    for _ in range(max_length):
        logits = decode_fn(ops.pad(out, [[0, 0], [1, 0]]), encoder_output, encoder_mask)
        nxt = ops.cast(ops.argmax(_log_probs(logits[:, -1]), axis=-1), "int32")
        nxt = ops.where(finished, PAD_ID, nxt)
        out = ops.concatenate([out, nxt[:, None]], axis=1)
        finished = ops.logical_or(finished, ops.equal(nxt, EOS_ID))
        if bool(ops.convert_to_numpy(ops.all(finished))):
            break
    return ops.pad(out, [[0, 0], [0, max_length - ops.shape(out)[1]]])
