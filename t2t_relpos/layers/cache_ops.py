"""Writing new positions into a decoding cache without copying the whole buffer.

A decoding step writes one position into fixed-size key/value buffers (of `max_length` positions, or the
search's current capacity). The functional update `ops.slice_update` returns a new tensor; in a TensorFlow
graph (not compiled by XLA) its kernel copies the whole buffer to do so, so every step costs memory traffic
in the buffer's size whatever it computes: at 200 positions and beam 4 that copy is most of a small model's
step.

`write` uses TensorFlow's `TensorStridedSliceUpdate` there instead. It has the same functional meaning (the
input is never changed where anyone can see it), but its kernel reuses the input's memory when nothing else
holds a reference to it, which is the case for a cache carried from one step of a `while_loop` to the next;
otherwise it copies, exactly like `slice_update`. Under XLA (`jit_compile=True`), and on JAX, the compiler
updates loop-carried buffers in place already, and its strided-slice kernel needs constant bounds, so `write`
is `ops.slice_update` there.
"""

import keras
from keras import ops

from t2t_relpos.layers.checks import concrete


def _in_xla_context():
    # There is no public API for "am I being traced for XLA?"; tf.function(jit_compile=True) traces inside an
    # XLA control-flow context, which this (private, long-stable) helper looks for. Without it, assume XLA:
    # `slice_update` is correct everywhere, only slower in a plain graph.
    try:
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        from tensorflow.python.ops import control_flow_util  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover
        return True
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def _check_room(buffer, update, index, axis):
    """Refuses an update of another shape than the buffer's, and a write past its end where the index is known.

    Inside `tf.function` / `jax.jit` the index is a traced value and this cannot be checked without a host
    round trip per step; there XLA clamps the write into the buffer (the last positions are overwritten) and
    TensorFlow's graph kernels raise. Size the cache for the longest output (`init_cache(..., max_length)`).
    """
    for a, (want, got) in enumerate(zip(buffer.shape, update.shape)):
        if a != axis and want is not None and got is not None and want != got:
            # TensorFlow's in-place kernel would broadcast, e.g. one row of ids over a cache of two.
            raise ValueError(f"new positions of shape {tuple(update.shape)} do not fit a cache of shape "
                             f"{tuple(buffer.shape)} (axis {a}: {got} against {want}; axis 0 is the batch)")
    start = concrete(index)
    size, count = buffer.shape[axis], update.shape[axis]
    if start is None or size is None or count is None:
        return
    start = int(start)
    if start < 0 or start + count > size:
        raise ValueError(f"cannot write positions {start}..{start + count - 1} into a cache of {size} positions "
                         "(init_cache with a larger max_length)")


def write(buffer, update, index, axis):
    """`buffer` with `update` written at positions `index .. index + n - 1` of `axis` (n = update's size there).

    Args:
        buffer: the cache tensor, any rank.
        update: same rank and dtype; the size of `buffer` on every axis but `axis`.
        index: int scalar (tensor or Python), the first position written.
        axis: the positions axis (non-negative).

    Raises:
        ValueError: in eager calls, when the positions written do not all fit in the buffer.

    Returns:
        The updated buffer (same shape). `buffer` itself is left as it was (unless nothing else refers to it,
        when TensorFlow may have reused its memory).
    """
    _check_room(buffer, update, index, axis)
    rank = len(buffer.shape)
    if keras.backend.backend() != "tensorflow" or _in_xla_context():
        start = [0] * rank
        start[axis] = index
        return ops.slice_update(buffer, start, update)
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    index = tf.cast(index, "int32")
    begin = tf.one_hot(axis, rank, on_value=index, off_value=0)
    end = tf.one_hot(axis, rank, on_value=index + tf.shape(update)[axis], off_value=0)
    full = sum(1 << a for a in range(rank) if a != axis)  # Every other axis: its whole range.
    return tf.raw_ops.TensorStridedSliceUpdate(input=buffer, begin=begin, end=end, strides=[1] * rank,
                                               value=update, begin_mask=full, end_mask=full)
