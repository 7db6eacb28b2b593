"""Writes examples of a problem's split as text, for the decoder's file mode.

    .venv/bin/python benchmarks/split_text.py --problem algorithmic_addition_decimal40 --split train \
        --num_samples 200 [--seed 0] --prefix /tmp/train200
    t2t-relpos-decoder --output_dir RUN --decode_from_file=/tmp/train200.src \
        --decode_reference=/tmp/train200.ref --decode_hparams=beam_size=1 > /tmp/train200.out

PREFIX.src holds the inputs, PREFIX.ref the targets, one example a line, as the problem's own encoders write them
(so the decoder reads back the same ids). The decoder then scores its output against the references (accuracy by
length for the algorithmic problems). `--split train` draws `--num_samples` strings of the training distribution
with `--seed` (the same strings for the same seed, not the trainer's own stream); decoding them asks whether a model
has learned the lengths it was trained on, which the eval split, mostly longer strings, cannot show.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from t2t_relpos import errors, registry  # noqa: E402
from teacher_forced import examples_of  # noqa: E402


def split_text(problem, split, num_samples, seed=0):
    """(inputs, targets): the first `num_samples` examples of `split` as text lines (the training split's drawn
    with `seed`)."""
    encoders = problem.feature_encoders(None)
    inputs, targets = [], []
    for example in examples_of(problem, split, num_samples, seed).as_numpy_iterator():
        inputs.append(encoders["inputs"].decode(example["inputs"].tolist()))
        targets.append(encoders["targets"].decode(example["targets"].tolist()))
    return inputs, targets


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--problem", required=True, help="a registered problem generated on the fly")
    parser.add_argument("--split", default="train", choices=("train", "eval", "test"))
    parser.add_argument("--num_samples", type=int, required=True, help="how many examples (the split's first N)")
    parser.add_argument("--seed", type=int, default=0, help="--split train: the seed its strings are drawn with")
    parser.add_argument("--prefix", required=True, help="writes PREFIX.src and PREFIX.ref")
    args = parser.parse_args(argv)
    if args.num_samples <= 0 or args.seed < 0:
        parser.error(f"need --num_samples > 0 and --seed >= 0, got {args.num_samples} and {args.seed}")
    try:
        problem = registry.problem(args.problem)
    except errors.UnknownNameError as e:
        parser.error(str(e))
    inputs, targets = split_text(problem, args.split, args.num_samples, args.seed)
    for suffix, lines in ((".src", inputs), (".ref", targets)):
        with open(args.prefix + suffix, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
    lengths = [len(line) for line in inputs]
    print(f"{len(inputs)} examples of {args.problem} ({args.split}) in {args.prefix}.src and .ref; "
          f"input lengths {min(lengths)}-{max(lengths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
