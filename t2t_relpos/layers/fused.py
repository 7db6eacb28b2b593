"""`fused(fn)`: a function of keras.ops compiled by XLA on the TensorFlow backend, one memory pass per loop.

TensorFlow's graph kernels write every intermediate: a chain of elementwise ops and reductions over a large
tensor (attention weights `[B, H, Tq, Tk]`, logits `[B, T, V]`) reads and writes it once per op. XLA fuses the
chain into a few loops. JAX compiles everything with XLA already, so other backends call `fn` as it is.
Shapes stay dynamic in the trace (`reduce_retracing`); XLA compiles once per concrete shape (tens of
milliseconds on a CPU; a trainer with length buckets pays it once per bucket).
"""

import keras


def fused(fn):
    """`fn` under `tf.function(jit_compile=True, reduce_retracing=True)` on TensorFlow, else `fn` itself."""
    if keras.backend.backend() != "tensorflow":
        return fn
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.function(fn, jit_compile=True, reduce_retracing=True)
