"""A plain-numpy reference of Adaptive Computation Time (Graves 2016, as the Universal Transformer uses it).

Written position by position with scalar control flow, independently of the vectorised keras.ops layer.
"""

import numpy as np


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference_act(states, step_fn, halting_kernel, halting_bias, max_steps, epsilon, mask):
    """ACT over a batch of sequences.

    Args:
        states: `[B, L, D]` initial states.
        step_fn: numpy `step_fn(step, states) -> (step_inputs, candidates)`, run on every position each step.
        halting_kernel: `[D]`; halting_bias: scalar: p = sigmoid(step_input . kernel + bias).
        max_steps: M.
        epsilon: halting threshold 1 - epsilon.
        mask: bool `[B, L]`, False at padding.

    Returns:
        dict of `output` `[B, L, D]`, `n_updates`, `remainders`, `ponder_times` `[B, L]`, and `weights`
        `[M, B, L]` (the weight of each step's state).
    """
    states = np.array(states, dtype=np.float64)
    batch, length, _ = states.shape
    running = np.array(mask, dtype=bool).copy()
    cumulative = np.zeros((batch, length))
    n_updates = np.zeros((batch, length))
    remainders = np.zeros((batch, length))
    output = np.zeros_like(states)
    weights = np.zeros((max_steps, batch, length))
    for step in range(max_steps):
        step_inputs, candidates = step_fn(step, states)
        new_states = states.copy()
        for b in range(batch):
            for i in range(length):
                if not running[b, i]:
                    continue  # Halted (or padding): the state is copied forward, no weight.
                p = sigmoid(step_inputs[b, i] @ halting_kernel + halting_bias)
                n_updates[b, i] += 1
                new_states[b, i] = candidates[b, i]
                if step == max_steps - 1 or cumulative[b, i] + p > 1.0 - epsilon:
                    weight = 1.0 - cumulative[b, i]
                    remainders[b, i] = weight
                    running[b, i] = False
                else:
                    weight = p
                cumulative[b, i] += weight
                weights[step, b, i] = weight
                output[b, i] += weight * candidates[b, i]
        states = new_states
    return {"output": output, "n_updates": n_updates, "remainders": remainders,
            "ponder_times": n_updates + remainders, "weights": weights}
