"""Checkpoint averaging: the element-wise mean of a model's weights over several checkpoints.

Averaging the last checkpoints of a run smooths out the noise of the final updates; the paper averaged the
last 20 checkpoints of its big models.
"""

import os
import shutil

import numpy as np
import tensorflow as tf

from t2t_relpos import errors
from t2t_relpos.hparams import stored
from t2t_relpos.training import checkpoints


def last_checkpoints(output_dir, num_last):
    """The newest `num_last` checkpoint paths of a run, oldest first."""
    state = tf.train.get_checkpoint_state(output_dir)
    if state is None or not state.all_model_checkpoint_paths:
        raise errors.T2TRelposError(f"no checkpoints in {output_dir}")
    paths = [p if os.path.isabs(p) else os.path.join(output_dir, p) for p in state.all_model_checkpoint_paths]
    return paths[-num_last:]


def average(model, paths):
    """Sets `model`'s weights to the mean of its weights in `paths` (accumulated in float64)."""
    if not paths:
        raise errors.T2TRelposError("no checkpoints to average")
    totals = None
    for path in paths:
        checkpoints.restore_model(model, path)
        values = [np.asarray(w.numpy(), np.float64) for w in model.weights]
        totals = values if totals is None else [t + v for t, v in zip(totals, values)]
    for weight, total in zip(model.weights, totals):
        weight.assign((total / len(paths)).astype(weight.dtype))
    return model


def write_averaged(model, source_dir, paths, averaged_dir):
    """Saves the averaged weights as a run directory of their own, readable by the decoder.

    The checkpoint is numbered with the newest averaged step; the run's hparams are copied along so that
    `t2t-relpos-decoder --output_dir=<averaged_dir>` works.
    """
    tf.io.gfile.makedirs(averaged_dir)
    for name in (stored.JSON_NAME, stored.GIN_NAME):
        source = os.path.join(source_dir, name)
        if tf.io.gfile.exists(source):
            shutil.copyfile(source, os.path.join(averaged_dir, name))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), averaged_dir, max_to_keep=1,
                                         checkpoint_name=checkpoints.CHECKPOINT_NAME)
    return manager.save(checkpoint_number=checkpoints.step_of(paths[-1]))
