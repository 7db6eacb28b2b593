"""XLA fusion, steered: `fused(fn)` compiles a function of keras.ops with XLA on the TensorFlow backend (one
memory pass per loop); `materialized(x)` keeps a value out of its consumers' fusions on JAX.

TensorFlow's graph kernels write every intermediate: a chain of elementwise ops and reductions over a large
tensor (attention weights `[B, H, Tq, Tk]`, logits `[B, T, V]`) reads and writes it once per op. XLA fuses the
chain into a few loops. JAX compiles everything with XLA already, so other backends call `fn` as it is.
Shapes stay dynamic in the trace (`reduce_retracing`); XLA compiles once per concrete shape (tens of
milliseconds on a CPU; a trainer with length buckets pays it once per bucket).
"""

import keras


def fused(fn):
    """`fn` under `tf.function(jit_compile=True, reduce_retracing=True)` (keras.ops: no AutoGraph) on TensorFlow,
    else `fn` itself."""
    if keras.backend.backend() != "tensorflow":
        return fn
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.function(fn, jit_compile=True, reduce_retracing=True, autograph=False)


def materialized(x):
    """`x`, computed by kernels of its own on the JAX backend; elsewhere `x` itself.

    XLA's GPU fusion may pull a producer into each consumer that reads it: a row reduction pulled into a
    concatenation or a transpose is then recomputed by every thread that needs one of its outputs, each
    thread reducing a whole row alone (one thread in 33 busy, strided loads), and a gather pulled into two
    consumers is done twice. On an H100 that made the bucket sums of relative attention (a `[B, H, Tq, R]`
    result of `[B, H, Tq, Tk]` reductions) the two slowest kernels of the layer. `jax.lax.optimization_barrier`
    stops fusion at `x`: its producers end in a kernel of their own and its consumers read it from memory.
    The value is unchanged, so gradients and results are too.
    """
    if keras.backend.backend() != "jax":
        return x
    import jax  # pylint: disable=import-outside-toplevel

    return jax.lax.optimization_barrier(x)
