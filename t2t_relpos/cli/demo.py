"""`make demo`'s strings of the training lengths: examples of an algorithmic problem, as text for the decoder.

    python -m t2t_relpos.cli.demo --problem=algorithmic_reverse_decimal20 --count=200 --output=demo_output/strings

writes demo_output/strings.txt (the inputs, one a line) and demo_output/strings.ref.txt (their targets), for
`t2t-relpos-decoder --decode_from_file=demo_output/strings.txt --decode_reference=demo_output/strings.ref.txt`.
The strings are drawn as the training strings are (lengths uniform in 1..train_length) from a stream seeded by
--seed, not the training stream; the problem's eval and test splits run to ten times those lengths.
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
    from t2t_relpos.problems import algorithmic

    if not isinstance(problem, algorithmic.AlgorithmicProblem):
        raise errors.T2TRelposError(f"{problem.name} is not an algorithmic problem: it has no strings to draw")
    bits = algorithmic._bits([seed])  # pylint: disable=protected-access
    (inputs, input_lengths), (targets, target_lengths) = problem.generate(bits, problem.train_length, count)
    encoder = problem.feature_encoders()["inputs"]
    paths = []
    for suffix, symbols, lengths in ((".txt", inputs, input_lengths), (".ref.txt", targets, target_lengths)):
        ids, _ = algorithmic.to_ids(symbols, lengths)
        paths.append(output + suffix)
        with files.atomic_write(paths[-1], what="the strings") as f:
            f.writelines(encoder.decode(row.tolist()) + "\n" for row in ids)
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(prog=_PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", default="algorithmic_reverse_decimal20", help="a registered algorithmic problem")
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
