"""Position-wise maps (a kernel applied at every position, `[..., D] -> [..., E]`) as 2-D matmuls.

On TensorFlow, `ops.matmul` of a 3-D input by a 2-D kernel (and so `keras.layers.Dense` on `[B, T, D]`) becomes
`tf.tensordot`: about 20 graph ops of shape arithmetic around one 2-D `MatMul` of `[B*T, D]` by `[D, E]`.
Flattening the positions first gives that same `MatMul` with a few ops around it: the products and their
gradients are unchanged, and a graph traces faster (every trainer start, evaluation, export and decoder traces
each layer: `benchmarks/trace_cost.py`). A batched matmul broadcasting the kernel is not used instead: its
gradient for the kernel is a `[B, D, E]` tensor summed over B.

    >>> import numpy as np
    >>> from keras import ops
    >>> x, kernel = np.ones((2, 3, 4), "float32"), np.ones((4, 5), "float32")
    >>> tuple(at_positions(lambda flat: ops.matmul(flat, kernel), x).shape)
    (2, 3, 5)
"""

from keras import ops


def flatten_positions(x):
    """`[..., D]` -> `[N, D]`, N the number of positions."""
    depth = x.shape[-1]
    return ops.reshape(x, (-1, ops.shape(x)[-1] if depth is None else depth))


def at_positions(fn, x, leading=None):
    """`fn`, a position-wise map `[N, D] -> [N, E]`, applied to x's positions: `[..., D]` -> `[..., E]`.

    `leading`: x's leading dimensions (`ops.shape(x)[:-1]`), when the caller has read them already (each read
    of a dynamic shape is a few graph ops); else they are read here.
    """
    leading = tuple(ops.shape(x)[:-1] if leading is None else leading)
    y = fn(flatten_positions(x))
    return ops.reshape(y, leading + (y.shape[-1],))
