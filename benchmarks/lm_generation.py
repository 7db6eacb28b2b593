"""What long contexts cost a decoder-only language model: cached generation, and a training step's memory.

    .venv/bin/python benchmarks/lm_generation.py [--parts generation,memory] [--models transformer_rel,...]
        [--contexts 128,1024] [--new_tokens 64] [--reps 7] [--lengths 2048,4096] [--memory_reps 3]
        [--threads 1] [--memory_fraction 0.5]

Untrained models of the `benchmarks/lm_length.py` sets (`transformer_lm_cpu_rel`, `transformer_lm_cpu`,
`universal_transformer_lm_cpu_rel`: 4 layers or steps, width 128, 4 heads of 32; the vocabulary of character-level
Tiny Shakespeare, 68 ids); what is measured depends on the shapes, not the weights.

- generation: `decoding.generation.continue_prompts` (greedy, the model's caches), the whole call in one
  `tf.function` traced before timing, on one prompt of C random characters for each C of `--contexts`. The call
  writes the prompt into the caches in one step, then generates token by token; a generated token's cost is the
  difference of two calls, `(T(C, 8 + N) - T(C, 8)) / N` with N = `--new_tokens` (the prompt's pass, the same in
  both, cancels), per repetition, median of `--reps` interleaved repetitions. Tokens/s = 1 / that. The end of
  text is forbidden (`decoding.ForcedLength`'s -1e9), so every call generates all its tokens. The ratio of the
  longest context's per-token cost to the shortest's is the median of the per-repetition ratios (IQR beside it).
- memory: one training step (forward, loss, gradients of every weight; no optimizer update) of the relative
  decoder-only Transformer at batch 1 and length n, against the same model whose self-attention materialises the
  `[n, n, d]` relation tables (`benchmarks/attention.py`'s naive layer, shared by the heads as in tensor2tensor,
  causal; checked equal to ours with shared tables first) and the sinusoid model (no relative terms). Peak: the
  allocator's peak in a step above what was allocated before it (`common.peak_memory_bytes`), median (and range)
  of `--memory_reps` steps after one warm-up step; a fresh process per (n, model). The naive form is skipped
  where its estimate, (2 x layers + 4) tables of n x n x d floats, exceeds `--memory_fraction` of the memory
  available.

Workers run TensorFlow on `--threads` threads; pin the script to a core with `taskset -c 0`.
"""

import argparse
import contextlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import common  # noqa: E402  pylint: disable=wrong-import-position
import lm_length  # noqa: E402  pylint: disable=wrong-import-position

VOCAB = 68  # languagemodel_shakespeare_characters: its characters and the reserved ids.
FIRST_NEW = 8  # Tokens of the shorter call: its difference to the longer one is the generated tokens' cost.
GOAL_RATIO = 1.5  # Per-token cost at the longest context at most this times that at the shortest.
MEMORY_CONFIGS = ("sinusoid", "relative", "naive")
MEMORY_LABELS = {"sinusoid": "sinusoid (transformer_lm_cpu)", "relative": "relative, ours (transformer_lm_cpu_rel)",
                 "naive": "relative, naive [n, n, d] tables"}
MIB, GIB = 2**20, 2**30


def build(hparams_set, overrides="", seed=1):
    """The untrained decoder-only model of `hparams_set` (with `overrides`), built, with seeded weights."""
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    hparams = registry.hparams(hparams_set)
    if overrides:
        hparams.parse(overrides)
    keras.utils.set_random_seed(seed)
    model = registry.model(hparams.model).from_hparams(hparams, None, VOCAB)
    model.build()
    return model, hparams


# -- generation ------------------------------------------------------------------------------------------------
def _no_end_of_text(model):
    """`model` as `continue_prompts` reads it, with the end of text forbidden (`decoding.ForcedLength`)."""
    import decoding  # pylint: disable=import-outside-toplevel

    class NoEndOfText(decoding.ForcedLength):
        decoder_only = True

        def __init__(self, model):
            super().__init__(model)
            self.target_vocab_size = model.target_vocab_size

        def init_cache(self, encoder_output, encoder_mask, max_length, batch_size=None):  # pylint: disable=arguments-differ
            return self.model.init_cache(encoder_output, encoder_mask, max_length, batch_size=batch_size)

    return NoEndOfText(model)


def measure_generation(model_name, contexts, new_tokens, reps, min_sample_s=0.0):
    """{"times": {context: {tokens: {"wall": [s per rep], "cpu": [...]}}}, "parameters"} of one model."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from t2t_relpos.decoding import generation  # pylint: disable=import-outside-toplevel

    model, _ = build(lm_length.MODELS[model_name])
    wrapped = _no_end_of_text(model)
    rng = np.random.default_rng(0)
    fns = {}
    for context in contexts:
        prompt = tf.constant(rng.integers(3, VOCAB, size=(1, context)), tf.int32)
        for tokens in (FIRST_NEW, FIRST_NEW + new_tokens):
            call = tf.function(lambda p, n=tokens: generation.continue_prompts(wrapped, p, n)[0], autograph=False)
            ids = call(prompt).numpy()  # Traced here, not in the timing.
            if ids.shape != (1, 1, tokens) or ids.min() < 2:
                raise AssertionError(f"{model_name}, context {context}: {tokens} tokens asked, got {ids.tolist()}")
            fns[f"{context}:{tokens}"] = lambda call=call, prompt=prompt: call(prompt).numpy()
    samples = common.interleaved_samples(fns, {"wall": time.perf_counter, "cpu": time.process_time}, reps=reps,
                                         warmup=1, min_sample_s=min_sample_s)
    times = {}
    for name in fns:
        context, tokens = (int(v) for v in name.split(":"))
        times.setdefault(str(context), {})[str(tokens)] = {clock: samples[clock][name] for clock in samples}
    return {"model": model_name, "parameters": int(model.count_params()), "times": times}


def per_token(result, context, new_tokens, clock="wall"):
    """Seconds per generated token at `context`, one figure per repetition: (T(8 + N) - T(8)) / N."""
    by_tokens = result["times"][str(context)]
    return [(long - short) / new_tokens for short, long in zip(by_tokens[str(FIRST_NEW)][clock],
                                                               by_tokens[str(FIRST_NEW + new_tokens)][clock])]


def generation_table(results, contexts, new_tokens):
    shortest, longest = min(contexts), max(contexts)
    headers = (["model", "clock"] + [f"ms/token @ {c}" for c in contexts] + [f"tokens/s @ {c}" for c in contexts]
               + [f"whole call ms @ {c}" for c in contexts] + [f"per token {longest} / {shortest} (IQR)"])
    rows = []
    for result in results:
        if "error" in result:
            rows.append([result.get("model", "?"), f"error: {result['error']}"] + [""] * (len(headers) - 2))
            continue
        for clock in ("wall", "cpu"):
            costs = {c: per_token(result, c, new_tokens, clock) for c in contexts}
            whole = {c: statistics.median(result["times"][str(c)][str(FIRST_NEW + new_tokens)][clock])
                     for c in contexts}
            paired = common.paired_ratios(costs[longest], costs[shortest])
            rows.append([result["model"], clock] + [f"{statistics.median(costs[c]) * 1e3:.2f}" for c in contexts]
                        + [f"{1 / statistics.median(costs[c]):.0f}" for c in contexts]
                        + [f"{whole[c] * 1e3:.0f}" for c in contexts]
                        + [f"{paired['median']:.2f}x ({paired['low']:.2f}-{paired['high']:.2f})"])
    return common.markdown_table(headers, rows, align="ll" + "r" * (len(headers) - 2))


def generation_verdict(results, contexts, new_tokens):
    shortest, longest = min(contexts), max(contexts)
    parts = []
    for result in results:
        if "error" in result:
            parts.append(f"{result.get('model', '?')}: not measured")
            continue
        ratio = common.paired_ratios(per_token(result, longest, new_tokens), per_token(result, shortest, new_tokens))
        judged = "met" if ratio["median"] <= GOAL_RATIO else "MISSED"
        parts.append(f"{result['model']} {ratio['median']:.2f}x, {judged}")
    return (f"Goal: a generated token's cost with {longest} tokens of context at most {GOAL_RATIO}x that with "
            f"{shortest} (wall clock): " + "; ".join(parts) + ".")


# -- memory ----------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def naive_self_attention():
    """Models built inside get `attention.py`'s naive `[n, n, d]` layer as the relative self-attention of their
    Transformer blocks (tables shared by the heads; the block's kernel initializer, widths and k)."""
    import attention  # pylint: disable=import-outside-toplevel
    from t2t_relpos.layers import transformer_block  # pylint: disable=import-outside-toplevel

    naive = attention._naive_class()  # pylint: disable=protected-access
    owner = next(c for c in transformer_block.TransformerDecoderBlock.__mro__ if "_attention" in vars(c))
    original = owner._attention  # pylint: disable=protected-access

    def patched(self, name, relative):
        if not relative or self.max_relative_position is None:
            return original(self, name, relative)
        return naive(num_heads=self.num_heads, key_dim=self.key_dim, value_dim=self.value_dim,
                     output_dim=self.hidden_size, max_relative_position=self.max_relative_position,
                     kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy, name=name)

    owner._attention = patched  # pylint: disable=protected-access
    try:
        yield
    finally:
        owner._attention = original  # pylint: disable=protected-access


def memory_model(config):
    """(model, hparams) of a memory configuration."""
    if config == "sinusoid":
        return build(lm_length.MODELS["transformer"])
    if config == "relative":
        return build(lm_length.MODELS["transformer_rel"])
    with naive_self_attention():
        return build(lm_length.MODELS["transformer_rel"])


def training_step(model):
    """A compiled `ids -> (loss, gradients)`: cross-entropy of the model's next-character logits, dense gradients
    of every trainable weight (as an optimizer would read them)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    @tf.function(autograph=False)
    def step(ids):
        with tf.GradientTape() as tape:
            logits = model({"targets": ids}, training=True)
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(ids, logits, from_logits=True))
        grads = tape.gradient(loss, model.trainable_variables)
        return loss, [tf.convert_to_tensor(g) for g in grads]

    return step


def check_naive_model(length=40, atol=1e-4):
    """AssertionError unless the naive model gives the logits and gradients of ours with shared tables (the same
    weights), causal attention included."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    ours, _ = build(lm_length.MODELS["transformer_rel"], "heads_share_relative_embeddings=true")
    with naive_self_attention():
        naive, _ = build(lm_length.MODELS["transformer_rel"], "heads_share_relative_embeddings=true", seed=2)
    kinds = {type(block.self_attention).__name__ for block in naive.decoder.blocks}
    if kinds != {"NaiveRelativeAttention"}:
        raise AssertionError(f"the naive model's self-attention is {kinds}, not the naive form")
    naive.set_weights(ours.get_weights())
    ids = tf.constant(np.random.default_rng(1).integers(3, VOCAB, size=(2, length)), tf.int32)
    got = [[m({"targets": ids})] + training_step(m)(ids)[1] for m in (ours, naive)]
    for index, (a, b) in enumerate(zip(*got)):
        a, b = np.asarray(a), np.asarray(b)
        error = float(np.max(np.abs(a - b))) / max(1.0, float(np.max(np.abs(a))))
        if error > atol:
            raise AssertionError(f"the naive model differs from ours in {'logits' if index == 0 else 'a gradient'} "
                                 f"{index}: {error:.2e} (relative)")


def measure_memory(config, length, memory_reps=3, time_reps=2):
    """{"memory_bytes" (median), "memory_min", "memory_max", "step_s" (median), "parameters"} of one training step
    at batch 1 and `length`."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    model, _ = memory_model(config)
    step = training_step(model)
    ids = tf.constant(np.random.default_rng(0).integers(3, VOCAB, size=(1, length)), tf.int32)
    float(step(ids)[0])  # Traced (and its buffers first allocated) outside the measurement.
    memory = [common.peak_memory_bytes(lambda: step(ids)) for _ in range(memory_reps)]
    seconds = []
    for _ in range(time_reps):
        began = time.perf_counter()
        float(step(ids)[0])
        seconds.append(time.perf_counter() - began)
    return {"memory_bytes": statistics.median(memory), "memory_min": min(memory), "memory_max": max(memory),
            "step_s": statistics.median(seconds), "parameters": int(model.count_params())}


def naive_estimate_bytes(length, layers=4, depth=32):
    """The naive step's rough peak: (2 x layers + 4) `[n, n, d]` float32 tables (each layer keeps a^K and a^V
    for the backward pass; a few more live while it runs)."""
    return (2 * layers + 4) * length * length * depth * 4


def memory_table(results):
    headers = ["n", "model", "peak MiB (range)", "/ ours", "/ sinusoid", "step s"]
    rows = []
    for length, by_config in results.items():
        ours = by_config.get("relative", {}).get("memory_bytes")
        sinusoid = by_config.get("sinusoid", {}).get("memory_bytes")
        for config in MEMORY_CONFIGS:
            r = by_config.get(config, {})
            if "memory_bytes" not in r:
                rows.append([str(length), MEMORY_LABELS[config], r.get("error", "not measured"), "", "", ""])
                continue
            rows.append([str(length), MEMORY_LABELS[config],
                         f"{r['memory_bytes'] / MIB:.0f} ({r['memory_min'] / MIB:.0f}-{r['memory_max'] / MIB:.0f})",
                         f"{r['memory_bytes'] / ours:.2f}x" if ours else "",
                         f"{r['memory_bytes'] / sinusoid:.2f}x" if sinusoid else "", f"{r['step_s']:.2f}"])
    return common.markdown_table(headers, rows, align="rlrrrr")


def _measure_memory_at(length, args):
    available = common.available_memory_bytes()
    out = {}
    for config in MEMORY_CONFIGS:
        if config == "naive" and available and naive_estimate_bytes(length) > args.memory_fraction * available:
            out[config] = {"error": f"not measured: estimated ~{naive_estimate_bytes(length) / GIB:.1f} GiB, over "
                                    f"{args.memory_fraction:g} of the {available / GIB:.1f} GiB available",
                           "estimate_bytes": naive_estimate_bytes(length)}
            continue
        print(f"memory: n = {length}, {config} ...", file=sys.stderr, flush=True)
        out[config] = common.run_worker([os.path.abspath(__file__), "--worker", f"memory:{config}:{length}",
                                         "--memory_reps", str(args.memory_reps)])
        if "error" in out[config] and config == "naive":
            out[config]["estimate_bytes"] = naive_estimate_bytes(length)
    return out


# -- the script ------------------------------------------------------------------------------------------------
def _parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--parts", default="generation,memory")
    parser.add_argument("--models", default=",".join(lm_length.MODELS), help="generation's models")
    parser.add_argument("--contexts", default="128,1024", help="prompt lengths (tokens)")
    parser.add_argument("--new_tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=7, help="interleaved repetitions (median)")
    parser.add_argument("--lengths", default="2048,4096", help="memory: sequence lengths")
    parser.add_argument("--memory_reps", type=int, default=3)
    parser.add_argument("--memory_fraction", type=float, default=0.5,
                        help="skip the naive form where its estimate exceeds this share of the available memory")
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow threads in the workers (0: default)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    if not parts or any(p not in ("generation", "memory") for p in parts):
        raise SystemExit(f"error: --parts={args.parts}: generation, memory or both")
    unknown = [m for m in args.models.split(",") if m not in lm_length.MODELS]
    if unknown:
        raise SystemExit(f"error: --models: unknown {', '.join(unknown)}; known: {', '.join(lm_length.MODELS)}")
    lm_length.int_list(args.contexts, "contexts")
    lm_length.int_list(args.lengths, "lengths")
    if args.new_tokens < 1 or args.reps < 1:
        raise SystemExit("error: --new_tokens and --reps must be >= 1")
    return args


def _worker(args):
    kind, _, rest = args.worker.partition(":")
    if kind == "generation":
        common.emit_result(measure_generation(rest, lm_length.int_list(args.contexts, "contexts"), args.new_tokens,
                                              args.reps))
    elif kind == "check":
        check_naive_model()
        common.emit_result({"naive_matches": True})
    else:
        config, length = rest.split(":")
        common.emit_result(measure_memory(config, int(length), args.memory_reps))


def main(argv=None):
    args = _parse_args(argv)
    if args.threads:
        os.environ.update(TF_NUM_INTRAOP_THREADS=str(args.threads), TF_NUM_INTEROP_THREADS=str(args.threads))
    if args.worker:
        _worker(args)
        return 0
    began = time.perf_counter()
    lines = [f"`{common.command_line()}` — {common.today()}", f"Machine: {common.machine_description()}. "
             f"Code: {common.code_version()}. TensorFlow on {args.threads or 'all'} thread(s).", ""]
    failed = False
    if "generation" in args.parts.split(","):
        contexts = lm_length.int_list(args.contexts, "contexts")
        results = []
        for model in args.models.split(","):
            print(f"generation: {model} ...", file=sys.stderr, flush=True)
            result = common.run_worker([os.path.abspath(__file__), "--worker", f"generation:{model}", "--contexts",
                                        args.contexts, "--new_tokens", str(args.new_tokens), "--reps",
                                        str(args.reps)])
            results.append(dict(result, model=model))
            failed |= "error" in result
        lines += [f"### Cached generation, greedy, one prompt of {' or '.join(map(str, contexts))} tokens",
                  "", f"ms/token: (T(prompt, {FIRST_NEW} + {args.new_tokens}) - T(prompt, {FIRST_NEW})) / "
                  f"{args.new_tokens}, median of {args.reps} interleaved repetitions; whole call: T(prompt, "
                  f"{FIRST_NEW + args.new_tokens}), the prompt's pass included.", "",
                  generation_table(results, contexts, args.new_tokens), "",
                  generation_verdict(results, contexts, args.new_tokens), ""]
    if "memory" in args.parts.split(","):
        check = common.run_worker([os.path.abspath(__file__), "--worker", "check"])
        if not check.get("naive_matches"):
            print(f"the naive model disagrees with ours, not measuring memory: {check}", file=sys.stderr)
            return 1
        results = {n: _measure_memory_at(n, args) for n in lm_length.int_list(args.lengths, "lengths")}
        lines += ["### A training step's peak memory, batch 1", "",
                  f"Forward, loss and gradients (no optimizer update); median (range) of {args.memory_reps} steps; "
                  "the naive form checked equal to ours with shared tables before measuring.", "",
                  memory_table(results), ""]
        estimated = [f"n = {n}: ~{r['naive']['estimate_bytes'] / GIB:.1f} GiB" for n, r in results.items()
                     if "estimate_bytes" in r.get("naive", {})]
        if estimated:
            lines += [f"The naive form's estimate where it was not measured: {'; '.join(estimated)}.", ""]
    lines.append(f"Took {time.perf_counter() - began:.0f} s.")
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
