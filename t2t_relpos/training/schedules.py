"""Learning-rate schedules, chosen by the `learning_rate_schedule` hparam; add one with `@register`."""

import math

import keras
from keras import ops

from t2t_relpos import errors
from t2t_relpos.hparams.checks import FLOAT32_TINY

_SCHEDULES = {}


def register(name):
    """Registers `factory(hparams) -> LearningRateSchedule` under `name`."""

    def decorate(factory):
        _SCHEDULES[name] = factory
        return factory

    return decorate


def names():
    return sorted(_SCHEDULES)


def from_hparams(hparams):
    name = hparams.learning_rate_schedule
    if name not in _SCHEDULES:
        raise errors.UnknownNameError(errors.unknown_name_message("learning_rate_schedule", name, _SCHEDULES))
    return _SCHEDULES[name](hparams)


def check(hparams, train_steps=None):
    """Raises `HParamsError` where the hparams' schedule gives no finite rate >= 0 at its first step, at the end
    of its warm-up or at `train_steps` (default: the hparams'): the trainer calls it before it writes the run, so
    that a value the schedule cannot take is refused in one line instead of failing at the first step."""
    schedule = from_hparams(hparams)
    name = hparams.learning_rate_schedule
    warmup = max(int(hparams.get("learning_rate_warmup_steps", 0)), 0)
    last = train_steps if train_steps is not None else hparams.get("train_steps", 1)
    rates = {}
    for step in sorted({0, max(warmup - 1, 0), warmup, max(int(last) - 1, 0)}):
        try:
            rate = rates[step] = float(schedule(step))
        except (ArithmeticError, ValueError, TypeError) as e:
            raise errors.HParamsError(f"learning_rate_schedule={name!r} cannot be computed at step {step + 1} with "
                                      f"these hparams ({type(e).__name__}: {e})") from None
        if not (math.isfinite(rate) and rate >= 0.0):
            raise errors.HParamsError(f"learning_rate_schedule={name!r} gives a learning rate of {rate} at step "
                                      f"{step + 1} with these hparams; it must be finite and >= 0")
    # The schedule computes in float32, as the optimizer applies the rate to the float32 weights whatever
    # --mixed_precision: a rate below float32's smallest normal number is 0 there (TensorFlow flushes it), and
    # learning_rate=1e-50 trained at "lr 0" without moving a weight. The peak is among the steps above (the end
    # of the warm-up) for every schedule here; a rate of 0 at some steps only (a decay to 0) is a schedule's own.
    step = max(rates, key=rates.get)
    if rates[step] < FLOAT32_TINY:
        raise errors.HParamsError(
            f"learning_rate_schedule={name!r} with learning_rate={hparams.get('learning_rate')!r} gives a learning "
            + (f"rate of at most {rates[step]:.4g} (at step {step + 1})" if rates[step] else "rate of 0") +
            " in float32, the type the optimizer updates the weights in (below "
            f"{FLOAT32_TINY:.4g}, float32's smallest normal number, a value is flushed to 0): no weight would ever "
            "change; raise learning_rate")


class _Schedule(keras.optimizers.schedules.LearningRateSchedule):
    """Base: subclasses define `value(step)`, where the first update is step 1."""

    def __init__(self, multiplier=1.0, warmup_steps=4000):
        self.multiplier = float(multiplier)
        self.warmup_steps = float(warmup_steps)

    def __call__(self, step):
        return self.multiplier * self.value(ops.cast(step, "float32") + 1.0)  # pylint: disable=no-member

    def get_config(self):
        return {"multiplier": self.multiplier, "warmup_steps": self.warmup_steps}


@keras.saving.register_keras_serializable(package="t2t_relpos")
class NoamSchedule(_Schedule):
    """The paper's schedule: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (times `multiplier`).

    Linear warm-up to its peak at `warmup_steps`, then inverse square-root decay. `warmup_steps=0` is no
    warm-up: inverse square-root decay from the first step, as in tensor2tensor (whose warmup^-1.5 was infinite).
    """

    def __init__(self, hidden_size, multiplier=1.0, warmup_steps=4000):
        super().__init__(multiplier, warmup_steps)
        self.hidden_size = int(hidden_size)

    def value(self, step):
        if self.warmup_steps <= 0:
            return self.hidden_size ** -0.5 * ops.rsqrt(step)
        return self.hidden_size ** -0.5 * ops.minimum(ops.rsqrt(step), step * self.warmup_steps ** -1.5)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size}


@keras.saving.register_keras_serializable(package="t2t_relpos")
class RsqrtDecay(_Schedule):
    """tensor2tensor's `rsqrt_decay`: 1 / sqrt(max(step, warmup)): constant, then inverse square-root."""

    def value(self, step):
        return ops.rsqrt(ops.maximum(step, self.warmup_steps))


@keras.saving.register_keras_serializable(package="t2t_relpos")
class LinearWarmupConstant(_Schedule):
    """min(1, step / warmup): linear warm-up, then constant."""

    def value(self, step):
        return ops.minimum(1.0, step / max(self.warmup_steps, 1.0))


@keras.saving.register_keras_serializable(package="t2t_relpos")
class Constant(_Schedule):
    def value(self, step):
        return ops.ones_like(step)


register("noam")(lambda hp: NoamSchedule(hp.hidden_size, hp.learning_rate, hp.learning_rate_warmup_steps))
register("rsqrt_decay")(lambda hp: RsqrtDecay(hp.learning_rate, hp.learning_rate_warmup_steps))
register("linear_warmup_constant")(
    lambda hp: LinearWarmupConstant(hp.learning_rate, hp.learning_rate_warmup_steps))
register("constant")(lambda hp: Constant(hp.learning_rate, hp.learning_rate_warmup_steps))
