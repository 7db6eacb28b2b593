"""Checks of resolved hyperparameters: a value no model or trainer can use is an error naming the field.

Types are checked by `HParams` itself; these are the ranges and the relations between fields (heads must
divide the width), checked when a run's hparams are resolved, before anything is built or trained.
"""

import math

from t2t_relpos import errors

_AT_LEAST_ONE = (
    "hidden_size", "filter_size", "num_heads", "num_encoder_layers", "num_decoder_layers", "batch_size",
    "max_length", "min_length_bucket", "accumulation_steps", "beam_size", "num_averaged_checkpoints",
    "num_rec_steps", "act_max_steps",
)
_AT_LEAST_ZERO = (
    "attention_key_channels", "attention_value_channels", "max_relative_position", "extra_length",
    "learning_rate_warmup_steps", "train_steps", "weight_decay", "clip_grad_norm", "alpha",
    "max_position_offset",
)
_RATES = ("layer_prepostprocess_dropout", "attention_dropout", "relu_dropout", "label_smoothing")
# A learning rate of -1 trains by gradient ascent, without an error anywhere.
_POSITIVE = ("learning_rate", "optimizer_adam_epsilon", "norm_epsilon", "initializer_gain")
_AT_LEAST_ZERO_FLOATS = ("act_loss_weight",)
# Used in float32 whatever --mixed_precision (layer normalization computes in at least float32, Adam in the
# float32 of the weights), where TensorFlow flushes a number below float32's smallest normal one to 0: an
# epsilon of 1e-50 was 0, its division gave inf, and the run stopped as "diverged" (lower the learning rate?).
FLOAT32_TINY = 1.1754943508222875e-38
_NONZERO_IN_FLOAT32 = {"optimizer_adam_epsilon": "Adam's update", "norm_epsilon": "layer normalization"}
_MOMENTS = ("optimizer_adam_beta1", "optimizer_adam_beta2")


def check(hp):
    """Raises `HParamsError` naming the first field of `hp` whose value cannot work; returns `hp`."""

    def fail(name, wanted):
        raise errors.HParamsError(f"hparam {name!r} must be {wanted}, got {hp.get(name)!r}")

    # Every test is written so that NaN fails it (every comparison with NaN is false).
    for name, value in sorted(hp.values().items()):
        if isinstance(value, float) and not math.isfinite(value):
            fail(name, "a finite number")
    for name in _AT_LEAST_ONE:
        if name in hp and not hp.get(name) >= 1:
            fail(name, ">= 1")
    for name in _AT_LEAST_ZERO + _AT_LEAST_ZERO_FLOATS:
        if name in hp and not hp.get(name) >= 0:
            fail(name, ">= 0")
    for name in _POSITIVE:
        if name in hp and not hp.get(name) > 0:
            fail(name, "> 0")
    for name, user in _NONZERO_IN_FLOAT32.items():
        if name in hp and hp.get(name) < FLOAT32_TINY:
            raise errors.HParamsError(
                f"hparam {name!r} is {hp.get(name)!r}, which is 0 in float32, the type {user} computes in (below "
                f"{FLOAT32_TINY:.4g}, float32's smallest normal number, a value is flushed to 0), and dividing by it "
                f"gives inf; it must be at least {FLOAT32_TINY:.4g}")
    for name in _RATES + _MOMENTS:
        if name in hp and not 0.0 <= hp.get(name) < 1.0:
            fail(name, "in [0, 1)")
    if "act_epsilon" in hp and not 0.0 < hp.act_epsilon < 1.0:
        fail("act_epsilon", "in (0, 1)")
    if hp.get("position_offset_shared") and hp.get("position_start_index") != "random":
        fail("position_start_index", '"random" with position_offset_shared=True (a shared offset is a random one)')
    if hp.get("position_start_index") == "step" and hp.get("model") == "transformer":
        fail("position_start_index", '"none" or "random" for a Transformer ("step" follows recurrent steps)')
    if "length_bucket_step" in hp and not hp.length_bucket_step > 1.0:
        fail("length_bucket_step", "> 1")
    if {"hidden_size", "num_heads"} <= set(hp.values()):
        per_head = [hp.get("attention_key_channels", 0), hp.get("attention_value_channels", 0)]
        if hp.hidden_size % hp.num_heads and not all(per_head):
            raise errors.HParamsError(
                f"hparam 'num_heads' ({hp.num_heads}) must divide 'hidden_size' ({hp.hidden_size}): each head "
                "gets hidden_size / num_heads channels (or set attention_key_channels and "
                "attention_value_channels)")
    return hp
