"""Checkpoint averaging: the element-wise mean of a model's weights over several checkpoints.

Averaging the last checkpoints of a run smooths out the noise of the final updates; the paper averaged the
last 20 checkpoints of its big models.

The average is a directory of its own (weights, index, the run's description naming what was averaged), made
under a temporary name and swapped in whole: a kill or a full disk while averaging again leaves the earlier
average as it was, never a description of checkpoints beside weights that are not their average.
"""

import collections
import ctypes
import errno
import os
import shutil

import numpy as np
import tensorflow as tf
from absl import logging

from t2t_relpos import errors, files
from t2t_relpos.hparams import stored
from t2t_relpos.training import checkpoints


def last_checkpoints(output_dir, num_last):
    """The newest `num_last` checkpoint paths of a run, oldest first (fewer, with a warning, if it has fewer)."""
    paths = checkpoints.listed(output_dir)  # Relative entries of the index are joined to `output_dir`.
    if not paths:
        raise errors.T2TRelposError(f"no checkpoints in {output_dir}")
    if num_last > len(paths):
        logging.warning("asked to average the last %d checkpoints but %s has only %d; averaging those",
                        num_last, output_dir, len(paths))
    return paths[-num_last:]


def check_named(paths):
    """Raises unless `paths` name checkpoints once each: no blank name (`--checkpoints=a,b,` or `,`: a comma too
    many), none twice (it would weigh twice in the mean)."""
    if not paths:
        raise errors.T2TRelposError("no checkpoints to average")
    if any(not p.strip() for p in paths):
        raise errors.T2TRelposError(f"--checkpoints={','.join(paths)} has a blank name (a comma too many?); name "
                                    "each checkpoint once, separated by single commas")
    counts = collections.Counter(os.path.realpath(p) for p in paths)
    twice = [p for p in paths if counts[os.path.realpath(p)] > 1]
    if twice:
        raise errors.T2TRelposError(f"checkpoint {twice[0]} is named twice; each checkpoint counts once")


def average_last(model, output_dir, num_last):
    """Sets `model`'s weights to the mean of the newest `num_last` checkpoints of the run in `output_dir`;
    returns their paths.

    A trainer still running there deletes its oldest checkpoint as it saves one (`--keep_checkpoint_max`): where
    one of those picked is deleted before or while it is read, the newest `num_last` are picked again, up to
    `checkpoints.ATTEMPTS` times.
    """
    gone = []
    for _ in range(checkpoints.ATTEMPTS):
        paths = last_checkpoints(output_dir, num_last)
        try:
            average(model, paths)
            return paths
        except errors.T2TRelposError:
            gone = [p for p in paths if checkpoints.vanished(p, output_dir)]
            if not gone:
                raise
            logging.warning("checkpoint %s was deleted while being read; averaging the newest %d again", gone[0],
                            num_last)
    raise checkpoints.DeletedWhileReadError(gone[0], f" ({checkpoints.ATTEMPTS} times, each among the newest in "
                                                     "turn)")


def average(model, paths):
    """Sets `model`'s weights to the mean of its weights in `paths` (accumulated in float64)."""
    check_named(paths)
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
    `t2t-relpos-decoder --output_dir=<averaged_dir>` works and says what it decodes. The directory is written
    under a temporary name beside `averaged_dir` and swapped in when whole (see the module's docstring).

    Raises:
        T2TRelposError: `averaged_dir` may not be written (see `check_target`), or the storage refused the
            average (a full disk): one line; an earlier average is left as it was.
    """
    check_target(source_dir, averaged_dir)
    step = checkpoints.step_of(paths[-1])
    if "://" in averaged_dir:  # No renames of directories there: written in place, weights first.
        _write_average(model, source_dir, paths, averaged_dir, step)
        return os.path.join(averaged_dir, f"{checkpoints.CHECKPOINT_NAME}-{step}")
    earlier = os.path.isdir(averaged_dir) and os.listdir(averaged_dir)
    kept = "; the earlier average is left as it was" if earlier else ""
    tmp = files.temporary_name(os.path.abspath(averaged_dir))
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        os.makedirs(tmp)
        _write_average(model, source_dir, paths, tmp, step)
        _replace_directory(tmp, averaged_dir)
    except (OSError,) + checkpoints.STORAGE_ERRORS as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise checkpoints.storage_error(e, "the average", averaged_dir, kept.lstrip("; ") or None) from None
    except errors.T2TRelposError as e:  # The description's writer says where: the temporary name.
        shutil.rmtree(tmp, ignore_errors=True)
        raise errors.T2TRelposError(str(e).replace(os.path.join(tmp, ""), os.path.join(averaged_dir, "")) +
                                    kept) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return os.path.join(averaged_dir, f"{checkpoints.CHECKPOINT_NAME}-{step}")


def _write_average(model, source_dir, paths, directory, step):
    """Writes the weights of `model` as checkpoint `step` of `directory` and, after them, the description."""
    tf.io.gfile.makedirs(directory)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), checkpoints.tf_dir(directory),
                                         max_to_keep=1, checkpoint_name=checkpoints.CHECKPOINT_NAME)
    manager.save(checkpoint_number=step)
    record = stored.load_record(source_dir)
    if record is not None:
        hp, problem, model_name = stored.load(source_dir)
        details = {k: v for k, v in record.items() if k not in ("hparams_set", "problem", "model", "hparams")}
        # Names relative to the run, so that the record says when a checkpoint came from elsewhere.
        details["averaged_checkpoints"] = [_relative_to(p, source_dir) for p in paths]
        stored.save(directory, hp, problem, model_name, **details)


def _replace_directory(new, path):
    """Puts the directory `new` at `path`, which may hold an earlier one (removed): atomically where the system
    can exchange two names (Linux's renameat2), else by two renames (a kill between them leaves the earlier
    directory under a hidden name beside `path`, and the new one under `new`)."""
    if not os.path.lexists(path):
        os.rename(new, path)
        return
    if _exchange(new, path):
        shutil.rmtree(new, ignore_errors=True)  # The earlier directory, now under the temporary name.
        return
    old = new + ".old"
    os.rename(path, old)
    os.rename(new, path)
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a, b):
    """Swaps the names `a` and `b` in one step; False where the system or file system cannot."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), b)


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
        what = "a run" if checkpoints.listed(averaged_dir) else "files"
        raise errors.T2TRelposError(f"--averaged_dir={averaged_dir} holds {what} of its own, not an earlier "
                                    "average; name a new or empty directory")


def _relative_to(path, run_dir):
    """`path` relative to `run_dir` when it lies there (`ckpt-20`), else absolute."""
    relative = os.path.relpath(os.path.realpath(path), os.path.realpath(run_dir))
    return relative if not relative.startswith(os.pardir) else os.path.realpath(path)
