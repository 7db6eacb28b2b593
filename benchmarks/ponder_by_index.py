"""Ponder time of a trained Universal Transformer by position: where in a string does it halt early?

    .venv/bin/python benchmarks/ponder_by_index.py --output_dir RUN --split train --num_samples 200 [--seed 0] \
        [--checkpoint_path RUN/ckpt-N]

Runs the model teacher-forced (as `teacher_forced.py` does, on the same examples) and prints the mean ponder time
N + R (steps taken plus the halting remainder; at most `act_max_steps` + 1) of the decoder by target index and of
the encoder by input index, over the examples long enough to have that index (indices >= 10 pooled). For an
addition the encoder's line is split by operand: the index inside the first operand and inside the second (the
separator left out), so that a position lines up with the digit of the sum it adds into. With `basic`
recurrence every position takes `num_rec_steps`; the lines say something for `act` only.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from t2t_relpos.problems.problem import EOS_ID, PAD_ID  # noqa: E402
from teacher_forced import MeanByIndex, add_run_arguments, addition_separator, examples_of, load_run  # noqa: E402


def ponder_by_index(model, problem, split, num_samples, seed=0, batch_size=10, last=10):
    """Lines of the mean ponder time by index: the decoder's by target index, then the encoder's by input index
    (by index inside each operand for an addition). EOS and padding are left out."""
    separator = addition_separator(problem)
    decoder = MeanByIndex(last)
    encoder = [MeanByIndex(last) for _ in range(1 if separator is None else 2)]
    examples = examples_of(problem, split, num_samples, seed)
    padded = {"inputs": PAD_ID, "targets": PAD_ID}
    for batch in examples.padded_batch(batch_size, padding_values=padded).as_numpy_iterator():
        ponder = model(batch, training=False, return_details=True)["ponder_times"]
        for inputs, targets, source, target in zip(batch["inputs"], batch["targets"],
                                                   np.asarray(ponder["encoder"]), np.asarray(ponder["decoder"])):
            decoder.add(target[:int(np.sum((targets != PAD_ID) & (targets != EOS_ID)))])
            source = source[:int(np.sum((inputs != PAD_ID) & (inputs != EOS_ID)))]
            if separator is None:
                encoder[0].add(source)
            else:
                split_at = inputs.tolist().index(separator)
                encoder[0].add(source[:split_at])
                encoder[1].add(source[split_at + 1:])
    if separator is None:
        return [decoder.line("decoder, by target index"), encoder[0].line("encoder, by input index")]
    return [decoder.line("decoder, by index in the sum"), encoder[0].line("encoder, by index in the first operand"),
            encoder[1].line("encoder, by index in the second operand")]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    model, problem, path = load_run(parser, args)
    if not hasattr(model, "ponder_times"):
        parser.error(f"{args.output_dir} holds a {type(model).__name__}; ponder times are a Universal Transformer's")
    seeded = f" (seed {args.seed})" if args.split == "train" else ""
    print(f"ponder time N + R, teacher-forced, {path}, {args.split} split{seeded}")
    print("\n".join(ponder_by_index(model, problem, args.split, args.num_samples, args.seed)))


if __name__ == "__main__":
    sys.exit(main())
