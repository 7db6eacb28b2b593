"""The benchmark report's plots of quality, drawn from the results files under benchmarks/results/.

    .venv/bin/python benchmarks/plots.py [--only decoding,length_generalisation,length_generalisation_curves,...]
        [--results_dir benchmarks/results] [--out_dir benchmarks]

The scripts append their rows to those files with `--record` (`length_generalisation.py`, `babi.py train` and
`curriculum`, `babi_accelerator.py report`, `translate_small.py`); this draws, from whatever rows are there:

- `length_generalisation.png`: char accuracy (solid) and sequence accuracy (dashed, where recorded) by reference
  length, one panel per task and kind of position signal (a row of panels each: relative positions; sinusoids with
  position offsets, Table 4's protocol; sinusoids without), one line per model: each model's newest setting
  (steps and overrides, such as position offsets), averaged over its seeds, a model that did not learn the
  training lengths drawn faint; the
  paper's Table 4 figures at length 400 in black (a plus the Transformer, a star the UT; filled char, hollow
  sequence); chance (0.1) and the training lengths marked; a legend under each panel.
- `training_curves.png`: training accuracy (teacher-forced tokens of the training batches, lengths <= 40) by
  step, one panel per task and model, one colour per setting (position offsets and their range, a curriculum over
  them), one line style per seed; a run recorded again after training on replaces its shorter curve, and a run
  trained again from step 0 with the same setting is drawn beside the first, its date in the legend.
- `babi_tasks.png`: test error per task, one panel per subset (1k, 10k): our best recorded run (lowest mean test
  error) of each protocol (joint training; the curriculum, which is not the paper's protocol) beside the paper's
  adaptive UT (Appendix E, best of 10 seeds per task), drawn hatched in black; its legend gives Table 1's mean
  error (7.85% at 1k, the figure the report quotes) and the mean of the per-task figures drawn (7.78%).
- `translation_bleu.png`: BLEU (sacreBLEU, 13a) per model on Multi30k, a point per recorded seed and a bar at
  their mean, the runs of each date side by side (so a re-run on later code stands apart from the old one).

- `decoding.png`: decoding.py's plot (ms per step against the output length, greedy and beam 4, one colour per
  model, one line style per path) from the rows of `decoding.json` (the whole run of 2026-11-26, copied from
  docs/studies/decoding.md); `decoding.py --plot` draws the same from a new measurement.

Each title gives the dates of the rows it draws. attention.png is drawn by attention.py from its own measurements.
"""

import argparse
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import babi  # noqa: E402  pylint: disable=wrong-import-position
import common  # noqa: E402  pylint: disable=wrong-import-position
import length_generalisation  # noqa: E402  pylint: disable=wrong-import-position

BUCKETS = ("1-10", "11-40", "41-100", "101-200", "201-400")  # The decoder's reference-length buckets.
# One hue per architecture, darker with relative positions (drawn with circles; sinusoids with squares).
MODEL_COLOURS = {"transformer": "#6baed6", "transformer_rel": "#08519c", "universal_transformer": "#fd8d3c",
                 "universal_transformer_rel": "#a63603", "adaptive_universal_transformer": "#74c476",
                 "adaptive_universal_transformer_rel": "#006d2c"}
TRAINING_BUCKETS = ("1-10", "11-40")  # Inside the training lengths (<= 40).
CHANCE = 0.1  # Char accuracy of a random decimal digit.


def _pyplot():
    import matplotlib  # pylint: disable=import-outside-toplevel

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    return plt


def date_range(rows):
    """"2026-11-21" or "2026-11-21 to 2026-11-26": the dates of `rows`."""
    dates = sorted({row["date"] for row in rows})
    return dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"


def _save(fig, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    print(f"Wrote {path}")


# -- length generalisation ----------------------------------------------------------------------------------
def _setting(row):
    return row["train_steps"], row.get("hparams", ""), row.get("offsets_warmup")


def length_rows(rows):
    """Per (task, model), the runs of its newest setting (training steps and overrides) merged over seeds: the
    newest row of each seed, their buckets' accuracies and training accuracy averaged, `seeds` listing them."""
    newest = {}  # The setting of each pair's latest-dated row (rows copied from old tables came in late).
    for row in sorted(rows, key=lambda r: r["date"]):  # A stable sort: the same date keeps the order appended.
        newest[row["task"], row["model"]] = _setting(row)
    runs = {}
    for row in rows:
        if _setting(row) == newest[row["task"], row["model"]]:
            runs.setdefault((row["task"], row["model"]), {})[row.get("seed")] = row
    merged = []
    for by_seed in runs.values():
        chosen = list(by_seed.values())
        buckets = {}
        for bucket in dict.fromkeys(b for row in chosen for b in row["buckets"]):
            for kind in ("char", "seq"):
                values = [row["buckets"][bucket][kind] for row in chosen if kind in row["buckets"].get(bucket, {})]
                if values:
                    buckets.setdefault(bucket, {})[kind] = sum(values) / len(values)
        trained = [row["train_accuracy"] for row in chosen if row.get("train_accuracy") is not None]
        merged.append(dict(chosen[-1], buckets=buckets, seeds=sorted(by_seed, key=str),
                           train_accuracy=sum(trained) / len(trained) if trained else None))
    return merged


# Overrides a line's legend spells out in words (the offsets' range, pre-norm); any other is named as it is.
_LABELLED = ("position_start_index", "position_offset_shared", "max_position_offset", "norm_position")


MODEL_NAMES = {"transformer": "Transformer", "universal_transformer": "UT", "adaptive_universal_transformer":
               "adaptive UT"}


def model_name(model):
    """"relative UT" for universal_transformer_rel: a model as a legend names it."""
    base = model.removesuffix("_rel")
    name = MODEL_NAMES.get(base, base)
    return f"relative {name}" if model.endswith("_rel") else name


def unlearned(row):
    """Whether a merged row's runs did not learn the training lengths (mean training accuracy below 0.9)."""
    return row.get("train_accuracy") is not None and row["train_accuracy"] < 0.9


def length_label(row):
    """A line's legend: the model, whether it trained with position offsets, its steps and seeds."""
    seeds = row["seeds"]
    return (f"{model_name(row['model'])}{setting_label(row)}, {row['train_steps']} steps, "
            f"{'seed' if len(seeds) == 1 else 'seeds'} {', '.join(map(str, seeds))}"
            f"{'; not learned' if unlearned(row) else ''}")


def setting_label(row):
    """" + offsets in [0, 400) (pre-norm)" and the like: a row's offsets and other overrides, in words."""
    hparams = row.get("hparams", "")
    limit = re.search(r"max_position_offset=(\d+)", hparams)
    offsets = ("" if "position_start_index" not in hparams else
               f" + offsets in [0, {limit.group(1)})" if limit else " + offsets")
    warmup = re.fullmatch(r"(?:\w+:(\d+)|none)@(\d+)", row.get("offsets_warmup") or "")
    if warmup and limit:  # A curriculum: the first steps with a narrower range, or without offsets.
        first, then = ((f" + offsets in [0, {warmup.group(1)})", "in") if warmup.group(1) else
                       (" without offsets", "offsets in"))
        offsets = f"{first} for {warmup.group(2)} steps, then {then} [0, {limit.group(1)})"
    offsets += " (pre-norm)" if "norm_position=pre" in hparams and not row["model"].startswith(
        ("universal", "adaptive")) else ""
    others = [item for item in hparams.split(",") if item and item.partition("=")[0] not in _LABELLED]
    return offsets + (f" ({', '.join(others)})" if others else "")  # Such as a UT's num_rec_steps=4.


# The rows of the plot: one kind of position signal each, as the report's sections split them.
POSITION_KINDS = (("relative", "relative positions, no offsets"),
                  ("offsets", "sinusoids + position offsets (Table 4's protocol)"),
                  ("sinusoid", "sinusoids, no offsets"))


def position_kind(row):
    """"offsets" (trained with position offsets), "relative" (relative positions) or "sinusoid"."""
    if "position_start_index" in row.get("hparams", ""):
        return "offsets"
    return "relative" if row["model"].endswith("_rel") else "sinusoid"


def plot_length_generalisation(results, path):
    plt = _pyplot()
    rows = length_rows(results["rows"])
    tasks = list(dict.fromkeys(row["task"] for row in rows))
    kinds = [(kind, title) for kind, title in POSITION_KINDS if any(position_kind(r) == kind for r in rows)]
    buckets = [b for b in BUCKETS if any(b in row["buckets"] for row in rows)]
    x = {bucket: i for i, bucket in enumerate(buckets)}
    fig, axes = plt.subplots(len(kinds), len(tasks), figsize=(5.2 * len(tasks), 5.2 * len(kinds)), sharey=True,
                             squeeze=False)
    for (kind, kind_title), panels in zip(kinds, axes):
        for ax, task in zip(panels, tasks):
            inside = [x[b] for b in TRAINING_BUCKETS if b in x]
            if inside:
                ax.axvspan(min(inside) - 0.4, max(inside) + 0.4, color="0.93", zorder=0)
                ax.text(max(inside) + 0.35, 0.02, "training lengths", ha="right", fontsize=8, color="0.4")
            ax.axhline(CHANCE, color="0.5", linestyle=":", linewidth=1)
            ax.text(len(buckets) / 2 - 0.5, CHANCE + 0.015, "chance (char)", ha="center", fontsize=8, color="0.4")
            for row in (r for r in rows if r["task"] == task and position_kind(r) == kind):
                for kind_of_accuracy, style in (("char", "-"), ("seq", "--")):
                    points = [(x[b], v[kind_of_accuracy]) for b, v in row["buckets"].items()
                              if b in x and kind_of_accuracy in v]
                    if points:  # One legend entry a row, on its char line.
                        ax.plot(*zip(*sorted(points)), style, marker="o" if row["model"].endswith("_rel") else "s",
                                color=MODEL_COLOURS.get(row["model"], "0.3"), alpha=0.4 if unlearned(row) else 1.0,
                                label=length_label(row) if kind_of_accuracy == "char" else "_nolegend_")
            task_key = {name: key for key, name in length_generalisation.TASKS.items()}[task]
            for paper_model, marker in (("transformer", "P"), ("universal_transformer", "*")):
                char, seq = length_generalisation.PAPER[paper_model][task_key]
                ax.scatter([x["201-400"] + 0.15], [char], marker=marker, s=120, color="black", zorder=5,
                           label=f"the paper's {model_name(paper_model)} at length 400")
                ax.scatter([x["201-400"] + 0.15], [seq], marker=marker, s=120, facecolors="none",
                           edgecolors="black", zorder=5, label="_nolegend_")
            ax.set_title(f"{task}: {kind_title}", fontsize=10)
            ax.set_xticks(range(len(buckets)), buckets)
            ax.set_xlabel("reference length")
            ax.set_ylim(0, 1.05)
            ax.grid(axis="y", alpha=0.3)
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.17), fontsize=7.5, frameon=False)
        panels[0].set_ylabel("accuracy (decoded greedily)")
    fig.suptitle("Length generalisation, trained on length <= 40 (each model's newest setting): char accuracy "
                 "solid, sequence accuracy dashed; faint: training lengths not learned\n"
                 f"(width-64 models, runs of {date_range(rows)}; the paper's at length 400, char filled, sequence "
                 "hollow: base size, randomized position offsets, trained to convergence)", fontsize=10)
    fig.tight_layout(h_pad=3.0)
    _save(fig, path)


def curve_rows(rows):
    """Per (task, model, setting, seed), each run's longest recorded curve: a run trained on to more steps and
    recorded again (its shorter curve a prefix of the longer one) replaces its shorter curve; a run trained again
    from step 0 with the same setting and seed (a lost run redone; other data orders) is drawn beside the first.
    A setting is the overrides and warm-up."""
    chosen = {}
    for row in sorted(rows, key=lambda r: r["date"]):
        runs = chosen.setdefault(_curve_key(row), [])
        for k, earlier in enumerate(runs):
            if _continues(row, earlier) or _continues(earlier, row):
                if len(row["train_accuracy_by_step"]) >= len(earlier["train_accuracy_by_step"]):
                    runs[k] = row
                break
        else:
            runs.append(row)
    return [row for runs in chosen.values() for row in runs]


def _curve_key(row):
    return row["task"], row["model"], row.get("hparams", ""), row.get("offsets_warmup"), row.get("seed")


def _continues(longer, shorter, tolerance=1e-6):
    """Whether `longer`'s curve is `shorter`'s trained on: equal at every step both have (the same events read)."""
    steps = shorter["train_accuracy_by_step"].keys() & longer["train_accuracy_by_step"].keys()
    return all(abs(longer["train_accuracy_by_step"][s] - shorter["train_accuracy_by_step"][s]) <= tolerance
               for s in steps)


def _curve_setting(row, rows):
    """The legend's name of a row's setting; with the run's date where another run of it (same seed) is drawn."""
    again = any(other is not row and _curve_key(other) == _curve_key(row) for other in rows)
    return _offsets_only(row) + (f", run of {row['date']}" if again else "")


def _offsets_only(row):
    """A row's setting in words, less the norm position (its panel's title says that)."""
    hparams = ",".join(item for item in row.get("hparams", "").split(",") if item != "norm_position=pre")
    return setting_label(dict(row, hparams=hparams)).strip().removeprefix("+ ") or "without offsets"


def plot_training_curves(results, path):
    """Training accuracy by step: a panel per task and model, a colour per setting, a line style per seed."""
    plt = _pyplot()
    rows = curve_rows(results["rows"])
    panels = list(dict.fromkeys((row["task"], row["model"]) for row in rows))
    tasks = list(dict.fromkeys(task for task, _ in panels))
    models = list(dict.fromkeys(model for _, model in panels))
    fig, axes = plt.subplots(len(tasks), len(models), figsize=(6 * len(models), 3.8 * len(tasks)), sharey=True,
                             squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    labels = {id(row): _curve_setting(row, rows) for row in rows}
    settings = list(dict.fromkeys(labels.values()))
    seeds = sorted({row.get("seed") for row in rows}, key=str)
    styles = ("-", "--", ":", "-.")
    for i, task in enumerate(tasks):
        for j, model in enumerate(models):
            ax = axes[i][j]
            ax.axhline(CHANCE, color="0.5", linestyle=":", linewidth=1)
            here = [row for row in rows if (row["task"], row["model"]) == (task, model)]
            for row in here:
                curve = sorted((int(step), value) for step, value in row["train_accuracy_by_step"].items())
                ax.plot(*zip(*curve), styles[seeds.index(row.get("seed")) % len(styles)], linewidth=1.1,
                        color=colours[settings.index(labels[id(row)]) % len(colours)])
            pre_norm = here and all("norm_position=pre" in row.get("hparams", "") for row in here)
            ax.set_title(f"{task}: {model_name(model)}{' (pre-norm)' if pre_norm else ''}" if here else
                         f"{task}: {model_name(model)} (none recorded)")
            ax.set_xlabel("training step")
            ax.set_ylim(0, 1.05)
            ax.grid(alpha=0.3)
        axes[i][0].set_ylabel("training accuracy (tokens)")
    handles = [plt.Line2D([], [], color=colours[k % len(colours)]) for k in range(len(settings))]
    handles += [plt.Line2D([], [], color="black", linestyle=styles[k % len(styles)]) for k in range(len(seeds))]
    fig.legend(handles, settings + [f"seed {seed}" for seed in seeds], loc="upper center", ncol=2, fontsize=8,
               bbox_to_anchor=(0.5, 0.0), frameon=False)
    fig.suptitle("Training accuracy by step on the training lengths (<= 40): teacher-forced tokens of the training "
                 f"batches,\neach point the mean of {rows[0]['curve_window']} steps; chance dotted (width-64 "
                 f"models, runs of {date_range(rows)})", fontsize=10, y=1.06)
    _save(fig, path)


# -- bAbI ------------------------------------------------------------------------------------------------------
PROTOCOLS = {"joint": "joint training", "curriculum": "curriculum (not the paper's protocol)"}


def best_babi_rows(rows, subset):
    """Per protocol (joint, curriculum), the row of `subset` with the lowest mean test error."""
    best = {}
    for row in rows:
        if row["subset"] == subset and row["protocol"] in PROTOCOLS and len(row["test_error"]) == 20:
            if row["protocol"] not in best or row["mean_error"] < best[row["protocol"]]["mean_error"]:
                best[row["protocol"]] = row
    return [best[protocol] for protocol in PROTOCOLS if protocol in best]


def _babi_label(row):
    hparams = f" ({row['hparams']})" if row.get("hparams") else ""
    return (f"ours, {PROTOCOLS[row['protocol']]}: {row['model']}{hparams}, {row['train_steps']} steps, "
            f"seed {row['seed']}, {row['date']}: mean {row['mean_error']:.2f}% ({row['failed']} failed)")


def plot_babi(results, path):
    plt = _pyplot()
    subsets = [s for s in ("1k", "10k") if best_babi_rows(results["rows"], s)]
    if not subsets:
        raise ValueError("no row of joint training or of the curriculum with all 20 tasks")
    fig, axes = plt.subplots(len(subsets), 1, figsize=(12, 3.6 * len(subsets) + 0.8), squeeze=False)
    tasks = [f"qa{t}" for t in range(1, 21)]
    drawn = []
    for ax, subset in zip(axes[:, 0], subsets):
        ours = best_babi_rows(results["rows"], subset)
        drawn += ours
        width = 0.8 / (len(ours) + 1)
        for k, row in enumerate(ours):
            ax.bar([i + (k - len(ours) / 2) * width for i in range(20)], [row["test_error"][t] for t in tasks],
                   width, color=("tab:blue", "tab:orange")[k % 2], label=_babi_label(row))
        paper = babi.PAPER_TASKS[subset]
        # Table 1's mean error (the figure the report quotes) and the mean of Appendix E's per-task errors, which
        # the bars draw: 7.85% and 7.78% at 1k.
        table_mean, table_failed = babi.PAPER[subset]["Adaptive UT"]
        ax.bar([i + len(ours) / 2 * width for i in range(20)], paper, width, facecolor="white", edgecolor="black",
               hatch="///", label=f"paper: adaptive UT, joint, best of 10 seeds: mean {table_mean:.2f}% "
               f"({table_failed} failed; Table 1); bars: per task, Appendix E (their mean "
               f"{babi.PAPER_TASKS_MEAN[subset]:.2f}%, {sum(e > babi.FAILED_ERROR for e in paper)} failed)")
        ax.axhline(babi.FAILED_ERROR, color="0.4", linestyle="--", linewidth=1)
        ax.text(11, babi.FAILED_ERROR + 1, "failed above 5%", ha="center", fontsize=8, color="0.3")
        ax.set_xticks(range(20), tasks)
        ax.set_xlim(-0.6, 19.6)
        ax.set_yscale("function", functions=(np.sqrt, np.square))  # Errors of 1-5% visible beside 50-90%.
        ax.set_ylim(0, 100)
        ax.set_yticks([0, 1, 5, 10, 25, 50, 75, 100])
        ax.set_ylabel("test error (%, square-root scale)")
        ax.set_title(f"bAbI {subset}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"bAbI: test error per task, our best recorded runs (lowest mean test error) beside the paper's "
                 f"(runs of {date_range(drawn)})", fontsize=10)
    fig.tight_layout()
    _save(fig, path)


# -- translation ---------------------------------------------------------------------------------------------
def bleu_groups(rows):
    """{model: {date: [BLEU of each row]}}: the rows of one model and date are one run of seeds; rows trained with
    overrides (the ablations) are not drawn."""
    groups = {}
    for row in rows:
        if not row.get("hparams"):
            groups.setdefault(row["model"], {}).setdefault(row["date"], []).append(row["bleu_13a"])
    return groups


def plot_translate_small(results, path):
    plt = _pyplot()
    rows = [row for row in results["rows"] if not row.get("hparams")]
    groups = bleu_groups(rows)
    dates = sorted({row["date"] for row in rows})
    colours = dict(zip(dates, plt.get_cmap("tab10").colors))
    width = 0.8 / len(dates)
    fig, ax = plt.subplots(figsize=(max(5.0, 2.2 * len(groups)), 4.4))
    for i, (_model, by_date) in enumerate(groups.items()):
        for k, date in enumerate(dates):
            if date not in by_date:
                continue
            scores = by_date[date]
            centre = i + (k - (len(dates) - 1) / 2) * width
            mean = sum(scores) / len(scores)
            ax.bar(centre, mean, width * 0.9, color=colours[date], alpha=0.35)
            spread = [centre + (j - (len(scores) - 1) / 2) * width * 0.6 / max(len(scores), 2)
                      for j in range(len(scores))]
            ax.scatter(spread, scores, color=colours[date], edgecolors="black", zorder=3, s=36)
            ax.annotate(f"mean {mean:.2f}\n({len(scores)} seed{'s' * (len(scores) > 1)})", (centre, max(scores)),
                        xytext=(0, 6), textcoords="offset points", ha="center", fontsize=8)
    for date in dates:
        codes = sorted({row["code"] for row in rows if row["date"] == date})
        ax.bar([0], [0], color=colours[date], alpha=0.35, label=f"runs of {date} ({'; '.join(codes)})")
    ax.scatter([], [], color="0.6", edgecolors="black", s=36, label="one seed (bar: the mean over seeds)")
    ax.set_xticks(range(len(groups)), list(groups), rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("BLEU (sacreBLEU 13a, test_2016_flickr)")
    top = max(row["bleu_13a"] for row in rows)
    ax.set_ylim(0, top * 1.25)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.4), frameon=False)
    steps = sorted({row["steps"] for row in rows})
    ax.set_title(f"Multi30k En->De, {', '.join(map(str, steps))} steps, beam 4 (runs of {date_range(rows)})",
                 fontsize=10)
    _save(fig, path)


# -- decoding --------------------------------------------------------------------------------------------------
def plot_decoding(results, path):
    """decoding.py's plot of its measurements, from the rows recorded in decoding.json (ms per step)."""
    import decoding  # pylint: disable=import-outside-toplevel  (imports TensorFlow)

    by_model = {}
    for row in results["rows"]:
        model = by_model.setdefault(row["model"], {"model": row["model"], "times": {}})
        times = model["times"].setdefault(row["tokens"], {name: {} for name in decoding.SEARCHES})
        # decoding.plot takes the seconds of a whole call; a row has ms per step (seconds / tokens * 1e3).
        times[row["search"]] = {p: ms * row["tokens"] / 1e3 for p, ms in row["ms_per_step"].items()}
    machines = sorted({row["machine"] for row in results["rows"]})
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    decoding.plot(by_model, path, title="Decoding time per step: cached vs re-running the decoder on the whole "
                  f"prefix (run of {date_range(results['rows'])}, {', '.join(machines)}, 1 thread)")
    print(f"Wrote {path}")


PLOTS = {
    "decoding": (plot_decoding, "decoding.png"),
    "length_generalisation": (plot_length_generalisation, "length_generalisation.png"),
    "length_generalisation_curves": (plot_training_curves, "training_curves.png"),
    "babi": (plot_babi, "babi_tasks.png"),
    "translate_small": (plot_translate_small, "translation_bleu.png"),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--only", default=",".join(PLOTS), help=f"comma-separated, of {', '.join(PLOTS)}")
    parser.add_argument("--results_dir", default=common.RESULTS, help="where the results files are")
    parser.add_argument("--out_dir", default=os.path.dirname(os.path.abspath(__file__)), help="where the PNGs go")
    args = parser.parse_args(argv)
    names = [name for name in args.only.split(",") if name]
    unknown = [name for name in names if name not in PLOTS]
    if unknown:
        parser.error(f"unknown plot(s) {', '.join(unknown)}; known: {', '.join(PLOTS)}")
    for name in names:
        draw, filename = PLOTS[name]
        try:
            results = common.read_results(name, args.results_dir)
        except FileNotFoundError:
            print(f"plots: error: no {name}.json in {args.results_dir} (the scripts' --record writes it)",
                  file=sys.stderr)
            return 2
        try:
            if not results["rows"]:
                raise ValueError("no rows")
            draw(results, os.path.join(args.out_dir, filename))
        except ValueError as error:
            print(f"plots: error: {name}.json in {args.results_dir}: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
