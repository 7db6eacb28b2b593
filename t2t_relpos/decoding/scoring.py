"""Scores of decoded text: sacreBLEU for translation, character and sequence accuracy for algorithmic tasks.

BLEU is computed by sacreBLEU on detokenized text with its standard tokenisations (13a, and intl), and the
signature is reported with the score, so figures are comparable across papers. tensor2tensor's "approx
BLEU" on subword ids is not BLEU and is not offered.
"""

import sacrebleu


def bleu(hypotheses, references, tokenize="13a"):
    """Corpus BLEU of `hypotheses` against one reference each: `(score, signature string)`."""
    metric = sacrebleu.metrics.BLEU(tokenize=tokenize)
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return result.score, str(metric.get_signature())


def sequence_accuracy(hypotheses, references):
    """Per-symbol and per-sequence accuracy (the Universal Transformer paper's char/seq accuracy).

    A symbol is correct when the hypothesis has the reference's symbol at the same position; symbols missing
    from a too-short hypothesis count as wrong, so do extra symbols of a too-long one.

    Returns:
        {"char_accuracy": ..., "seq_accuracy": ..., "sequences": n}
    """
    correct = total = exact = 0
    for hyp, ref in zip(hypotheses, references):
        correct += sum(a == b for a, b in zip(hyp, ref))
        total += max(len(ref), len(hyp))
        exact += hyp == ref
    n = len(references)
    return {"char_accuracy": correct / total if total else 1.0, "seq_accuracy": exact / n if n else 1.0,
            "sequences": n}


def answer_accuracy(hypotheses, references, groups=None):
    """Exact-match accuracy of answers, overall and per group (bAbI: per task).

    Returns:
        {"accuracy": ..., "questions": n, "groups": {group: (accuracy, n)}} (groups in first-seen order).
    """
    right = [h == r for h, r in zip(hypotheses, references)]
    per_group = {}
    for group, ok in zip(groups or [], right):
        per_group.setdefault(group, []).append(ok)
    return {"accuracy": sum(right) / len(right) if right else 1.0, "questions": len(right),
            "groups": {g: (sum(v) / len(v), len(v)) for g, v in per_group.items()}}


# A bAbI task counts as failed above 5% error (Weston et al. 2015; the UT paper's Table 1).
FAILED_ERROR = 0.05


def _answer_lines(hypotheses, references, groups):
    scores = answer_accuracy(hypotheses, references, groups)
    lines = [f"answer_accuracy = {scores['accuracy']:.4f}  error = {100 * (1 - scores['accuracy']):.2f}%  "
             f"({scores['questions']} questions)"]
    if len(scores["groups"]) > 1:
        errors = []
        for group, (accuracy, n) in scores["groups"].items():
            errors.append(1 - accuracy)
            lines.append(f"  {group:<5} accuracy = {accuracy:.4f}  error = {100 * (1 - accuracy):.2f}%  ({n})")
        failed = sum(e > FAILED_ERROR for e in errors)
        lines.append(f"mean error over {len(errors)} groups = {100 * sum(errors) / len(errors):.2f}%  "
                     f"failed (error > {100 * FAILED_ERROR:.0f}%) = {failed}")
    return lines


def report(metric, hypotheses, references, groups=None):
    """Human-readable lines for the problem's decode metric ("bleu", "accuracy" or "answer_accuracy").

    `groups` (one name per example, for "answer_accuracy") adds a line per group, e.g. per bAbI task.
    """
    if metric == "answer_accuracy":
        return _answer_lines(hypotheses, references, groups)
    if metric == "bleu":
        lines = []
        for tokenize in ("13a", "intl"):
            score, signature = bleu(hypotheses, references, tokenize)
            lines.append(f"BLEU = {score:.2f}  ({signature})")
        return lines
    lines = [_accuracy_line("", sequence_accuracy(hypotheses, references))]
    pairs = list(zip(hypotheses, references))
    low = 1
    for high in LENGTH_BUCKETS:
        chosen = [(h, r) for h, r in pairs if low <= len(r) <= high]
        if chosen and len(chosen) < len(pairs):
            lines.append(_accuracy_line(f"  reference length {low:>3}-{high:<3} ",
                                        sequence_accuracy(*zip(*chosen))))
        low = high + 1
    return lines


# Accuracy by reference length shows length generalisation: the algorithmic tasks train on <= 40 symbols.
LENGTH_BUCKETS = (10, 40, 100, 200, 400, 1000, 10 ** 9)


def _accuracy_line(prefix, scores):
    return (f"{prefix}char_accuracy = {scores['char_accuracy']:.4f}  seq_accuracy = {scores['seq_accuracy']:.4f}"
            f"  ({scores['sequences']} sequences)")
