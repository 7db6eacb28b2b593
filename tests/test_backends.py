"""The layers, models and search on the JAX and PyTorch backends, each in one subprocess (`backend_checks.py`).

TensorFlow computes the reference outputs of a few tiny models here; the subprocess loads the same weights on
its backend and compares, besides checking the attention layer and ACT against the numpy references.
JAX is installed by `make test`; PyTorch is checked where it is installed (see docs/guide/backends.md).
Set T2T_RELPOS_REQUIRE_BACKENDS=jax,torch to make a missing backend a failure instead of a skip.
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from keras import ops

import backend_checks
from t2t_relpos.decoding import search
from t2t_relpos.models import Transformer, UniversalTransformer

VOCAB = 13
MAX_LENGTH = 9
_CHECKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "backend_checks.py")
_INSTALL = {"jax": "pip install jax (make test installs it)",
            "torch": "pip install torch --index-url https://download.pytorch.org/whl/cpu"}


def _models():
    """The fixture models (names as in `backend_checks.FIXTURE_MODELS`): class and configuration."""
    common = dict(input_vocab_size=VOCAB, target_vocab_size=VOCAB, hidden_size=16, filter_size=32, num_heads=2,
                  max_relative_position=3, layer_prepostprocess_dropout=0.0, attention_dropout=0.0,
                  relu_dropout=0.0)
    return {
        "transformer_relative": (Transformer, dict(common, num_encoder_layers=2, num_decoder_layers=2,
                                                   position_encoding="relative")),
        "transformer_sinusoid_prenorm": (Transformer, dict(common, num_encoder_layers=2, num_decoder_layers=2,
                                                           position_encoding="sinusoid", norm_position="pre")),
        "adaptive_ut_relative": (UniversalTransformer, dict(common, recurrence_type="act", act_max_steps=4,
                                                            position_encoding="relative", norm_position="pre")),
    }


def _features():
    rng = np.random.default_rng(0)
    inputs = rng.integers(2, VOCAB, size=(3, 7)).astype("int32")
    targets = rng.integers(2, VOCAB, size=(3, 6)).astype("int32")
    inputs[:, -1] = targets[:, -1] = 1
    inputs[1, 4:], inputs[1, 3] = 0, 1
    targets[2, 3:], targets[2, 2] = 0, 1
    return {"inputs": inputs, "targets": targets}


def _write_fixture(directory, name, model_class, config):
    model = model_class(**config)
    model.build()
    if isinstance(model, UniversalTransformer):  # Halting weights that make positions stop at different steps.
        rng = np.random.default_rng(1)
        for act in (model.encoder.act, model.decoder.act):
            act.halting_unit.kernel.assign(rng.normal(0.0, 0.6, act.halting_unit.kernel.shape).astype("float32"))
            act.halting_unit.bias.assign(np.array([-0.5], "float32"))
    features = _features()
    details = model(features, return_details=True)
    out = {"inputs": features["inputs"], "targets": features["targets"],
           "logits": ops.convert_to_numpy(details["logits"])}
    if details.get("ponder_times"):
        out["ponder_decoder"] = ops.convert_to_numpy(details["ponder_times"]["decoder"])
    ids, scores = search.greedy(model, features["inputs"], MAX_LENGTH)
    out["greedy_ids"], out["greedy_scores"] = ops.convert_to_numpy(ids), ops.convert_to_numpy(scores)
    rank_unfinished = name == "transformer_relative"  # Beam search that ends before any hypothesis does.
    for max_length in (MAX_LENGTH, 3) if rank_unfinished else (MAX_LENGTH,):
        ids, scores = search.beam_search(model, features["inputs"], max_length, beam_size=4, alpha=0.6)
        out[f"beam_ids_{max_length}"] = ops.convert_to_numpy(ids)
        out[f"beam_scores_{max_length}"] = ops.convert_to_numpy(scores)
    weights = model.get_weights()
    out.update({f"weight_{i}": w for i, w in enumerate(weights)})
    np.savez(os.path.join(directory, f"{name}.npz"), **out)
    spec = {"class": model_class.__name__, "config": config, "num_weights": len(weights), "max_length": MAX_LENGTH,
            "rank_unfinished": rank_unfinished}
    with open(os.path.join(directory, f"{name}.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    directory = tmp_path_factory.mktemp("backend_fixtures")
    models = _models()
    assert tuple(models) == backend_checks.FIXTURE_MODELS
    for name, (model_class, config) in models.items():
        _write_fixture(str(directory), name, model_class, config)
    return str(directory)


def _required():
    return {b for b in os.environ.get("T2T_RELPOS_REQUIRE_BACKENDS", "").split(",") if b}


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_layers_models_and_search_agree_with_the_references(backend, fixtures):
    if importlib.util.find_spec(backend) is None:
        message = f"{backend} is not installed in this environment ({_INSTALL[backend]})"
        if backend in _required():
            pytest.fail(message)
        pytest.skip(message)
    # XLA's CPU code generation at -O0: the checks are of what the layers compute, and compiling the ~500 tiny
    # programs they run (eager ops included) was most of the JAX check's time (alone, idle: 54-83 s -> 43-64 s).
    xla_flags = " ".join(filter(None, [os.environ.get("XLA_FLAGS"), "--xla_backend_optimization_level=0"]))
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
               JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags)
    result = subprocess.run([sys.executable, _CHECKS, fixtures], capture_output=True, text=True, env=env,
                            timeout=900, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("BACKEND_CHECKS: ")]
    assert result.returncode == 0 and lines, f"status {result.returncode}\n{result.stdout}\n{result.stderr[-4000:]}"
    results = json.loads(lines[-1][len("BACKEND_CHECKS: "):])
    assert set(results) == {fn.__name__ for fn in backend_checks.CHECKS}
    failed = {name: error for name, error in results.items() if error}
    assert not failed, "\n\n".join(f"{backend}: {name}\n{error}" for name, error in failed.items())
