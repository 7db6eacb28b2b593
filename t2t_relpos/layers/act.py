"""Adaptive Computation Time per position (Graves 2016), as the Universal Transformer uses it."""

import keras
from keras import ops

from t2t_relpos.layers.checks import check_int
from t2t_relpos.layers.checks import keras_mask as _keras_mask
from t2t_relpos.layers.positionwise import at_positions

# How halted positions and the output behave (see `AdaptiveComputationTime`).
ACT_TYPES = ("copy", "basic")

@keras.saving.register_keras_serializable(package="t2t_relpos")
class AdaptiveComputationTime(keras.layers.Layer):
    """Runs a recurrent step function until each position halts, and mixes its states by halting weight.

    At step t (1-based) every position still running reads the halting unit p^t = sigmoid(w . x^t + b) of the
    step's input x^t (the state plus its signals, as in tensor2tensor). With c the cumulative probability of
    the steps before, a running position

    - continues if c + p^t <= 1 - epsilon: its weight is p^t;
    - halts otherwise, or unconditionally at step `max_steps`: its weight is the remainder R = 1 - c.

    Weights therefore sum to exactly 1 per position, and are 0 once it has halted. Padding positions never run:
    zero weight, zero output, no ponder cost. The ponder time of a position is rho = N + R, with N the number of
    steps it ran. What a halted position's state does, and how the output mixes the states, is `act_type`:

    - "copy" (Graves 2016, and the UT paper's §2.2 text): a halted position's state is copied forward
      unchanged, and other positions attend to that copy; the output is `sum_t w^t H^t`.
    - "basic" (tensor2tensor's `act_type="basic"`, the code behind the paper's results): every position's
      state is transformed at every step, halted or not, so a halted position goes on changing as context for
      the others; only its output stops, `o^t = w^t H^t + (1 - w^t) o^{t-1}` from `o^0 = 0`.

    By default the loop is a fixed number (`max_steps`) of masked iterations unrolled in Python: no
    data-dependent while-loop, so it compiles with XLA, trains under `tf.distribute`, and every step runs the
    step function on all positions (the Universal Transformer decoder's caches rely on that: see
    `UniversalTransformerDecoder`). For inference, `halt_early=True` stops once every position has halted
    (a while-loop bounded by `max_steps`); the results are identical, since later steps change nothing.

    Args:
        max_steps: M >= 1, the most steps a position takes; it is forced to halt (with its remainder) at step M.
        epsilon: A position halts once its cumulative halting probability would exceed 1 - epsilon.
        halting_bias_init: Initial bias of the halting unit (1.0 in tensor2tensor: p starts near 0.73, so
            positions begin by halting after two steps).
        act_type: "copy" or "basic" (above).
        kernel_initializer: Initializer of the halting unit's weights.

    Call arguments:
        states: `[B, L, D]` initial states H^0.
        step_fn: `step_fn(step, states) -> (step_inputs, new_states)`, both `[B, L, D]`; `step` is the 0-based
            Python int step; `step_inputs` is what the halting unit reads (e.g. states + position/step signal).
        padding_mask: bool `[B, L]`, False at padding (default: the Keras mask of `states`, else none).
        halt_early: Stop when all positions have halted (inference only; then `step` is an int32 tensor).

    Returns:
        dict with `"output"` `[B, L, D]`, and float32 `[B, L]` `"ponder_times"` (N + R), `"n_updates"` (N) and
        `"remainders"` (R), all zero at padding.

    Example:

    >>> import numpy as np
    >>> act = AdaptiveComputationTime(max_steps=4)
    >>> dense = keras.layers.Dense(8, activation="tanh")
    >>> result = act(np.random.rand(2, 5, 8).astype("float32"), step_fn=lambda t, h: (h, dense(h)))
    >>> tuple(result["output"].shape), tuple(result["ponder_times"].shape)
    ((2, 5, 8), (2, 5))
    """

    def __init__(self, max_steps, epsilon=0.01, halting_bias_init=1.0, kernel_initializer="glorot_uniform",
                 act_type="copy", **kwargs):
        super().__init__(**kwargs)
        max_steps = check_int("max_steps", max_steps, 1)
        if act_type not in ACT_TYPES:
            raise ValueError(f"act_type must be one of {ACT_TYPES}, got {act_type!r}")
        self.act_type = act_type
        if not 0.0 <= epsilon < 1.0:
            raise ValueError(f"epsilon must be in [0, 1), got {epsilon}")
        self.max_steps = int(max_steps)
        self.epsilon = float(epsilon)
        self.halting_bias_init = float(halting_bias_init)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.halting_unit = keras.layers.Dense(
            1, activation="sigmoid", kernel_initializer=self.kernel_initializer,
            bias_initializer=keras.initializers.Constant(self.halting_bias_init), dtype=self.dtype_policy,
            name="halting_unit")
        self.supports_masking = True  # The Keras mask of the states is consumed as `padding_mask`.

    def build(self, states_shape, padding_mask_shape=None):
        self.halting_unit.build(states_shape)

    @property
    def _accumulation_dtype(self):
        """Halting and the output mix are computed in float32 at least (float64 in a float64 layer)."""
        return "float64" if self.compute_dtype == "float64" else "float32"

    def halting_probability(self, step_inputs):
        """p = sigmoid(w . x + b): `[B, L, D]` -> float32 `[B, L]` (float64 in a float64 layer)."""
        p = at_positions(self.halting_unit, step_inputs)  # A 2-D matmul (`positionwise`).
        return ops.cast(p[..., 0], self._accumulation_dtype)

    def call(self, states, step_fn, padding_mask=None, halt_early=False):
        if padding_mask is None:
            padding_mask = _keras_mask(states)
        shape = ops.shape(states)
        dtype = self._accumulation_dtype
        if padding_mask is None:
            running = ops.ones(shape[:2], dtype)
        else:
            running = ops.cast(padding_mask, dtype)
        zeros = ops.zeros_like(running)
        # (states, running, cumulative, n_updates, remainders, output); output accumulates in float32 or more.
        carry = (states, running, zeros, zeros, zeros, ops.zeros(shape, dtype))
        if halt_early:
            def cond(step, *carry):
                return ops.logical_and(step < self.max_steps, ops.any(carry[1] > 0))

            def body(step, *carry):
                return (step + 1,) + self._step(step, ops.equal(step, self.max_steps - 1), carry, step_fn)

            carry = ops.while_loop(cond, body, (ops.convert_to_tensor(0, "int32"),) + carry,
                                   maximum_iterations=self.max_steps)[1:]
        else:
            for step in range(self.max_steps):
                carry = self._step(step, step == self.max_steps - 1, carry, step_fn)
        states, _, _, n_updates, remainders, output = carry
        n_updates, remainders = ops.cast(n_updates, "float32"), ops.cast(remainders, "float32")
        return {"output": ops.cast(output, states.dtype), "ponder_times": n_updates + remainders,
                "n_updates": n_updates, "remainders": remainders}

    def _step(self, step, is_last, carry, step_fn):
        """One masked ACT step over all positions (see the class docstring)."""
        states, running, cumulative, n_updates, remainders, output = carry
        step_inputs, candidates = step_fn(step, states)
        p = self.halting_probability(step_inputs)
        over = running * ops.cast(cumulative + p > 1.0 - self.epsilon, running.dtype)
        # At the last step whoever is still running is forced to halt, and gets its remainder.
        if isinstance(is_last, bool):
            halts = running if is_last else over
        else:
            halts = ops.where(is_last, running, over)
        continues = running - halts
        remainder = halts * (1.0 - cumulative)
        weight = continues * p + remainder
        if self.act_type == "basic":
            states = candidates
            output = weight[..., None] * ops.cast(states, output.dtype) + (1.0 - weight[..., None]) * output
        else:
            states = ops.where(running[..., None] > 0, candidates, states)
            output = output + weight[..., None] * ops.cast(states, output.dtype)
        return (states, continues, cumulative + weight, n_updates + running, remainders + remainder, output)

    def compute_mask(self, states, mask=None):
        return None  # The outputs are a dict; padding shows as zero ponder time.

    def compute_output_spec(self, states, step_fn=None, padding_mask=None, halt_early=False):
        per_position = keras.KerasTensor(tuple(states.shape[:2]), dtype="float32")
        return {"output": keras.KerasTensor(tuple(states.shape), dtype=states.dtype),
                "ponder_times": per_position, "n_updates": per_position, "remainders": per_position}

    def get_config(self):
        config = super().get_config()
        config.update({
            "max_steps": self.max_steps,
            "epsilon": self.epsilon,
            "halting_bias_init": self.halting_bias_init,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "act_type": self.act_type,
        })
        return config


def ponder_cost(ponder_times, padding_mask=None):
    """Mean ponder time N + R over the non-padding positions: float32 scalar (0 when there are none).

    Args:
        ponder_times: `[B, L]` from `AdaptiveComputationTime` (or a Universal Transformer layer).
        padding_mask: bool `[B, L]`, False at padding.
    """
    ponder_times = ops.cast(ponder_times, "float32")
    if padding_mask is None:
        return ops.mean(ponder_times)
    weights = ops.cast(padding_mask, "float32")
    return ops.sum(ponder_times * weights) / ops.maximum(ops.sum(weights), 1.0)
