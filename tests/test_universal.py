"""The Universal Transformer and ACT: numpy reference, halting limits, padding, weight sharing, caches, training."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from act_reference import reference_act
from t2t_relpos import registry
from t2t_relpos.decoding import search
from t2t_relpos.layers import (
    AdaptiveComputationTime,
    SeparableConvTransition,
    TransformerDecoder,
    TransformerEncoder,
    UniversalTransformerDecoder,
    UniversalTransformerEncoder,
    timing_signal,
)
from t2t_relpos.models import UniversalTransformer
from t2t_relpos.models.transformer import shift_right

VOCAB = 13
WIDTH = 16
TRAIN_STEPS = 300


def numpy_of(x):
    return ops.convert_to_numpy(x)


def spread_halting(act, seed=0):
    """Halting weights that make positions halt after different numbers of steps (1 to max)."""
    rng = np.random.default_rng(seed)
    unit = act.halting_unit
    unit.kernel.assign(rng.normal(0.0, 0.6, unit.kernel.shape).astype("float32"))
    unit.bias.assign(np.array([-0.5], "float32"))


def tiny(recurrence_type="act", position_encoding="relative", transition_type="ffn", **kwargs):
    config = dict(hidden_size=WIDTH, filter_size=32, num_heads=2, num_rec_steps=3, act_max_steps=4,
                  recurrence_type=recurrence_type, transition_type=transition_type,
                  position_encoding=position_encoding, max_relative_position=3,
                  layer_prepostprocess_dropout=0.0, attention_dropout=0.0, relu_dropout=0.0)
    config.update(kwargs)
    model = UniversalTransformer(VOCAB, VOCAB, **config)
    model.build()
    if recurrence_type == "act":
        spread_halting(model.encoder.act, seed=1)
        spread_halting(model.decoder.act, seed=2)
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


# -- ACT against the numpy reference ---------------------------------------------------------------------
def _act_problem(seed=0, batch=2, length=6, depth=4, max_steps=5):
    """States, mask and matching keras/numpy step functions that mix positions (like attention) and mark
    which step produced a state in `max_steps` one-hot channels (so the output exposes the step weights)."""
    rng = np.random.default_rng(seed)
    mixing = rng.normal(0.0, 0.7, (depth, depth))
    context = rng.normal(0.0, 0.7, (depth, depth))
    signals = rng.normal(0.0, 0.5, (max_steps, depth + max_steps))
    states = np.concatenate([rng.normal(size=(batch, length, depth)), np.zeros((batch, length, max_steps))], -1)
    mask = np.ones((batch, length), bool)
    mask[0, 4:] = False

    def numpy_step(step, h):
        x = h + signals[step]
        body = np.tanh(x[..., :depth] @ mixing + x[..., :depth].mean(axis=1, keepdims=True) @ context)
        marker = np.broadcast_to(np.eye(max_steps)[step], x.shape[:2] + (max_steps,))
        return x, np.concatenate([body, marker], axis=-1)

    def keras_step(step, h):  # `step` may be a Python int or (in the early-exit loop) a tensor.
        x = h + ops.take(signals.astype("float32"), step, axis=0)
        head = x[..., :depth]
        body = ops.tanh(ops.matmul(head, mixing.astype("float32")) +
                        ops.matmul(ops.mean(head, axis=1, keepdims=True), context.astype("float32")))
        marker = ops.broadcast_to(ops.one_hot(step, max_steps), ops.shape(x)[:2] + (max_steps,))
        return x, ops.concatenate([body, marker], axis=-1)

    return states.astype("float32"), mask, numpy_step, keras_step


def _act_layer(depth, max_steps, kernel, bias, act_type="copy"):
    act = AdaptiveComputationTime(max_steps=max_steps, epsilon=0.01, act_type=act_type)
    act.build((None, None, depth))
    act.halting_unit.kernel.assign(np.asarray(kernel, "float32").reshape(depth, 1))
    act.halting_unit.bias.assign(np.array([bias], "float32"))
    return act


@pytest.mark.parametrize("act_type", ["copy", "basic"])
def test_act_matches_the_numpy_reference(act_type):
    depth, max_steps = 4, 5
    states, mask, numpy_step, keras_step = _act_problem(depth=depth, max_steps=max_steps)
    kernel = np.random.default_rng(2).normal(0.0, 2.0, depth + max_steps)
    act = _act_layer(depth + max_steps, max_steps, kernel, -1.5, act_type)
    got = {k: numpy_of(v) for k, v in act(states, step_fn=keras_step, padding_mask=mask).items()}
    want = reference_act(states, numpy_step, kernel, -1.5, max_steps, 0.01, mask, act_type)

    # The case is not trivial: positions halt after 1 to max_steps steps, some only at the forced last step.
    counts = want["n_updates"][mask]
    assert len(set(counts)) >= 4 and counts.min() == 1 and counts.max() == max_steps
    for name in ("n_updates", "remainders", "ponder_times"):
        np.testing.assert_allclose(got[name], want[name], atol=1e-5, err_msg=name)
    np.testing.assert_allclose(got["output"], want["output"], atol=1e-5)
    # The halting weights sum to one at every valid position; with "copy" the marker channels of the output
    # are those weights; with "basic" the weight of step t's state is w^t times (1 - w^s) of every later step s.
    weights = want["weights"]
    np.testing.assert_allclose(weights.sum(axis=0)[mask], 1.0, atol=1e-6)
    if act_type == "basic":
        later = np.ones_like(weights)
        for step in range(max_steps - 2, -1, -1):
            later[step] = later[step + 1] * (1.0 - weights[step + 1])
        weights = weights * later
        # Positions that halted go on changing as context, so the outputs are not those of "copy".
        copy = reference_act(states, numpy_step, kernel, -1.5, max_steps, 0.01, mask, "copy")["output"]
        assert np.abs(want["output"][..., :depth] - copy[..., :depth]).max() > 0.1
    np.testing.assert_allclose(got["output"][..., depth:], np.moveaxis(weights, 0, -1), atol=1e-5)
    # Padding never runs: no ponder time, no output.
    assert not got["ponder_times"][~mask].any() and not got["output"][~mask].any()


def test_halting_probability_near_one_takes_one_step():
    depth, max_steps = 4, 5
    states, mask, numpy_step, keras_step = _act_problem(depth=depth, max_steps=max_steps)
    act = _act_layer(depth + max_steps, max_steps, np.zeros(depth + max_steps), 30.0)
    got = {k: numpy_of(v) for k, v in act(states, step_fn=keras_step, padding_mask=mask).items()}
    np.testing.assert_array_equal(got["n_updates"], mask.astype("float32"))
    np.testing.assert_allclose(got["remainders"], mask.astype("float32"), atol=1e-6)  # R = 1 - 0.
    first_state = numpy_step(0, states.astype("float64"))[1]
    np.testing.assert_allclose(got["output"][mask], first_state[mask], atol=1e-5)


@pytest.mark.parametrize("first_p, reaches_the_unit", [(0.995, False), (0.98, True)])
def test_a_position_halting_at_its_first_step_gives_its_halting_unit_no_gradient(first_p, reaches_the_unit):
    """Why ACT's collapse to one step is permanent (benchmarks/README, bAbI): with p > 1 - epsilon at step 1 the
    position's only weight is its remainder 1, and its ponder time 1 + 1, neither of which depends on p. Just
    below the threshold, p weighs the first state and the remainder, so both losses reach the unit."""
    depth, max_steps = 4, 5
    states, mask, _, keras_step = _act_problem(depth=depth, max_steps=max_steps)
    act = _act_layer(depth + max_steps, max_steps, np.zeros(depth + max_steps), np.log(first_p / (1 - first_p)))
    with tf.GradientTape() as tape:
        got = act(states, step_fn=keras_step, padding_mask=mask)
        loss = tf.reduce_sum(got["output"] ** 2) + tf.reduce_sum(got["ponder_times"])
    grads = tape.gradient(loss, [act.halting_unit.kernel, act.halting_unit.bias])
    largest = max(np.abs(numpy_of(g)).max() if g is not None else 0.0 for g in grads)
    assert (largest > 1e-3) == reaches_the_unit, largest


def test_halting_probability_near_zero_runs_to_the_maximum_with_its_remainder():
    depth, max_steps = 4, 5
    states, mask, numpy_step, keras_step = _act_problem(depth=depth, max_steps=max_steps)
    act = _act_layer(depth + max_steps, max_steps, np.zeros(depth + max_steps), -30.0)
    got = {k: numpy_of(v) for k, v in act(states, step_fn=keras_step, padding_mask=mask).items()}
    np.testing.assert_array_equal(got["n_updates"], max_steps * mask.astype("float32"))
    # The forced halt at the last step gets the remainder 1 - sum(p) ~ 1 (tensor2tensor gave it nothing).
    np.testing.assert_allclose(got["remainders"][mask], 1.0, atol=1e-6)
    np.testing.assert_allclose(got["ponder_times"][mask], max_steps + 1.0, atol=1e-6)
    h = states.astype("float64")
    for step in range(max_steps):  # Every valid position runs every step; padding keeps its state.
        h = np.where(mask[..., None], numpy_step(step, h)[1], h)
    np.testing.assert_allclose(got["output"][mask], h[mask], atol=1e-5)


@pytest.mark.parametrize("act_type", ["copy", "basic"])
def test_early_exit_at_inference_gives_the_same_results(act_type):
    depth, max_steps = 4, 5
    states, mask, _, keras_step = _act_problem(depth=depth, max_steps=max_steps)
    kernel = np.random.default_rng(2).normal(0.0, 2.0, depth + max_steps)
    act = _act_layer(depth + max_steps, max_steps, kernel, -1.5, act_type)
    fixed = act(states, step_fn=keras_step, padding_mask=mask)
    early = act(states, step_fn=keras_step, padding_mask=mask, halt_early=True)
    graph = tf.function(lambda s: act(s, step_fn=keras_step, padding_mask=mask, halt_early=True),
                        autograph=False)(states)
    for name in fixed:
        np.testing.assert_allclose(numpy_of(early[name]), numpy_of(fixed[name]), atol=1e-6, err_msg=name)
        np.testing.assert_allclose(numpy_of(graph[name]), numpy_of(fixed[name]), atol=1e-6, err_msg=name)
    # When every position halts at its first step, the loop stops after that step.
    calls = []

    def counted_step(step, h):
        calls.append(step)
        return keras_step(step, h)

    quick = _act_layer(depth + max_steps, max_steps, np.zeros(depth + max_steps), 30.0)
    quick(states, step_fn=counted_step, padding_mask=mask, halt_early=True)
    assert len(calls) == 1
    quick(states, step_fn=counted_step, padding_mask=mask)
    assert len(calls) == 1 + max_steps


@pytest.mark.parametrize("bias, steps", [(30.0, 1), (-30.0, 3)])
def test_forced_act_encoder_equals_the_basic_encoder(bias, steps):
    common = dict(hidden_size=WIDTH, num_heads=2, filter_size=32, position_encoding="both",
                  max_relative_position=3)
    act = UniversalTransformerEncoder(num_rec_steps=1, recurrence_type="act", act_max_steps=steps, **common)
    basic = UniversalTransformerEncoder(num_rec_steps=steps, **common)
    for layer in (act, basic):
        layer.build((None, None, WIDTH))
    basic.block.set_weights(act.block.get_weights())
    act.act.halting_unit.bias.assign(np.array([bias], "float32"))
    x = np.random.default_rng(0).normal(size=(2, 5, WIDTH)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    out, ponder = act(x, padding_mask=mask, return_ponder_times=True)
    np.testing.assert_allclose(numpy_of(out)[mask], numpy_of(basic(x, padding_mask=mask))[mask], atol=1e-5)
    np.testing.assert_allclose(numpy_of(ponder), (steps + 1.0) * mask, atol=1e-5)


# -- the recurrence ----------------------------------------------------------------------------------------
def test_fixed_steps_equal_a_transformer_whose_layers_share_weights():
    steps = 3
    common = dict(hidden_size=WIDTH, num_heads=2, filter_size=32, max_relative_position=3)
    encoder = UniversalTransformerEncoder(num_rec_steps=steps, position_encoding="both", **common)
    decoder = UniversalTransformerDecoder(num_rec_steps=steps, position_encoding="both", **common)
    # Relative attention inside the stacks; the absolute and step signals are added by hand below.
    encoder_stack = TransformerEncoder(num_layers=steps, position_encoding="relative", **common)
    decoder_stack = TransformerDecoder(num_layers=steps, position_encoding="relative", **common)
    encoder.build((None, None, WIDTH))
    decoder.build((None, None, WIDTH), (None, None, WIDTH))
    encoder_stack.build((None, None, WIDTH))
    decoder_stack.build((None, None, WIDTH), (None, None, WIDTH))
    for block in encoder_stack.blocks:
        block.set_weights(encoder.block.get_weights())
    for block in decoder_stack.blocks:
        block.set_weights(decoder.block.get_weights())

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 7, WIDTH)).astype("float32")
    y = rng.normal(size=(2, 5, WIDTH)).astype("float32")
    mask = np.array([[1] * 5 + [0] * 2, [1] * 7], bool)

    def signal(length, step):
        return numpy_of(timing_signal(np.arange(length), WIDTH)) + numpy_of(timing_signal(np.array(step), WIDTH))

    h = x
    for step, block in enumerate(encoder_stack.blocks):
        h = block(h + signal(7, step), padding_mask=mask)
    memory = numpy_of(encoder(x, padding_mask=mask))
    np.testing.assert_allclose(memory, numpy_of(h), atol=1e-5)
    g = y
    for step, block in enumerate(decoder_stack.blocks):
        g = block(g + signal(5, step), memory, encoder_mask=mask)
    np.testing.assert_allclose(numpy_of(decoder(y, memory, encoder_mask=mask)), numpy_of(g), atol=1e-5)
    # The step signal matters: without it the shared block gives another result.
    h = x
    for block in encoder_stack.blocks:
        h = block(h + signal(7, 0), padding_mask=mask)
    assert not np.allclose(memory, numpy_of(h), atol=1e-3)


def test_one_block_is_shared_by_all_steps():
    model = tiny("basic", num_rec_steps=4)
    blocks = [w.path for w in model.weights if "/block/" in w.path]
    assert blocks and all("/block/" in p and "layer_" not in p for p in blocks)
    four = len(model.weights)
    assert len(tiny("basic", num_rec_steps=2).weights) == four  # Depth adds no weights.
    relative = [p for p in blocks if "relative" in p]
    assert relative and not [p for p in relative if "cross_attention" in p]


@pytest.mark.parametrize("position_encoding, transition_type", [("sinusoid", "ffn"), ("relative", "sepconv")])
def test_padding_changes_neither_outputs_nor_ponder_loss(position_encoding, transition_type):
    model = tiny("act", position_encoding, transition_type)
    f = features()
    padded = {"inputs": np.pad(f["inputs"], [[0, 0], [0, 3]]), "targets": np.pad(f["targets"], [[0, 0], [0, 2]])}
    plain, more = model(f, return_details=True), model(padded, return_details=True)
    valid = f["targets"] != 0
    np.testing.assert_allclose(numpy_of(more["logits"])[:, :6][valid], numpy_of(plain["logits"])[valid],
                               atol=1e-5)
    np.testing.assert_allclose(numpy_of(more["losses"]["act_loss"]), numpy_of(plain["losses"]["act_loss"]),
                               rtol=1e-6)
    for name in ("encoder_ponder_time", "decoder_ponder_time"):
        np.testing.assert_allclose(numpy_of(more["summaries"][name]), numpy_of(plain["summaries"][name]),
                                   rtol=1e-6)
    encoder_ponder = numpy_of(more["ponder_times"]["encoder"])
    np.testing.assert_allclose(encoder_ponder[:, :7], numpy_of(plain["ponder_times"]["encoder"]), atol=1e-5)
    assert not encoder_ponder[padded["inputs"] == 0].any()
    assert not numpy_of(more["ponder_times"]["decoder"])[padded["targets"] == 0].any()


def test_ponder_loss_is_the_weighted_mean_over_real_tokens():
    model = tiny("act", act_loss_weight=0.5)
    f = features()
    details = model(f, return_details=True)
    encoder = numpy_of(details["ponder_times"]["encoder"])
    decoder = numpy_of(details["ponder_times"]["decoder"])
    expected = 0.5 * (encoder[f["inputs"] != 0].mean() + decoder[f["targets"] != 0].mean())
    np.testing.assert_allclose(numpy_of(details["losses"]["act_loss"]), expected, rtol=1e-5)
    np.testing.assert_allclose(numpy_of(model.ponder_times(f["inputs"])), encoder, atol=1e-6)
    assert 1.0 < encoder[f["inputs"] != 0].min() and encoder.max() <= 5.0  # 1 <= N <= 4, 0 < R <= 1.
    assert len(set(np.floor(encoder[f["inputs"] != 0]))) >= 2  # The halting really varies by position.


def test_basic_recurrence_reports_fixed_ponder_times_and_no_loss():
    model = tiny("basic", num_rec_steps=3)
    f = features()
    details = model(f, return_details=True)
    assert details["losses"] == {} and details["summaries"] == {}
    np.testing.assert_array_equal(numpy_of(model.ponder_times(f["inputs"])), 3.0 * (f["inputs"] != 0))


# -- incremental decoding ----------------------------------------------------------------------------------
@pytest.mark.parametrize("recurrence_type, position_encoding, transition_type, act_type", [
    ("basic", "sinusoid", "ffn", "copy"), ("basic", "relative", "sepconv", "copy"),
    ("act", "sinusoid", "ffn", "copy"), ("act", "relative", "ffn", "copy"), ("act", "both", "sepconv", "copy"),
    ("act", "relative", "ffn", "basic")])
def test_cached_decoding_equals_the_full_pass(recurrence_type, position_encoding, transition_type, act_type):
    model = tiny(recurrence_type, position_encoding, transition_type, act_type=act_type)
    f = features()
    encoder_output, mask = model.encode(f["inputs"])
    decoder_inputs = numpy_of(shift_right(f["targets"]))
    full = numpy_of(model.decode(decoder_inputs, encoder_output, mask))
    for chunk in (1, 4):
        cache = model.init_cache(encoder_output, mask, 6)
        assert len(cache["self"]) == model.decoder.num_steps
        steps = []
        for start in range(0, 6, chunk):
            logits, cache = model.decode_step(decoder_inputs[:, start:start + chunk], cache, start)
            steps.append(numpy_of(logits))
        np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5, err_msg=f"chunk {chunk}")
    # Teacher forcing with the target mask agrees on every real target position.
    valid = f["targets"] != 0
    np.testing.assert_allclose(numpy_of(model(f))[valid], full[valid], atol=1e-5)
    if recurrence_type == "act":
        ponder = numpy_of(model(f, return_details=True)["ponder_times"]["decoder"])[valid]
        assert len(set(np.floor(ponder))) >= 2  # Positions halted at different steps.


def test_cached_greedy_search_equals_full_prefix_search():
    model = tiny("act", "relative")
    inputs = features()["inputs"]
    # Both compiled (eager, each is a Python loop of ops): the search as one graph, the full pass once per prefix.
    cached, _ = tf.function(lambda x: search.greedy(model, x, max_length=7), autograph=False)(inputs)
    decode = tf.function(lambda *args: model.decode(*args, training=False), reduce_retracing=True, autograph=False)
    uncached = search.greedy_full_prefix(model, inputs, 7, decode_fn=decode)
    np.testing.assert_array_equal(numpy_of(cached), numpy_of(uncached))


def test_beam_search_reorders_every_step_cache():
    model = tiny("act", "both", "sepconv")
    beam = tf.function(lambda x: search.beam_search(model, x, max_length=5, beam_size=2), autograph=False)
    ids, scores = beam(features()["inputs"])
    assert tuple(ids.shape) == (3, 2, 5) and np.isfinite(numpy_of(scores)).all()


# -- training ----------------------------------------------------------------------------------------------
def test_gradients_are_finite_and_reach_the_halting_units():
    model = tiny("act", "both", "sepconv", layer_prepostprocess_dropout=0.1, attention_dropout=0.1,
                 relu_dropout=0.1)
    f = features()
    with tf.GradientTape() as tape:
        details = model(f, training=True, return_details=True)
        loss = tf.reduce_mean(details["logits"] ** 2) + details["losses"]["act_loss"]
    grads = tape.gradient(loss, model.trainable_weights)
    for weight, grad in zip(model.trainable_weights, grads):
        assert grad is not None and np.isfinite(numpy_of(grad)).all(), weight.path
        if "halting_unit" in weight.path:
            assert np.abs(numpy_of(grad)).max() > 0, weight.path


def test_act_encoder_compiles_with_xla():
    encoder = UniversalTransformerEncoder(num_rec_steps=1, hidden_size=WIDTH, num_heads=2, filter_size=32,
                                          position_encoding="relative", max_relative_position=3,
                                          recurrence_type="act", act_max_steps=3)
    encoder.build((None, None, WIDTH))
    spread_halting(encoder.act)
    x = np.random.default_rng(0).normal(size=(2, 5, WIDTH)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1] * 5], bool)
    eager = encoder(x, padding_mask=mask, return_ponder_times=True)  # The unrolled loop.
    # training=False takes the early-exit while-loop, compiled here by XLA.
    compiled = tf.function(lambda a, m: encoder(a, padding_mask=m, training=False, return_ponder_times=True),
                           jit_compile=True, autograph=False)(x, mask)
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(numpy_of(b), numpy_of(a), atol=1e-5)


_MIRRORED_SCRIPT = textwrap.dedent("""
    import json, sys
    from t2t_relpos.training import strategy as strategy_lib
    strategy_lib.split_cpu(2)  # Before TensorFlow creates any tensor.
    from t2t_relpos import registry
    from t2t_relpos.problems.algorithmic import AlgorithmicIdentityBinary40
    from t2t_relpos.training.trainer import Trainer
    strategy = strategy_lib.make_strategy("mirrored")
    hp = registry.hparams("adaptive_universal_transformer_cpu").parse(
        "hidden_size=16,filter_size=32,num_heads=2,batch_size=64,max_length=8,act_max_steps=2")
    problem = AlgorithmicIdentityBinary40(train_length=6, eval_length=6, num_eval_examples=8)
    trainer = Trainer(problem, hp, sys.argv[1], strategy=strategy, seed=3, jit_compile=True, eval_every=0,
                      verbose=False)
    train_step = trainer._build_train_step()  # pylint: disable=protected-access
    batches = iter(trainer._train_dataset())  # pylint: disable=protected-access
    stats = [{k: float(v) for k, v in train_step(batches).items()} for _ in range(2)]
    print(json.dumps({"replicas": strategy.num_replicas_in_sync, "step": trainer.step, "stats": stats}))
""")


def test_training_step_under_mirrored_strategy_and_xla(tmp_path):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-c", _MIRRORED_SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2 and result["step"] == 2
    for stats in result["stats"]:
        assert all(np.isfinite(v) for v in stats.values()), stats
        assert stats["summary/act_loss"] > 0
        ponder = stats["summary/encoder_ponder_time"] / stats["tokens"]  # Token-weighted by the trainer.
        assert 1.0 < ponder <= 3.0


def test_adaptive_tiny_learns_to_copy(tmp_path):
    from t2t_relpos.problems.algorithmic import AlgorithmicIdentityBinary40  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training.trainer import Trainer  # pylint: disable=import-outside-toplevel

    # The set as it is, with a shorter warmup and a gentler peak learning rate for a 300-step run.
    hp = registry.hparams("adaptive_universal_transformer_cpu").parse(
        "batch_size=256,max_length=10,learning_rate_warmup_steps=100,learning_rate=0.5")
    problem = AlgorithmicIdentityBinary40(train_length=6, eval_length=6, num_eval_examples=64)
    trainer = Trainer(problem, hp, str(tmp_path), seed=5, eval_every=0, checkpoint_every=10 ** 6, verbose=False)
    assert isinstance(trainer.model, UniversalTransformer) and trainer.model.adaptive
    metrics = trainer.train(TRAIN_STEPS)  # Evaluated once, at the end (eval_every=0).
    assert metrics["accuracy"] >= 0.95, metrics
    assert 1.0 < metrics["encoder_ponder_time"] <= hp.act_max_steps + 1.0, metrics


# -- serialisation, precision, hparams, plot ---------------------------------------------------------------
def test_keras_file_round_trip(tmp_path):
    model = tiny("act", "both", "sepconv", norm_position="pre", act_type="basic")
    f = features()
    expected = model(f, return_details=True)
    path = os.path.join(tmp_path, "ut.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    assert isinstance(restored, UniversalTransformer) and restored.get_config() == model.get_config()
    got = restored(f, return_details=True)
    np.testing.assert_allclose(numpy_of(got["logits"]), numpy_of(expected["logits"]), atol=1e-6)
    np.testing.assert_allclose(numpy_of(got["losses"]["act_loss"]), numpy_of(expected["losses"]["act_loss"]),
                               atol=1e-6)


def test_layers_round_trip_in_a_functional_model(tmp_path):
    ids = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(VOCAB, WIDTH, mask_zero=True)(ids)
    x = UniversalTransformerEncoder(num_rec_steps=2, hidden_size=WIDTH, num_heads=2, filter_size=32,
                                    position_encoding="relative", max_relative_position=3,
                                    transition_type="sepconv", recurrence_type="act", act_max_steps=3)(x)
    classifier = keras.Model(ids, keras.layers.Dense(3)(keras.layers.GlobalAveragePooling1D()(x)))
    batch = np.array([[3, 4, 5, 0], [6, 7, 0, 0]])
    expected = numpy_of(classifier(batch))
    path = os.path.join(tmp_path, "classifier.keras")
    classifier.save(path)
    np.testing.assert_allclose(numpy_of(keras.models.load_model(path)(batch)), expected, atol=1e-6)
    for layer in (classifier.layers[2], SeparableConvTransition(WIDTH, 32, causal=True),
                  UniversalTransformerDecoder(num_rec_steps=2, hidden_size=WIDTH, num_heads=2, filter_size=32,
                                              recurrence_type="act", transition_type="sepconv")):
        config = layer.get_config()
        assert type(layer).from_config(config).get_config() == config


def test_mixed_precision_keeps_float32_logits_and_ponder_times():
    model = UniversalTransformer(VOCAB, VOCAB, hidden_size=WIDTH, filter_size=32, num_heads=2, num_rec_steps=2,
                                 recurrence_type="act", act_max_steps=3, dtype="mixed_bfloat16")
    model.build()
    details = model(features(), return_details=True)
    assert details["logits"].dtype == "float32" and details["ponder_times"]["encoder"].dtype == "float32"
    assert np.isfinite(numpy_of(details["logits"])).all()
    assert model.encoder.block.self_attention.compute_dtype == "bfloat16"


SETS = {
    "universal_transformer_tiny": ("basic", "sinusoid"),
    "universal_transformer_tiny_rel": ("basic", "relative"),
    "adaptive_universal_transformer_tiny": ("act", "sinusoid"),
    "adaptive_universal_transformer_tiny_rel": ("act", "relative"),
    "universal_transformer_base": ("basic", "sinusoid"),
    "universal_transformer_base_rel": ("basic", "relative"),
    "adaptive_universal_transformer_base": ("act", "sinusoid"),
    "adaptive_universal_transformer_base_rel": ("act", "relative"),
    "universal_transformer_cpu": ("basic", "sinusoid"),
    "universal_transformer_cpu_rel": ("basic", "relative"),
    "adaptive_universal_transformer_cpu": ("act", "sinusoid"),
    "adaptive_universal_transformer_cpu_rel": ("act", "relative"),
}


@pytest.mark.parametrize("name", sorted(SETS))
def test_hparams_sets(name):
    hp = registry.hparams(name)
    recurrence_type, position_encoding = SETS[name]
    assert hp.model == "universal_transformer" and registry.model(hp.model) is UniversalTransformer
    assert (hp.recurrence_type, hp.position_encoding, hp.transition_type) == (recurrence_type, position_encoding,
                                                                             "ffn")
    assert (hp.act_epsilon, hp.act_halting_bias_init, hp.act_loss_weight) == (0.01, 1.0, 0.01)
    # Every UT set is pre-norm, as tensor2tensor's (derived from its transformer_base_v3); tensor2tensor's sets
    # learn their step signal, the package's CPU sets keep the paper's sinusoid.
    assert hp.norm_position == "pre"
    assert hp.step_timing_signal_type == ("sinusoid" if "cpu" in name else "learned")
    # tensor2tensor's adaptive sets run its ACT (act_type "basic"); the package's CPU sets keep "copy".
    assert hp.act_type == ("basic" if recurrence_type == "act" and "cpu" not in name else "copy")
    if "base" in name:  # tensor2tensor's universal_transformer_base: transformer_base_v3 widened.
        assert (hp.hidden_size, hp.filter_size, hp.num_heads) == (1024, 4096, 16)
        assert hp.layer_prepostprocess_dropout == 0.3
        assert (hp.num_rec_steps, hp.act_max_steps) == (6, 12)
        assert hp.label_smoothing == 0.1 and hp.learning_rate_warmup_steps == 8000
        assert (hp.learning_rate, hp.optimizer_adam_beta2) == (2.0, 0.997)
        if position_encoding == "relative":  # The big model's relative setting (same shape).
            assert hp.max_relative_position == 8 and hp.heads_share_relative_embeddings
    elif "tiny" in name:  # tensor2tensor's universal_transformer_tiny: transformer_tiny's block, 8 steps.
        assert (hp.hidden_size, hp.filter_size, hp.num_heads) == (128, 512, 4)
        assert (hp.num_rec_steps, hp.act_max_steps) == (8, 4)
        assert (hp.learning_rate, hp.learning_rate_warmup_steps, hp.optimizer_adam_beta2) == (2.0, 8000, 0.997)
        if position_encoding == "relative":
            assert hp.max_relative_position == 16 and not hp.heads_share_relative_embeddings
    else:  # The package's CPU-sized sets: width 64, a short warm-up.
        assert (hp.hidden_size, hp.filter_size, hp.num_heads) == (64, 256, 4)
        assert (hp.num_rec_steps, hp.act_max_steps, hp.learning_rate_warmup_steps) == (8, 4, 400)
    model = UniversalTransformer.from_hparams(hp.parse("hidden_size=16,filter_size=32,num_heads=2"), VOCAB, VOCAB)
    assert model.encoder.recurrence_type == recurrence_type
    assert model.encoder.act_type == hp.act_type
    assert model.encoder.num_steps == (hp.act_max_steps if recurrence_type == "act" else hp.num_rec_steps)
    assert model.encoder.block.self_attention.max_relative_position == (
        hp.max_relative_position if position_encoding == "relative" else None)


@pytest.mark.parametrize("recurrence_type", ["basic", "act"])
def test_learned_step_signal_trains_and_decodes_incrementally(recurrence_type):
    """tensor2tensor's learned step signal: one trained vector per step, different steps different vectors, and
    cached decoding still equals the full pass."""
    model = tiny(recurrence_type, step_timing_signal_type="learned")
    feats = features()
    signal = model.encoder.step_signal
    assert tuple(signal.embeddings.shape) == ((4 if recurrence_type == "act" else 3), 16)
    x = np.zeros((1, 2, 16), "float32")
    assert not np.allclose(numpy_of(signal(x, step=0)), numpy_of(signal(x, step=1)))
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(feats, training=True))
    assert tape.gradient(loss, signal.embeddings) is not None
    inputs, targets = feats["inputs"], feats["targets"]
    full = numpy_of(model(feats, training=False))
    encoder_output, mask = model.encode(inputs)
    cache = model.init_cache(encoder_output, mask, targets.shape[1])
    ids = np.zeros((targets.shape[0], 1), "int32")
    for i in range(targets.shape[1]):
        logits, cache = model.decode_step(ids, cache, i)
        valid = targets[:, i] != 0  # With ACT, target padding does not run in the full pass.
        np.testing.assert_allclose(numpy_of(logits)[valid, 0], full[valid, i], rtol=1e-4, atol=1e-4)
        ids = targets[:, i:i + 1]


def test_ponder_heatmap_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    from t2t_relpos.decoding.ponder_plot import write_ponder_heatmap  # pylint: disable=import-outside-toplevel

    model = tiny("act")
    inputs = features()["inputs"]
    times = numpy_of(model.ponder_times(inputs))
    tokens = [[str(t) for t in row if t] for row in inputs]
    path = write_ponder_heatmap(tokens, times, os.path.join(tmp_path, "plots", "ponder.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="do not match"):
        write_ponder_heatmap(tokens, times[:2], os.path.join(tmp_path, "bad.png"))
