"""Continuing prompts with a decoder-only model: `search`'s cached greedy, sampling and beam search, the prompt
as the prefix of the output.

A language model reads `s = [PAD] + prompt + continuation` (PAD is the start symbol, as in training). For a
batch of prompts whose shortest has `m` tokens, the first `m` positions of `s` are written into the model's
cache in one step (a multi-token step is exact); the search then runs from position `m`. A row whose prompt is
longer is *forced* through the rest of it: at those steps the logits put all probability on the prompt's next
token (log-probability 0, so the scores are those of the continuations alone). Each row's continuation is then
taken from where its own prompt ends. Prompts of one length need no forcing (`generate` groups them so).

Positions are those of the whole text: continuation token j of a prompt of n tokens sits at position n + 1 + j,
as it would in the teacher-forced pass (the cached search equals the full pass).
"""

import keras
import numpy as np
from keras import ops

from t2t_relpos import errors
from t2t_relpos.decoding import search

PAD_ID = search.PAD_ID
EOS_ID = search.EOS_ID


class PromptedDecoder:
    """A decoder-only model as `search` sees a model: `encode` takes the right-padded prompts `[B, P]`
    (their "encoder output" is the prompts themselves), `init_cache` writes the first `m` positions
    (`m` = the shortest prompt), `decode_step` runs the model at position `m + i` and forces longer prompts.
    """

    def __init__(self, model):
        if not getattr(model, "decoder_only", False):
            raise errors.HParamsError(f"{type(model).__name__} reads inputs: continuing prompts needs a decoder-only "
                                      "model (a language model, input_vocab_size=None)")
        self.model = model
        self.target_vocab_size = model.target_vocab_size
        self.shortest = None

    def encode(self, prompts, training=False):
        del training
        mask = ops.not_equal(prompts, PAD_ID)
        lengths = ops.sum(ops.cast(mask, "int32"), axis=1)
        self.shortest = ops.min(lengths)
        return prompts, mask

    def init_cache(self, prompts, mask, capacity):
        batch = ops.shape(prompts)[0]
        started = ops.pad(prompts, [[0, 0], [1, 0]], constant_values=PAD_ID)  # [B, P + 1]: s's known part.
        cache = self.model.init_cache(None, None, capacity + self.shortest, batch_size=batch)
        _, cache = self.model.decode_step(started[:, :self.shortest], cache, 0)
        return {**cache, "prompts": started, "lengths": ops.sum(ops.cast(mask, "int32"), axis=1)}

    def decode_step(self, ids, cache, index):
        prompts, lengths = cache["prompts"], cache["lengths"]
        position = index + self.shortest
        # Step 0 feeds the last token of s that every row knows: s[m] (the start symbol when m = 0).
        last_column = ops.shape(prompts)[1] - 1  # Gathers past it fail on CPUs: columns are clipped to it.
        known = ops.take(prompts, ops.minimum(position, last_column)[None], axis=1)
        ids = ops.where(index == 0, known, ids)
        model_cache = {k: v for k, v in cache.items() if k not in ("prompts", "lengths")}
        logits, model_cache = self.model.decode_step(ids, model_cache, position)
        # The output of this step is s[position + 1] = prompt[position]: forced while the row's prompt lasts.
        forced = position < lengths  # [B]
        next_token = ops.take(prompts, ops.minimum(position + 1, last_column)[None], axis=1)  # [B, 1]
        one_hot = ops.equal(ops.arange(ops.shape(logits)[-1], dtype="int32")[None, None, :],
                            next_token[:, :, None])
        forcing = ops.where(one_hot, 0.0, -1.0e9)
        logits = ops.where(forced[:, None, None], forcing, ops.cast(logits, "float32"))
        return logits, {**model_cache, "prompts": prompts, "lengths": lengths}


def continue_prompts(model, prompts, max_new_tokens, beam_size=1, alpha=0.0, temperature=0.0, top_k=0, seed=None):
    """Continuations of a batch of prompts, with the model's cache (the search of `search.greedy` or
    `search.beam_search`, see the module docstring).

    Runs eagerly or inside `tf.function` (shapes may be dynamic).

    Args:
        model: A built decoder-only model (`Transformer` / `UniversalTransformer` with `input_vocab_size=None`).
        prompts: int `[B, P]`, each row a prompt of ids (no EOS) right-padded with PAD (0); an empty row
            samples from the start of a document.
        max_new_tokens: int, the longest continuation (EOS included: a continuation that ends its document
            stops there).
        beam_size: 1 for greedy search or sampling; > 1 for beam search (then the length penalty counts the
            forced tokens of prompts longer than the batch's shortest: give it prompts of one length).
        alpha: Beam search's length penalty.
        temperature, top_k: Sampling (beam_size 1): from softmax(logits / temperature), the k best tokens.
        seed: Sampling's seed (int or `keras.random.SeedGenerator`).

    Returns:
        (ids `[B, beam_size, max_new_tokens]`, 0 after EOS; log-probabilities of the continuations
        `[B, beam_size]`, best first; beam search's are length-normalised).
    """
    search.check_arguments(beam_size, alpha, temperature, top_k, model.target_vocab_size)
    search.ensure_built(model)
    prompts = ops.convert_to_tensor(prompts, "int32")
    adapter = PromptedDecoder(model)
    lengths = ops.sum(ops.cast(ops.not_equal(prompts, PAD_ID), "int32"), axis=1)
    shortest = ops.min(lengths)
    forced = lengths - shortest  # Steps each row spends in its own prompt.
    steps = ops.shape(prompts)[1] - shortest + max_new_tokens
    if isinstance(max_new_tokens, int) and not isinstance(steps, int):
        steps = _static_or_tensor(steps)
    row_lengths = forced + max_new_tokens
    if beam_size > 1:
        ids, scores = search.beam_search(adapter, prompts, steps, beam_size, alpha, row_lengths)
    else:
        ids, scores = search.greedy(adapter, prompts, steps, temperature, top_k, seed, row_lengths)
        ids, scores = ids[:, None], scores[:, None]
    # Row r's continuation starts after its forced steps.
    padded = ops.pad(ids, [[0, 0], [0, 0], [0, max_new_tokens]])
    columns = forced[:, None, None] + ops.arange(max_new_tokens, dtype="int32")[None, None, :]
    columns = ops.broadcast_to(columns, (ops.shape(ids)[0], ops.shape(ids)[1], max_new_tokens))
    return ops.take_along_axis(padded, columns, axis=2), scores


def _static_or_tensor(value):
    """A Python int where the value is known now (eager), so that the search's caches grow in segments."""
    try:
        return int(ops.convert_to_numpy(value))
    except Exception:  # pylint: disable=broad-except  # A symbolic tensor inside tf.function.
        return value


def generate(model, prompts, max_new_tokens, beam_size=1, alpha=0.0, temperature=0.0, top_k=0, seed=None,
             batch_size=32, search_fn=None):
    """Continues each prompt: a list of id lists in, a list of (continuation ids, score) out, in order.

    Prompts are grouped by length (and batched `batch_size` at a time), so that no prompt is forced through
    another's. A continuation stops at EOS (the end of the document), which it leaves out, or after
    `max_new_tokens` tokens.

    Args:
        model: A built decoder-only model.
        prompts: A list of lists of ids (no EOS); `[]` samples a document from its start.
        max_new_tokens, beam_size, alpha, temperature, top_k, seed: as for `continue_prompts`.
        batch_size: Prompts per batch.
        search_fn: `continue_prompts` or a compiled version of it with the same arguments (e.g. wrapped in
            `tf.function`), called as `search_fn(model, prompts, max_new_tokens, ...)`.

    Returns:
        A list, per prompt, of `(ids, score)`: the best continuation without its EOS, and its log-probability.

    Example:

    >>> from t2t_relpos.models.transformer import Transformer
    >>> model = Transformer(None, 12, hidden_size=16, filter_size=32, num_heads=2, num_decoder_layers=1,
    ...                     position_encoding="relative", max_relative_position=4)
    >>> model.build()
    >>> [len(ids) <= 5 for ids, _ in generate(model, [[5, 6, 7], []], max_new_tokens=5)]
    [True, True]
    """
    if not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise errors.HParamsError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    search_fn = search_fn or continue_prompts
    if temperature > 0 and not isinstance(seed, keras.random.SeedGenerator):
        seed = keras.random.SeedGenerator(seed)  # One stream for all batches: no two batches sample alike.
    prompts = [list(p) for p in prompts]
    for index, prompt in enumerate(prompts):
        if any(i in (PAD_ID, EOS_ID) for i in prompt):
            raise errors.HParamsError(f"prompt {index} holds the reserved id {PAD_ID} (padding) or {EOS_ID} (end of "
                                      "sequence): a prompt is text, continued before any end")
    results = [None] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    groups = []
    for i in order:
        if groups and len(prompts[groups[-1][0]]) == len(prompts[i]) and len(groups[-1]) < batch_size:
            groups[-1].append(i)
        else:
            groups.append([i])
    for group in groups:
        batch = np.array([prompts[i] for i in group], np.int32).reshape(len(group), len(prompts[group[0]]))
        ids, scores = search_fn(model, batch, max_new_tokens, beam_size=beam_size, alpha=alpha,
                                temperature=temperature, top_k=top_k, seed=seed)
        ids, scores = ops.convert_to_numpy(ids), ops.convert_to_numpy(scores)
        for row, i in enumerate(group):
            continuation = ids[row, 0].tolist()
            if EOS_ID in continuation:
                continuation = continuation[:continuation.index(EOS_ID)]
            results[i] = ([t for t in continuation if t != PAD_ID], float(scores[row, 0]))
    return results
