"""A plain-numpy reference of Adaptive Computation Time (Graves 2016, as the Universal Transformer uses it).

Written position by position with scalar control flow, independently of the vectorised keras.ops layer.
"""

import numpy as np


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference_act(states, step_fn, halting_kernel, halting_bias, max_steps, epsilon, mask, act_type="copy"):
    """ACT over a batch of sequences.

    Args:
        states: `[B, L, D]` initial states.
        step_fn: numpy `step_fn(step, states) -> (step_inputs, candidates)`, run on every position each step.
        halting_kernel: `[D]`; halting_bias: scalar: p = sigmoid(step_input . kernel + bias).
        max_steps: M.
        epsilon: halting threshold 1 - epsilon.
        mask: bool `[B, L]`, False at padding.
        act_type: "copy": a halted position keeps its state and the output is the weighted sum of the states it
            ran through; "basic" (tensor2tensor): every position takes its new state at every step, halted or not,
            and a running position's output is output = weight * new state + (1 - weight) * output.

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
        new_states = candidates.copy() if act_type == "basic" else states.copy()
        for b in range(batch):
            for i in range(length):
                if not running[b, i]:
                    continue  # Halted (or padding): no weight; with "copy" the state is copied forward.
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
                if act_type == "basic":
                    output[b, i] = weight * candidates[b, i] + (1.0 - weight) * output[b, i]
                else:
                    output[b, i] += weight * candidates[b, i]
        states = new_states
    return {"output": output, "n_updates": n_updates, "remainders": remainders,
            "ponder_times": n_updates + remainders, "weights": weights}
