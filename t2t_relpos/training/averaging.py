"""Checkpoint averaging: the element-wise mean of a model's weights over several checkpoints.

Averaging the last checkpoints of a run smooths out the noise of the final updates; the paper averaged the
last 20 checkpoints of its big models.
"""

import collections
import os

from absl import logging
import numpy as np
import tensorflow as tf

from t2t_relpos import errors
from t2t_relpos.hparams import stored
from t2t_relpos.training import checkpoints


def last_checkpoints(output_dir, num_last):
    """The newest `num_last` checkpoint paths of a run, oldest first (fewer, with a warning, if it has fewer)."""
    state = tf.train.get_checkpoint_state(output_dir)
    if state is None or not state.all_model_checkpoint_paths:
        raise errors.T2TRelposError(f"no checkpoints in {output_dir}")
    # TensorFlow has already joined relative entries of the index to `output_dir`.
    paths = list(state.all_model_checkpoint_paths)
    if num_last > len(paths):
        logging.warning("asked to average the last %d checkpoints but %s has only %d; averaging those",
                        num_last, output_dir, len(paths))
    return paths[-num_last:]


def average(model, paths):
    """Sets `model`'s weights to the mean of its weights in `paths` (accumulated in float64)."""
    if not paths:
        raise errors.T2TRelposError("no checkpoints to average")
    counts = collections.Counter(os.path.realpath(p) for p in paths)
    twice = [p for p in paths if counts[os.path.realpath(p)] > 1]
    if twice:  # Counted twice, it would weigh twice in the mean.
        raise errors.T2TRelposError(f"checkpoint {twice[0]} is named twice; each checkpoint counts once")
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

    The checkpoint is numbered with the newest averaged step; the run's description (hparams, vocabulary)
    is copied along, with the names of the averaged checkpoints, so that
    `t2t-relpos-decoder --output_dir=<averaged_dir>` works and says what it decodes.
    """
    check_target(source_dir, averaged_dir)
    tf.io.gfile.makedirs(averaged_dir)
    record = stored.load_record(source_dir)
    if record is not None:
        hp, problem, model_name = stored.load(source_dir)
        details = {k: v for k, v in record.items() if k not in ("hparams_set", "problem", "model", "hparams")}
        # Names relative to the run, so that the record says when a checkpoint came from elsewhere.
        details["averaged_checkpoints"] = [_relative_to(p, source_dir) for p in paths]
        stored.save(averaged_dir, hp, problem, model_name, **details)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), averaged_dir, max_to_keep=1,
                                         checkpoint_name=checkpoints.CHECKPOINT_NAME)
    return manager.save(checkpoint_number=checkpoints.step_of(paths[-1]))


def check_target(source_dir, averaged_dir):
    """Raises unless `averaged_dir` is new, empty or an earlier average (which the new one replaces).

    A checkpoint manager in a run's directory would take its checkpoints for its own and delete them: averaging
    into the run itself once replaced its newest checkpoint by weights without their optimizer.
    """
    if not tf.io.gfile.exists(averaged_dir):
        return
    if not tf.io.gfile.isdir(averaged_dir):
        raise errors.T2TRelposError(f"--averaged_dir={averaged_dir} is a file, not a directory")
    if os.path.realpath(averaged_dir) == os.path.realpath(source_dir):
        raise errors.T2TRelposError(f"--averaged_dir={averaged_dir} is the run's own directory, whose checkpoints "
                                    "the average would replace; name another (default: <output_dir>/averaged)")
    if not tf.io.gfile.listdir(averaged_dir):
        return
    record = stored.load_record(averaged_dir)
    if record is None or "averaged_checkpoints" not in record:
        what = "a run" if tf.train.get_checkpoint_state(averaged_dir) else "files"
        raise errors.T2TRelposError(f"--averaged_dir={averaged_dir} holds {what} of its own, not an earlier "
                                    "average; name a new or empty directory")


def _relative_to(path, run_dir):
    """`path` relative to `run_dir` when it lies there (`ckpt-20`), else absolute."""
    relative = os.path.relpath(os.path.realpath(path), os.path.realpath(run_dir))
    return relative if not relative.startswith(os.pardir) else os.path.realpath(path)
