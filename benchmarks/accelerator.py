"""Decoding and training steps on the JAX backend, on whatever device JAX runs (a GPU where there is one).

    KERAS_BACKEND=jax python benchmarks/accelerator.py [--lengths 25,50,100,200] [--decode_models rel64,rel256,abs64]
                                                       [--batches 8,64] [--shapes small,base] [--reps N] [--quick]
                                                       [--parts decoding,training,attention,memory]
                                                       [--profile_dir DIR] [--json PATH]

The package's layers, models and search are written in `keras.ops` and import no TensorFlow, so they run
where only JAX is installed. This script measures there the three figures that `decoding.py` and
`train_step.py` measure with TensorFlow on the CPU:

- **Cached decoding per step** (issue 17, goal 3): `search.greedy` and `search.beam_search` (beam 4,
  alpha 0.6) over the models of `decoding.MODELS`, each whole search compiled once by `jax.jit` per (model,
  batch, length), random weights, end of sequence forbidden (`decoding.ForcedLength`) so every call decodes
  exactly `length` tokens. Reported: ms per step (call time / length) and the flatness ratio, ms/step at the
  longest length over the shortest. The cache is the model's own fixed-size buffers, written in place
  (`cache_ops`) and reordered between beams by a gather, as on the CPU.
- **Training step, relative / absolute** (goal 4): forward, backward and Adam update of the whole
  encoder-decoder (`Transformer.stateless_call`, the package's label-smoothed cross-entropy, Keras's Adam
  stateless, parameters and optimizer state donated), compiled by `jax.jit`, at `train_step.SHAPES` on
  `train_step.SETTINGS` batches. Float32 parameters and activations.
- **One attention layer, relative / absolute**: forward and backward of the training step's self-attention
  layer alone, jitted, on the same batches' shapes (`attention_timing`), to say how much of the step's
  difference the relative layers account for; also with the key term alone and the value term alone.
- **Kernels** (`--profile_dir`): each training step and attention layer above is also run under
  `jax.profiler` (`gpu_trace.py`), and the report gives per program the kernels the device ran per call and
  their total time, split into matrix products, reductions, gathers, loops and copies; the traces and each
  compiled program's text stay in the directory, to name the kernels that differ.
- **Attention memory at n = 2048**: XLA's temporary buffer size (`compiled.memory_analysis()`) of forward
  plus backward of one `RelationAwareMultiHeadAttention` layer (d 512, 8 heads, k = 16) against the same layer
  with relative positions off, batch 1; what the compiled program reserves, not a sampled peak.

Timing: every sample is one call followed by `block_until_ready`, wall clock; the configurations being
compared are interleaved over `--reps` repetitions after a compile-and-warm-up call, and medians are reported
with the spread (min-max) of the per-repetition ratios. Output: a markdown report on stdout, and the raw
figures as JSON where `--json` names a file.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("KERAS_BACKEND", "jax")

import common  # noqa: E402  pylint: disable=wrong-import-position
import decoding  # noqa: E402  pylint: disable=wrong-import-position
import train_step  # noqa: E402  pylint: disable=wrong-import-position


def _device():
    import jax  # pylint: disable=import-outside-toplevel

    dev = jax.devices()[0]
    return f"{dev.platform}: {getattr(dev, 'device_kind', dev)} (jax {jax.__version__})"


def _timed(fn, *args):
    """Seconds of one call, waiting for its results."""
    import jax  # pylint: disable=import-outside-toplevel

    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def _interleaved(calls, reps):
    """{name: [seconds per call, one per repetition]} for `calls` {name: (fn, args)}, waiting for each result
    (`common.interleaved_samples`: rotated order, samples of one repetition pairable)."""
    import jax  # pylint: disable=import-outside-toplevel

    fns = {name: (lambda fn=fn, args=args: jax.block_until_ready(fn(*args))) for name, (fn, args) in calls.items()}
    return common.interleaved_samples(fns, {"wall": time.perf_counter}, reps, warmup=0)["wall"]


def _greedy_agreement(model, greedy_fn, inputs):
    """Fraction of the cached greedy ids that are the argmax of the teacher-forced full pass over them.

    Greedy decoding is exact when every output token is the argmax of the full (uncached) decoder run on the
    outputs before it: one compiled pass checks all positions, where `search.greedy_full_prefix` would run
    the decoder op by op once per position (minutes on a GPU).
    """
    import jax  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel

    from t2t_relpos.models.transformer import shift_right  # pylint: disable=import-outside-toplevel

    ids = greedy_fn(inputs)

    @jax.jit
    def full_pass_argmax(inputs, ids):
        encoder_output, encoder_mask = model.encode(inputs, training=False)
        return model.decode(shift_right(ids), encoder_output, encoder_mask, training=False).argmax(-1)

    return float(np.mean(np.asarray(full_pass_argmax(inputs, ids)) == np.asarray(ids)))


def decoding_figures(models, batches, lengths, reps):
    """[{model, batch, search, length, ms_per_step, compile_s, greedy_agreement}].

    `greedy_agreement`: at the longest length, the fraction of cached greedy tokens that the teacher-forced
    full pass also predicts (`_greedy_agreement`), per (model, batch).
    """
    import jax  # pylint: disable=import-outside-toplevel

    from t2t_relpos.decoding import search  # pylint: disable=import-outside-toplevel

    rows = []
    for name in models:
        model = decoding.ForcedLength(decoding.build_model(name))
        for batch in batches:
            inputs = jax.numpy.asarray(decoding.source_ids(batch=batch))
            calls = {}
            for search_name in decoding.SEARCHES:
                for length in lengths:
                    # Each call is made in this iteration (`calls` is new for each batch); the defaults say so.
                    if search_name == "greedy":
                        fn = jax.jit(lambda x, n=length, model=model: search.greedy(model, x, n)[0])
                    else:
                        fn = jax.jit(lambda x, n=length, model=model: search.beam_search(
                            model, x, n, decoding.BEAM_SIZE, decoding.ALPHA)[0])
                    compile_s = _timed(fn, inputs)
                    print(f"compiled {name} batch {batch} {search_name} {length}: {compile_s:.1f} s", file=sys.stderr,
                          flush=True)
                    calls[(search_name, length)] = (fn, (inputs,))
                    rows.append({"model": name, "batch": batch, "search": search_name, "length": length,
                                 "compile_s": compile_s})
            agreement = _greedy_agreement(model, calls[("greedy", lengths[-1])][0], inputs)
            samples = _interleaved(calls, reps)
            for row in rows:
                key = (row["search"], row["length"])
                if row["model"] == name and row["batch"] == batch:
                    row["ms_per_step"] = [1000.0 * s / row["length"] for s in samples[key]]
                    row["greedy_agreement"] = agreement
            done = [r for r in rows if r["model"] == name and r["batch"] == batch]
            for (_, _, search_name), (ratio, low, high) in flatness(done).items():
                medians = " ".join(f"{statistics.median(r['ms_per_step']):.3f}" for r in done
                                   if r["search"] == search_name)
                print(f"decoding {name} batch {batch} {search_name}: ms/step {medians}, flatness {ratio:.2f} "
                      f"({low:.2f}-{high:.2f}), greedy agreement {agreement:.3f}", file=sys.stderr, flush=True)
    return rows


def flatness(rows):
    """{(model, batch, search): (median ratio longest/shortest, min, max)} over the repetitions."""
    out = {}
    for key in sorted({(r["model"], r["batch"], r["search"]) for r in rows}):
        group = sorted((r for r in rows if (r["model"], r["batch"], r["search"]) == key),
                       key=lambda r: r["length"])
        ratios = [b / a for a, b in zip(group[0]["ms_per_step"], group[-1]["ms_per_step"])]
        out[key] = (statistics.median(ratios), min(ratios), max(ratios))
    return out


def make_train_step(hparams):
    """A jitted `(state, batch) -> (state, loss)` of a fresh model, and its initial state and parameter count."""
    import jax  # pylint: disable=import-outside-toplevel
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos.models import Transformer  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import losses  # pylint: disable=import-outside-toplevel

    keras.utils.set_random_seed(1)
    model = Transformer.from_hparams(hparams, train_step.VOCAB, train_step.VOCAB)
    model.build()
    optimizer = keras.optimizers.Adam(learning_rate=1e-4, beta_1=hparams.optimizer_adam_beta1,
                                      beta_2=hparams.optimizer_adam_beta2,
                                      epsilon=hparams.optimizer_adam_epsilon)
    optimizer.build(model.trainable_variables)

    def loss_fn(trainable, non_trainable, batch):
        logits, non_trainable = model.stateless_call(trainable, non_trainable, batch, training=True)
        loss_sum, tokens = losses.smoothed_cross_entropy(logits, batch["targets"], hparams.label_smoothing)
        return loss_sum / tokens, non_trainable

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def step(state, batch):
        trainable, non_trainable, optimizer_vars = state
        (loss, non_trainable), grads = grad_fn(trainable, non_trainable, batch)
        trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads, trainable)
        return (trainable, non_trainable, optimizer_vars), loss

    state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables])
    params = sum(int(v.size) for v in state[0])
    return jax.jit(step, donate_argnums=0), state, params


def training_figures(shapes, settings, reps, profile_dir=None):
    """[{shape, setting, ms: {absolute, relative}, ratios, params, loss}] with the two models interleaved.

    With `profile_dir`, each step's kernels are also traced (`_profile`, under the row's `profile`).
    """
    import jax  # pylint: disable=import-outside-toplevel

    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    rows = []
    for shape in shapes:
        for setting in settings:
            batch = {k: jax.numpy.asarray(v) for k, v in train_step.make_batch(setting).items()}
            steps, states, params, samples, losses = {}, {}, {}, {}, {}
            for kind, set_name in (("absolute", "transformer_base"), ("relative", "transformer_base_rel")):
                hparams = registry.hparams(set_name).override(**train_step.SHAPES[shape])
                steps[kind], states[kind], params[kind] = make_train_step(hparams)
                for _ in range(2):  # Compile, then one warm step.
                    states[kind], loss = steps[kind](states[kind], batch)
                jax.block_until_ready(loss)
                samples[kind] = []
            for _ in range(reps):
                for kind in samples:
                    start = time.perf_counter()
                    states[kind], loss = steps[kind](states[kind], batch)
                    jax.block_until_ready(loss)
                    samples[kind].append(time.perf_counter() - start)
                    losses[kind] = float(loss)
            ratios = [r / a for a, r in zip(samples["absolute"], samples["relative"])]
            row = {"shape": shape, "setting": setting, "params": params, "last_loss": losses,
                   "ms": {k: [1000.0 * s for s in v] for k, v in samples.items()}, "ratios": ratios}
            if profile_dir:
                # The steps donate their state: each traced call takes the state the one before returned.
                # `_profile` makes every call before this iteration ends (and deletes steps and states).
                def run(kind, batch=batch, steps=steps, states=states):
                    states[kind], loss = steps[kind](states[kind], batch)
                    return loss

                row["profile"] = _profile(
                    {kind: (lambda kind=kind: run(kind),
                            lambda kind=kind, batch=batch, steps=steps, states=states: steps[kind].lower(
                                states[kind], batch)) for kind in states}, profile_dir, f"step_{shape}_{setting}")
            rows.append(row)
            print(f"training {shape}/{setting}: done", file=sys.stderr, flush=True)
            del steps, states
    return rows


ATTENTION_KINDS = {  # kind: (max_relative_position, use_relative_keys, use_relative_values)
    "absolute": (None, True, True),
    "relative": (16, True, True),
    "keys only": (16, True, False),
    "values only": (16, False, True),
}


def attention_timing(settings, reps, width=512, heads=8, profile_dir=None):
    """[{setting, ms: {kind: [...]}, ratios, profile}]: forward + backward of one self-attention layer, jitted.

    The layer of the training step alone (`RelationAwareMultiHeadAttention`, d 512, 8 heads, k = 16) in the
    `ATTENTION_KINDS` variants (no relations, both relative terms, the key term alone, the value term alone), on
    `[rows, longest, d]` inputs of `train_step.SETTINGS`, padding masked: how much of the step's difference one
    relative layer accounts for, and which term costs what. With `profile_dir`, each variant's kernels are also
    traced (`gpu_trace.kernel_times`) and its compiled program written there as text.
    """
    import jax  # pylint: disable=import-outside-toplevel
    import keras  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel

    from t2t_relpos.layers import RelationAwareMultiHeadAttention  # pylint: disable=import-outside-toplevel

    rows = []
    for setting in settings:
        ids = train_step.make_batch(setting)["inputs"]
        x = jax.numpy.asarray(np.random.default_rng(0).normal(size=ids.shape + (width,)).astype("float32"))
        mask = jax.numpy.asarray(ids != 0)
        calls = {}
        for kind, (max_relative_position, keys, values) in ATTENTION_KINDS.items():
            keras.utils.set_random_seed(1)
            layer = RelationAwareMultiHeadAttention(num_heads=heads, key_dim=width // heads,
                                                    max_relative_position=max_relative_position,
                                                    use_relative_keys=keys, use_relative_values=values)
            layer.build(x.shape)
            weights = [v.value for v in layer.trainable_variables]

            def loss(weights, x, mask, layer=layer):
                y, _ = layer.stateless_call(weights, [], x, query_mask=mask, value_mask=mask)
                return (y * y).sum()

            fn = jax.jit(jax.grad(loss, argnums=(0, 1)))
            _timed(fn, weights, x, mask)
            calls[kind] = (fn, (weights, x, mask))
        samples = _interleaved(calls, reps)
        row = {"setting": setting, "ms": {kind: [1000.0 * t for t in v] for kind, v in samples.items()},
               "ratios": [r / a for a, r in zip(samples["absolute"], samples["relative"])]}
        if profile_dir:
            row["profile"] = _profile({kind: (lambda fn=fn, args=args: fn(*args),
                                              lambda fn=fn, args=args: fn.lower(*args))
                                       for kind, (fn, args) in calls.items()}, profile_dir, f"attention_{setting}")
        rows.append(row)
        print(f"attention {setting}: done", file=sys.stderr, flush=True)
    return rows


def _profile(calls, profile_dir, what, trace_calls=5):
    """{kind: gpu_trace summary} of `calls` {kind: (run, lower)}: `run()` makes one call, `lower()` lowers the
    same program, whose compiled text is written beside the traces."""
    import gpu_trace  # pylint: disable=import-outside-toplevel

    out = {}
    for kind, (run, lower) in calls.items():
        slug = f"{what}_{kind.replace(' ', '_')}"
        out[kind] = gpu_trace.kernel_times(run, (), trace_calls, os.path.join(profile_dir, slug))
        with open(os.path.join(profile_dir, f"{slug}.hlo.txt"), "w", encoding="utf-8") as f:
            f.write(lower().compile().as_text())
        print(f"profiled {slug}: {out[kind]['kernels']:.0f} kernels, {out[kind]['us']:.0f} us per call",
              file=sys.stderr, flush=True)
    return out


def attention_memory(length=2048, width=512, heads=8, k=16):
    """{relative, absolute: XLA temp bytes of forward + backward of one attention layer at `length`}."""
    import jax  # pylint: disable=import-outside-toplevel
    import keras  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel

    from t2t_relpos.layers import RelationAwareMultiHeadAttention  # pylint: disable=import-outside-toplevel

    out = {}
    x = jax.numpy.asarray(np.random.default_rng(0).normal(size=(1, length, width)).astype("float32"))
    for kind, max_relative_position in (("relative", k), ("absolute", None)):
        keras.utils.set_random_seed(1)
        layer = RelationAwareMultiHeadAttention(num_heads=heads, key_dim=width // heads,
                                                max_relative_position=max_relative_position)
        layer.build((1, length, width))
        weights = [v.value for v in layer.trainable_variables]

        def loss(weights, x, layer=layer):
            y, _ = layer.stateless_call(weights, [], x)
            return (y * y).sum()

        compiled = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(weights, x).compile()
        analysis = compiled.memory_analysis()
        out[kind] = int(analysis.temp_size_in_bytes) if analysis is not None else None
    out["length"] = length
    return out


def report(args, device, decode_rows, train_rows, memory, seconds, attention_rows=()):
    lines = [f"`{common.command_line()}` — {common.today()}, took {seconds / 60:.1f} min.  ",
             f"Device: {device}; host {platform.machine()}, Python {platform.python_version()}, "
             f"Keras {common._version('keras')}.", ""]  # pylint: disable=protected-access
    if decode_rows:
        lengths = sorted({r["length"] for r in decode_rows})
        flat = flatness(decode_rows)
        headers = ["model", "batch", "search"] + [f"ms/step at {n}" for n in lengths] + [
            f"{lengths[-1]} / {lengths[0]} (min-max)", "greedy = full prefix"]
        table = []
        for (model, batch, search_name), (ratio, low, high) in flat.items():
            cells = [model, str(batch), decoding.SEARCH_LABELS[search_name]]
            for n in lengths:
                row = next(r for r in decode_rows if (r["model"], r["batch"], r["search"], r["length"])
                           == (model, batch, search_name, n))
                cells.append(f"{statistics.median(row['ms_per_step']):.3f}")
            cells.append(f"**{ratio:.2f}** ({low:.2f}-{high:.2f})")
            cells.append(f"{row['greedy_agreement']:.3f}")
            table.append(cells)
        lines += [common.markdown_table(headers, table), ""]
    if train_rows:
        headers = ["shape", "batch", "absolute ms", "relative ms", "relative / absolute (min-max)"]
        table = []
        for row in train_rows:
            ratios = row["ratios"]
            table.append([row["shape"], row["setting"], f"{statistics.median(row['ms']['absolute']):.2f}",
                          f"{statistics.median(row['ms']['relative']):.2f}",
                          f"**{statistics.median(ratios):.3f}** ({min(ratios):.3f}-{max(ratios):.3f})"])
        lines += [common.markdown_table(headers, table), ""]
    if attention_rows:
        kinds = list(attention_rows[0]["ms"])
        headers = ["one attention layer, forward + backward"] + [f"{kind} ms" for kind in kinds] + [
            "relative / absolute (min-max)"]
        table = []
        for row in attention_rows:
            ratios = row["ratios"]
            table.append([row["setting"]] + [f"{statistics.median(row['ms'][kind]):.3f}" for kind in kinds] + [
                f"**{statistics.median(ratios):.3f}** ({min(ratios):.3f}-{max(ratios):.3f})"])
        lines += [common.markdown_table(headers, table), ""]
    profiles = [(f"attention, {row['setting']}", row["profile"]) for row in attention_rows if "profile" in row]
    profiles += [(f"step, {row['shape']}, {row['setting']}", row["profile"]) for row in train_rows
                 if "profile" in row]
    if profiles:
        lines += [profile_table(profiles), ""]
    if memory:
        rel, absolute = memory["relative"], memory["absolute"]
        lines.append(f"Attention layer at n = {memory['length']} (d 512, 8 heads, forward + backward): "
                     f"XLA temporary buffers "
                     f"{rel / 2**20:.1f} MiB relative, {absolute / 2**20:.1f} MiB absolute, "
                     f"ratio **{rel / absolute:.3f}**.")
    return "\n".join(lines)


def profile_table(profiles):
    """Markdown: per traced program and kind, kernels and device time per call, by class (`gpu_trace`)."""
    import gpu_trace  # pylint: disable=import-outside-toplevel

    classes = ("matmul", "reduce", "gather", "loop", "copy", "other")
    headers = ["program", "kind", "kernels", "device us"] + [f"{c} us (n)" for c in classes]
    table = []
    for what, by_kind in profiles:
        for kind, summary in by_kind.items():
            if not summary["device"]:
                table.append([what, kind, "no device events in the trace", ""] + [""] * len(classes))
                continue
            split = gpu_trace.by_class(summary)
            table.append([what, kind, f"{summary['kernels']:.0f}", f"{summary['us']:.0f}"] + [
                f"{split[c][0]:.0f} ({split[c][1]:.0f})" if c in split else "" for c in classes])
    return common.markdown_table(headers, table)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--lengths", default="25,50,100,200")
    parser.add_argument("--decode_models", default="rel64,rel256,abs64")
    parser.add_argument("--batches", default="8,64")
    parser.add_argument("--shapes", default="small,base")
    parser.add_argument("--settings", default="mixed,long")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--parts", default="decoding,training,attention,memory")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check the script runs")
    parser.add_argument("--json", default=None)
    parser.add_argument("--profile_dir", default=None,
                        help="also trace the kernels of the training steps and attention layers (a GPU) here")
    args = parser.parse_args(argv)
    import keras  # pylint: disable=import-outside-toplevel

    if keras.backend.backend() != "jax":
        sys.exit("error: run with KERAS_BACKEND=jax (this benchmark compiles with jax.jit)")
    parts = args.parts.split(",")
    began = time.time()
    device = _device()
    print(f"device: {device}", file=sys.stderr, flush=True)
    lengths = [int(n) for n in args.lengths.split(",")]
    if args.quick:
        train_step.SHAPES["small"] = {"hidden_size": 32, "filter_size": 64, "num_heads": 4,
                                      "num_encoder_layers": 1, "num_decoder_layers": 1}
        train_step.SETTINGS["mixed"] = (8, 5, 9)
    decode_rows = (decoding_figures(args.decode_models.split(","), [int(b) for b in args.batches.split(",")],
                                    lengths, args.reps) if "decoding" in parts else [])
    if args.profile_dir:
        os.makedirs(args.profile_dir, exist_ok=True)
    train_rows = (training_figures(args.shapes.split(","), args.settings.split(","), args.reps, args.profile_dir)
                  if "training" in parts else [])
    attention_rows = (attention_timing(args.settings.split(","), args.reps, profile_dir=args.profile_dir)
                      if "attention" in parts else [])
    memory = (attention_memory(length=64 if args.quick else 2048) if "memory" in parts else None)
    text = report(args, device, decode_rows, train_rows, memory, time.time() - began, attention_rows)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"device": device, "decoding": decode_rows, "training": train_rows,
                       "attention": attention_rows, "memory": memory, "report": text}, f, indent=1)


if __name__ == "__main__":
    main()
