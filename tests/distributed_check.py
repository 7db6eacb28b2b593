"""Run as a script by test_training_replicas.py: one optimizer step three ways on the same global batch.

1. one device, the whole batch;
2. MirroredStrategy over 2 logical CPU devices, half the batch on each replica;
3. one device with gradient accumulation over the two halves;

each also with a global-norm clip that every step's gradient exceeds (`_clipped`); and, as a foil for the
clipped check, the step with each half's gradient clipped on its own before the sum (`per_replica_clipped`, what
Keras alone does under a strategy), which the three ways must not match.

Adam with epsilon=1 and a constant learning rate: epsilon far above every gradient element makes the update
linear in the gradient (momentum SGD). With Adam's epsilon of 1e-9 the first steps are lr * sign(gradient) and
nearly blind to a clip's scale: clipping on or off changed the weights by 6e-7.

Prints one JSON line: per way, the losses of two steps and the change of every weight over them (`delta`).
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

CLIP = 0.05


def halves():
    """Two micro-batches with different lengths and padding, as int32 [4, 9] arrays; the second's rows are
    short, so the halves' gradients differ in size and clipping each alone is not clipping their sum."""
    rng = np.random.default_rng(7)
    out = []
    for lengths in ((9, 3, 6, 8), (2, 1, 3, 2)):
        inputs = np.zeros((4, 9), np.int32)
        targets = np.zeros((4, 9), np.int32)
        for row, n in enumerate(lengths):
            digits = rng.integers(2, 12, size=n - 1)
            inputs[row, :n] = np.append(digits, 1)
            targets[row, :n] = np.append(digits[::-1], 1)
        out.append({"inputs": inputs, "targets": targets})
    return out


def make_trainer(strategy, accumulation_steps, clip_grad_norm):
    hparams = registry.hparams("transformer_cpu_rel")
    # A 16-wide 1+1-layer model: the check is of how the step sums, clips and applies the gradients, which
    # every weight of a model takes alike; six steps of transformer_cpu_rel's 2+2 layers took 50 s of a core.
    hparams.parse("hidden_size=16,filter_size=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1,"
                  "learning_rate_schedule=constant,learning_rate=1.0,optimizer_adam_epsilon=1.0")
    hparams.layer_prepostprocess_dropout = 0.0  # Dropout masks differ between devices.
    hparams.accumulation_steps = accumulation_steps
    hparams.clip_grad_norm = clip_grad_norm
    problem = registry.problem("algorithmic_reverse_decimal40")
    return trainer_lib.Trainer(problem, hparams, tempfile.mkdtemp(), strategy=strategy, seed=3, verbose=False)


def result(trainer, initial, losses):
    delta = np.concatenate([(v.numpy() - w).ravel() for v, w in zip(trainer.model.trainable_variables, initial)])
    return {"losses": losses, "delta": delta.tolist(), "step": trainer.step}


def run(strategy, batches, accumulation_steps, clip_grad_norm=0.0):
    trainer = make_trainer(strategy, accumulation_steps, clip_grad_norm)
    initial = [v.numpy() for v in trainer.model.trainable_variables]
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
    return result(trainer, initial, losses)


def run_clipped_per_replica(batches, clip_grad_norm):
    """The wrong clipped step: each half's part of the gradient (its loss over the whole batch's tokens) clipped
    alone, then the parts summed and applied unclipped."""
    trainer = make_trainer(tf.distribute.OneDeviceStrategy("/cpu:0"), 1, 0.0)
    initial = [v.numpy() for v in trainer.model.trainable_variables]
    variables = trainer.model.trainable_variables
    tensors = [{k: tf.constant(v) for k, v in b.items()} for b in batches]
    denominator = tf.constant(float(sum(np.count_nonzero(b["targets"]) for b in batches)))
    losses = []
    for _ in range(2):
        total, loss_sum, tokens = None, 0.0, 0.0
        for batch in tensors:
            grads, stats = trainer._gradients(batch, denominator)  # pylint: disable=protected-access
            grads = tf.clip_by_global_norm(grads, clip_grad_norm)[0]
            total = grads if total is None else [t + g for t, g in zip(total, grads)]
            loss_sum, tokens = loss_sum + float(stats["loss_sum"]), tokens + float(stats["tokens"])
        trainer.optimizer.apply_gradients(zip(total, variables))
        losses.append(loss_sum / tokens)
    return result(trainer, initial, losses)


def main():
    a, b = halves()
    whole = {k: np.concatenate([a[k], b[k]]) for k in a}
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    results = {}
    for suffix, clip in (("", 0.0), ("_clipped", CLIP)):
        results[f"one_device{suffix}"] = run(one, [whole], 1, clip)
        results[f"mirrored{suffix}"] = run(mirrored, [a, b], 1, clip)
        results[f"accumulated{suffix}"] = run(one, [a, b], 2, clip)
    results["per_replica_clipped"] = run_clipped_per_replica([a, b], CLIP)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
