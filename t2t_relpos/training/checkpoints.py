"""Checkpoints of a run: the model's and optimizer's variables, written so that a kill never corrupts them.

TensorFlow writes a checkpoint's files first and then atomically replaces the `checkpoint` index, so a run
killed mid-save resumes from the previous checkpoint; the partial files it leaves (`*_temp*`) are removed
at the next start. A checkpoint damaged afterwards (a full disk, a truncated copy) is skipped when training
resumes, with a warning naming it; decoding or averaging it is an error that names its files. A checkpoint of
another model (other shapes, weights missing or left over) is an error too, never loaded in part.
"""

import gc
import glob
import os
import re
import shutil
import tempfile

from absl import logging
from google.protobuf import text_format
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from t2t_relpos import errors

CHECKPOINT_NAME = "ckpt"
# What reading a truncated or corrupt checkpoint raises: IndexError ("Read less bytes than requested") for a
# short data file, an OpError (DataLossError, NotFoundError, ...) for a damaged index or a missing file.
UNREADABLE = (IndexError, tf.errors.OpError)
# Errors of the storage rather than of the files (a network file system away, a permission taken): the
# checkpoint may be intact, so it is never skipped or unlisted for them, which would roll the run back.
NOT_DAMAGE = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.AbortedError,
              tf.errors.CancelledError, tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError,
              tf.errors.UnauthenticatedError)


class UnreadableCheckpointError(errors.T2TRelposError):
    """A checkpoint whose files are truncated, corrupt or missing."""

    def __init__(self, path, cause):
        files = ", ".join(sorted(os.path.basename(f) for f in glob.glob(glob.escape(path) + ".*"))) or "none"
        super().__init__(f"checkpoint {path} is unreadable ({_first_line(cause)}); its files ({files}) are "
                         "truncated, corrupt or missing")
        self.path = path


class CheckpointAccessError(errors.T2TRelposError):
    """A checkpoint the storage would not give back (unavailable, timed out, not permitted): maybe intact."""


def remove_partial_saves(directory):
    """Deletes the temporary files of a save that was interrupted."""
    for path in glob.glob(os.path.join(directory, f"{CHECKPOINT_NAME}-*_temp*")):
        _remove(path)


def make_manager(checkpoint, directory, max_to_keep, is_chief=True):
    """A `tf.train.CheckpointManager` of a `tf.train.Checkpoint(model=..., optimizer=...)`, numbered by the
    optimizer's step.

    Non-chief workers of a multi-worker run must save too (saving is collective) but into a scratch
    directory of their own, which `save` removes after every save (TensorFlow's advice for workers).
    """
    if not is_chief:
        directory = tempfile.mkdtemp(prefix="t2t_relpos_worker_ckpt_")
        os.rmdir(directory)  # `save` makes it when it needs it; a run never leaves it behind.
        max_to_keep = 1
    else:
        tf.io.gfile.makedirs(directory)
        remove_partial_saves(directory)
    return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep,
                                      checkpoint_name=CHECKPOINT_NAME, step_counter=checkpoint.optimizer.iterations)


def save(manager, step, is_chief=True):
    """Saves a checkpoint of `step`; a non-chief worker's copy is deleted at once (nobody reads it)."""
    if is_chief:
        return manager.save(checkpoint_number=step)
    os.makedirs(manager.directory, exist_ok=True)
    try:
        return manager.save(checkpoint_number=step)
    finally:
        shutil.rmtree(manager.directory, ignore_errors=True)


def restore_latest(checkpoint, directory, is_chief=True):
    """Restores the newest readable checkpoint of `directory` into `checkpoint`; returns its path or None.

    An unreadable newer checkpoint is skipped with a warning that names it, and (by the chief) dropped from
    the `checkpoint` index so that averaging and decoding do not pick it up; its files stay until a save of
    the same step replaces them. Every worker restores from the run's directory, even those whose manager
    saves elsewhere. Call it before making the run's manager, which reads the index.

    Raises:
        UnreadableCheckpointError: when the run has checkpoints and none of them is readable.
    """
    state = tf.train.get_checkpoint_state(directory)
    if state is None or not state.model_checkpoint_path:
        return None
    paths = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
    unreadable = []
    for path in reversed(paths):
        try:
            _check_loss_scaling(checkpoint, path)
            _restore(lambda path=path: checkpoint.restore(path).assert_existing_objects_matched(), path)
        except UnreadableCheckpointError as e:
            unreadable.append(e)
            logging.warning("%s; resuming from an older checkpoint", e)
            continue
        except CheckpointAccessError:
            raise
        except errors.T2TRelposError:  # Does not fit the model.
            if "optimizer" not in _saved_children(path):
                raise errors.T2TRelposError(
                    f"checkpoint {path} holds a model's weights only (an averaged checkpoint?), not a training "
                    "checkpoint with its optimizer: resume training from the run's own --output_dir") from None
            raise
        if getattr(checkpoint, "model", None) is not None:  # A run's checkpoint (tests restore others too).
            _check_no_extra_weights(checkpoint.model, path)
        if unreadable and is_chief:
            _forget(directory, state, {u.path for u in unreadable}, path)
        return path
    raise errors.T2TRelposError(f"no checkpoint of {directory} is readable ({unreadable[0]}); move them away "
                                "to start afresh")


def _forget(directory, state, dropped, latest):
    """Rewrites the `checkpoint` index of `directory` (a CheckpointState proto) without the paths `dropped`."""
    kept = [(p, t) for p, t in zip(state.all_model_checkpoint_paths, state.all_model_checkpoint_timestamps)
            if p not in dropped]
    # Names relative to `directory`, as the manager writes them (the run directory stays movable), and the
    # save times, by which the manager decides what to delete later.
    state.model_checkpoint_path = os.path.basename(latest)
    del state.all_model_checkpoint_paths[:]
    del state.all_model_checkpoint_timestamps[:]
    state.all_model_checkpoint_paths.extend(os.path.basename(p) for p, _ in kept)
    state.all_model_checkpoint_timestamps.extend(t for _, t in kept)
    index = os.path.join(directory, "checkpoint")
    with tf.io.gfile.GFile(index + ".tmp", "w") as f:
        f.write(text_format.MessageToString(state))
    tf.io.gfile.rename(index + ".tmp", index, overwrite=True)


def step_of(path):
    """The step number in a checkpoint path `.../ckpt-1200`."""
    return int(path.rsplit("-", 1)[-1])


def restore_model(model, path):
    """Restores only `model`'s weights from a run's checkpoint `path` (optimizer slots are skipped).

    Raises:
        T2TRelposError: `path` does not exist or was written for another model.
        UnreadableCheckpointError: its files are truncated or corrupt.
    """
    if tf.io.gfile.isdir(path) or not tf.io.gfile.exists(path + ".index"):
        raise errors.T2TRelposError(f"checkpoint {path} does not exist (a checkpoint is named by the prefix of "
                                    "its files, e.g. runs/x/ckpt-1000)")
    _restore(lambda: tf.train.Checkpoint(model=model).restore(path).expect_partial().assert_existing_objects_matched(),
             path)
    _check_no_extra_weights(model, path)


def _restore(restore, path):
    """Runs `restore()` of the checkpoint `path`.

    Raises:
        UnreadableCheckpointError: its files are truncated or corrupt.
        CheckpointAccessError: the storage failed to give them back (they may be intact).
        T2TRelposError: it does not fit the model (weights missing, or of other shapes).
    """
    misfit = None
    logger = tf.get_logger()
    level = logger.level
    # A restore that failed half-way logs one warning for every value it did not reach when its remains are
    # freed (hundreds, after the error that says it all): quiet until they are.
    logger.setLevel("ERROR")
    try:
        try:
            restore()
        except NOT_DAMAGE as e:
            raise CheckpointAccessError(
                f"checkpoint {path} could not be read ({_first_line(e)}); nothing was changed: rerun once it "
                "can be read") from None
        except tf.errors.InvalidArgumentError as e:
            if "dtype" not in str(e):
                raise UnreadableCheckpointError(path, e) from None
            misfit = _misfit(path, e)  # Intact files of other types: not damage, and never to be skipped.
        except UNREADABLE as e:
            raise UnreadableCheckpointError(path, e) from None
        except (AssertionError, ValueError) as e:
            misfit = _misfit(path, e)
        if misfit:
            gc.collect()
    finally:
        logger.setLevel(level)
    if misfit:
        raise misfit


def _misfit(path, error):
    """The error for a checkpoint whose weights are missing from the model or have other shapes."""
    if isinstance(error, AssertionError):
        # The message lists every unmatched variable with its values: name a few instead.
        names = re.findall(r"path=([^,\s]+)", str(error))
        what = "weights missing from it" + (f", e.g. {', '.join(names[:2])}" if names else "")
    elif isinstance(error, tf.errors.InvalidArgumentError):  # "... expected dtype float does not equal original
        # dtype int64": the loss-scale variables of a mixed_float16 run where a float32 run has others.
        detail = re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:\w+\]", "", _first_line(error.message))  # TensorFlow's wrapping.
        what = "variables of other types: " + detail.rstrip(".")
        return errors.T2TRelposError(f"checkpoint {path} does not fit this run ({what}); was it written with "
                                     "another --mixed_precision, or by another model?")
    else:  # "Received incompatible tensor with shape (13, 32) when attempting to restore variable with shape ..."
        what = _first_line(error).rstrip(".")
    return errors.T2TRelposError(f"checkpoint {path} does not fit this run's model ({what}); was it written by "
                                 "another model?")


def _check_no_extra_weights(model, path):
    """Raises when `path` holds more model weights than `model` has: restoring matches what the model asks
    for and would silently drop the rest (a checkpoint of 6 layers would decode as a model of 4)."""
    held, has = _saved_model_weights(path), len({id(w) for w in model.weights})
    if held > has:
        raise errors.T2TRelposError(f"checkpoint {path} does not fit this run's model: it holds {held} model "
                                    f"weights, the model has {has}; was it written by a larger model?")


def _object_graph(path):
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(tf.train.load_checkpoint(path).get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    return graph


def _check_loss_scaling(checkpoint, path):
    """Raises when `path` was saved with a loss-scaled optimizer (`mixed_float16`) and `checkpoint`'s is not, or
    the other way round: found before restoring, since a failed restore leaves a warning per variable behind."""
    optimizer = getattr(checkpoint, "optimizer", None)
    if optimizer is None:
        return
    try:
        graph = _object_graph(path)
    except UNREADABLE:
        return  # Damage: the restore says so.
    nodes = [child.node_id for child in graph.nodes[0].children if child.local_name == "optimizer"]
    saved = bool(nodes) and any(child.local_name == "inner_optimizer" for child in graph.nodes[nodes[0]].children)
    if nodes and saved != hasattr(optimizer, "inner_optimizer"):
        was, now = ("with", "without") if saved else ("without", "with")
        raise errors.T2TRelposError(
            f"checkpoint {path} does not fit this run: it was saved {was} the loss scaling of "
            f"--mixed_precision=mixed_float16, and this run is {now} it; resume with the run's own --mixed_precision")


def _saved_children(path):
    """The names of the checkpoint's top-level objects (`model`, `optimizer`, `save_counter`)."""
    return {child.local_name for child in _object_graph(path).nodes[0].children}


def _saved_model_weights(path):
    """How many variables of `path` belong to its `model` (found from it in the object graph: a training
    checkpoint files them under the optimizer, which reached them first)."""
    graph = _object_graph(path)
    roots = [child.node_id for child in graph.nodes[0].children if child.local_name == "model"]
    seen, stack = set(), roots
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(child.node_id for child in graph.nodes[node].children)
    return sum(any(a.name == "VARIABLE_VALUE" for a in graph.nodes[node].attributes) for node in seen)


def _remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.remove(path)
        except OSError:
            pass


def _first_line(error):
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
