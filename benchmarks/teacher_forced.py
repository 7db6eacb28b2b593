"""Teacher-forced accuracy of a trained run on its problem's own split, by reference length.

    .venv/bin/python benchmarks/teacher_forced.py --output_dir RUN [--split eval] [--num_samples 100]

Each target symbol is predicted from the true symbols before it (one forward pass, as in training), and the
argmax is compared with the reference: the `accuracy` and `accuracy_per_sequence` that tensor2tensor's trainer
reports in evaluation, and so, most likely, the char / seq accuracy of the Universal Transformer paper's
Table 4 (its models were trained and evaluated with tensor2tensor; the paper does not say it decoded). The
decoder (`t2t-relpos-decoder --decode_split=eval`) measures something harder: the model's own output, where one
wrong symbol can derail the rest. The end-of-sequence symbol is not counted (tensor2tensor's accuracy counts it;
one symbol in 200-400 at the lengths that matter here).

Prints the decoder's accuracy lines for the first `--num_samples` examples of `--split` (the same examples the
decoder's `num_samples` takes): overall, then by reference length.

`--digit_kinds` (addition only) also splits each length's sum digits by what they need: both operands (digit i
of the sum, below the shorter operand's length), one operand (the longer operand's digits past the shorter's, with
a carry at most), or neither (the final carry). A model that copies the longer operand and adds nothing gets the
second kind right, and those are most of a long sum's digits (73% at lengths 201-400 in the eval split): the
split shows whether a model adds.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from t2t_relpos.decoding import scoring  # noqa: E402
from t2t_relpos.problems import algorithmic  # noqa: E402
from t2t_relpos.problems.problem import EOS_ID, NUM_RESERVED_IDS, PAD_ID  # noqa: E402
from t2t_relpos.training import runs  # noqa: E402


def predictions(model, problem, split, num_samples, batch_size=10):
    """(hypotheses, references): per example, the teacher-forced argmax ids and the reference ids (no EOS)."""
    examples = problem.dataset(split)
    if num_samples > 0:
        examples = examples.take(num_samples)
    padded = {"inputs": PAD_ID, "targets": PAD_ID}
    hypotheses, references = [], []
    for batch in examples.padded_batch(batch_size, padding_values=padded).as_numpy_iterator():
        logits = model(batch, training=False)
        argmax = np.argmax(np.asarray(logits), axis=-1)
        for target, predicted in zip(batch["targets"], argmax):
            length = int(np.sum((target != PAD_ID) & (target != EOS_ID)))
            references.append(target[:length].tolist())
            hypotheses.append(predicted[:length].tolist())
    return hypotheses, references


DIGIT_KINDS = ("both operands", "one operand", "final carry")


def digit_kinds(inputs, separator):
    """The kind (an index into DIGIT_KINDS) of each digit of an addition's sum, from its input ids (operands
    least-significant digit first around `separator`, padding and EOS ignored): digit i needs both operands
    below the shorter one's length, one operand below the longer one's, neither after it (the final carry)."""
    symbols = [int(s) for s in inputs if s not in (PAD_ID, EOS_ID)]
    first = symbols.index(separator)
    shorter, longer = sorted((first, len(symbols) - first - 1))
    return [0] * shorter + [1] * (longer - shorter) + [2]


def digit_kind_lines(hypotheses, references, kinds):
    """Char accuracy by digit kind (and each kind's share of the digits), per reference-length bucket."""
    lines, low = [], 1
    for high in scoring.LENGTH_BUCKETS:
        correct, counts = np.zeros(len(DIGIT_KINDS)), np.zeros(len(DIGIT_KINDS))
        for hypothesis, reference, kind in zip(hypotheses, references, kinds):
            if low <= len(reference) <= high:
                for h, r, k in zip(hypothesis, reference, kind):
                    correct[k] += h == r
                    counts[k] += 1
        if counts.sum():
            cells = [f"{name} {correct[k] / counts[k]:.2f} ({counts[k] / counts.sum():.0%} of digits)"
                     for k, name in enumerate(DIGIT_KINDS) if counts[k]]
            lines.append(f"  reference length {low:>3}-{high:<3} " + ", ".join(cells))
        low = high + 1
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--output_dir", required=True, help="the trainer's --output_dir")
    parser.add_argument("--split", default="eval", choices=("eval", "test"))
    parser.add_argument("--num_samples", type=int, default=0, help="the split's first N examples (0: all)")
    parser.add_argument("--digit_kinds", action="store_true",
                        help="addition: accuracy of the sum's digits by what they need (both operands, one, neither)")
    args = parser.parse_args(argv)
    model, problem, _, path = runs.load(args.output_dir)
    if args.digit_kinds and not isinstance(problem, algorithmic.AlgorithmicAddition):
        parser.error(f"--digit_kinds is for the addition problems, not {problem.name}")
    hypotheses, references = predictions(model, problem, args.split, args.num_samples)
    print(f"teacher-forced, {path}, {args.split} split")
    print("\n".join(scoring.report("accuracy", hypotheses, references)))
    if args.digit_kinds:
        examples = problem.dataset(args.split).take(args.num_samples if args.num_samples > 0 else -1)
        separator = problem.base + NUM_RESERVED_IDS
        kinds = [digit_kinds(e["inputs"], separator) for e in examples.as_numpy_iterator()]
        print("by digit kind:")
        print("\n".join(digit_kind_lines(hypotheses, references, kinds)))


if __name__ == "__main__":
    sys.exit(main())
