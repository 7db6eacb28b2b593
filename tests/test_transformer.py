"""The Transformer model: shapes, masking, position invariances, incremental decoding, serialisation."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from t2t_relpos import registry
from t2t_relpos.layers import TransformerEncoder
from t2t_relpos.models import Transformer
from t2t_relpos.models.transformer import shift_right

VOCAB = 13


def tiny(position_encoding="relative", **kwargs):
    config = dict(hidden_size=16, filter_size=32, num_heads=2, num_encoder_layers=2, num_decoder_layers=2,
                  position_encoding=position_encoding, max_relative_position=3,
                  layer_prepostprocess_dropout=0.0, attention_dropout=0.0, relu_dropout=0.0)
    config.update(kwargs)
    model = Transformer(VOCAB, VOCAB, **config)
    model.build()
    return model


def features(seed=0, batch=3, source=7, target=6):
    rng = np.random.default_rng(seed)
    inputs = rng.integers(2, VOCAB, size=(batch, source)).astype("int32")
    targets = rng.integers(2, VOCAB, size=(batch, target)).astype("int32")
    inputs[:, -1] = targets[:, -1] = 1
    inputs[1, 4:] = 0
    inputs[1, 3] = 1
    targets[2, 3:] = 0
    targets[2, 2] = 1
    return {"inputs": inputs, "targets": targets}


@pytest.mark.parametrize("position_encoding", ["sinusoid", "relative", "both", "none"])
def test_logits_shape_and_finite(position_encoding):
    logits = tiny(position_encoding)(features())
    assert tuple(logits.shape) == (3, 6, VOCAB) and logits.dtype == "float32"
    assert np.isfinite(ops.convert_to_numpy(logits)).all()


def test_relative_sets_build_relation_tables_and_sinusoid_does_not():
    names = lambda m: [w.path for w in m.weights if "relative" in w.path]
    assert names(tiny("relative")) and names(tiny("both"))
    assert not names(tiny("sinusoid")) and not names(tiny("none"))
    cross = [n for n in names(tiny("relative")) if "cross_attention" in n]
    assert not cross  # Encoder-decoder attention stays plain.


def test_source_padding_does_not_change_the_logits():
    model = tiny("both")
    f = features()
    padded = dict(f, inputs=np.pad(f["inputs"], [[0, 0], [0, 4]]))
    np.testing.assert_allclose(ops.convert_to_numpy(model(padded)), ops.convert_to_numpy(model(f)), atol=1e-5)


def test_relative_encoder_is_invariant_to_absolute_shifts():
    tokens = np.random.default_rng(3).integers(2, VOCAB, size=(2, 8)).astype("int32")
    shifted = np.pad(tokens, [[0, 0], [5, 0]])  # The same tokens five positions later, after padding.
    for position_encoding, invariant in (("relative", True), ("sinusoid", False)):
        model = tiny(position_encoding)
        plain = ops.convert_to_numpy(model.encode(tokens)[0])
        moved = ops.convert_to_numpy(model.encode(shifted)[0])[:, 5:]
        assert np.allclose(plain, moved, atol=1e-5) == invariant, position_encoding


@pytest.mark.parametrize("position_encoding", ["sinusoid", "relative", "both", "none"])
@pytest.mark.parametrize("chunk", [1, 3])
def test_incremental_decoding_equals_teacher_forcing(position_encoding, chunk):
    model = tiny(position_encoding)
    f = features()
    full = ops.convert_to_numpy(model(f))
    encoder_output, mask = model.encode(f["inputs"])
    cache = model.init_cache(encoder_output, mask, 6)
    decoder_inputs = ops.convert_to_numpy(shift_right(f["targets"]))
    steps = []
    for start in range(0, 6, chunk):
        logits, cache = model.decode_step(decoder_inputs[:, start:start + chunk], cache, start)
        steps.append(ops.convert_to_numpy(logits))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_pre_norm_and_separate_vocabularies():
    model = Transformer(11, 17, hidden_size=16, filter_size=32, num_heads=2, num_encoder_layers=1,
                        num_decoder_layers=1, norm_position="pre", shared_embedding_and_softmax_weights=False)
    model.build()
    f = {"inputs": np.array([[3, 4, 10, 1]]), "targets": np.array([[5, 16, 1]])}
    assert tuple(model(f).shape) == (1, 3, 17)
    assert model.input_embedding is not model.target_embedding and model.softmax is not None


def test_shared_vocabulary_shares_one_matrix():
    model = tiny()
    assert model.input_embedding is model.target_embedding and model.softmax is None
    assert sum(w.path.endswith("/embeddings") for w in model.weights) == 1


def test_gradients_are_finite_for_every_weight():
    model = tiny("both", layer_prepostprocess_dropout=0.1, attention_dropout=0.1, relu_dropout=0.1)
    f = features()
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(f, training=True) ** 2)
    grads = tape.gradient(loss, model.trainable_weights)
    for weight, grad in zip(model.trainable_weights, grads):
        assert grad is not None and np.isfinite(ops.convert_to_numpy(grad)).all(), weight.path


def test_from_hparams_reads_the_set():
    hp = registry.hparams("transformer_tiny_rel")
    model = Transformer.from_hparams(hp, VOCAB, VOCAB)
    model.build()
    assert model.architecture["position_encoding"] == "relative"
    block = model.encoder.blocks[0]
    assert block.self_attention.max_relative_position == hp.max_relative_position
    assert len(model.encoder.blocks) == hp.num_encoder_layers


def test_config_round_trip_and_keras_file(tmp_path):
    model = tiny("both", norm_position="pre")
    f = features()
    expected = ops.convert_to_numpy(model(f))
    clone = Transformer.from_config(model.get_config())
    clone.build()
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(ops.convert_to_numpy(clone(f)), expected, atol=1e-6)
    path = os.path.join(tmp_path, "transformer.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_allclose(ops.convert_to_numpy(restored(f)), expected, atol=1e-6)


def test_mixed_precision_keeps_float32_logits():
    model = Transformer(VOCAB, VOCAB, hidden_size=16, filter_size=32, num_heads=2, num_encoder_layers=1,
                        num_decoder_layers=1, position_encoding="relative", dtype="mixed_bfloat16")
    model.build()
    logits = model(features())
    assert logits.dtype == "float32" and np.isfinite(ops.convert_to_numpy(logits)).all()
    assert model.encoder.blocks[0].self_attention.compute_dtype == "bfloat16"


def test_encoder_alone_is_a_building_block():
    ids = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(VOCAB, 16, mask_zero=True)(ids)
    x = TransformerEncoder(num_layers=2, hidden_size=16, num_heads=2, filter_size=32,
                           position_encoding="relative", max_relative_position=4)(x)
    classifier = keras.Model(ids, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling1D()(x)))
    out = classifier(np.array([[3, 4, 5, 0], [6, 7, 0, 0]]))
    assert tuple(out.shape) == (2, 3)


@pytest.mark.parametrize("name", ["transformer_tiny", "transformer_tiny_rel", "universal_transformer_tiny",
                                  "adaptive_universal_transformer_tiny_rel"])
def test_checkpoints_hold_every_weight(tmp_path, name):
    """tf.train.Checkpoint follows attributes, not Keras's layer lists: every weight must still be saved."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    hparams = registry.hparams(name)
    model = registry.model(hparams.model).from_hparams(hparams, 12, 12)
    model.build()
    path = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
    saved = [n for n, _ in tf.train.list_variables(path) if n.startswith("model/")]
    assert len(saved) == len(model.weights)
