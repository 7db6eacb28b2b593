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
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from t2t_relpos.decoding import scoring  # noqa: E402
from t2t_relpos.problems.problem import EOS_ID, PAD_ID  # noqa: E402
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--output_dir", required=True, help="the trainer's --output_dir")
    parser.add_argument("--split", default="eval", choices=("eval", "test"))
    parser.add_argument("--num_samples", type=int, default=0, help="the split's first N examples (0: all)")
    args = parser.parse_args(argv)
    model, problem, _, path = runs.load(args.output_dir)
    hypotheses, references = predictions(model, problem, args.split, args.num_samples)
    print(f"teacher-forced, {path}, {args.split} split")
    print("\n".join(scoring.report("accuracy", hypotheses, references)))


if __name__ == "__main__":
    sys.exit(main())
