"""Run as a script by test_training_replicas.py: one optimizer step three ways on the same global batch.

1. one device, the whole batch;
2. MirroredStrategy over 2 logical CPU devices, half the batch on each replica;
3. one device with gradient accumulation over the two halves;

each also with a global-norm clip that every step's gradient exceeds (`_clipped`).

Prints one JSON line: per way, the losses of two steps and the weights' checksum afterwards.
The CPU must be split before TensorFlow creates a tensor, hence a separate process.
"""

import json
import sys
import tempfile

from t2t_relpos.training import strategy as strategy_lib

strategy_lib.split_cpu(2)

import numpy as np  # noqa: E402  pylint: disable=wrong-import-position
import tensorflow as tf  # noqa: E402  pylint: disable=wrong-import-position

from t2t_relpos import registry  # noqa: E402  pylint: disable=wrong-import-position
from t2t_relpos.training import trainer as trainer_lib  # noqa: E402  pylint: disable=wrong-import-position


def halves():
    """Two micro-batches with different lengths and padding, as int32 [4, 9] arrays."""
    rng = np.random.default_rng(7)
    out = []
    for lengths in ((9, 3, 6, 1), (2, 8, 5, 7)):
        inputs = np.zeros((4, 9), np.int32)
        targets = np.zeros((4, 9), np.int32)
        for row, n in enumerate(lengths):
            digits = rng.integers(2, 12, size=n - 1)
            inputs[row, :n] = np.append(digits, 1)
            targets[row, :n] = np.append(digits[::-1], 1)
        out.append({"inputs": inputs, "targets": targets})
    return out


def run(strategy, batches, accumulation_steps, clip_grad_norm=0.0):
    hparams = registry.hparams("transformer_cpu_rel")
    # A 16-wide 1+1-layer model: the check is of how the step sums, clips and applies the gradients, which
    # every weight of a model takes alike; six steps of transformer_cpu_rel's 2+2 layers took 50 s of a core.
    hparams.parse("hidden_size=16,filter_size=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1")
    hparams.layer_prepostprocess_dropout = 0.0  # Dropout masks differ between devices.
    hparams.accumulation_steps = accumulation_steps
    hparams.clip_grad_norm = clip_grad_norm
    problem = registry.problem("algorithmic_reverse_decimal40")
    trainer = trainer_lib.Trainer(problem, hparams, tempfile.mkdtemp(), strategy=strategy, seed=3, verbose=False)
    train_step = trainer._build_train_step()  # pylint: disable=protected-access
    stacked = {k: np.stack([b[k] for b in batches]) for k in batches[0]}

    def dataset_fn(context):
        del context
        return tf.data.Dataset.from_tensor_slices(stacked).repeat()

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    losses = []
    for _ in range(2):
        stats = train_step(iterator)
        losses.append(float(stats["loss_sum"] / stats["tokens"]))
    checksum = float(sum(np.abs(v.numpy()).sum() for v in trainer.model.trainable_variables))
    first = trainer.model.trainable_variables[0].numpy().ravel()[:50].tolist()
    return {"losses": losses, "checksum": checksum, "first": first, "step": trainer.step}


def main():
    a, b = halves()
    whole = {k: np.concatenate([a[k], b[k]]) for k in a}
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    results = {}
    for suffix, clip in (("", 0.0), ("_clipped", 0.05)):
        results[f"one_device{suffix}"] = run(one, [whole], 1, clip)
        results[f"mirrored{suffix}"] = run(mirrored, [a, b], 1, clip)
        results[f"accumulated{suffix}"] = run(one, [a, b], 2, clip)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
