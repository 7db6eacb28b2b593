"""Teacher-forced accuracy of a trained run on its problem's own split, by reference length.

    .venv/bin/python benchmarks/teacher_forced.py --output_dir RUN [--split eval] [--num_samples 100]
    .venv/bin/python benchmarks/teacher_forced.py --output_dir RUN --split train --num_samples 400 [--seed 0]
    .venv/bin/python benchmarks/teacher_forced.py --output_dir RUN --checkpoint_path RUN/ckpt-12000 ...
    .venv/bin/python benchmarks/teacher_forced.py --output_dir RUN --equal_operands 6,12,20 [--operand_period 5]
    .venv/bin/python benchmarks/teacher_forced.py --output_dir RUN --operand_lengths 15:150,150:15

Each target symbol is predicted from the true symbols before it (one forward pass, as in training), and the
argmax is compared with the reference: the `accuracy` and `accuracy_per_sequence` that tensor2tensor's trainer
reports in evaluation, and so, most likely, the char / seq accuracy of the Universal Transformer paper's
Table 4 (its models were trained and evaluated with tensor2tensor; the paper does not say it decoded). The
decoder (`t2t-relpos-decoder --decode_split=eval`) measures something harder: the model's own output, where one
wrong symbol can derail the rest. The end-of-sequence symbol is not counted (tensor2tensor's accuracy counts it;
one symbol in 200-400 at the lengths that matter here).

Prints the decoder's accuracy lines for the first `--num_samples` examples of `--split` (the same examples the
decoder's `num_samples` takes): overall, then by reference length. `--split train` draws `--num_samples` fresh
strings of the training distribution with `--seed` (the same strings for the same seed; not the trainer's own
stream, whose seeds derive from its --seed and step): has the model learned the training lengths?

`--digit_kinds` (addition only) also splits each length's sum digits by what they need: both operands (digit i
of the sum, below the shorter operand's length), one operand (the longer operand's digits past the shorter's, with
a carry at most), or neither (the final carry). A model that copies the longer operand and adds nothing gets the
second kind right, and those are most of a long sum's digits (73% at lengths 201-400 in the eval split): the
split shows whether a model adds. A last line gives the digits that need both operands by their index i in the sum
(0: the first, least-significant digit): where in a string a model that adds in part has learned to.
`--equal_operands 6,10,16` (addition only) asks instead whether what a model gets wrong is a digit's index or the
operands' length: for each L, `--num_samples` (default 64) sums whose operands both have L digits, and the
accuracy of each digit index below L; `--operand_period P` repeats each operand's first P digits, so that a
digit's neighbours in the input cannot tell a model where it is. `--operand_lengths 15:150,150:15` does the same
for operands of unequal length (and gives the longer one's other digits' accuracy): the two inputs are equally long,
but the digits a sum pairs are 16 symbols apart in the first (as in training, where the first operand has at most
20 digits) and 151 in the second.
`--checkpoint_path` measures an older checkpoint of the run (default: its newest), e.g. to see in which order the
indices are learned.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from t2t_relpos import errors  # noqa: E402
from t2t_relpos.decoding import scoring  # noqa: E402
from t2t_relpos.problems import algorithmic  # noqa: E402
from t2t_relpos.problems.problem import EOS_ID, NUM_RESERVED_IDS, PAD_ID  # noqa: E402
from t2t_relpos.training import runs  # noqa: E402


def examples_of(problem, split, num_samples, seed=0):
    """The first `num_samples` examples of `split` (all of eval or test for 0); the training split's with `seed`."""
    examples = problem.dataset(split, seed=seed if split == "train" else None)
    return examples.take(num_samples) if num_samples > 0 else examples


def predictions(model, problem, split, num_samples, batch_size=10, seed=0):
    """(hypotheses, references, inputs): per example, the teacher-forced argmax ids, the reference ids (no EOS)
    and the input ids (padded to the batch's longest)."""
    examples = examples_of(problem, split, num_samples, seed)
    padded = {"inputs": PAD_ID, "targets": PAD_ID}
    hypotheses, references, inputs = [], [], []
    for batch in examples.padded_batch(batch_size, padding_values=padded).as_numpy_iterator():
        logits = model(batch, training=False)
        argmax = np.argmax(np.asarray(logits), axis=-1)
        for target, predicted in zip(batch["targets"], argmax):
            length = int(np.sum((target != PAD_ID) & (target != EOS_ID)))
            references.append(target[:length].tolist())
            hypotheses.append(predicted[:length].tolist())
        inputs.extend(batch["inputs"].tolist())
    return hypotheses, references, inputs


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
    """Char accuracy by digit kind (and each kind's share of the digits), per reference-length bucket, then over
    all lengths."""
    def line(label, low, high):
        correct, counts = np.zeros(len(DIGIT_KINDS)), np.zeros(len(DIGIT_KINDS))
        for hypothesis, reference, kind in zip(hypotheses, references, kinds):
            if low <= len(reference) <= high:
                for h, r, k in zip(hypothesis, reference, kind):
                    correct[k] += h == r
                    counts[k] += 1
        if not counts.sum():
            return []
        cells = [f"{name} {correct[k] / counts[k]:.2f} ({counts[k] / counts.sum():.0%} of digits)"
                 for k, name in enumerate(DIGIT_KINDS) if counts[k]]
        return [f"  {label} " + ", ".join(cells)]

    lows = (1,) + tuple(high + 1 for high in scoring.LENGTH_BUCKETS[:-1])
    lines = [row for low, high in zip(lows, scoring.LENGTH_BUCKETS)
             for row in line(f"reference length {low:>3}-{high:<3}", low, high)]
    return lines + line(f"{'all lengths':<24}", 1, float("inf"))


class MeanByIndex:
    """Running means of values by their index in a string, indices >= `last` pooled into one."""

    def __init__(self, last=10):
        self.last = last
        self.sums, self.counts = np.zeros(last + 1), np.zeros(last + 1)

    def add_at(self, index, value):
        self.sums[min(index, self.last)] += value
        self.counts[min(index, self.last)] += 1

    def add(self, values):
        for index, value in enumerate(values):
            self.add_at(index, value)

    def line(self, label):
        cells = [f"{i}{'+' if i == self.last else ''} {self.sums[i] / self.counts[i]:.2f}"
                 for i in range(self.last + 1) if self.counts[i]]
        return f"  {label}: " + ", ".join(cells)


def both_operands_by_index_line(hypotheses, references, kinds, last=10):
    """Char accuracy of the digits that need both operands by their index in the sum (indices >= `last` pooled)."""
    accuracy = MeanByIndex(last)
    for hypothesis, reference, kind in zip(hypotheses, references, kinds):
        for i, (h, r, k) in enumerate(zip(hypothesis, reference, kind)):
            if k == 0:
                accuracy.add_at(i, h == r)
    return accuracy.line("both operands by digit index")


def operand_sums(problem, lengths, count, period=0, seed=0):
    """Features {"inputs", "targets"} (ids as the problem writes them) of `count` sums whose first operand has
    `lengths[0]` digits and second `lengths[1]`, random with a nonzero last (most significant) digit, drawn with
    `seed`; with `period`, each operand is its first `period` digits repeated, so that a digit's neighbours do not
    tell where it is. Digit i of the second operand is `lengths[0] + 1` symbols behind digit i of the first."""
    width = max(lengths)
    rng = np.random.default_rng(seed)
    operands = rng.integers(0, problem.base, size=(2, count, width))
    if period:
        operands = np.tile(operands[:, :, :period], (1, 1, -(-width // period)))[:, :, :width]
    tops = rng.integers(1, problem.base, size=(2, count))
    for operand, length in enumerate(lengths):
        operands[operand, :, length - 1] = tops[operand]
        operands[operand, :, length:] = 0
    symbols = np.concatenate([operands[0, :, :lengths[0]], np.full((count, 1), problem.base),
                              operands[1, :, :lengths[1]]], axis=1)
    inputs, _ = algorithmic.to_ids(symbols, np.full(count, sum(lengths) + 1))
    targets, _ = algorithmic.to_ids(*algorithmic.add_lower_endian(operands[0], operands[1], problem.base))
    return {"inputs": inputs, "targets": targets}


def operands_line(model, problem, lengths, count, period=0, seed=0):
    """Teacher-forced accuracy on `operand_sums`, by index, of the digits that need both operands (indices below
    the shorter operand's length); with operands of unequal length, also the mean over the longer one's other
    digits (one operand, a carry at most) and over each ten of them. Is a digit's index what a model gets wrong,
    the operands' length, or the distance between the digits a sum pairs (the first operand's length + 1)?"""
    features = operand_sums(problem, lengths, count, period, seed)
    argmax = np.argmax(np.asarray(model(features, training=False)), axis=-1)
    right = argmax == features["targets"]
    both, longer = min(lengths), max(lengths)
    label = f"{lengths[0]:>2} digits" if both == longer else f"{lengths[0]:>2} + {lengths[1]:>2} digits"
    line = f"  operands of {label}: " + " ".join(f"{value:.2f}" for value in right[:, :both].mean(axis=0))
    if both < longer:
        tens = " ".join(f"{right[:, start:min(start + 10, longer)].mean():.2f}" for start in range(both, longer, 10))
        line += f"; one operand (indices {both}-{longer - 1}): {right[:, both:longer].mean():.2f}, by ten: {tens}"
    return line


def addition_separator(problem):
    """The id between an addition's operands; None for a problem that is not an addition."""
    return problem.base + NUM_RESERVED_IDS if isinstance(problem, algorithmic.AlgorithmicAddition) else None


def add_run_arguments(parser):
    """The flags that name a run, a checkpoint of it and the examples to measure (this script's and its kin's)."""
    parser.add_argument("--output_dir", required=True, help="the trainer's --output_dir")
    parser.add_argument("--checkpoint_path", help="a checkpoint of the run (RUN/ckpt-N); default: its newest")
    parser.add_argument("--split", default="eval", choices=("eval", "test", "train"))
    parser.add_argument("--num_samples", type=int, default=0,
                        help="the split's first N examples (0: all of eval or test; train needs N)")
    parser.add_argument("--seed", type=int, default=0, help="--split train: the seed its strings are drawn with")


def load_run(parser, args):
    """(model, problem, checkpoint path) of `add_run_arguments`' flags; a bad one is `parser.error` (status 2)."""
    if args.split == "train" and args.num_samples <= 0:
        parser.error("--split train is endless: give --num_samples N")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    try:
        model, problem, _, path = runs.load(args.output_dir, args.checkpoint_path)
    except errors.T2TRelposError as error:
        parser.error(str(error))
    return model, problem, path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    add_run_arguments(parser)
    parser.add_argument("--digit_kinds", action="store_true",
                        help="addition: accuracy of the sum's digits by what they need (both operands, one, neither)")
    parser.add_argument("--equal_operands", help="addition: comma-separated operand lengths L; instead of --split, "
                        "--num_samples (default 64) sums whose operands both have L digits, drawn with --seed, and "
                        "the accuracy of each digit index below L")
    parser.add_argument("--operand_lengths", help="addition: comma-separated L1:L2, as --equal_operands with a "
                        "first operand of L1 digits and a second of L2, e.g. 15:150,150:15 (the same lengths, "
                        "digits paired 16 or 151 symbols apart)")
    parser.add_argument("--operand_period", type=int, default=0, help="--equal_operands, --operand_lengths: each "
                        "operand its first P digits repeated")
    args = parser.parse_args(argv)
    lengths = []  # (first, second) operand lengths.
    try:
        lengths += [(int(length),) * 2 for length in args.equal_operands.split(",")] if args.equal_operands else []
    except ValueError:
        parser.error(f"--equal_operands takes comma-separated lengths, got {args.equal_operands!r}")
    try:
        pairs = [entry.split(":") for entry in args.operand_lengths.split(",")] if args.operand_lengths else []
        lengths += [(int(first), int(second)) for first, second in pairs]
    except ValueError:  # Also an entry without its two lengths.
        parser.error(f"--operand_lengths takes comma-separated L1:L2, got {args.operand_lengths!r}")
    if lengths and min(min(pair) for pair in lengths) < 1 or args.operand_period < 0:
        parser.error("operand lengths must be >= 1 and --operand_period >= 0")
    model, problem, path = load_run(parser, args)
    addition = isinstance(problem, algorithmic.AlgorithmicAddition)
    for flag, given in (("--digit_kinds", args.digit_kinds), ("--equal_operands", args.equal_operands),
                        ("--operand_lengths", args.operand_lengths)):
        if given and not addition:
            parser.error(f"{flag} is for the addition problems, not {problem.name}")
    if lengths:
        period = f", each operand its first {args.operand_period} digits repeated" if args.operand_period else ""
        print(f"teacher-forced, {path}, sums of operands of the lengths asked (seed {args.seed}{period}); accuracy "
              "of the digits that need both operands, by index (0 the least significant):")
        for pair in lengths:
            print(operands_line(model, problem, pair, args.num_samples or 64, args.operand_period, args.seed))
        return 0
    hypotheses, references, inputs = predictions(model, problem, args.split, args.num_samples, seed=args.seed)
    seeded = f" (seed {args.seed})" if args.split == "train" else ""
    print(f"teacher-forced, {path}, {args.split} split{seeded}")
    print("\n".join(scoring.report("accuracy", hypotheses, references)))
    if args.digit_kinds:
        separator = addition_separator(problem)
        kinds = [digit_kinds(example_inputs, separator) for example_inputs in inputs]
        print("by digit kind:")
        print("\n".join(digit_kind_lines(hypotheses, references, kinds)))
        print(both_operands_by_index_line(hypotheses, references, kinds))


if __name__ == "__main__":
    sys.exit(main())
