"""Length extrapolation of perplexity (Press et al. 2022, ALiBi, Figure 1) on character-level Tiny Shakespeare.

    .venv/bin/python benchmarks/lm_length.py [--models transformer_rel,transformer,universal_transformer_rel]
        [--seeds 1,2,3] [--train_steps 1000] [--windows 128,256,512,1024] [--work_dir /tmp/lm_length]
        [--data_dir DIR] [--tmp_dir DIR] [--threads 1] [--plot PATH] [--record] [--report_only]

Each (model, seed) trains with `t2t-relpos-trainer` on `languagemodel_shakespeare_characters` (nanoGPT's 90/10
split) with its `*_lm_cpu*` hparams set: windows of 128 characters, 12 a batch (1536 tokens), for
`--train_steps` steps. The trained run is then read back (`runs.load`) in a fresh process and the whole eval
split (111,541 characters) is scored with disjoint windows (`decoding.lm_scoring.score_ids`, stride = window) of
each of `--windows` tokens: bits per character, and the perplexity ratio ppl(longest) / ppl(training window)
(= 2 ** (bits(longest) - bits(128))). A model that extrapolates scores as well or better on longer windows (more
context per character); one that does not falls apart past the length it was trained on, as sinusoids do in the
ALiBi paper's Figure 1. The trainer's own final evaluation (bits per character over the eval windows of 128) is
kept as a check of the scoring at 128.

Models (name -> hparams set): `transformer_rel` (relative positions, k = 16, per-head tables), `transformer`
(sinusoids), `universal_transformer_rel` (relative, one block over 4 steps); all 4 layers (steps) of width 128,
pre-norm, no dropout.

Runs live in `--work_dir` (default under the system's temporary folder, never the repository): `<model>_s<seed>/`
with the trainer's files, `<model>_s<seed>.log`, and `result.json` once scored (reused when its steps and windows
match; an unfinished run resumes from its checkpoint). `--threads` limits TensorFlow's thread pools in the tools
(`TF_NUM_INTRAOP_THREADS` / `TF_NUM_INTEROP_THREADS`, which TensorFlow reads); pin the whole script to a core
with `taskset -c 0`. One run at a time. `--data_dir` is prepared on first use from `tinyshakespeare.txt.gz` in
`--tmp_dir`. The report is a markdown table per seed and one of mean +- sample std per model; `--plot PATH` draws
bits per character and the perplexity ratio against the evaluation length (a line per model at the seeds' mean,
a band over their range, the seeds as points); `--record` appends a row per run to
benchmarks/results/lm_length.json (with the commit it ran on; committed code only).
"""

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position

MODELS = {  # name -> hparams set; the order is the report's and the plot's.
    "transformer_rel": "transformer_lm_cpu_rel",
    "transformer": "transformer_lm_cpu",
    "universal_transformer_rel": "universal_transformer_lm_cpu_rel",
}
PROBLEM = "languagemodel_shakespeare_characters"
TRAIN_WINDOW = 128  # The sets' max_length: the windows every model is trained on.
GOAL_RATIO = 1.05  # The relative model's perplexity at 8x the training window within 5% of it at 1x.
FINAL_BITS = re.compile(r"^Final evaluation: .*\bbits_per_character ([0-9.]+)", re.M)
RESULTS_DESCRIPTION = (
    "Length extrapolation of perplexity (ALiBi, Figure 1 protocol) on character-level Tiny Shakespeare: each "
    "model trained on windows of 128 characters, the eval split (nanoGPT's last 10%) scored with disjoint windows "
    "of each length; bits_per_char by window length. Recorded by `benchmarks/lm_length.py --record`.")


def int_list(text, name):
    """Comma-separated positive integers, or one `error:` line naming the flag."""
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise SystemExit(f"error: --{name}={text}: give comma-separated integers >= 1")
    return values


def run_name(model, seed):
    return f"{model}_s{seed}"


def setting(args):
    """What a saved result must have been made with to be reused."""
    return {"train_steps": args.train_steps, "windows": int_list(args.windows, "windows")}


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def saved_result(model, seed, args):
    """The run's saved result at these steps and windows, or None."""
    saved = _read_json(os.path.join(args.work_dir, run_name(model, seed), "result.json"))
    return saved if saved and saved.get("setting") == setting(args) else None


def ids_path(data_dir):
    return os.path.join(data_dir, f"{PROBLEM}-eval.ids.npy")


def prepare_data(args):
    """Runs `t2t-relpos-datagen` where `--data_dir` has no eval split yet (it says what to copy where)."""
    if os.path.exists(ids_path(args.data_dir)):
        return
    os.makedirs(args.work_dir, exist_ok=True)
    common.run_cli("datagen", f"--problem={PROBLEM}", f"--data_dir={args.data_dir}", f"--tmp_dir={args.tmp_dir}",
                   log=os.path.join(args.work_dir, "datagen.log"), threads=args.threads)


def train(model, seed, args):
    """Trains (or resumes) the run to `--train_steps`; the trainer's output. One evaluation, at the end."""
    run_dir = os.path.join(args.work_dir, run_name(model, seed))
    return common.run_cli(
        "trainer", f"--problem={PROBLEM}", f"--data_dir={args.data_dir}", f"--hparams_set={MODELS[model]}",
        f"--output_dir={run_dir}", f"--train_steps={args.train_steps}", "--eval_every=0",
        f"--checkpoint_every={args.train_steps}", "--log_every=100", f"--seed={seed}",
        log=run_dir + ".log", threads=args.threads)


def evaluate(run_dir, data_dir, windows, tokens_per_batch=8192):
    """{window: {"bits_per_char", "perplexity", "tokens", "seconds"}} of the run's newest checkpoint on the eval
    split, disjoint windows (stride = window); with "checkpoint" and "parameters". Imports TensorFlow."""
    from t2t_relpos.decoding import lm_scoring  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import runs  # pylint: disable=import-outside-toplevel

    model, problem, _, path = runs.load(run_dir, data_dir=data_dir)
    ids = problem.tokens("eval", data_dir)
    scorer = lm_scoring.model_scorer(model)
    out = {"checkpoint": path, "parameters": int(model.count_params()), "windows": {}}
    for window in windows:
        began = time.perf_counter()
        scored = lm_scoring.score_ids(scorer, ids, window, window, batch_size=max(1, tokens_per_batch // window))
        out["windows"][str(window)] = {"bits_per_char": scored["bits_per_token"], "perplexity": scored["perplexity"],
                                       "tokens": scored["tokens"], "seconds": time.perf_counter() - began}
    return out


def run_one(model, seed, args):
    """Trains and scores one run (or reads its saved result); the result dict saved in its `result.json`."""
    previous = saved_result(model, seed, args)
    if previous is not None:
        return previous
    run_dir = os.path.join(args.work_dir, run_name(model, seed))
    print(f"{run_name(model, seed)}: training {args.train_steps} steps ...", file=sys.stderr, flush=True)
    with common.RunClock(run_dir) as clock:
        trained = train(model, seed, args)
    final = FINAL_BITS.findall(trained)
    print(f"{run_name(model, seed)}: scoring windows {args.windows} ...", file=sys.stderr, flush=True)
    began = time.perf_counter()
    scored = common.run_worker([os.path.abspath(__file__), "--worker", run_dir, "--data_dir", args.data_dir,
                                "--windows", args.windows, "--tokens_per_batch", str(args.tokens_per_batch)])
    if "error" in scored:
        raise RuntimeError(f"{run_name(model, seed)}: scoring failed: {scored['error']}")
    result = {"setting": setting(args), "model": model, "seed": seed, "train_seconds": clock.total,
              "eval_seconds": time.perf_counter() - began, "trainer_bits_per_char": float(final[-1]) if final else None,
              **scored}
    with open(os.path.join(run_dir, "result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return result


# -- the report ------------------------------------------------------------------------------------------------
def bits(result, window):
    return result["windows"][str(window)]["bits_per_char"]


def ratio(result, window, base=TRAIN_WINDOW):
    """Perplexity at `window` over perplexity at `base`: 2 ** (bits difference), per character."""
    return 2.0 ** (bits(result, window) - bits(result, base))


def mean_std(values):
    """(mean, sample std; 0.0 for a lone value)."""
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _spread(values, digits=3):
    mean, std = mean_std(values)
    return f"{mean:.{digits}f} +- {std:.{digits}f}" if len(values) > 1 else f"{mean:.{digits}f}"


def by_model(results):
    """{model: [results, in seed order]}, models in `MODELS` order, then any other."""
    grouped = {}
    for result in sorted(results, key=lambda r: (list(MODELS).index(r["model"]) if r["model"] in MODELS
                                                 else len(MODELS), r["model"], r["seed"])):
        grouped.setdefault(result["model"], []).append(result)
    return grouped


def per_seed_table(results, windows):
    longest = max(windows)
    headers = (["model", "seed"] + [f"bits/char @ {w}" for w in windows]
               + [f"ppl({longest}) / ppl({TRAIN_WINDOW})", "trainer @ 128", "train min", "eval s"])
    rows = []
    for model, runs in by_model(results).items():
        for result in runs:
            check = result.get("trainer_bits_per_char")
            rows.append([model, str(result["seed"])] + [f"{bits(result, w):.3f}" for w in windows]
                        + [f"{ratio(result, longest):.3f}", "" if check is None else f"{check:.3f}",
                           f"{result['train_seconds'] / 60:.1f}", f"{result['eval_seconds']:.0f}"])
    return common.markdown_table(headers, rows, align="ll" + "r" * (len(headers) - 2))


def summary_table(results, windows):
    """Mean +- sample std over each model's seeds: bits per character at each window, and the ratios."""
    others = [w for w in windows if w != TRAIN_WINDOW]
    headers = (["model", "seeds"] + [f"bits/char @ {w}" for w in windows]
               + [f"ppl({w}) / ppl({TRAIN_WINDOW})" for w in others])
    rows = []
    for model, runs in by_model(results).items():
        rows.append([model, ",".join(str(r["seed"]) for r in runs)]
                    + [_spread([bits(r, w) for r in runs]) for w in windows]
                    + [_spread([ratio(r, w) for r in runs]) for w in others])
    return common.markdown_table(headers, rows, align="ll" + "r" * (len(headers) - 2))


def verdict(results, windows, goal_model="transformer_rel", foil="transformer"):
    """The goal's line: the relative Transformer's ppl(longest) / ppl(128) against GOAL_RATIO, the sinusoid's
    beside it."""
    longest = max(windows)
    grouped = by_model(results)
    if goal_model not in grouped or TRAIN_WINDOW not in windows or longest == TRAIN_WINDOW:
        return f"Goal (ppl({longest}) / ppl({TRAIN_WINDOW}) <= {GOAL_RATIO}): not measured."
    ratios = [ratio(r, longest) for r in grouped[goal_model]]
    mean = statistics.mean(ratios)
    met = "met" if max(ratios) <= GOAL_RATIO else ("met on average, not by every seed" if mean <= GOAL_RATIO
                                                   else "MISSED")
    worse = [r for r in ratios if r > GOAL_RATIO]
    line = (f"Goal: {goal_model}'s perplexity at {longest} ({longest // TRAIN_WINDOW}x the training window) within "
            f"{GOAL_RATIO - 1:.0%} of it at {TRAIN_WINDOW}: ratio {_spread(ratios)} "
            f"(seeds {', '.join(f'{r:.3f}' for r in ratios)}): {met}"
            + (f" ({len(worse)} of {len(ratios)} seeds above {GOAL_RATIO})" if worse and met != "MISSED" else "")
            + ("; below 1, longer windows score better (more context)" if max(ratios) < 1 else "") + ".")
    if foil in grouped:
        foil_ratios = [ratio(r, longest) for r in grouped[foil]]
        line += f" Beside it, {foil} (sinusoids): {_spread(foil_ratios)}."
    return line


def report(results, args, seconds):
    windows = int_list(args.windows, "windows")
    total_train = sum(r["train_seconds"] for r in results) / 60
    total_eval = sum(r["eval_seconds"] for r in results) / 60
    return "\n".join([
        "## Length extrapolation of perplexity (ALiBi, Figure 1 protocol)", "",
        f"`{common.command_line()}` — {common.today()}, "
        + ("collected from the finished runs" if args.report_only else f"took {seconds / 60:.0f} min")
        + f"; the runs' training took {total_train:.0f} min and their scoring {total_eval:.0f} min in all, "
        f"one at a time, TensorFlow on {args.threads or 'all'} thread(s).  ",
        f"Machine: {common.machine_description()}. Code: {common.code_version()}.", "",
        f"Trained on windows of {TRAIN_WINDOW} characters of Tiny Shakespeare (nanoGPT's 90/10 split), 12 a batch, "
        f"{args.train_steps} steps; the eval split ({_tokens(results)} characters) scored with disjoint windows "
        "(stride = window) of each length: bits per character (lower is better) and per-character perplexity over "
        f"that at {TRAIN_WINDOW}. trainer @ 128: the trainer's own final evaluation (the same windows of 128).", "",
        per_seed_table(results, windows), "",
        "Over seeds (mean +- sample std):", "",
        summary_table(results, windows), "",
        verdict(results, windows)])


def _tokens(results):
    counts = {w["tokens"] for r in results for w in r["windows"].values()}
    return ", ".join(f"{c:,}" for c in sorted(counts))


def plot(results, windows, path):
    """Bits per character and ppl / ppl(128) against the evaluation length: a line per model at the seeds' mean,
    a band over their range, each seed a point; the training window marked."""
    import plots  # pylint: disable=import-outside-toplevel  # The report's plot helpers (matplotlib).

    plt = plots._pyplot()  # pylint: disable=protected-access
    fig, (bits_ax, ratio_ax) = plt.subplots(1, 2, figsize=(11.5, 4.4))
    for model, runs in by_model(results).items():
        colour = plots.MODEL_COLOURS.get(model)
        marker = "o" if model.endswith("_rel") else "s"
        for ax, value in ((bits_ax, bits), (ratio_ax, ratio)):
            per_seed = [[value(r, w) for w in windows] for r in runs]
            means = [statistics.mean(column) for column in zip(*per_seed)]
            label = f"{plots.model_name(model)} ({len(runs)} seed{'s' * (len(runs) > 1)})"
            line, = ax.plot(windows, means, marker=marker, color=colour, label=label)
            ax.fill_between(windows, [min(c) for c in zip(*per_seed)], [max(c) for c in zip(*per_seed)],
                            color=line.get_color(), alpha=0.18, linewidth=0)
            for seed_values in per_seed:
                ax.scatter(windows, seed_values, s=10, color=line.get_color(), alpha=0.6, zorder=3)
    ratio_ax.axhline(GOAL_RATIO, color="0.3", linestyle="--", linewidth=1)
    ratio_ax.text(windows[0], GOAL_RATIO, f" goal: {GOAL_RATIO}", va="bottom", fontsize=8, color="0.3")
    ratio_ax.axhline(1.0, color="0.6", linestyle=":", linewidth=1)
    ratio_ax.set_yscale("log")
    plain = plt.FuncFormatter(lambda value, _: f"{value:g}")
    ratio_ax.yaxis.set_major_formatter(plain)
    ratio_ax.yaxis.set_minor_formatter(plain)
    for ax, ylabel in ((bits_ax, "bits per character (eval split)"),
                       (ratio_ax, f"perplexity / perplexity at {TRAIN_WINDOW} (log scale)")):
        ax.axvline(TRAIN_WINDOW, color="0.5", linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(windows, [str(w) for w in windows])
        ax.set_xlabel("evaluation window (characters; disjoint windows)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
    bits_ax.legend(fontsize=8)
    steps = sorted({r["setting"]["train_steps"] for r in results})
    fig.suptitle(f"Tiny Shakespeare, characters: trained on windows of {TRAIN_WINDOW} for "
                 f"{', '.join(map(str, steps))} steps, scored on longer ones (line: mean over seeds; band: their "
                 "range; points: seeds)", fontsize=10)
    fig.tight_layout()
    plots._save(fig, path)  # pylint: disable=protected-access


def record_rows(results):
    return [{"model": r["model"], "hparams_set": MODELS.get(r["model"]), "train_steps": r["setting"]["train_steps"],
             "bits_per_char": {w: v["bits_per_char"] for w, v in r["windows"].items()},
             "trainer_bits_per_char": r.get("trainer_bits_per_char"), "parameters": r.get("parameters"),
             "train_minutes": round(r["train_seconds"] / 60, 2), **common.provenance(seed=r["seed"])}
            for r in results]


def _parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--train_steps", type=int, default=1000)
    parser.add_argument("--windows", default="128,256,512,1024", help="evaluation windows (tokens); must hold "
                        f"the training window {TRAIN_WINDOW}")
    parser.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(), "lm_length"))
    parser.add_argument("--data_dir", help="prepared data (default: <work_dir>/data, prepared on first use)")
    parser.add_argument("--tmp_dir", help="where tinyshakespeare.txt.gz is (default: <work_dir>/raw)")
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow threads in the tools (0: default)")
    parser.add_argument("--tokens_per_batch", type=int, default=8192, help="scoring: windows per call x window")
    parser.add_argument("--report_only", action="store_true", help="train nothing: report the finished runs")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG of bits/char and the ratio against length")
    parser.add_argument("--record", action="store_true", help="append a row per run to "
                        "benchmarks/results/lm_length.json (committed code only)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # A run directory to score, in this process.
    args = parser.parse_args(argv)
    args.data_dir = args.data_dir or os.path.join(args.work_dir, "data")
    args.tmp_dir = args.tmp_dir or os.path.join(args.work_dir, "raw")
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        raise SystemExit(f"error: --models: unknown {', '.join(unknown)}; known: {', '.join(MODELS)}")
    if TRAIN_WINDOW not in int_list(args.windows, "windows"):
        raise SystemExit(f"error: --windows={args.windows} must include the training window {TRAIN_WINDOW}")
    int_list(args.seeds, "seeds")
    if args.train_steps < 1:
        raise SystemExit("error: --train_steps must be >= 1")
    return args


def main(argv=None):
    args = _parse_args(argv)
    if args.threads:  # The tools and the scoring worker inherit it.
        os.environ.update(TF_NUM_INTRAOP_THREADS=str(args.threads), TF_NUM_INTEROP_THREADS=str(args.threads))
    if args.worker:
        common.emit_result(evaluate(args.worker, args.data_dir, int_list(args.windows, "windows"),
                                    args.tokens_per_batch))
        return 0
    common.refuse_uncommitted_writes(args)
    began = time.perf_counter()
    runs = [(model, seed) for model in args.models.split(",") for seed in int_list(args.seeds, "seeds")]
    results, missing = [], []
    if args.report_only:
        for model, seed in runs:
            found = saved_result(model, seed, args)
            if found:
                results.append(found)
            else:
                missing.append(run_name(model, seed))
    else:
        common.stop_tools_on_termination()
        prepare_data(args)
        for model, seed in runs:
            try:
                results.append(run_one(model, seed, args))
            except RuntimeError as error:
                print(f"error: {error}", file=sys.stderr, flush=True)
                missing.append(run_name(model, seed))
                continue
            r = results[-1]
            print(f"{run_name(model, seed)}: " + ", ".join(f"{w}: {v['bits_per_char']:.3f}"
                                                           for w, v in r["windows"].items())
                  + f" bits/char; {r['train_seconds'] / 60:.1f} min training", file=sys.stderr, flush=True)
    if results:
        print(report(results, args, time.perf_counter() - began))
        if args.plot:
            plot(results, int_list(args.windows, "windows"), args.plot)
        if args.record:
            common.record("lm_length", record_rows(results), description=RESULTS_DESCRIPTION)
    if missing:
        print(f"Not finished: {', '.join(missing)}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
