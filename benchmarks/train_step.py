"""Training-step time of relative vs absolute positions: the package's headline ratio (paper: +7%).

    .venv/bin/python benchmarks/train_step.py [--shapes small,base] [--settings mixed,long] [--reps N]
                                              [--variants plain,jit,bf16] [--write]
    .venv/bin/python benchmarks/train_step.py --compare_variants [--shapes small] [--settings mixed] [--write]

One step = forward, backward and Adam update of the whole encoder-decoder model under `tf.function`
(label-smoothed cross-entropy, the package's optimizer). Shapes are the named hparams sets and their
relative twins: "base" = transformer_base vs transformer_base_rel (6+6 layers, d 512, k = 16 per head),
"small" = 3+3 layers of d 256 (4 heads, FFN 1024), the same set with the width changed. Batches hold about
4096 target tokens, like the paper's per-GPU batches:

- mixed: length-bucketed batch of sentences of 20-36 tokens (mean ~28, the WMT mean), 128 sentences;
- long: 16 sentences of 256 tokens.

Every (shape, setting, variant) runs in a fresh worker process that times the absolute and relative models in
interleaved repetitions (median), so their ratio is measured side by side. Each worker also measures the
machine's float32 matmul peak (a 2048^3 product) and reports model FLOP/s as a fraction of it (FLOPs counted as
6 x parameters x tokens for the dense layers plus the attention products).

`--compare_variants` instead times, per (shape, setting), both models in every variant in one worker, all six
steps interleaved: plain (graph mode, float32), jit (`jit_compile=True`, as the trainer's `--jit_compile`) and
bf16 (the `mixed_bfloat16` policy, as `--mixed_precision=mixed_bfloat16`), so the effect of XLA and of mixed
precision on the step time is a ratio measured side by side.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")  # As t2t_relpos/cli/common.py: the trainer's allocator.

import common  # noqa: E402  pylint: disable=wrong-import-position

SHAPES = {
    "small": {"hidden_size": 256, "filter_size": 1024, "num_heads": 4, "num_encoder_layers": 3,
              "num_decoder_layers": 3},
    "base": {},
}
SETTINGS = {"mixed": (128, 20, 36), "long": (16, 256, 256)}  # (sentences, shortest, longest)
VARIANTS = ("plain", "jit", "bf16")
VOCAB = 8000
TARGET = 1.07  # The paper's step-time cost of relative positions.


def make_batch(setting, seed=0):
    """Source and target ids `[B, L]` with per-row lengths drawn in the setting's range (EOS-terminated)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    rows, low, high = SETTINGS[setting]
    rng = np.random.default_rng(seed)
    batch = {}
    for name in ("inputs", "targets"):
        lengths = rng.integers(low, high + 1, size=rows)
        ids = np.zeros((rows, high), np.int32)
        for row, n in enumerate(lengths):
            ids[row, :n - 1] = rng.integers(2, VOCAB, size=n - 1)
            ids[row, n - 1] = 1
        batch[name] = ids
    return batch


def make_step(hparams, variant):
    """A compiled training step of a fresh model for `hparams`; returns (step fn, parameter count)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from t2t_relpos.models import Transformer  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import losses, optimizers  # pylint: disable=import-outside-toplevel

    dtype = "mixed_bfloat16" if variant == "bf16" else None
    model = Transformer.from_hparams(hparams, VOCAB, VOCAB, dtype=dtype)
    model.build()
    optimizer = optimizers.from_hparams(hparams)
    optimizer.build(model.trainable_variables)

    @tf.function(jit_compile=variant == "jit", autograph=False)  # As the trainer traces its step.
    def step(batch):
        with tf.GradientTape() as tape:
            logits = model(batch, training=True)
            loss_sum, tokens = losses.smoothed_cross_entropy(logits, batch["targets"], hparams.label_smoothing)
            loss = loss_sum / tokens
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step, sum(int(tf.size(v)) for v in model.trainable_variables)


def step_flops(hparams, params, batch):
    """Approximate FLOPs of one step: 6 per parameter per target token, plus the attention products."""
    rows, length = batch["targets"].shape
    tokens = rows * length
    width = hparams.hidden_size
    # QK^T and AV: 2 * 2 * L * width per token and attention, three attentions per decoder layer pair.
    attention = 3 * 4 * length * width * tokens * hparams.num_encoder_layers
    return 6 * params * tokens + 3 * attention


def matmul_peak_flops(size=2048, reps=5):
    """The machine's float32 matmul rate in FLOP/s (median of `reps`)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    a = tf.random.normal((size, size))
    matmul = tf.function(lambda x: tf.reduce_sum(tf.matmul(x, x)))
    seconds = common.time_interleaved({"mm": lambda: matmul(a).numpy()}, reps=reps)["mm"]
    return 2 * size ** 3 / seconds


def measure(shape, setting, variant, reps):
    """Worker: times the absolute and relative models on one batch; returns a result dict."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    batch = {k: tf.constant(v) for k, v in make_batch(setting).items()}
    steps, flops = {}, {}
    for name, set_name in (("absolute", "transformer_base"), ("relative", "transformer_base_rel")):
        hparams = registry.hparams(set_name)
        for field, value in SHAPES[shape].items():
            setattr(hparams, field, value)
        step, params = make_step(hparams, variant)
        steps[name] = lambda step=step: step(batch).numpy()
        flops[name] = step_flops(hparams, params, make_batch(setting))
    samples = common.interleaved_samples(steps, {"wall": time.perf_counter}, reps=reps, min_sample_s=0.0)["wall"]
    seconds = {name: statistics.median(values) for name, values in samples.items()}
    ratio = common.paired_ratios(samples["relative"], samples["absolute"])
    peak = matmul_peak_flops()
    tokens = int(tf.reduce_sum(tf.cast(batch["targets"] != 0, tf.int32)) +
                 tf.reduce_sum(tf.cast(batch["inputs"] != 0, tf.int32)))
    return {"shape": shape, "setting": setting, "variant": variant, "seconds": seconds, "ratio": ratio,
            "tokens": tokens, "flops": flops, "peak_flops": peak}


def measure_variants(shape, setting, reps):
    """Worker: times both models in every variant, interleaved; returns {"model/variant": seconds}."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    batch = {k: tf.constant(v) for k, v in make_batch(setting).items()}
    steps = {}
    for name, set_name in (("absolute", "transformer_base"), ("relative", "transformer_base_rel")):
        hparams = registry.hparams(set_name).override(**SHAPES[shape])
        for variant in VARIANTS:
            step, _ = make_step(hparams, variant)
            step(batch)  # Traces (and compiles) it outside the timing.
            steps[f"{name}/{variant}"] = lambda step=step: step(batch).numpy()
    return {"shape": shape, "setting": setting, "seconds": common.time_interleaved(steps, reps=reps,
                                                                                     min_sample_s=0.0)}


def report_variants(results, seconds):
    """The section on XLA and mixed precision: step times and their ratios to plain, per model."""
    rows = []
    for r in results:
        if "error" in r:
            rows.append([r.get("label", "?"), "error", r["error"][:60]] + [""] * 5)
            continue
        t = r["seconds"]
        for name in ("absolute", "relative"):
            plain = t[f"{name}/plain"]
            rows.append([f"{r['shape']}, {r['setting']}", name, f"{plain * 1e3:.0f}"]
                        + [cell for variant in ("jit", "bf16") for cell in
                           (f"{t[f'{name}/{variant}'] * 1e3:.0f}", f"{t[f'{name}/{variant}'] / plain:.2f}x")]
                        + [" / ".join(f"{t[f'relative/{v}'] / t[f'absolute/{v}']:.3f}" for v in VARIANTS)
                           if name == "relative" else ""])
    headers = ["shape, batch", "model", "plain (ms)", "jit (ms)", "jit / plain", "bf16 (ms)", "bf16 / plain",
               "relative / absolute (plain / jit / bf16)"]
    return "\n".join([
        "## Training step: XLA and mixed precision", "",
        f"`{common.command_line()}` — {common.today()}, took {seconds:.0f} s.  ",
        f"Machine: {common.machine_description()}.", "",
        "The step of the section above (same shapes and batches) in three variants, all six (model, variant) "
        "steps of a row timed interleaved in one process (median): plain = graph mode in float32; jit = "
        "`jit_compile=True` (the trainer's `--jit_compile`); bf16 = the `mixed_bfloat16` policy (the trainer's "
        "`--mixed_precision=mixed_bfloat16`; float32 variables and softmax, bfloat16 matmuls).", "",
        common.markdown_table(headers, rows, align="llrrrrrr")])


def _rows(results):
    rows = []
    for r in results:
        if "error" in r:
            rows.append([r.get("label", "?"), "error", r["error"][:60], "", "", "", ""])
            continue
        absolute, relative = r["seconds"]["absolute"], r["seconds"]["relative"]
        ratio = r["ratio"]
        rows.append([f"{r['shape']}, {r['setting']}, {r['variant']}", f"{absolute * 1e3:.0f}",
                     f"{relative * 1e3:.0f}", f"{ratio['median']:.3f} ({ratio['low']:.3f}-{ratio['high']:.3f})",
                     f"{r['tokens'] / relative:,.0f}",
                     f"{r['flops']['relative'] / relative / 1e9:.1f}",
                     f"{r['flops']['relative'] / relative / r['peak_flops']:.0%} of {r['peak_flops'] / 1e9:.0f}"])
    return rows


def report(results, seconds):
    headers = ["shape, batch, variant", "absolute step (ms)", "relative step (ms)", "relative / absolute (IQR)",
               "relative tokens/s", "relative GFLOP/s", "of matmul peak (GFLOP/s)"]
    ratios = [r["ratio"]["median"] for r in results if "error" not in r]
    verdict = (f"Worst relative/absolute step ratio {max(ratios):.3f} (target <= {TARGET}, the paper's 7%): "
               f"{'met' if max(ratios) <= TARGET else 'NOT met'}." if ratios else "No result.")
    return "\n".join([
        "## Training step: relative vs absolute positions", "",
        f"`{common.command_line()}` — {common.today()}, took {seconds:.0f} s.  ",
        f"Machine: {common.machine_description()}.", "",
        "Forward + backward + Adam of the whole model (tf.function), vocabulary 8000. small = 3+3 layers, d 256, "
        "4 heads, FFN 1024; base = transformer_base (6+6, d 512, 8 heads, FFN 2048) vs transformer_base_rel "
        "(k = 16, tables per layer and head). mixed = 128 sentences of 20-36 tokens (~3.6k target tokens), "
        "long = 16 x 256. Both models in one fresh process per row, timed in interleaved repetitions: step "
        "times are medians; relative / absolute is the median of the per-repetition ratios, with their "
        "interquartile range (the run-to-run noise of this machine).", "",
        common.markdown_table(headers, _rows(results)), "", verdict])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--shapes", default="small,base")
    parser.add_argument("--settings", default="mixed,long")
    parser.add_argument("--variants", default="plain", help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="write the section into docs/studies/benchmark_runs.md")
    parser.add_argument("--compare_variants", action="store_true",
                        help="time plain, jit and bf16 side by side (own section of the run log)")
    parser.add_argument("--worker", nargs=3, metavar=("SHAPE", "SETTING", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        shape, setting, variant = args.worker
        common.emit_result(measure_variants(shape, setting, args.reps) if variant == "all"
                           else measure(shape, setting, variant, reps=args.reps))
        return 0

    common.refuse_uncommitted_writes(args)
    began = time.perf_counter()
    if args.compare_variants:
        return _compare_variants(args, began)
    results = []
    for shape in args.shapes.split(","):
        for setting in args.settings.split(","):
            for variant in args.variants.split(","):
                result = common.run_worker([os.path.abspath(__file__), "--reps", str(args.reps), "--worker",
                                            shape, setting, variant])
                result.setdefault("label", f"{shape}, {setting}, {variant}")
                results.append(result)
                print(_rows([result])[0], flush=True)
    text = report(results, time.perf_counter() - began)
    print(text)
    if args.write:
        common.replace_section("train_step", text)
    return 0


def _compare_variants(args, began):

    results = []
    for shape in args.shapes.split(","):
        for setting in args.settings.split(","):
            result = common.run_worker([os.path.abspath(__file__), "--reps", str(args.reps), "--worker", shape,
                                        setting, "all"])
            result.setdefault("label", f"{shape}, {setting}")
            results.append(result)
    text = report_variants(results, time.perf_counter() - began)
    print(text)
    if args.write:
        common.replace_section("train_step_variants", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
