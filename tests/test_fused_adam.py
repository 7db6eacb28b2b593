"""The fused Adam update against Keras's own: the same steps, variables and checkpoints."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_relpos.training import fused_adam


def _model():
    keras.utils.set_random_seed(5)
    inputs = keras.Input((6,), dtype="int32")
    x = keras.layers.Embedding(11, 8)(inputs)  # A sparse (IndexedSlices) gradient: Keras's update runs there.
    x = keras.layers.Dense(16, activation="relu")(keras.layers.Flatten()(x))
    return keras.Model(inputs, keras.layers.Dense(3)(x))


def _train(optimizer, steps=6, graph=True, model=None):
    model = model or _model()
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 11, (32, 6)).astype("int32"), rng.normal(size=(32, 3)).astype("float32")

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    step = tf.function(step) if graph else step
    for _ in range(steps):
        step()
    return model, step


@pytest.mark.parametrize("graph", [True, False])
@pytest.mark.parametrize("fused, keras_optimizer", [
    (lambda: fused_adam.FusedAdam(0.01, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
     lambda: keras.optimizers.Adam(0.01, beta_1=0.9, beta_2=0.98, epsilon=1e-9)),
    (lambda: fused_adam.FusedAdamW(0.01, weight_decay=0.1), lambda: keras.optimizers.AdamW(0.01, weight_decay=0.1)),
])
def test_fused_steps_equal_keras_adam(fused, keras_optimizer, graph):
    ours, _ = _train(fused(), graph=graph)
    theirs, _ = _train(keras_optimizer(), graph=graph)
    for a, b in zip(ours.trainable_variables, theirs.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=a.path)


def test_dense_updates_run_the_fused_kernel_and_sparse_ones_keras():
    _, step = _train(fused_adam.FusedAdam(0.01), steps=1)
    ops = [op.type for op in step.get_concrete_function().graph.get_operations()]
    # Two dense kernels and two biases fused; the embedding's sparse gradient takes Keras's path (no fused op).
    assert ops.count("ResourceApplyAdam") == 4


def test_slots_and_checkpoints_are_keras_adams(tmp_path):
    """A run checkpointed with Keras's Adam resumes with the fused one and takes the same next step."""
    plain = keras.optimizers.Adam(0.01)
    model, _ = _train(plain, steps=3)
    path = tf.train.Checkpoint(model=model, optimizer=plain).save(str(tmp_path / "ckpt"))
    after = []
    for make in (fused_adam.FusedAdam, keras.optimizers.Adam):
        model, optimizer = _model(), make(0.01)
        optimizer.build(model.trainable_variables)
        tf.train.Checkpoint(model=model, optimizer=optimizer).restore(path).assert_consumed()
        assert int(optimizer.iterations.numpy()) == 3
        _train(optimizer, steps=1, model=model)
        after.append([v.numpy() for v in model.trainable_variables])
    for a, b in zip(*after):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
