"""A finished (or running) training run read back from its output directory: hparams, problem, weights."""

import os

import tensorflow as tf

from t2t_relpos import errors
from t2t_relpos import registry
from t2t_relpos.hparams import stored
from t2t_relpos.training import checkpoints
from t2t_relpos.training import trainer


def load(output_dir, checkpoint_path=None, data_dir=None):
    """Rebuilds the model of the run in `output_dir` and restores its weights.

    Args:
        output_dir: The trainer's --output_dir (holds hparams.json and checkpoints).
        checkpoint_path: A specific checkpoint (`.../ckpt-1200`); default: the newest in `output_dir`.
        data_dir: The problem's data directory (vocabularies), if it needs one.

    Returns:
        (model, problem, hparams, checkpoint path).
    """
    run = stored.load(output_dir) if output_dir else None
    if run is None:
        raise errors.T2TRelposError(f"{output_dir} holds no run (no {stored.JSON_NAME}); pass the trainer's "
                                    "--output_dir")
    hparams, problem_name, model_name = run
    path = checkpoint_path or tf.train.latest_checkpoint(output_dir)
    if not path:
        raise errors.T2TRelposError(f"no checkpoint in {output_dir}; train first or pass --checkpoint_path")
    problem = registry.problem(problem_name)
    model = trainer.build_model(hparams, problem, data_dir, model_name)
    checkpoints.restore_model(model, path)
    return model, problem, hparams, os.path.abspath(path)
