"""The layers, models and search on the Keras backend named by KERAS_BACKEND, against the references.

Run by `test_backends.py` in a subprocess per backend (Keras picks its backend once per process):

    KERAS_BACKEND=jax python tests/backend_checks.py FIXTURES_DIR

It prints one line `BACKEND_CHECKS: {"check name": null or "what failed", ...}`. The references are the
plain-numpy ones the TensorFlow tests use (eq. 3-4 in `attention_reference.py`, ACT in `act_reference.py`),
autodiff of the materialised form for the custom gradients, and, for whole models and search, the outputs
that TensorFlow computed for the same weights (FIXTURES_DIR, written by `test_backends.py`). The package's
backend-neutral modules must not import TensorFlow: one check says whether they did.
"""

import json
import os
import re
import sys
import time
import traceback

import keras
import numpy as np
from keras import ops

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from act_reference import reference_act  # noqa: E402  pylint: disable=wrong-import-position
from attention_reference import layer_weights, masks, materialized_attention, reference_attention, relation_labels  # noqa: E402
from t2t_relpos.decoding import search  # noqa: E402  pylint: disable=wrong-import-position
from t2t_relpos.layers import (  # noqa: E402
    AdaptiveComputationTime,
    RelationAwareMultiHeadAttention,
    TransformerEncoder,
    UniversalTransformerEncoder,
)
from t2t_relpos.models import Transformer, UniversalTransformer  # noqa: E402
from t2t_relpos.models.transformer import shift_right  # noqa: E402

# What the backend-neutral modules imported, before any check runs (Keras itself may import TensorFlow later,
# e.g. for `fit`'s data adapters, when it is installed).
TENSORFLOW_AT_IMPORT = sorted(m for m in sys.modules if m == "tensorflow" or m.startswith("tensorflow."))
BACKEND = keras.backend.backend()
# The user guide's page on backends, whose examples (one per backend, marked `notest` for tests/test_docs.py,
# which runs pages on TensorFlow) run here.
BACKENDS_PAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "guide",
                             "backends.md")
B, T, D, H, DK = 2, 6, 12, 3, 4
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def numpy(x):
    return ops.convert_to_numpy(x)


def close(got, want, what, atol=1e-5, rtol=1e-5):
    np.testing.assert_allclose(numpy(got), want, atol=atol, rtol=rtol, err_msg=what)


def inputs(length=T, seed=0):
    return np.random.default_rng(seed).normal(size=(B, length, D)).astype("float32")


def attention(**kwargs):
    return RelationAwareMultiHeadAttention(**{"num_heads": H, "key_dim": DK, "max_relative_position": 2,
                                              **kwargs})


def compiled(fn):
    """`fn` compiled as a whole on JAX (eager JAX compiles op by op, for every new shape: far slower here)."""
    if BACKEND == "jax":
        import jax  # pylint: disable=import-outside-toplevel

        return jax.jit(fn)
    return fn


def gradients(loss_fn, x, variables):
    """d loss / d (x, variables) on this backend: `loss_fn(x)` reads the variables."""
    if BACKEND == "jax":
        import jax  # pylint: disable=import-outside-toplevel

        def loss(x, values):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return loss_fn(x)

        d_x, d_values = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, [v.value for v in variables])
        return [d_x] + list(d_values)
    import torch  # pylint: disable=import-outside-toplevel

    x = torch.tensor(x, requires_grad=True)
    return list(torch.autograd.grad(loss_fn(x), [x] + [v.value for v in variables]))


# -- relation-aware attention against eq. 3-4 --------------------------------------------------------------
@check
def attention_matches_eq_3_4():
    x = inputs()
    for keys, values, shared in [(True, True, False), (True, True, True), (True, False, False),
                                 (False, True, True)]:
        for k in (0, 2, T + 4):
            layer = attention(max_relative_position=k, use_relative_keys=keys, use_relative_values=values,
                              heads_share_relative_embeddings=shared, use_bias=True,
                              bias_initializer="random_normal")
            kinds = ("none", "padding", "causal", "both") if (keys, values, k) == (True, True, 2) else ("both",)
            for kind in kinds:
                kwargs, mask = masks(kind, B, T)
                got = layer(x, **kwargs)
                labels = np.broadcast_to(relation_labels(T, T, k), (B, T, T))
                want = reference_attention(layer_weights(layer), x, x, mask, labels)
                close(got, want, f"keys={keys} values={values} shared={shared} k={k} mask={kind}")


@check
def edge_labels_and_cross_attention_match_reference():
    x, memory = inputs(), inputs(length=7, seed=3)
    labels = np.random.default_rng(1).integers(0, 5, size=(B, T, T)).astype("int32")
    graph = attention(max_relative_position=None, num_edge_labels=5)
    kwargs, mask = masks("padding", B, T)
    got = graph(x, edge_labels=labels, **kwargs)
    close(got, reference_attention(layer_weights(graph), x, x, mask, labels), "edge labels")
    cross = attention(max_relative_position=None)
    memory_mask = np.arange(7)[None] < np.array([7, 5])[:, None]
    got = cross(x, memory, value_mask=memory_mask)
    want = reference_attention(layer_weights(cross), x, memory, np.broadcast_to(memory_mask[:, None], (B, T, 7)),
                               None)
    close(got, want, "cross attention")


@check
def custom_gradients_equal_autodiff_of_the_materialized_form():
    x = inputs()
    weight = np.random.default_rng(5).normal(size=(B, T, D)).astype("float32")
    kwargs, mask = masks("both", B, T)
    scale = ops.convert_to_tensor(weight * mask.any(-1)[..., None])  # Rows without keys have no gradient.
    for k, shared in ((0, False), (2, True), (3, False)):
        layer = attention(max_relative_position=k, heads_share_relative_embeddings=shared)
        layer(x)
        labels = np.broadcast_to(relation_labels(T, T, k), (B, T, T)).astype("int32")
        # `gradients` calls the loss in this iteration; the defaults say so.
        ours = gradients(lambda t, layer=layer: ops.sum(layer(t, **kwargs) * scale), x, layer.trainable_weights)
        naive = gradients(lambda t, layer=layer, labels=labels: ops.sum(
            materialized_attention(layer, t, labels, mask) * scale), x, layer.trainable_weights)
        names = ["input"] + [w.path for w in layer.trainable_weights]
        for got, want, name in zip(ours, naive, names):
            close(got, numpy(want), f"k={k} shared={shared} {name}", atol=2e-5, rtol=1e-4)


@check
def jax_grad_of_jit_equals_jit_of_grad():
    """`jax.grad(jax.jit(f))` traces the custom gradients apart from f (it failed while they closed over
    index tensors made in f's trace)."""
    if BACKEND != "jax":
        return
    import jax  # pylint: disable=import-outside-toplevel

    x = inputs()
    for kwargs in ({"max_relative_position": 2}, {"max_relative_position": None, "num_edge_labels": 4}):
        layer = attention(**kwargs)
        labels = np.random.default_rng(2).integers(0, 4, size=(B, T, T)).astype("int32")
        extra = {"edge_labels": labels} if "num_edge_labels" in kwargs else {"use_causal_mask": True}
        layer(x, **extra)

        def loss(t, layer=layer, extra=extra):
            return ops.sum(layer(t, **extra) ** 2)

        close(jax.grad(jax.jit(loss))(x), jax.jit(jax.grad(loss))(x), f"{kwargs}", atol=1e-5)


@check
def bucket_sums_end_fusion_on_jax():
    """The bucket sums of the forward pass and of the key term's gradient reach XLA behind optimization
    barriers (`fused.materialized`): fused into their consumers they were the slowest kernels of the layer on
    an H100 (benchmarks/README.md, "Training step on a GPU"). A GPU is not needed to see the barriers in the program."""
    if BACKEND != "jax":
        return
    import jax  # pylint: disable=import-outside-toplevel

    x = inputs()
    layer = attention()
    layer(x)
    weights = [v.value for v in layer.trainable_variables]

    def loss(values, t):
        y, _ = layer.stateless_call(values, [], t)
        return ops.sum(y ** 2)

    forward = jax.jit(loss).lower(weights, x).as_text().count("optimization_barrier")
    backward = jax.jit(jax.grad(loss)).lower(weights, x).as_text().count("optimization_barrier")
    assert forward >= 3 and backward >= 2 * forward, (forward, backward)


@check
def cached_attention_steps_equal_the_full_causal_pass():
    length = 6
    x = inputs(length=length)
    for k in (2, 0, None):
        layer = attention(max_relative_position=k)
        full = numpy(layer(x, use_causal_mask=True))
        step = compiled(lambda piece, cache, index, layer=layer: layer(piece, cache=cache, cache_index=index,
                                                                       use_causal_mask=True))
        for chunk in (1, 3):
            cache, pieces = layer.init_cache(B, length), []
            for start in range(0, length, chunk):
                out, cache = step(x[:, start:start + chunk], cache, np.int32(start))
                pieces.append(numpy(out))
            close(np.concatenate(pieces, axis=1), full, f"k={k} chunk={chunk}")


@check
def keras_masks_reach_every_layer_when_compiled():
    """Embedding(mask_zero=True) into the encoders, compiled: padding left out as with an explicit mask.

    JAX arrays cannot carry a Keras mask; Keras keeps it beside them, and every layer must look there.
    """
    ids = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 0]])
    embed = keras.layers.Embedding(20, 8, mask_zero=True)
    small = {"hidden_size": 8, "num_heads": 2, "filter_size": 16, "position_encoding": "relative",
             "max_relative_position": 2}
    for encoder in (TransformerEncoder(num_layers=1, **small),
                    UniversalTransformerEncoder(num_rec_steps=2, **small),
                    UniversalTransformerEncoder(num_rec_steps=2, recurrence_type="act", act_max_steps=3,
                                                transition_type="sepconv", **small)):
        want = numpy(encoder(embed(ids), padding_mask=ids != 0))
        close(compiled(lambda i, encoder=encoder: encoder(embed(i)))(ids), want, encoder.name)


@check
def act_matches_the_numpy_reference():
    depth, max_steps, length = 5, 4, 6
    rng = np.random.default_rng(3)
    mixing, signals = rng.normal(0.0, 0.7, (depth, depth)), rng.normal(0.0, 0.5, (max_steps, depth))
    states = rng.normal(size=(B, length, depth)).astype("float32")
    mask = np.ones((B, length), bool)
    mask[0, 4:] = False
    kernel = rng.normal(0.0, 2.0, depth)

    def numpy_step(step, h):  # Mixes positions, like attention.
        x = h + signals[step]
        return x, np.tanh(x @ mixing + x.mean(axis=1, keepdims=True))

    def keras_step(step, h):
        x = h + ops.take(signals.astype("float32"), step, axis=0)
        return x, ops.tanh(ops.matmul(x, mixing.astype("float32")) + ops.mean(x, axis=1, keepdims=True))

    act = AdaptiveComputationTime(max_steps=max_steps, epsilon=0.01)
    act.build((None, None, depth))
    act.halting_unit.kernel.assign(kernel.reshape(depth, 1).astype("float32"))
    act.halting_unit.bias.assign(np.array([-1.0], "float32"))
    got = act(states, step_fn=keras_step, padding_mask=mask)
    want = reference_act(states, numpy_step, kernel, -1.0, max_steps, 0.01, mask)
    assert len(set(want["n_updates"][mask])) >= 3, "the case should halt after different numbers of steps"
    for name in ("output", "n_updates", "remainders", "ponder_times"):
        close(got[name], want[name], name)


# -- whole models and search against TensorFlow's outputs for the same weights ---------------------------
def load_fixture(directory, name):
    with open(os.path.join(directory, f"{name}.json"), encoding="utf-8") as f:
        spec = json.load(f)
    arrays = dict(np.load(os.path.join(directory, f"{name}.npz")))
    model_class = {"Transformer": Transformer, "UniversalTransformer": UniversalTransformer}[spec["class"]]
    model = model_class(**spec["config"])
    model.build()
    weights = [arrays[f"weight_{i}"] for i in range(spec["num_weights"])]
    model.set_weights(weights)
    return spec, arrays, model


def model_check(name):
    def run(directory):
        spec, want, model = load_fixture(directory, name)
        features = {"inputs": want["inputs"], "targets": want["targets"]}
        details = compiled(lambda f: model(f, return_details=True))(features)
        close(details["logits"], want["logits"], "teacher-forced logits", atol=1e-4)
        if "ponder_decoder" in want:
            close(details["ponder_times"]["decoder"], want["ponder_decoder"], "decoder ponder times", atol=1e-4)
        # Incremental decoding (in steps of 1 and of 3 tokens) equals the full pass on this backend.
        encoder_output, mask = model.encode(features["inputs"])
        decoder_inputs = numpy(shift_right(features["targets"]))
        full = numpy(details["logits"])
        valid = features["targets"] != 0  # The Universal Transformer zeroes logits at padded targets.
        length = decoder_inputs.shape[1]
        decode_step = compiled(model.decode_step)
        for chunk in (1, 3):
            cache, steps = model.init_cache(encoder_output, mask, length), []
            for start in range(0, length, chunk):
                logits, cache = decode_step(decoder_inputs[:, start:start + chunk], cache, np.int32(start))
                steps.append(numpy(logits))
            close(np.concatenate(steps, axis=1)[valid], full[valid], f"cached decoding in steps of {chunk}")
        # Search: the same ids and scores as TensorFlow's.
        ids, scores = compiled(lambda x: search.greedy(model, x, spec["max_length"]))(features["inputs"])
        np.testing.assert_array_equal(numpy(ids), want["greedy_ids"], err_msg="greedy ids")
        close(scores, want["greedy_scores"], "greedy scores", atol=1e-4)
        # With max_length 3 nothing finishes: the alive hypotheses are ranked by score.
        for max_length in (spec["max_length"], 3) if spec["rank_unfinished"] else (spec["max_length"],):
            beam = compiled(lambda x, n=max_length: search.beam_search(model, x, n, beam_size=4, alpha=0.6))
            ids, scores = beam(features["inputs"])
            np.testing.assert_array_equal(numpy(ids), want[f"beam_ids_{max_length}"],
                                          err_msg=f"beam ids, max_length {max_length}")
            close(scores, want[f"beam_scores_{max_length}"], f"beam scores, max_length {max_length}", atol=1e-4)
    run.__name__ = f"{name}_agrees_with_tensorflow"
    return run


FIXTURE_MODELS = ("transformer_relative", "transformer_sinusoid_prenorm", "adaptive_ut_relative")
for _name in FIXTURE_MODELS:
    check(model_check(_name))


@check
def fit_learns_a_batch():
    """`.fit` (compiled by XLA on JAX) brings a relative Transformer's loss on one batch down."""
    model = Transformer(13, 13, hidden_size=16, filter_size=32, num_heads=2, num_encoder_layers=1,
                        num_decoder_layers=1, position_encoding="relative", max_relative_position=3,
                        layer_prepostprocess_dropout=0.0, attention_dropout=0.0, relu_dropout=0.0)
    rng = np.random.default_rng(0)
    x = {"inputs": rng.integers(2, 13, size=(8, 7)).astype("int32"),
         "targets": rng.integers(2, 13, size=(8, 6)).astype("int32")}
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=BACKEND == "jax")
    history = model.fit(x, x["targets"], batch_size=8, epochs=30, verbose=0).history["loss"]
    assert np.isfinite(history).all() and history[-1] < 0.5 * history[0], f"loss {history[0]} -> {history[-1]}"


@check
def docs_example_runs():
    """The example for this backend in docs/guide/backends.md runs as written."""
    with open(BACKENDS_PAGE, encoding="utf-8") as f:
        text = f.read()
    blocks = re.findall(r"^```python[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    mine = [b for b in blocks if f'os.environ["KERAS_BACKEND"] = "{BACKEND}"' in b]
    assert len(mine) == 1, f"expected one example setting KERAS_BACKEND to {BACKEND}, found {len(mine)}"
    exec(compile(mine[0], f"docs/guide/backends.md ({BACKEND})", "exec"), {})  # pylint: disable=exec-used


@check
def package_imports_without_tensorflow():
    """`t2t_relpos.layers`, `.models` and `.decoding.search` import no TensorFlow (checked right after import)."""
    assert not TENSORFLOW_AT_IMPORT, f"imported {TENSORFLOW_AT_IMPORT[:3]}"


def main(directory):
    keras.utils.set_random_seed(1234)
    results, seconds = {}, {}
    for fn in CHECKS:
        began = time.perf_counter()
        try:
            fn(directory) if fn.__code__.co_argcount else fn()
            results[fn.__name__] = None
        except Exception:  # pylint: disable=broad-except  # Reported, with its traceback, to the test.
            results[fn.__name__] = traceback.format_exc(limit=-3)
        seconds[fn.__name__] = round(time.perf_counter() - began, 1)
    print("BACKEND_CHECK_SECONDS: " + json.dumps(seconds), flush=True)
    print("BACKEND_CHECKS: " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
