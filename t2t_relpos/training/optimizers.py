"""The optimizer of an hparams set: Adam (or AdamW) on the set's learning-rate schedule."""

import keras

from t2t_relpos import errors
from t2t_relpos.training import fused_adam, schedules


def from_hparams(hparams, mixed_precision=None):
    """Adam(beta1, beta2, epsilon) with `learning_rate_schedule`, global-norm clipping if `clip_grad_norm`.

    Keras's Adam and AdamW with the per-variable update in one TensorFlow kernel (`fused_adam`): the same steps
    and checkpoints. With `mixed_precision="mixed_float16"` the optimizer is wrapped in dynamic loss scaling.
    """
    kwargs = {
        "learning_rate": schedules.from_hparams(hparams),
        "beta_1": hparams.optimizer_adam_beta1,
        "beta_2": hparams.optimizer_adam_beta2,
        "epsilon": hparams.optimizer_adam_epsilon,
        "global_clipnorm": hparams.clip_grad_norm or None,
    }
    if hparams.optimizer == "adam":
        optimizer = fused_adam.FusedAdam(**kwargs)
    elif hparams.optimizer == "adamw":
        optimizer = fused_adam.FusedAdamW(weight_decay=hparams.weight_decay, **kwargs)
    else:
        raise errors.UnknownNameError(errors.unknown_name_message("optimizer", hparams.optimizer,
                                                                  ["adam", "adamw"]))
    if mixed_precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
