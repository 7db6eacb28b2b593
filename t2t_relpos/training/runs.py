"""A finished (or running) training run read back from its output directory: hparams, problem, weights."""

import os

import tensorflow as tf

from t2t_relpos import errors, registry
from t2t_relpos.hparams import stored
from t2t_relpos.training import checkpoints, trainer


def load_record(output_dir):
    """The run description stored in `output_dir` (a dict); an error when it holds no run."""
    record = stored.load_record(output_dir) if output_dir and tf.io.gfile.isdir(output_dir) else None
    if record is None:
        raise errors.T2TRelposError(f"{output_dir} holds no run (no {stored.JSON_NAME}); pass the trainer's "
                                    "--output_dir")
    return record


def load_hparams(output_dir):
    """The hparams of the run in `output_dir` (without building anything)."""
    load_record(output_dir)
    return stored.load(output_dir)[0]


def load_problem(output_dir):
    """The problem of the run in `output_dir` (without building anything): what a tool checks its flags
    against before it loads the model."""
    record = load_record(output_dir)
    return _registered(registry.problem, stored.load(output_dir)[1], record)


def load(output_dir, checkpoint_path=None, data_dir=None):
    """Rebuilds the model of the run in `output_dir` and restores its weights.

    Args:
        output_dir: The trainer's --output_dir (holds hparams.json and checkpoints).
        checkpoint_path: A specific checkpoint (`.../ckpt-1200`); default: the newest in `output_dir`.
        data_dir: The problem's data directory (vocabularies), if it needs one.

    Returns:
        (model, problem, hparams, checkpoint path).

    Raises:
        T2TRelposError: no run or checkpoint there, a `--usr_dir` the run needs was not imported, the
            vocabulary in `data_dir` is not the run's, or the checkpoint is unreadable.
    """
    record = load_record(output_dir)
    hparams, problem_name, model_name = stored.load(output_dir)
    path = checkpoint_path or checkpoints.latest_checkpoint(output_dir)
    if not path:
        raise errors.T2TRelposError(f"no checkpoint in {output_dir}; train first or pass --checkpoint_path")
    if checkpoint_path:
        checkpoints.check_exists(checkpoint_path)  # Before the model is built.
    check_checkpoint_vocabulary(output_dir, path)
    problem = _registered(registry.problem, problem_name, record)
    _registered(registry.model, model_name or hparams.model, record)
    stored.check_vocabulary(output_dir, problem.vocabulary(data_dir), data_dir)
    model = trainer.build_model(hparams, problem, data_dir, model_name)
    if checkpoint_path:
        checkpoints.restore_model(model, path)
    else:  # The newest, picked again if a running trainer deletes it under us.
        path = checkpoints.restore_newest(model, output_dir)
        if not path:
            raise errors.T2TRelposError(f"no checkpoint in {output_dir}; train first or pass --checkpoint_path")
    return model, problem, hparams, os.path.abspath(path)


def check_checkpoint_vocabulary(output_dir, checkpoint_path):
    """Raises `DataError` when `checkpoint_path` lies in another run's directory (or an average's) whose
    `hparams.json` records other vocabularies than the run in `output_dir`: its weights stand for other tokens,
    and would decode fluent garbage (or average into it) without an error. A checkpoint without a run's record
    beside it is not checked."""
    directory = os.path.dirname(checkpoint_path) or "."
    if "://" not in checkpoint_path and os.path.realpath(directory) == os.path.realpath(output_dir):
        return
    theirs = stored.load_record(directory) if tf.io.gfile.isdir(directory) else None
    if theirs is None:
        return
    difference = stored.vocabulary_difference(load_record(output_dir).get("vocabulary"), theirs.get("vocabulary"))
    if difference:
        feature, ours, other = difference
        raise errors.DataError(
            f"checkpoint {checkpoint_path} is of a run trained with another {feature} vocabulary "
            f"({stored.describe(other)}) than the run in {output_dir} ({stored.describe(ours)}): its ids stand for "
            f"other tokens; use it with --output_dir={directory}")


def _registered(lookup, name, record):
    """`lookup(name)`; an unknown name in a run trained with `--usr_dir` says which one to pass."""
    try:
        return lookup(name)
    except errors.UnknownNameError as e:
        missing = [d for d in record.get("usr_dirs", []) if d not in registry.usr_dirs()]
        if not missing:
            raise
        raise errors.UnknownNameError(f"{e}; the run was trained with --usr_dir={missing[0]}: pass it here "
                                      "too") from None
