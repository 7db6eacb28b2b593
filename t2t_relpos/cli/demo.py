"""`make demo`'s strings of the training lengths: examples of an algorithmic problem, as text for the decoder.

    python -m t2t_relpos.cli.demo --problem=algorithmic_reverse_decimal20 --count=200 --output=demo_output/strings

writes demo_output/strings.txt (the inputs, one a line) and demo_output/strings.ref.txt (their targets), for
`t2t-relpos-decoder --decode_from_file=demo_output/strings.txt --decode_reference=demo_output/strings.ref.txt`.
The strings are drawn as the training strings are (lengths uniform in 1..train_length) from a stream seeded by
--seed, not the training stream; the problem's eval and test splits run to ten times those lengths.

A Learning to Execute problem (learning_to_execute_program, ...) writes each input, a program of several lines,
on one line, a line break written as a backslash and an n (a backslash, were there one, as two), which its
encoder reads back. They are drawn at the training difficulties, from the training stream of --seed, outside
the examples that training sees.
"""

import argparse
import os
import sys

from t2t_relpos import errors, files, registry

_PROG = "python -m t2t_relpos.cli.demo"


def write_strings(problem, count, output, seed=0):
    """Writes `count` inputs of `problem`'s training lengths to `output`.txt and their targets to `output`.ref.txt.

    Returns the two paths.
    """
    # pylint: disable=import-outside-toplevel
    from t2t_relpos.problems import algorithmic, learning_to_execute

    if isinstance(problem, learning_to_execute.LearningToExecuteProblem):
        examples = problem.examples("train", seed=seed, code=1)
        pairs = [next(examples) for _ in range(count)]
        return _write_lines(output, ([learning_to_execute.escape(x) for x, _ in pairs], [y for _, y in pairs]))
    if not isinstance(problem, algorithmic.AlgorithmicProblem):
        raise errors.T2TRelposError(f"{problem.name} is not an algorithmic problem: it has no strings to draw")
    bits = algorithmic._bits([seed])  # pylint: disable=protected-access
    (inputs, input_lengths), (targets, target_lengths) = problem.generate(bits, problem.train_length, count)
    encoder = problem.feature_encoders()["inputs"]
    return _write_lines(output, [[encoder.decode(row.tolist()) for row in algorithmic.to_ids(symbols, lengths)[0]]
                                 for symbols, lengths in ((inputs, input_lengths), (targets, target_lengths))])


def _write_lines(output, texts):
    """Writes the lines of `texts` (inputs, targets) to `output`.txt and `output`.ref.txt; returns the paths."""
    paths = []
    for suffix, lines in zip((".txt", ".ref.txt"), texts):
        paths.append(output + suffix)
        with files.atomic_write(paths[-1], what="the strings") as f:
            f.writelines(line + "\n" for line in lines)
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(prog=_PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", default="algorithmic_reverse_decimal20",
                        help="a registered algorithmic or learning_to_execute_* problem")
    parser.add_argument("--count", type=int, default=200, help="how many strings")
    parser.add_argument("--output", required=True, type=os.path.expanduser,  # `--output=~/x`: no shell expands it.
                        help="path prefix: writes PREFIX.txt and PREFIX.ref.txt")
    parser.add_argument("--seed", type=int, default=0, help="seed of the strings (>= 0)")
    args = parser.parse_args(argv)
    if args.count < 1 or args.seed < 0:
        parser.error("--count must be >= 1 and --seed >= 0")
    try:
        write_strings(registry.problem(args.problem), args.count, args.output, args.seed)
    except errors.T2TRelposError as e:
        print(f"{_PROG}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
