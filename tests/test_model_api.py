"""The models used from Python: methods called in any order, hparams, ids and features checked, saving.
Each case was once silently wrong or unusable (audit of 2026-11-27, /work/notes/audit17.md)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_relpos import errors, registry
from t2t_relpos.data import batching
from t2t_relpos.hparams import HParams
from t2t_relpos.models import Transformer, UniversalTransformer
from t2t_relpos.models.encoder_classifier import TransformerEncoderClassifier

SMALL = {"hidden_size": 16, "filter_size": 32, "num_heads": 2, "num_encoder_layers": 1, "num_decoder_layers": 1,
         "position_encoding": "relative", "max_relative_position": 3}
SOURCE = np.array([[5, 6, 7, 1], [3, 1, 0, 0]])
TARGET = np.array([[7, 6, 1], [4, 1, 0]])


def numpy(x):
    return keras.ops.convert_to_numpy(x)


def transformer():
    keras.utils.set_random_seed(0)
    return Transformer(12, 12, **SMALL)


@pytest.mark.parametrize("first", ["encode", "init_cache", "classify"])
def test_any_method_first_builds_the_model_and_it_saves_its_weights(first, tmp_path):
    keras.utils.set_random_seed(0)
    if first == "classify":
        model = TransformerEncoderClassifier(12, 5, **{k: v for k, v in SMALL.items() if k != "num_decoder_layers"})
        before = numpy(model.classify(SOURCE))
        after = lambda m: numpy(m.classify(SOURCE))  # noqa: E731
        features = {"inputs": SOURCE}
    else:
        model = transformer()
        if first == "init_cache":
            model.init_cache(np.zeros((2, 4, 16), "float32"), np.ones((2, 4), bool), 8)
        before = numpy(model.encode(SOURCE)[0])
        after = lambda m: numpy(m.encode(SOURCE)[0])  # noqa: E731
        features = {"inputs": SOURCE, "targets": TARGET}
    assert model.built
    model(features)  # Still callable: its layers are not built twice.
    model.save(tmp_path / "model.keras")
    np.testing.assert_allclose(after(keras.models.load_model(tmp_path / "model.keras")), before, atol=1e-6)


def test_hparams_missing_a_field_the_model_reads_are_refused_not_read_as_none():
    partial = HParams(**{k: v for k, v in SMALL.items()}, initializer_gain=1.0)
    with pytest.raises(errors.HParamsError, match="hparams lack .*relative_keys.*registry.hparams"):
        Transformer.from_hparams(partial, 12, 12)
    with pytest.raises(errors.HParamsError, match="hparams lack"):
        TransformerEncoderClassifier.from_hparams(partial, 12, 5)
    # A registered set has every field.
    UniversalTransformer.from_hparams(registry.hparams("universal_transformer_cpu_rel"), 12, 12)


@pytest.mark.parametrize("features, message", [
    ({"inputs": np.array([[5, -4, 1]]), "targets": TARGET[:1]}, r"ids must be in \[0, vocab_size=12\), got -4"),
    ({"inputs": np.array([[5, 12, 1]]), "targets": TARGET[:1]}, r"got 12"),
    ({"inputs": np.array([[5.0, 9.0, 1.0, 0.4]]), "targets": TARGET[:1]}, r"features\['inputs'\] must be integer"),
    ({"inputs": np.array([5, 6, 1]), "targets": np.array([6, 5, 1])}, r"features\['inputs'\] must be \[B, T\]"),
    ({"inputs": SOURCE, "targets": TARGET[..., None]}, r"features\['targets'\] must be \[B, T\]"),
    ({"inputs": SOURCE}, r"features lack 'targets'"),
    ((SOURCE, TARGET), r"features must be a dict"),
    ({"inputs": SOURCE, "targets": TARGET[:1]}, r"different batch sizes: inputs 2, targets 1"),
])
def test_features_the_model_would_misread_are_refused(features, message):
    model = transformer()
    with pytest.raises(ValueError, match=message):
        model(features)


def test_decode_step_refuses_ids_of_another_batch_than_its_cache():
    model = transformer()
    encoded, mask = model.encode(SOURCE)
    cache = model.init_cache(encoded, mask, 8)
    with pytest.raises(ValueError, match=r"axis 0: 1 against 2; axis 0 is the batch"):
        model.decode_step(np.array([[0]]), cache, 0)
    logits, _ = model.decode_step(np.array([[0], [0]]), cache, 0)
    assert tuple(logits.shape) == (2, 1, 12)


def test_bucket_padding_leaves_an_example_past_max_length_at_its_own_length():
    examples = tf.data.Dataset.from_tensor_slices({
        "inputs": tf.ragged.constant([[3, 1], [3, 4, 5, 6, 7, 8, 9, 10, 11, 1]]),
        "targets": tf.ragged.constant([[3, 1], [4, 1]])})
    batches = list(batching.batch_examples(examples, 64, 8, drop_long=False, pad_to_bucket_boundary=True))
    shapes = sorted(tuple(b["inputs"].shape) for b in batches)
    assert len(batches) == 2 and (1, 10) in shapes, shapes
    long = next(b for b in batches if b["inputs"].shape[1] == 10)
    np.testing.assert_array_equal(long["inputs"].numpy()[0], [3, 4, 5, 6, 7, 8, 9, 10, 11, 1])


# -- a model too large to make ----------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: Transformer(13, 13, **{**SMALL, "num_encoder_layers": 2}),
    lambda: Transformer(13, 20, **{**SMALL, "shared_embedding_and_softmax_weights": False, "norm_position": "pre",
                                   "heads_share_relative_embeddings": True, "position_encoding": "both"}),
    lambda: UniversalTransformer(13, 13, num_rec_steps=2, recurrence_type="act", act_max_steps=2, **SMALL),
    lambda: TransformerEncoderClassifier(20, 6, **{k: v for k, v in SMALL.items() if k != "num_decoder_layers"}),
], ids=["transformer", "untied_pre_norm", "universal_act", "classifier"])
def test_the_size_counted_before_building_is_the_built_models(make):
    model = make()
    counted = sum(model.parameter_counts().values())
    model.build()
    assert counted == model.count_params()


@pytest.mark.parametrize("override, part", [
    ({"hidden_size": 2 ** 36, "num_heads": 4}, "the attention projections"),
    ({"hidden_size": 512, "num_heads": 8, "max_relative_position": 2 ** 31}, "the relative-position tables"),
])
def test_a_model_too_large_for_the_memory_is_refused_before_any_weight_is_made(override, part, monkeypatch):
    """It was an out-of-memory traceback from TensorFlow (after minutes of swapping, where it could be)."""
    model = Transformer(13, 13, **{**SMALL, **override})
    made = []
    monkeypatch.setattr(keras.layers.Layer, "add_weight", lambda *args, **kwargs: made.append(args))
    with pytest.raises(errors.HParamsError, match=r"the model is too large to make: [0-9.e+]+ parameters, whose "
                       r"float32 weights alone need [0-9.]+ [TPEZY]iB .* more than this machine's [0-9.]+ [MGT]iB "
                       rf"of memory \({part} are 100% of it\): check hidden_size"):
        model.build()
    assert not made


def test_the_trainer_refuses_a_model_too_large_in_one_line(tmp_path):
    from test_cli import assert_usage_error, call_tool  # pylint: disable=import-outside-toplevel

    result = call_tool("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal40",
                       "--hparams_set=transformer_tiny_rel", f"--hparams=hidden_size={2 ** 36},filter_size=8",
                       f"--output_dir={tmp_path / 'run'}", "--train_steps=1")
    assert_usage_error(result, "t2t-relpos-trainer: error: the model is too large to make")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "run" / "hparams.json").exists()  # Nothing to refuse the corrected command with.
