"""Checkpoints of a run: the model's and optimizer's variables, written so that a kill never corrupts them.

TensorFlow writes a checkpoint's files first and then atomically replaces the `checkpoint` index, so a run
killed mid-save resumes from the previous checkpoint; the partial files it leaves (`*_temp*`) are removed
at the next start.
"""

import glob
import os
import shutil
import tempfile

import tensorflow as tf

from t2t_relpos import errors

CHECKPOINT_NAME = "ckpt"


def remove_partial_saves(directory):
    """Deletes the temporary files of a save that was interrupted."""
    for path in glob.glob(os.path.join(directory, f"{CHECKPOINT_NAME}-*_temp*")):
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.remove(path)
            except OSError:
                pass


def make_manager(model, optimizer, directory, max_to_keep, is_chief=True):
    """A `tf.train.CheckpointManager` of `model` and `optimizer`, numbered by the optimizer's step.

    Non-chief workers of a multi-worker run must save too (saving is collective) but into a throw-away
    directory.
    """
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    if not is_chief:
        directory = tempfile.mkdtemp(prefix="t2t_relpos_worker_ckpt_")
    else:
        tf.io.gfile.makedirs(directory)
        remove_partial_saves(directory)
    return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep,
                                      checkpoint_name=CHECKPOINT_NAME, step_counter=optimizer.iterations)


def restore_latest(manager, directory):
    """Restores the newest checkpoint of `directory` if there is one; returns its path or None.

    Every worker restores from the run's directory, even those whose manager saves elsewhere.
    """
    path = tf.train.latest_checkpoint(directory)
    if path:
        manager.checkpoint.restore(path).assert_existing_objects_matched()
    return path


def step_of(path):
    """The step number in a checkpoint path `.../ckpt-1200`."""
    return int(path.rsplit("-", 1)[-1])


def restore_model(model, path):
    """Restores only `model`'s weights from a run's checkpoint `path` (optimizer slots are skipped)."""
    if not tf.io.gfile.exists(path + ".index"):
        raise errors.T2TRelposError(f"checkpoint {path} does not exist")
    try:
        tf.train.Checkpoint(model=model).restore(path).expect_partial().assert_existing_objects_matched()
    except AssertionError as e:
        raise errors.T2TRelposError(f"checkpoint {path} does not fit the model: {e}") from None
