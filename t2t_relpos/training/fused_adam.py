"""Adam whose per-variable update is one fused kernel on the TensorFlow backend.

Keras 3's `Adam.update_step` is written in `keras.ops`: on TensorFlow each of its dozen elementwise operations
is a kernel of its own, and each reads and writes whole parameter-sized tensors. With g the gradient, t the
step and lr the learning rate, the update is

    m <- m + (1 - beta_1) (g - m)
    v <- v + (1 - beta_2) (g^2 - v)
    theta <- theta - lr sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon)

which TensorFlow's `ResourceApplyAdam` kernel computes in place, reading g, m, v and theta once and writing m,
v and theta once (the kernel tf.keras's Adam used before Keras 3). On other backends, for sparse gradients and
with `amsgrad`, Keras's own update runs. Both compute the same formula; their results differ by float rounding
(the order of the operations), not by a term.

Clipping under `tf.distribute` is fixed too: Keras clips each replica's part of the gradient and sums the
clipped parts across replicas afterwards, so a global-norm clip on N replicas is not the clip one device
applies to the same batch. Here the parts are summed first and the sum is clipped, once.
"""

import threading

import keras
from keras import ops

try:
    import tensorflow as tf
except ImportError:  # pragma: no cover  # The layers run without TensorFlow; the fused path needs it.
    tf = None


def _tensorflow_variable(variable):
    """The tf.Variable behind a Keras variable (or a replica's component inside `strategy.extended.update`)."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def _replicas_in_sync():
    """How many replicas the current replica context computes a gradient over (1 outside `tf.distribute`)."""
    if tf is None or keras.backend.backend() != "tensorflow" or tf.distribute.in_cross_replica_context():
        return 1
    return tf.distribute.get_replica_context().num_replicas_in_sync


# Optimizers whose gradients `_clip_gradients` summed in the `apply` this thread is tracing. Per thread:
# MirroredStrategy traces each replica's step in a thread of its own, all on the one optimizer.
_SUMMED = threading.local()


def _summed():
    if not hasattr(_SUMMED, "ids"):
        _SUMMED.ids = set()
    return _SUMMED.ids


class _FusedUpdate:
    """Mixin for Keras's Adam and AdamW: `update_step` through `ResourceApplyAdam` where it applies, and
    clipping of the gradient summed over replicas."""

    def _clip_gradients(self, grads):
        """Clips the gradient of the whole batch: under N > 1 replicas, their sum (one all-reduce, which
        `_all_reduce_sum_gradients` then skips), as one device would clip it."""
        clips = any(c is not None and c > 0 for c in (self.clipnorm, self.clipvalue, self.global_clipnorm))
        if clips and _replicas_in_sync() > 1:
            present = [g for g in grads if g is not None]
            summed = iter(tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, present))
            grads = [None if g is None else next(summed) for g in grads]
            _summed().add(id(self))
        return super()._clip_gradients(grads)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if id(self) in _summed():  # Summed before clipping, in this same `apply`.
            _summed().discard(id(self))
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)

    def _fuses(self, gradient):
        return (tf is not None and keras.backend.backend() == "tensorflow" and not self.amsgrad
                and not isinstance(gradient, tf.IndexedSlices))

    def update_step(self, gradient, variable, learning_rate):
        if not self._fuses(gradient):
            return super().update_step(gradient, variable, learning_rate)
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        step = ops.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
        return tf.raw_ops.ResourceApplyAdam(
            var=_tensorflow_variable(variable).handle,
            m=_tensorflow_variable(self._momentums[index]).handle,
            v=_tensorflow_variable(self._velocities[index]).handle,
            beta1_power=ops.power(beta_1, step), beta2_power=ops.power(beta_2, step),
            lr=ops.cast(learning_rate, dtype), beta1=beta_1, beta2=beta_2, epsilon=ops.cast(self.epsilon, dtype),
            grad=ops.cast(gradient, dtype), use_locking=False, use_nesterov=False)


@keras.saving.register_keras_serializable(package="t2t_relpos")
class FusedAdam(_FusedUpdate, keras.optimizers.Adam):
    """`keras.optimizers.Adam` (same arguments, variables and checkpoints) with the fused update.

    Example:

    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    >>> model.compile(optimizer=FusedAdam(1e-3), loss="mse")
    >>> model.fit(np.ones((8, 4)), np.zeros((8, 2)), verbose=0).history["loss"][0] > 0
    True
    """


@keras.saving.register_keras_serializable(package="t2t_relpos")
class FusedAdamW(_FusedUpdate, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` with the fused Adam update (its decoupled weight decay is applied as before)."""
