"""Time and peak memory of one training step of self-attention: standard, relation-aware (ours), naive.

    .venv/bin/python benchmarks/attention.py [--lengths 64,256,1024,2048] [--reps N] [--write] [--plot PATH]

One step = forward + backward of one attention layer under `tf.function`: loss = sum of squared outputs,
gradients with respect to the input and every weight. d_model 512, 8 heads of 64, k = 16, and a constant
budget of 2048 tokens (batch = max(1, 2048 // n) sequences of length n). Configurations:

- standard: `keras.layers.MultiHeadAttention(8, 64, use_bias=False)`, called as `mha(x, x)`;
- relative, per-head: `RelationAwareMultiHeadAttention(8, 64, max_relative_position=16)` (paper's base);
- relative, shared: the same with `heads_share_relative_embeddings=True` (paper's big, tensor2tensor);
- naive: the original tensor2tensor formulation, which gathers the `[n, n, d]` tables a^K_ij and a^V_ij
  and contracts them with einsum; same weights and math as "relative, shared" (checked before timing).

Each length runs in a fresh worker process (all configurations together, timed in interleaved
repetitions); peak memory is the allocator's peak during one dedicated step above what was allocated before
it. Times and memory are also given as ratios to standard attention measured in the same worker.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import common  # noqa: E402  pylint: disable=wrong-import-position

D_MODEL, HEADS, DEPTH, K = 512, 8, 64, 16
TOKENS = 2048
CONFIGS = ("standard", "relative_per_head", "relative_shared", "naive")
LABELS = {
    "standard": "standard (keras MHA)",
    "relative_per_head": "relative, per-head tables (base)",
    "relative_shared": "relative, shared tables (big)",
    "naive": "naive [n, n, d] tables, shared",
}
# Targets of issue 3, on the memory ratio to standard attention at the longest length.
OURS_MAX_RATIO, NAIVE_MIN_RATIO = 1.2, 2.0
# Naive step memory in units of one [n, n, d] float32 table (measured peaks: 5.4 tables at n = 1024, 4.7 at
# 2048): the naive configuration is skipped where this estimate could not fit, instead of taking the
# machine down.
NAIVE_TABLES = 6
MIB, GIB = 2**20, 2**30


def batch_size(length):
    """Sequences per batch at `length`: a constant budget of TOKENS tokens, at least one sequence."""
    return max(1, TOKENS // length)


def naive_estimate_bytes(length):
    """Rough peak memory of a naive step at `length` (see NAIVE_TABLES)."""
    return NAIVE_TABLES * length * length * DEPTH * 4


def relative_labels(length, k):
    """`[n, n]` int32: the relation of query i and key j, clip(j - i, -k, k) + k."""
    from keras import ops  # pylint: disable=import-outside-toplevel

    positions = ops.arange(length, dtype="int32")
    return ops.clip(positions[None, :] - positions[:, None], -k, k) + k


def _naive_class():
    """The materialised-table layer, defined lazily so importing this file does not import TensorFlow."""
    from keras import ops  # pylint: disable=import-outside-toplevel

    from t2t_relpos.layers import RelationAwareMultiHeadAttention  # pylint: disable=import-outside-toplevel

    class NaiveRelativeAttention(RelationAwareMultiHeadAttention):
        """tensor2tensor's relative self-attention: a^K_ij, a^V_ij gathered into `[n, n, d]`, shared by heads.

        Reuses the parent's weights and projections; only self-attention, unmasked or causal (no padding masks,
        no cache): a decoder block calls it as it calls ours (`benchmarks/lm_generation.py` builds a language
        model of these).
        """

        def __init__(self, *args, **kwargs):
            super().__init__(*args, heads_share_relative_embeddings=True, **kwargs)

        def build(self, query_shape):  # pylint: disable=arguments-differ,useless-parent-delegation
            """Keras matches build() arguments to call()'s: with no value or key here, only the query's."""
            super().build(query_shape)

        def call(self, query, training=None, use_causal_mask=False, cache=None,  # pylint: disable=arguments-differ
                 cache_index=None):
            if cache is not None or cache_index is not None:
                raise ValueError("the naive form keeps no cache: it is measured in training steps only")
            n = ops.shape(query)[1]
            q = self._project(query, self._query, self.key_dim) * (self.key_dim ** -0.5)
            k = self._project(query, self._key, self.key_dim)
            v = self._project(query, self._value, self.value_dim)
            labels = relative_labels(n, self.max_relative_position)
            a_key = ops.take(self.relative_key_embeddings, labels, axis=0)  # [n, n, d]
            a_value = ops.take(self.relative_value_embeddings, labels, axis=0)  # [n, n, d]
            # q, k, v: [B, H, n, d] (the layer's heads-first projections).
            logits = ops.einsum("bhqd,bhkd->bhqk", q, k) + ops.einsum("bhqd,qkd->bhqk", q, a_key)
            if use_causal_mask:  # Key j after query i masked, as ours masks it.
                positions = ops.arange(n, dtype="int32")
                logits = ops.where(positions[None, :] <= positions[:, None], logits, -1.0e9)
            weights = ops.softmax(logits, axis=-1)
            out = ops.einsum("bhqk,bhkd->bqhd", weights, v) + ops.einsum("bhqk,qkd->bqhd", weights, a_value)
            out = ops.reshape(out, (ops.shape(out)[0], n, self.num_heads * self.value_dim))
            return ops.matmul(out, self._output[0])

    return NaiveRelativeAttention


def make_layer(config):
    """(layer, call) for a configuration name; `call(x)` runs self-attention on `x` `[B, n, D]`."""
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos.layers import RelationAwareMultiHeadAttention  # pylint: disable=import-outside-toplevel

    if config == "standard":
        layer = keras.layers.MultiHeadAttention(HEADS, DEPTH, use_bias=False)
        return layer, lambda x: layer(x, x)
    if config == "naive":
        layer = _naive_class()(HEADS, DEPTH, max_relative_position=K)
    else:
        layer = RelationAwareMultiHeadAttention(
            HEADS, DEPTH, max_relative_position=K,
            heads_share_relative_embeddings=config == "relative_shared")
    return layer, layer


def make_step(layer, call):
    """A compiled training step: loss = sum(call(x)^2), dense gradients for x and every weight."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    @tf.function(autograph=False)
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.square(call(x)))
        # Gathered tables get IndexedSlices gradients; densify as an optimizer's update would consume them.
        grads = tape.gradient(loss, [x] + list(layer.trainable_variables))
        return loss, [tf.convert_to_tensor(g) for g in grads]

    return step


def check_naive_matches(length=40, batch=2, atol=1e-4, use_causal_mask=False):
    """Raise AssertionError unless the naive layer gives the shared-table layer's output and gradients.

    Both get the same weights; `length` exceeds 2k + 1 so clipping is exercised. `use_causal_mask`: both called
    with it (the decoder's self-attention).
    """
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    x = tf.random.stateless_normal((batch, length, D_MODEL), seed=(1, 2))
    ours, _ = make_layer("relative_shared")
    naive, _ = make_layer("naive")
    ours(x)
    naive(x)
    naive.set_weights(ours.get_weights())
    results = []
    for layer in (ours, naive):
        call = lambda h, layer=layer: layer(h, use_causal_mask=use_causal_mask)
        loss, grads = make_step(layer, call)(x)
        results.append([call(x), loss] + grads)
    for name, a, b in zip(["output", "loss", "d input"] + [w.path for w in ours.trainable_variables],
                          *results):
        a, b = np.asarray(a), np.asarray(b)
        scale = max(1.0, float(np.max(np.abs(a))))
        error = float(np.max(np.abs(a - b))) / scale
        if error > atol:
            raise AssertionError(f"naive and shared-table attention differ in {name}: {error:.2e} (relative)")


def _compiled_steps(x, configs):
    """({config: step} of the configurations whose first step ran, {config: {"error"}} of the others)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    steps, failed = {}, {}
    for config in configs:
        layer, call = make_layer(config)
        call(x[:1, :8])  # Build the weights eagerly, outside the traced step.
        step = make_step(layer, call)
        try:
            step(x)  # Trace and run once: an OOM shows here rather than inside the timing loop.
        except tf.errors.ResourceExhaustedError as error:
            failed[config] = {"error": f"OOM ({error.message.splitlines()[0][:80]})"}
            continue
        steps[config] = step
    return steps, failed


def measure(length, configs=CONFIGS, reps=5, memory_reps=5, min_sample_s=0.2):
    """Median step time (s) and peak step memory (bytes) of each configuration at sequence length `length`.

    Returns {config: {"time_s", "memory_bytes" (median), "memory_min", "memory_max"}}, or {config: {"error"}}
    for a configuration that ran out of memory.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    x = tf.random.stateless_normal((batch_size(length), length, D_MODEL), seed=(0, length))
    steps, results = _compiled_steps(x, configs)
    # Memory first, in dedicated steps after warm-up. The peak depends on the order in which the executor's
    # threads happen to run independent ops (it moves by one [B, H, n, n] tensor from step to step), so
    # several steps are measured, round-robin, and the median is reported with the range.
    memory = {config: [] for config in steps}
    for _ in range(memory_reps):
        for config, step in steps.items():
            memory[config].append(common.peak_memory_bytes(lambda s=step: s(x)))
    times = common.time_interleaved({c: (lambda s=s: float(s(x)[0])) for c, s in steps.items()},
                                    reps=reps, warmup=1, min_sample_s=min_sample_s)
    for config, values in memory.items():
        results[config] = {"time_s": times[config], "memory_bytes": statistics.median(values),
                           "memory_min": min(values), "memory_max": max(values)}
    return results


def _worker(args):
    """Worker process: the equivalence check (`--worker check`) or the measurements at one length."""
    if args.worker == "check":
        check_naive_matches()
        common.emit_result({"naive_matches": True})
    else:
        common.emit_result(measure(int(args.worker), args.configs.split(","), reps=args.reps,
                                   memory_reps=args.memory_reps, min_sample_s=args.min_sample_s))


def _parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--lengths", default="64,256,1024,2048", help="comma-separated sequence lengths")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions per configuration (median)")
    parser.add_argument("--memory_reps", type=int, default=5, help="memory steps per configuration (median)")
    parser.add_argument("--min_sample_s", type=float, default=0.2,
                        help="a timed sample repeats short steps until it lasts this long")
    parser.add_argument("--write", action="store_true", help="write the section into docs/studies/benchmark_runs.md")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG of memory and time against n")
    parser.add_argument("--memory_fraction", type=float, default=0.5,
                        help="skip the naive form where its estimate exceeds this share of available RAM")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--configs", default=",".join(CONFIGS), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _naive_skipped(length, why):
    """The result entry of a naive configuration that was not measured, with its estimated peak."""
    estimate = naive_estimate_bytes(length)
    return {"error": f"not measured: {why}; estimated ~{estimate / GIB:.1f} GiB", "estimate_bytes": estimate}


def _measure_length(length, args):
    """{config: result} at `length`, measured in a worker process.

    The naive form is skipped where its estimate does not fit in memory, and dropped (the others measured
    again) if the worker dies with it, e.g. killed for memory.
    """
    configs = list(CONFIGS)
    available = common.available_memory_bytes()
    if available and naive_estimate_bytes(length) > args.memory_fraction * available:
        configs.remove("naive")
    print(f"n = {length}: {', '.join(configs)} ...", file=sys.stderr, flush=True)

    def run(names):
        return common.run_worker([os.path.abspath(__file__), "--worker", str(length), "--configs",
                                  ",".join(names), "--reps", str(args.reps), "--memory_reps",
                                  str(args.memory_reps), "--min_sample_s", str(args.min_sample_s)])

    results = run(configs)
    if "error" in results and "naive" in configs:
        print(f"n = {length}: {results['error']}; again without naive", file=sys.stderr, flush=True)
        configs.remove("naive")
        results = {**run(configs), "naive": _naive_skipped(length, "its worker died")}
    if "error" in results:
        return {config: {"error": results["error"]} for config in CONFIGS}
    results.setdefault("naive", _naive_skipped(
        length, f"over {args.memory_fraction:g} of the {available / GIB:.1f} GiB available"))
    return results


def _ratio(results, config, key):
    """results[config][key] / standard's, or None where either is missing."""
    value, base = results.get(config, {}).get(key), results.get("standard", {}).get(key)
    return value / base if value is not None and base else None


def format_table(results):
    """The markdown table of `results` ({length: {config: result}})."""
    rows = []
    for n, by_config in results.items():
        for config in CONFIGS:
            r = by_config.get(config, {"error": "missing"})
            if "error" in r:
                rows.append([n, batch_size(n), LABELS[config], r["error"], "", "", ""])
                continue
            time_ratio, memory_ratio = (_ratio(by_config, config, key) for key in ("time_s", "memory_bytes"))
            memory = f"{r['memory_bytes'] / MIB:.0f} ({r['memory_min'] / MIB:.0f}-{r['memory_max'] / MIB:.0f})"
            rows.append([n, batch_size(n), LABELS[config], f"{r['time_s'] * 1e3:.1f}",
                         f"{time_ratio:.2f}x" if time_ratio else "", memory,
                         f"{memory_ratio:.2f}x" if memory_ratio else ""])
    return common.markdown_table(
        ["n", "batch", "configuration", "step time (ms)", "time / standard", "peak memory, MiB (range)",
         "memory / standard"], rows, align="rrlrrrr")


def verdict(results):
    """Lines judging the memory ratios at the longest length against the targets of issue 3."""
    n = max(results)
    by_config = results[n]
    lines = [f"Targets (issue 3) at n = {n}: peak memory of relation-aware attention within "
             f"{OURS_MAX_RATIO}x standard attention's, of the materialised-table form above {NAIVE_MIN_RATIO}x."]
    for config in ("relative_per_head", "relative_shared"):
        ratio = _ratio(by_config, config, "memory_bytes")
        judged = ("not measured" if ratio is None else
                  f"{ratio:.2f}x, {'met' if ratio <= OURS_MAX_RATIO else 'MISSED'}")
        lines.append(f"- {LABELS[config]}: {judged}")
    naive = by_config.get("naive", {})
    ratio = _ratio(by_config, "naive", "memory_bytes")
    if ratio is None and naive.get("estimate_bytes") and by_config.get("standard", {}).get("memory_bytes"):
        ratio = naive["estimate_bytes"] / by_config["standard"]["memory_bytes"]
        note = " (estimate, not measured)"
    else:
        note = ""
    judged = ("not measured" if ratio is None else
              f"{ratio:.2f}x{note}, {'met' if ratio > NAIVE_MIN_RATIO else 'MISSED'}")
    lines.append(f"- {LABELS['naive']}: {judged}")
    return "\n".join(lines)


def plot(results, path):
    """A PNG at `path`: peak memory and step time against n, one line per configuration."""
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    lengths = list(results)
    fig, (mem_ax, time_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for config, marker in zip(CONFIGS, "osD^"):
        ok = [n for n in lengths if "memory_bytes" in results[n].get(config, {})]
        for ax, key, scale in ((mem_ax, "memory_bytes", 1 / MIB), (time_ax, "time_s", 1e3)):
            ax.plot(ok, [results[n][config][key] * scale for n in ok], marker=marker, label=LABELS[config])
    estimated = [n for n in lengths if "estimate_bytes" in results[n].get("naive", {})]
    if estimated:
        mem_ax.plot(estimated, [results[n]["naive"]["estimate_bytes"] / MIB for n in estimated], marker="x",
                    color="red", linestyle="", label="naive, estimate (not measured)")
    for ax, title, unit in ((mem_ax, "Peak memory of one step", "MiB"),
                            (time_ax, "Time of one step (median)", "ms")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.set_xlabel(f"sequence length n (batch x n = {TOKENS} tokens)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    mem_ax.legend(fontsize=8)
    fig.suptitle(f"Self-attention fwd+bwd, d_model {D_MODEL}, {HEADS} heads x {DEPTH}, k = {K}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def readme_section(args, table, judged, elapsed):
    """The run log's section: how it was run, on what, the method, the table and the verdict."""
    section = "\n\n".join([
        "## Attention: time and memory of one training step",
        f"`{common.command_line()}` — {common.today()}, took {elapsed:.0f} s.  \n"
        f"Machine: {common.machine_description()}.",
        "Forward + backward of one self-attention layer (tf.function; loss = sum of squared outputs; "
        f"gradients for the input and all weights), d_model {D_MODEL}, {HEADS} heads of {DEPTH}, k = {K}, "
        f"batch = max(1, {TOKENS} // n) sequences. Time: median of {args.reps} interleaved repetitions. "
        "Memory: the allocator's peak during one step above what was allocated before it, median "
        f"(and range) of {args.memory_reps} steps. Each n runs in a fresh process; ratios are to standard "
        "attention in that process.",
        table,
        judged,
    ])
    if args.plot:
        image = os.path.relpath(os.path.abspath(args.plot), os.path.dirname(common.RUN_LOG))
        section += f"\n\n![peak memory and time against n]({image})"
    return section


def main(argv=None):
    """Check the naive form, measure every length in its own worker, print (and write, plot) the results."""
    args = _parse_args(argv)
    if args.worker is not None:
        _worker(args)
        return 0
    common.refuse_uncommitted_writes(args)
    started = time.time()
    check = common.run_worker([os.path.abspath(__file__), "--worker", "check"])
    if not check.get("naive_matches"):
        print(f"naive and shared-table attention disagree, not measuring: {check}", file=sys.stderr)
        return 1
    results = {n: _measure_length(n, args) for n in sorted(int(n) for n in args.lengths.split(","))}
    elapsed = time.time() - started
    table, judged = format_table(results), verdict(results)
    print(f"{table}\n\n{judged}\n\n{common.command_line()} — {common.today()}, {elapsed:.0f} s\n"
          f"{common.machine_description()}")
    if args.plot:
        plot(results, args.plot)
    if args.write:
        common.replace_section("attention", readme_section(args, table, judged, elapsed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
