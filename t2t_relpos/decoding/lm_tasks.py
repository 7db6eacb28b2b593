"""The measures of the Universal Transformer paper's language-model tasks, for a decoder-only model.

The model is called as the package's decoder-only `Transformer` / `UniversalTransformer` are:
`model({"targets": ids [B, T]}, training=False)` -> float logits `[B, T, V]`, where `logits[:, i]` predicts
`ids[:, i]` from `ids[:, :i]` (the start symbol, PAD, shifted in). Sequences are right-padded with PAD: by
causality a position's logits do not see the padding after it. Examples are batched by length under a token
budget (`batch_tokens`), which bounds the `[B, T, V]` logits held at once.

- `lambada_accuracy` (LAMBADA, §3.3): a passage counts as right when greedy decoding from the words before
  its last one gives the last word's ids. With a word vocabulary the target is one id; a target of several
  ids (a subword vocabulary) is right when every one of them is the argmax given the context and the target's
  ids before it (the same verdict as greedy decoding of that many ids; whether the model would then end the
  word is not asked). A target holding the unknown id counts as wrong.
- `agreement_accuracy` (subject-verb agreement, §3.2): a sentence counts as right when the model gives the
  verb's right form a higher probability than its wrong form after the words before the verb (a tie is
  wrong), reported overall and by the number of attractors.
"""

import numpy as np
from keras import ops

from t2t_relpos.problems.problem import PAD_ID
from t2t_relpos.problems.word_vocab import UNK_ID

# Tokens (batch rows x padded length) per model call.
BATCH_TOKENS = 4096
# Attractor counts reported one by one; larger ones are pooled as "<ATTRACTOR_GROUPS>+" (the paper's table
# goes to 5).
ATTRACTOR_GROUPS = 6


def _batches(lengths, batch_tokens):
    """Index lists of examples of similar length, each batch's rows x longest length within `batch_tokens`."""
    order = np.argsort(lengths, kind="stable")
    batch = []
    for index in order:
        if batch and (len(batch) + 1) * max(lengths[index], 1) > batch_tokens:
            yield batch
            batch = []
        batch.append(int(index))
    if batch:
        yield batch


def _logits(model, sequences):
    """The model's float32 logits `[B, T, V]` for `sequences` (lists of ids), right-padded with PAD."""
    width = max(len(s) for s in sequences)
    ids = np.full((len(sequences), width), PAD_ID, np.int32)
    for row, sequence in enumerate(sequences):
        ids[row, :len(sequence)] = sequence
    logits = model({"targets": ids}, training=False)
    return np.asarray(ops.convert_to_numpy(logits), np.float32)


def lambada_accuracy(model, passages, batch_tokens=BATCH_TOKENS):
    """The share of passages whose last word the model predicts (see the module docstring).

    Args:
        model: A decoder-only model (see the module docstring).
        passages: `(context, target)` pairs of id lists (`t2t_relpos.problems.lambada.Passage`); the target is
            not empty.
        batch_tokens: Rows x padded length per model call.

    Returns:
        `{"accuracy": float, "correct": int, "total": int}`.
    """
    passages = [(list(c), list(t)) for c, t in passages]
    if any(not target for _, target in passages):
        raise ValueError("every passage needs a target word (its ids are empty)")
    correct = 0
    for batch in _batches([len(c) + len(t) for c, t in passages], batch_tokens):
        logits = _logits(model, [passages[i][0] + passages[i][1] for i in batch])
        for row, i in enumerate(batch):
            context, target = passages[i]
            predicted = logits[row, len(context):len(context) + len(target)].argmax(-1)
            correct += UNK_ID not in target and predicted.tolist() == target
    return {"accuracy": correct / max(len(passages), 1), "correct": correct, "total": len(passages)}


def attractor_group(attractors, groups=ATTRACTOR_GROUPS):
    """The report's group of an attractor count: "0" ... "<groups - 1>", then "<groups>+"."""
    return str(attractors) if attractors < groups else f"{groups}+"


def agreement_accuracy(model, examples, batch_tokens=BATCH_TOKENS, groups=ATTRACTOR_GROUPS):
    """How often the model prefers the verb's right form, overall and by attractors (see the module docstring).

    Args:
        model: A decoder-only model (see the module docstring).
        examples: `(prefix, verb, other, attractors)` tuples (`t2t_relpos.problems.agreement.AgreementExample`):
            the ids before the verb, the right and the wrong form's ids, the attractor count. An example whose
            `other` is None (no wrong form in the vocabulary) is counted as skipped and not scored.
        batch_tokens: Rows x padded length per model call.
        groups: Attractor counts reported one by one (see `attractor_group`).

    Returns:
        `{"accuracy", "correct", "total", "skipped", "by_attractors": {group: {"accuracy", "correct", "total",
        "skipped"}}}`, the groups in increasing order and only those with examples.
    """
    examples = [(list(p), int(v), o, int(a)) for p, v, o, a in examples]
    scored = [i for i, e in enumerate(examples) if e[2] is not None]
    right = {}
    for batch in _batches([len(examples[i][0]) + 1 for i in scored], batch_tokens):
        batch = [scored[b] for b in batch]
        logits = _logits(model, [examples[i][0] + [examples[i][1]] for i in batch])
        for row, i in enumerate(batch):
            prefix, verb, other, _ = examples[i]
            right[i] = bool(logits[row, len(prefix), verb] > logits[row, len(prefix), int(other)])
    by_group = {}
    for i, (_, _, other, attractors) in enumerate(examples):
        group = by_group.setdefault(attractors if attractors < groups else groups, [0, 0, 0])
        group[0] += right.get(i, False)
        group[1 if other is not None else 2] += 1
    report = {attractor_group(key, groups): _counts(*value) for key, value in sorted(by_group.items())}
    return {**_counts(*(sum(v[k] for v in by_group.values()) for k in range(3))), "by_attractors": report}


def _counts(correct, total, skipped):
    return {"accuracy": correct / max(total, 1), "correct": int(correct), "total": int(total),
            "skipped": int(skipped)}
