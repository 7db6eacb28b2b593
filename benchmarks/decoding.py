"""Tokens per second of cached and uncached greedy and beam-4 decoding, at output lengths 25 to 200.

    .venv/bin/python benchmarks/decoding.py [--lengths 25,50,100,200] [--models rel64,rel256,abs64] [--reps N]
                                            [--threads N] [--no_xla] [--write] [--plot PATH]
    .venv/bin/python benchmarks/decoding.py --reorder_cost [--models ut64] [--lengths 25,200] [--reps 9]

Four paths run the same search code (`t2t_relpos.decoding.search.greedy` and `.beam_search`, beam 4,
alpha 0.6), each wrapped whole in one `tf.function`, traced and run once before timing:

- cached: the model's own `init_cache` / `decode_step` (one new token per hypothesis and step; keys and
  values of earlier positions kept in buffers grown with the output, encoder keys/values computed once;
  each step's keys and values written in place, `layers.cache_ops`);
- one buffer: the cached path with caches of `max_length` positions from the first step (what the search did
  before it grew its caches with the output, `search.cache_capacities`), for comparison;
- uncached: `FullPrefix`, a `decode_step` that keeps only the token ids and re-runs the decoder over the
  whole prefix at every step (self- and encoder-decoder attention, all layers; only the last position is
  projected to the vocabulary), O(n^2) decoder work in all. Beam search reorders the id buffers between
  beams exactly as it reorders the caches;
- cached, XLA: the cached path compiled with `jit_compile=True` (as `Translator(jit_compile=True)` does).
  The uncached path has no XLA counterpart: its prefix grows, and XLA needs static shapes.

The random models never stop early: `ForcedLength` puts -1e9 on the end-of-sequence logit (padding is
already excluded by the search), so every path decodes exactly the target number of tokens. Before timing,
greedy cached, uncached and XLA outputs must agree token for token, and with `search.greedy_full_prefix` (the
library's uncached baseline) at the shortest length; beam outputs are compared too and the agreement is
reported.

Each model runs in a fresh worker process; all its (length, search, path) configurations are timed there in
interleaved repetitions, so speed-ups (uncached time / cached time) and the flatness of the cached path's
time per step across lengths are measured side by side. Every sample is read on two clocks: wall time, and
the process's CPU time. Workers run TensorFlow on one thread by default (`--threads 0`: one per core): on a
machine shared with other jobs the CPU time then counts the work of a decoding call whatever else runs,
about the wall time the call would take on an idle core, while wall time also counts the waits for a core.

`--reorder_cost` times what the beam search's reorder of the caches costs: the cached beam search at the
shortest and longest length, once as it is and once with the reorder left out (each beam keeps its own row's
history: wrong outputs, so only the time means anything), interleaved; it prints ms per step and the
longest / shortest ratio of both, and writes nothing.
"""

import argparse
import contextlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import common  # noqa: E402  pylint: disable=wrong-import-position

EOS_ID = 1
BATCH, SOURCE_LENGTH, VOCAB_SIZE, BEAM_SIZE, ALPHA = 8, 20, 1000, 4, 0.6
LENGTHS = (25, 50, 100, 200)
# name -> (hparams set, overrides, description). Widths 64 and 256; Transformers of 2 + 2 layers, Universal
# Transformers of one shared block per side (CPU-sized).
MODELS = {
    "rel64": ("transformer_cpu_rel", {}, "relative positions (k = 16), width 64, 4 heads, filter 256"),
    "rel256": ("transformer_cpu_rel", {"hidden_size": 256, "filter_size": 1024},
               "relative positions (k = 16), width 256, 4 heads of 64, filter 1024"),
    "abs64": ("transformer_cpu", {}, "sinusoid positions, width 64, 4 heads, filter 256"),
    "ut64": ("universal_transformer_cpu_rel", {},
             "Universal Transformer, relative positions (k = 16), width 64, 8 recurrent steps"),
    "aut64": ("adaptive_universal_transformer_cpu_rel", {},
              "adaptive Universal Transformer (ACT, at most 4 steps), relative positions (k = 16), width 64"),
}
SEARCHES = ("greedy", "beam")
PATHS = ("cached", "one_buffer", "uncached", "cached_xla")
SEARCH_LABELS = {"greedy": "greedy", "beam": f"beam {BEAM_SIZE}"}
# Targets of issue 5: uncached / cached time at TARGET_LENGTH tokens, and a cached time per step "roughly
# flat" in the length, judged as (time per step at the longest length) / (at the shortest) <= FLAT_MAX.
TARGET_SPEEDUP, TARGET_LENGTH, FLAT_MAX = 5.0, 100, 1.5


class ForcedLength:
    """A model whose end-of-sequence logit is -1e9: decoding runs to `max_length`, whatever the weights.

    Exposes what the searches use: `encode`, `init_cache`, `decode_step`, and `decode` (for
    `search.greedy_full_prefix`).
    """

    def __init__(self, model):
        self.model = model

    @staticmethod
    def forbid_eos(logits):
        from keras import ops  # pylint: disable=import-outside-toplevel

        return ops.where(ops.arange(ops.shape(logits)[-1]) == EOS_ID, -1.0e9, logits)

    def encode(self, inputs, training=None):
        return self.model.encode(inputs, training=training)

    def init_cache(self, encoder_output, encoder_mask, max_length):
        return self.model.init_cache(encoder_output, encoder_mask, max_length)

    def decode_step(self, ids, cache, index):
        logits, cache = self.model.decode_step(ids, cache, index)
        return self.forbid_eos(logits), cache

    def decode(self, decoder_inputs, encoder_output, encoder_mask, training=None):
        return self.forbid_eos(self.model.decode(decoder_inputs, encoder_output, encoder_mask,
                                                 training=training))


class FullPrefix(ForcedLength):
    """Uncached decoding behind the cached interface: `decode_step` re-runs the decoder on the whole prefix.

    The "cache" holds the encoder output and mask (shared by the beams of a sentence) and, under "self",
    an `[B, max_length]` buffer of the ids fed so far (reordered between beams by beam search, like a real
    cache). Step `index` writes its ids there and decodes positions 0 .. index, projecting only the new ones
    to the vocabulary.
    """

    def init_cache(self, encoder_output, encoder_mask, max_length):
        from keras import ops  # pylint: disable=import-outside-toplevel

        batch = ops.shape(encoder_output)[0]
        return {"encoder_output": encoder_output, "encoder_mask": encoder_mask,
                "self": {"ids": ops.zeros((batch, max_length), "int32")}}

    def decode_step(self, ids, cache, index):
        from keras import ops  # pylint: disable=import-outside-toplevel

        fed = ops.slice_update(cache["self"]["ids"], [0, index], ops.cast(ids, "int32"))
        new = ops.shape(ids)[1]
        model = self.model
        y = model.decoder(model.target_embedding(fed[:, :index + new]), cache["encoder_output"],
                          encoder_mask=cache["encoder_mask"], training=False)
        logits = model.logits(y[:, -new:])
        return self.forbid_eos(logits), {**cache, "self": {"ids": fed}}


def build_model(name, vocab_size=VOCAB_SIZE, seed=1):
    """The randomly initialised model (the hparams set's registered model class) of MODELS[name], built."""
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    hparams_set, overrides, _ = MODELS[name]
    hparams = registry.hparams(hparams_set).override(**overrides)
    keras.utils.set_random_seed(seed)
    model = registry.model(hparams.model).from_hparams(hparams, vocab_size, vocab_size)
    model.build()
    return model


def ponder_steps(model, inputs, outputs):
    """Mean ponder time (N + R, recurrent steps taken) of a Universal Transformer's positions, or None.

    Encoder: over the `[B, S]` source positions; decoder: over the positions of the `[B, n]` greedy outputs,
    teacher-forced (equal to what the cached decoder took, which the UT tests check).
    """
    import numpy as np  # pylint: disable=import-outside-toplevel

    if not hasattr(model, "ponder_times"):
        return None
    details = model({"inputs": inputs, "targets": outputs}, training=False, return_details=True)
    return {"encoder": float(np.mean(details["ponder_times"]["encoder"])),
            "decoder": float(np.mean(details["ponder_times"]["decoder"]))}


def source_ids(vocab_size=VOCAB_SIZE, batch=BATCH, length=SOURCE_LENGTH, seed=0):
    """`[batch, length]` int32 numpy random source ids in [2, vocab_size), each ending with EOS."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    ids = np.random.default_rng(seed).integers(2, vocab_size, (batch, length)).astype("int32")
    ids[:, -1] = EOS_ID
    return ids


def make_sources(vocab_size=VOCAB_SIZE, batch=BATCH, length=SOURCE_LENGTH, seed=0):
    """`source_ids` as a TensorFlow constant."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.constant(source_ids(vocab_size, batch, length, seed))


def one_buffer():
    """A context in which traced searches decode with caches of `max_length` positions from the first step."""
    from unittest import mock  # pylint: disable=import-outside-toplevel

    from t2t_relpos.decoding import search  # pylint: disable=import-outside-toplevel

    return mock.patch.object(search, "cache_capacities", lambda max_length: [max_length])


def without_reorder():
    """A context in which traced beam searches leave their caches where they are (for `--reorder_cost` only)."""
    from unittest import mock  # pylint: disable=import-outside-toplevel

    from t2t_relpos.decoding import search  # pylint: disable=import-outside-toplevel

    return mock.patch.object(search, "_reorder_caches", lambda self_cache, rows: self_cache)


def measure_reorder_cost(model_name, lengths, reps=9, min_sample_s=0.2, vocab_size=VOCAB_SIZE):
    """Cached beam ms/step with and without the caches' reorder, at the shortest and longest of `lengths`.

    Returns {"model", "ms_per_step": {clock: {"reorder"|"no_reorder": {length: ms}}}}, clocks "wall" and "cpu".
    """
    model = build_model(model_name, vocab_size)
    inputs = make_sources(vocab_size)
    ends = sorted({min(lengths), max(lengths)})
    fns = {}
    for length in ends:
        for variant in ("reorder", "no_reorder"):
            fn = make_decoder(model, "beam", "cached", length)
            with without_reorder() if variant == "no_reorder" else contextlib.nullcontext():
                fn(inputs).numpy()  # Traces it (with or without the reorder), untimed.
            fns[(length, variant)] = lambda fn=fn: fn(inputs).numpy()
    medians = common.time_interleaved_clocks(fns, {"wall": time.perf_counter, "cpu": time.process_time},
                                             reps=reps, warmup=0, min_sample_s=min_sample_s)
    return {"model": model_name, "ms_per_step": {
        clock: {variant: {length: ms_per_step(by_key[(length, variant)], length) for length in ends}
                for variant in ("reorder", "no_reorder")} for clock, by_key in medians.items()}}


def format_reorder_cost(results):
    """One row per model and clock: ms/step shortest -> longest (ratio), as it is and without the reorder."""
    rows = []
    for result in results:
        if "error" in result:
            rows.append([result["model"], "-", f"error: {result['error']}", ""])
            continue
        for clock, by_variant in result["ms_per_step"].items():
            cells = []
            for variant in ("reorder", "no_reorder"):
                (_, first), (_, last) = sorted((int(n), ms) for n, ms in by_variant[variant].items())
                cells.append(f"{first:.2f} -> {last:.2f} ({last / first:.2f}x)")
            rows.append([result["model"], clock] + cells)
    return common.markdown_table(["model", "clock", "beam 4, ms/step at the shortest -> longest length",
                                  "the same with the reorder left out"], rows)


def make_decoder(model, search_name, path, length):
    """A compiled `inputs -> ids` function: greedy `[B, length]` or beam `[B, beam, length]`."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from t2t_relpos.decoding import search  # pylint: disable=import-outside-toplevel

    wrapped = FullPrefix(model) if path == "uncached" else ForcedLength(model)

    def decode(inputs):
        if search_name == "greedy":
            return search.greedy(wrapped, inputs, length)[0]
        return search.beam_search(wrapped, inputs, length, BEAM_SIZE, ALPHA)[0]

    return tf.function(decode, autograph=False, jit_compile=path == "cached_xla")


def check_library_baseline(model, inputs, cached_ids):
    """Raise AssertionError unless cached greedy ids `[B, n]` equal `search.greedy_full_prefix`'s (run eagerly)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    from t2t_relpos.decoding import search  # pylint: disable=import-outside-toplevel

    length = cached_ids.shape[1]
    full = np.asarray(search.greedy_full_prefix(ForcedLength(model), inputs, length))
    if not np.array_equal(full, cached_ids):
        raise AssertionError(f"cached greedy decoding differs from search.greedy_full_prefix at {length} tokens "
                             f"in {int(np.sum(full != cached_ids))} of {full.size} tokens")


def _check_outputs(outputs, length):
    """{search: fraction of tokens on which every path agrees}; AssertionError on a greedy mismatch.

    Every output must be exactly `length` real tokens (no EOS, no padding).
    """
    import numpy as np  # pylint: disable=import-outside-toplevel

    agreement = {}
    for search_name, by_path in outputs.items():
        for path, ids in by_path.items():
            if ids.shape[-1] != length or np.any(ids <= EOS_ID):
                raise AssertionError(f"{search_name}, {path}: not {length} real tokens per output")
        reference = by_path["cached"]
        same = np.all([ids == reference for ids in by_path.values()], axis=0)
        if search_name == "greedy" and not same.all():
            raise AssertionError(f"greedy paths disagree at {length} tokens on {int(np.sum(~same))} tokens: "
                                 + ", ".join(by_path))
        agreement[search_name] = float(np.mean(same))
    return agreement


def measure(model_name, lengths=LENGTHS, paths=PATHS, reps=5, min_sample_s=0.2, vocab_size=VOCAB_SIZE):
    """Median seconds per decoding call of every (length, search, path), timed in interleaved repetitions.

    Returns {"model", "description", "parameters", "times": {length: {search: {path: seconds}}} (wall
    clock), "cpu_times" (the same on the process's CPU time), "agreement": {length: {search: fraction of
    tokens equal across paths}}}. Raises AssertionError when the greedy paths (or the library's uncached
    baseline) disagree.
    """
    model = build_model(model_name, vocab_size)
    inputs = make_sources(vocab_size)
    fns, outputs, agreement = {}, {}, {}
    for length in lengths:
        outputs = {search_name: {} for search_name in SEARCHES}
        for search_name in SEARCHES:
            for path in paths:
                fn = make_decoder(model, search_name, path, length)
                with one_buffer() if path == "one_buffer" else contextlib.nullcontext():
                    outputs[search_name][path] = fn(inputs).numpy()  # Traces (and compiles) it, untimed.
                fns[(length, search_name, path)] = lambda fn=fn: fn(inputs).numpy()
        agreement[length] = _check_outputs(outputs, length)
        if length == min(lengths):
            check_library_baseline(model, inputs, outputs["greedy"]["cached"])
    ponder = ponder_steps(model, inputs, outputs["greedy"]["cached"])
    # The first call of each function above was its warm-up; time_interleaved's own calibration call is
    # another.
    medians = common.time_interleaved_clocks(fns, {"wall": time.perf_counter, "cpu": time.process_time},
                                             reps=reps, warmup=0, min_sample_s=min_sample_s)
    times, cpu_times = ({length: {s: {p: by_clock[(length, s, p)] for p in paths} for s in SEARCHES}
                         for length in lengths} for by_clock in (medians["wall"], medians["cpu"]))
    return {"model": model_name, "description": MODELS[model_name][2], "parameters": int(model.count_params()),
            "times": times, "cpu_times": cpu_times, "agreement": agreement, "ponder_steps": ponder}


# -- reporting -----------------------------------------------------------------------------------------------
def ms_per_step(seconds, length):
    """Milliseconds per decoding step (one token for each of the BATCH sentences), encoder included."""
    return seconds / length * 1e3


def tokens_per_second(seconds, length):
    """Output tokens per second: BATCH sentences of `length` tokens (beam search: the best hypothesis each)."""
    return BATCH * length / seconds


def speedup(times, path="cached"):
    """Uncached time / `path` time, or None when either is missing."""
    if times.get(path) and times.get("uncached"):
        return times["uncached"] / times[path]
    return None


def flatness(result, search_name, path, key="times"):
    """`path`'s time per step at the longest length / at the shortest, or None (`key`: "cpu_times" for CPU)."""
    times = result[key]
    lengths = sorted(times)
    first, last = (times[n][search_name].get(path) for n in (lengths[0], lengths[-1]))
    if not first or not last or len(lengths) < 2:
        return None
    return ms_per_step(last, lengths[-1]) / ms_per_step(first, lengths[0])


def _fmt(value, spec, suffix=""):
    return "" if value is None else f"{value:{spec}}{suffix}"


def format_table(results):
    """The markdown table of times per step, tokens/s and speed-ups of every model, search and length."""
    rows = []
    for result in results.values():
        if "error" in result:
            rows.append([result["model"], result["error"]] + [""] * 10)
            continue
        for search_name in SEARCHES:
            for length, by_search in result["times"].items():
                t = by_search[search_name]
                cpu = result["cpu_times"][length][search_name]
                xla = t.get("cached_xla")
                agree = result["agreement"][length][search_name]
                single = t.get("one_buffer")
                rows.append([result["model"], SEARCH_LABELS[search_name], length,
                             f"{ms_per_step(t['cached'], length):.2f}",
                             _fmt(single and ms_per_step(single, length), ".2f"),
                             f"{ms_per_step(t['uncached'], length):.2f}",
                             f"{tokens_per_second(t['cached'], length):.0f}",
                             f"{tokens_per_second(t['uncached'], length):.0f}", f"**{speedup(t):.1f}x**",
                             f"{speedup(cpu):.1f}x",
                             _fmt(xla and ms_per_step(xla, length), ".2f"), _fmt(speedup(t, "cached_xla"), ".1f", "x"),
                             "yes" if agree == 1.0 else f"{agree:.1%}"])
    return common.markdown_table(
        ["model", "search", "tokens", "cached ms/step", "one buffer ms/step", "uncached ms/step", "cached tok/s",
         "uncached tok/s", "speed-up", "speed-up, CPU time", "cached XLA ms/step", "XLA speed-up", "same tokens"],
        rows, align="llrrrrrrrrrrr")


def format_flatness(results):
    """Time per step at the longest length / at the shortest, per model, search and path."""
    rows = []
    for result in results.values():
        if "error" in result:
            continue
        for search_name in SEARCHES:
            rows.append([result["model"], SEARCH_LABELS[search_name]]
                        + [_fmt(flatness(result, search_name, path, key), ".2f", "x")
                           for path, key in (("cached", "times"), ("cached", "cpu_times"), ("one_buffer", "times"),
                                             ("uncached", "times"), ("cached_xla", "times"))])
    lengths = sorted(next(iter(r["times"] for r in results.values() if "times" in r), [0]))
    span = f"{lengths[-1]} / {lengths[0]}" if lengths else ""
    return common.markdown_table(["model", "search", f"cached, ms/step {span}", f"cached, CPU time, {span}",
                                  f"one buffer, {span}", f"uncached, {span}", f"cached XLA, {span}"], rows,
                                 align="llrrrrr")


def format_ponder(results):
    """A line on the mean recurrent steps of each Universal Transformer (random weights), or ""."""
    parts = [f"`{r['model']}` encoder {r['ponder_steps']['encoder']:.2f}, decoder {r['ponder_steps']['decoder']:.2f}"
             for r in results.values() if r.get("ponder_steps")]
    if not parts:
        return ""
    return ("Average ponder steps (N + R per position; sources, and the greedy outputs at the longest length, "
            "teacher-forced): " + "; ".join(parts) + ". The weights are random: with the halting bias at its "
            "initial 1.0 (p = 0.73 a step) an adaptive position mostly halts at its second step, so the adaptive "
            "model's time per step here is that of a 2-step recurrence, not of a trained one.")


def verdict(results):
    """Lines judging the speed-up at TARGET_LENGTH tokens and the flatness of the cached path (issue 5).

    Each is judged on the wall clock and on CPU time (see the module's docstring).
    """
    lines = [f"Targets (issue 5): cached decoding at least {TARGET_SPEEDUP:g}x faster than uncached at "
             f"{TARGET_LENGTH} tokens; cached time per step roughly flat in the length (judged: longest / "
             f"shortest <= {FLAT_MAX:g}x). Judged on wall time, and on CPU time."]

    def judged(value, met):
        return "not measured" if value is None else f"{value:.2f}x {'met' if met(value) else 'MISSED'}"

    for result in results.values():
        if "error" in result:
            lines.append(f"- {result['model']}: not measured ({result['error']})")
            continue
        for search_name in SEARCHES:
            wall, cpu = (result[key].get(TARGET_LENGTH, {}).get(search_name) for key in ("times", "cpu_times"))
            fast = [judged(speedup(t) if t else None, lambda r: r >= TARGET_SPEEDUP) for t in (wall, cpu)]
            flat = [judged(flatness(result, search_name, "cached", key), lambda r: r <= FLAT_MAX)
                    for key in ("times", "cpu_times")]
            xla = speedup(wall, "cached_xla") if wall else None
            xla_note = "" if xla is None else f" (cached XLA: {xla:.1f}x wall)"
            lines.append(f"- {result['model']}, {SEARCH_LABELS[search_name]}: speed-up at {TARGET_LENGTH} tokens "
                         f"{fast[0]} wall, {fast[1]} CPU{xla_note}; flatness {flat[0]} wall, {flat[1]} CPU")
    return "\n".join(lines)


def plot(results, path, title=None):
    """A PNG at `path`: ms per step against the output length, greedy and beam, one colour per model and one line
    style per path, the two keys under the panels."""
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    from matplotlib.lines import Line2D  # pylint: disable=import-outside-toplevel

    styles = {"cached": ("-", "o"), "one_buffer": ("-.", "v"), "uncached": ("--", "s"), "cached_xla": (":", "^")}
    labels = {"cached": "cached (caches grown with the output)", "one_buffer": "cached, one max_length buffer",
              "uncached": "uncached (the whole prefix each step)", "cached_xla": "cached, XLA"}
    colours = dict(zip((r["model"] for r in results.values() if "error" not in r), ("C0", "C1", "C2", "C3", "C4")))
    fig, axes = plt.subplots(1, len(SEARCHES), figsize=(11.5, 4.6), sharey=True)
    drawn = set()
    for ax, search_name in zip(axes, SEARCHES):
        for result in results.values():
            if "error" in result:
                continue
            lengths = sorted(result["times"])
            for decode_path, (linestyle, marker) in styles.items():
                ok = [n for n in lengths if result["times"][n][search_name].get(decode_path)]
                if ok:
                    drawn.add(decode_path)
                    ax.plot(ok, [ms_per_step(result["times"][n][search_name][decode_path], n) for n in ok],
                            color=colours[result["model"]], linestyle=linestyle, marker=marker, markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.set_xlabel("output tokens")
        ax.set_title(f"{SEARCH_LABELS[search_name]}, batch {BATCH}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("ms per decoding step (median)")
    models = [Line2D([], [], color=colour, linewidth=2.5) for colour in colours.values()]
    paths = [Line2D([], [], color="0.3", linestyle=styles[p][0], marker=styles[p][1], markersize=4)
             for p in styles if p in drawn]
    fig.suptitle(title or "Decoding time per step: cached vs re-running the decoder on the whole prefix",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    fig.legend(models, list(colours), title="model", loc="lower left", bbox_to_anchor=(0.08, 0.0), ncol=5,
               fontsize=8, title_fontsize=8, frameon=False)
    fig.legend(paths, [labels[p] for p in styles if p in drawn], title="path", loc="lower right",
               bbox_to_anchor=(0.98, 0.0), ncol=2, fontsize=8, title_fontsize=8, frameon=False)
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)


def readme_section(args, results, table, flat_table, judged, elapsed):
    """The run log's section: how it was run, on what, the method, the tables and the verdict."""
    models = "; ".join(f"`{r['model']}`: {r['description']}, {r['parameters'] / 1e6:.2f} M parameters"
                       for r in results.values() if "error" not in r)
    section = "\n\n".join(part for part in [
        "## Decoding: cached vs uncached, greedy and beam search",
        f"`{common.command_line()}` — {common.today()}, took {elapsed:.0f} s.  \n"
        f"Machine: {common.machine_description()}.",
        f"Random models, vocabulary {args.vocab_size} ({models}). {BATCH} sources of "
        f"{SOURCE_LENGTH} tokens; end-of-sequence is forbidden so every output is exactly the given number of "
        f"tokens. Search: `search.greedy` and `search.beam_search` (beam {BEAM_SIZE}, alpha {ALPHA}), the whole "
        "search in one `tf.function`, traced before timing. *cached*: the model's `decode_step` with its "
        "key/value caches, written in place (`layers.cache_ops`) and grown with the output (32, 64, 96, then "
        "about 1.5x positions: `search.cache_capacities`); *one buffer*: the same with caches of all the tokens "
        "from the first step (the cached path before the caches grew); *uncached*: the same search with a "
        "`decode_step` that re-runs the decoder on the whole prefix at every step; *cached XLA*: the cached "
        "search with `jit_compile=True` (no uncached "
        "counterpart: the growing prefix has no static shape). Greedy outputs of all paths agree token for "
        "token (checked before timing, and against `search.greedy_full_prefix`); *same tokens* says so for "
        "beam search too. Times: median of "
        f"{args.reps} interleaved repetitions, every configuration of a model in one process, "
        f"{_threads_text(args.threads)}; ms/step = wall time of the whole call (encoder included) / tokens; "
        f"tok/s = {BATCH} x tokens / wall time; speed-up = uncached time / cached time, on the wall clock and "
        "on the process's CPU time (which other jobs on a shared machine do not inflate).",
        table,
        format_ponder(results),
        "Flatness: time per step at the longest length / at the shortest (uncached for contrast):",
        flat_table,
        judged,
    ] if part)
    if args.plot:
        image = os.path.relpath(os.path.abspath(args.plot), os.path.dirname(common.RUN_LOG))
        section += f"\n\n![ms per step against output length]({image})"
    return section


def _threads_text(threads):
    if not threads:
        return "TensorFlow on its default threads (one per core)"
    return f"TensorFlow on {threads} thread{'s' if threads > 1 else ''}"


def _parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="comma-separated output lengths")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions per configuration (median)")
    parser.add_argument("--threads", type=int, default=1,
                        help="TensorFlow intra- and inter-op threads (0: TensorFlow's default, one per core)")
    parser.add_argument("--min_sample_s", type=float, default=0.2,
                        help="a timed sample repeats short calls until it lasts this long")
    parser.add_argument("--vocab_size", type=int, default=VOCAB_SIZE)
    parser.add_argument("--no_xla", action="store_true", help="leave out the cached path compiled with XLA")
    parser.add_argument("--write", action="store_true", help="write the section into docs/studies/benchmark_runs.md")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG of ms per step against length")
    parser.add_argument("--reorder_cost", action="store_true",
                        help="time the beam search with and without its cache reorder instead (writes nothing)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _lengths(args):
    return sorted(int(n) for n in args.lengths.split(","))


def _paths(args):
    return tuple(p for p in PATHS if not (args.no_xla and p == "cached_xla"))


def _worker(args):
    if args.threads:
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    if args.reorder_cost:
        common.emit_result(measure_reorder_cost(args.worker, _lengths(args), reps=args.reps,
                                                min_sample_s=args.min_sample_s, vocab_size=args.vocab_size))
        return
    result = measure(args.worker, _lengths(args), _paths(args), reps=args.reps, min_sample_s=args.min_sample_s,
                     vocab_size=args.vocab_size)
    for key in ("times", "cpu_times", "agreement"):  # JSON keys are strings.
        result[key] = {str(n): value for n, value in result[key].items()}
    common.emit_result(result)


def _measure_model(name, args):
    print(f"{name}: lengths {args.lengths} ...", file=sys.stderr, flush=True)
    result = common.run_worker([os.path.abspath(__file__), "--worker", name, "--lengths", args.lengths,
                                "--reps", str(args.reps), "--min_sample_s", str(args.min_sample_s),
                                "--vocab_size", str(args.vocab_size), "--threads", str(args.threads)]
                               + (["--no_xla"] if args.no_xla else [])
                               + (["--reorder_cost"] if args.reorder_cost else []))
    if "error" in result:
        return {"model": name, "error": result["error"]}
    if args.reorder_cost:
        return result
    for key in ("times", "cpu_times", "agreement"):
        result[key] = {int(n): value for n, value in result[key].items()}
    return result


def main(argv=None):
    """Measure every model in its own worker, print (and write, plot) the results."""
    args = _parse_args(argv)
    if args.worker is not None:
        _worker(args)
        return 0
    common.refuse_uncommitted_writes(args)
    started = time.time()
    results = {name: _measure_model(name, args) for name in args.models.split(",")}
    elapsed = time.time() - started
    if args.reorder_cost:
        print(f"{format_reorder_cost(results.values())}\n\n{common.command_line()} — {common.today()}, "
              f"{elapsed:.0f} s\n{common.machine_description()}")
        return 0 if all("error" not in r for r in results.values()) else 1
    table, flat_table, judged = format_table(results), format_flatness(results), verdict(results)
    print(f"{table}\n\n{format_ponder(results)}\n\n{flat_table}\n\n{judged}\n\n"
          f"{common.command_line()} — {common.today()}, {elapsed:.0f} s\n"
          f"{common.machine_description()}")
    if args.plot:
        plot(results, args.plot)
    if args.write:
        common.replace_section("decoding", readme_section(args, results, table, flat_table, judged, elapsed))
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
