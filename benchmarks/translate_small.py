"""Real translation at small scale: relative vs absolute positions on Multi30k English->German, through the CLIs.

    .venv/bin/python benchmarks/translate_small.py [--steps 1500] [--rounds 2] [--seed 1] [--write] [--record]

The run goes the way a user's would, with `translate_local` (see problems/translate_local.py):

1. `t2t-relpos-datagen`: Multi30k task 1 (raw, cased) train / val / test_2016_flickr from --multi30k (default
   `../shared/data/multi30k` next to the repository) into shards and a shared SentencePiece vocabulary;
2. `t2t-relpos-trainer` for each hparams set (default `transformer_cpu_rel` and its absolute twin
   `transformer_cpu`), the same steps, batch and seed. Training alternates between the models in --rounds
   chunks (each run resumes from its checkpoint), so that drifting load on a shared machine hits both alike;
   throughput is the trainer's tokens per second (source + target tokens, padding excluded), median over its
   progress lines;
3. `t2t-relpos-decoder --decode_split=test`: beam 4, alpha 0.6 (the paper's), sacreBLEU on detokenized text
   (13a and intl tokenisation) against test_2016_flickr's references.

Without the Multi30k files it prints why and exits 0. Work files go to --work_dir (benchmarks/runs/, ignored
by git; a run of `--seed` other than 1 in `<hparams set>_s<seed>`); --write records the table, the commands and the
machine in docs/studies/benchmark_runs.md; --record appends each model's BLEU and figures, with its seed, to
benchmarks/results/translate_small.json, which `benchmarks/plots.py` draws (every seed's point and their mean).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position

_HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(_HERE)
DEFAULT_MULTI30K = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "multi30k"))
SPLIT_FILES = {"train": "train", "dev": "val", "test": "test_2016_flickr"}
RESULTS_DESCRIPTION = (
    "Multi30k English->German (task 1, raw, cased) through the CLIs: each hparams set trained for `steps` steps, "
    "test_2016_flickr decoded with beam 4, alpha 0.6; sacreBLEU on detokenized output (bleu_13a: tok:13a, "
    "bleu_intl: tok:intl), teacher-forced val loss and accuracy. One row per model and seed, recorded by "
    "`benchmarks/translate_small.py --record`; rows copied from the tables of benchmarks/README.md say "
    "`code as of <date>`.")
TOOLS = {"t2t-relpos-datagen": "t2t_relpos.cli.datagen", "t2t-relpos-trainer": "t2t_relpos.cli.trainer",
         "t2t-relpos-decoder": "t2t_relpos.cli.decoder"}


def missing_files(multi30k):
    """The Multi30k files this benchmark needs that are not in `multi30k`."""
    names = [f"{stem}.{lang}.gz" for stem in SPLIT_FILES.values() for lang in ("en", "de")]
    return [os.path.join(multi30k, n) for n in names if not os.path.isfile(os.path.join(multi30k, n))]


def settings(multi30k, vocab_size):
    """translate_local's settings file: the Multi30k files for train, dev and test, and the vocabulary size."""
    files = {split: [os.path.join(multi30k, f"{stem}.{lang}.gz") for lang in ("en", "de")]
             for split, stem in SPLIT_FILES.items()}
    return dict(files, vocab_size=vocab_size)


INTERRUPTED = 130  # The tools' status after SIGINT/SIGTERM (the trainer saves a checkpoint first).


def run_tool(tool, args, log, retries=2):
    """Runs a CLI tool (as `python -m`), echoing and returning its output and wall time.

    A run stopped by a signal from outside (status 130) is run again, at most `retries` times: the tools
    resume (the trainer from the checkpoint it saved), and the restart counts in the wall time. Any other
    failure stops the benchmark.
    """
    command = [sys.executable, "-m", TOOLS[tool]] + list(args)
    shown = " ".join([tool] + list(args)).replace(common.REPO + os.sep, "")
    print(f"$ {shown}", flush=True)
    log.append(shown)
    began = time.perf_counter()
    lines = []
    for attempt in range(retries + 1):
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env=dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2"))
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            print("    " + line, end="", flush=True)
        status = process.wait()
        if status == 0:
            break
        if status != INTERRUPTED or attempt == retries:
            raise SystemExit(f"{tool} failed with status {status}")
        print(f"    ({tool} was interrupted from outside; running it again to resume)", flush=True)
        log.append("    (interrupted from outside and resumed by running the same command again)")
    return "\n".join(lines), time.perf_counter() - began


def tokens_per_second(output):
    """The `tok/s` figures of the trainer's progress lines."""
    return [float(v) for v in re.findall(r"^step \d+/\d+ .*tok/s ([0-9.e+]+)", output, re.MULTILINE)]


def final_eval(output):
    """The last "Final evaluation:" metrics of a trainer's output, as a dict."""
    lines = re.findall(r"^Final evaluation: (.*)$", output, re.MULTILINE)
    if not lines:
        return {}
    return {k: float(v) for k, v in re.findall(r"(\w+) (-?[0-9.]+)", lines[-1])}


def bleu_scores(output):
    """{tokenisation: (score, signature)} from the decoder's "BLEU = ..." lines."""
    scores = {}
    for score, signature in re.findall(r"^BLEU = ([0-9.]+)\s+\((.*)\)$", output, re.MULTILINE):
        scores[re.search(r"tok:(\w+)", signature).group(1)] = (float(score), signature)
    return scores


def prepare_data(args, log):
    """Writes translate_local's settings for Multi30k and runs the datagen (which reuses finished shards).

    Returns the data directory, `<args.work_dir>/data`.
    """
    data_dir = os.path.join(args.work_dir, "data")
    raw_dir = os.path.join(args.work_dir, "raw")
    os.makedirs(raw_dir, exist_ok=True)
    with open(os.path.join(raw_dir, "translate_local.json"), "w", encoding="utf-8") as f:
        json.dump(settings(args.multi30k, args.vocab_size), f, indent=2)
    run_tool("t2t-relpos-datagen", ["--problem=translate_local", f"--data_dir={data_dir}", f"--tmp_dir={raw_dir}"],
             log)
    return data_dir


def decode_test(args, output_dir, data_dir, log):
    """Beam-decodes test_2016_flickr with the run in `output_dir`; returns ({tokenisation: BLEU}, seconds)."""
    output, seconds = run_tool("t2t-relpos-decoder", [
        f"--output_dir={output_dir}", f"--data_dir={data_dir}", "--decode_split=test",
        f"--decode_hparams=beam_size={args.beam_size},alpha={args.alpha},batch_size=64,"
        f"num_samples={args.decode_samples}",
        f"--decode_to_file={os.path.join(output_dir, 'test_2016_flickr.de')}"], log)
    return bleu_scores(output), seconds


def run_dir(args, name):
    """Where a model's run of `args.seed` lives: `<work_dir>/<name>` for seed 1 (the runs ablations.py reuses),
    `<work_dir>/<name>_s<seed>` for the others."""
    return os.path.join(args.work_dir, name if args.seed == 1 else f"{name}_s{args.seed}")


def benchmark(args):
    log = []
    data_dir = prepare_data(args, log)
    results = {name: {"rates": [], "train_s": 0.0} for name in args.hparams_sets}
    for name in args.hparams_sets:
        shutil.rmtree(run_dir(args, name), ignore_errors=True)
    chunk = -(-args.steps // args.rounds)
    for round_index in range(args.rounds):
        steps = min(args.steps, chunk * (round_index + 1))
        order = args.hparams_sets if round_index % 2 == 0 else args.hparams_sets[::-1]
        for name in order:
            output, seconds = run_tool("t2t-relpos-trainer", [
                "--problem=translate_local", f"--hparams_set={name}", f"--data_dir={data_dir}",
                f"--output_dir={run_dir(args, name)}", f"--train_steps={steps}",
                f"--checkpoint_every={chunk}", f"--eval_every={chunk}", f"--log_every={args.log_every}",
                f"--seed={args.seed}"]
                + ([f"--hparams={args.hparams}"] if args.hparams else []), log)
            results[name]["rates"] += tokens_per_second(output)
            results[name]["train_s"] += seconds
            results[name]["eval"] = final_eval(output)
    for name in args.hparams_sets:
        results[name]["bleu"], results[name]["decode_s"] = decode_test(args, run_dir(args, name), data_dir, log)
        results[name]["parameters"] = parameter_count(name, args.hparams, args.vocab_size)
    return results, log


def ponder_times(evaluation):
    """"encoder / decoder" mean ponder time (recurrent steps per position, teacher-forced on val) of an adaptive
    model's evaluation, or "" for a model without ACT."""
    if "encoder_ponder_time" not in evaluation:
        return ""
    return f"{evaluation['encoder_ponder_time']:.2f} / {evaluation.get('decoder_ponder_time', float('nan')):.2f}"


def format_table(results, steps):
    names = list(results)
    baseline = statistics.median(results[names[-1]]["rates"]) if results[names[-1]]["rates"] else None
    rows = []
    for name in names:
        r = results[name]
        rate = statistics.median(r["rates"]) if r["rates"] else float("nan")
        ratio = f"{rate / baseline:.2f}x" if baseline else "-"
        rows.append([name, f"{r['parameters']:,}", steps, f"{r['train_s']:.0f}", f"{rate:,.0f}", ratio,
                     f"{r['eval'].get('loss', float('nan')):.3f}", f"{r['eval'].get('accuracy', float('nan')):.3f}",
                     f"{r['bleu']['13a'][0]:.2f}", f"{r['bleu']['intl'][0]:.2f}", f"{r['decode_s']:.0f}",
                     ponder_times(r["eval"])])
    headers = ["hparams set", "parameters", "steps", "train wall s", "train tokens/s", f"vs {names[-1]}", "val loss",
               "val accuracy", "BLEU 13a", "BLEU intl", "decode wall s", "ponder enc / dec"]
    return common.markdown_table(headers, rows)


def parameter_count(name, overrides, vocab_size):
    """The parameters of hparams set `name`'s model for a shared vocabulary of `vocab_size` (imports TensorFlow)."""
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    hp = registry.hparams(name).parse(overrides)
    model = registry.model(hp.model).from_hparams(hp, vocab_size, vocab_size)
    model.build()
    return int(model.count_params())


def describe(name, overrides=""):
    """One line on an hparams set's shape and positions (imports the package, so TensorFlow)."""
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    hp = registry.hparams(name).parse(overrides)
    positions = (f"relative positions (k = {hp.max_relative_position})" if hp.position_encoding == "relative"
                 else f"{hp.position_encoding} positions")
    return (f"`{name}`: {hp.num_encoder_layers}+{hp.num_decoder_layers} layers, d_model {hp.hidden_size}, "
            f"{hp.num_heads} heads, FFN {hp.filter_size}, {hp.batch_size}-token batches, {positions}")


def report(args, results, log, seconds):
    signature = next(iter(results.values()))["bleu"]["13a"][1]
    commands = "\n".join(f"    {line}" for line in log)
    shown = {k: [os.path.relpath(p) for p in v] if isinstance(v, list) else v
             for k, v in settings(args.multi30k, args.vocab_size).items()}
    # "\x20\x20" at a line's end: Markdown's line break (two spaces, which editors strip).
    return f"""## Translation: Multi30k English->German, relative vs absolute positions

`{common.command_line()}` — {common.today()}, took {seconds / 60:.0f} min.\x20\x20
Machine: {common.machine_description()}.

Multi30k task 1 (raw, cased): 29,000 training pairs, val (1,014) for teacher-forced evaluation, test_2016_flickr
(1,000) decoded with beam {args.beam_size}, alpha {args.alpha}; a shared SentencePiece vocabulary of {args.vocab_size}
pieces. Models: {"; ".join(describe(name, args.hparams) for name in results)}. The same {args.steps} steps
and seed {args.seed} for each, trained in {args.rounds} alternating chunks.
tokens/s counts source + target tokens (no padding), median of the trainer's progress
lines; the CPU is shared with other jobs, so treat throughput as indicative. BLEU: sacreBLEU on detokenized
output, `{signature}` (and tok:intl).

{format_table(results, args.steps)}

Commands (run from the repository root; `benchmarks/runs/` holds the work files), with
`{os.path.relpath(os.path.join(args.work_dir, "raw", "translate_local.json"))}` holding (paths here relative to the
repository root) `{json.dumps(shown)}`:

{commands}

"train wall s" is the trainers' whole run time (start-up, input pipeline, evaluations and checkpoints
included). This is a budget comparison on a CPU with one seed, far from convergence and from the paper's WMT
setting: it shows that the relative model trains and translates through the real tools, what it gains at
equal steps, and how its throughput compares with the absolute one at equal settings (the paper reports 7%
fewer steps per second for relative positions on GPUs, at far larger widths where attention's share of the
work differs).
"""


def result_row(model, overrides, r, args):
    """A row of benchmarks/results/translate_small.json: a run's set, overrides, BLEU and figures, and its seed."""
    return {"model": model, "hparams": overrides, "steps": args.steps, "rounds": args.rounds,
            "bleu_13a": r["bleu"]["13a"][0], "bleu_intl": r["bleu"]["intl"][0], "signature": r["bleu"]["13a"][1],
            "val_loss": r["eval"].get("loss"), "val_accuracy": r["eval"].get("accuracy"),
            "train_wall_s": round(r["train_s"], 1),
            "tokens_per_s": round(statistics.median(r["rates"])) if r.get("rates") else None,
            "decode_wall_s": round(r["decode_s"], 1), "decode_samples": args.decode_samples,
            "parameters": r.get("parameters"), "encoder_ponder_time": r["eval"].get("encoder_ponder_time"),
            "decoder_ponder_time": r["eval"].get("decoder_ponder_time"), **common.provenance(seed=args.seed)}


def record_rows(args, results):
    """Rows of benchmarks/results/translate_small.json, one per model, with where they came from."""
    return [result_row(name, args.hparams, r, args) for name, r in results.items()]


def seed_rows(rows, models, steps, since, overrides=""):
    """{label: the recorded rows of `steps` steps dated `since` or later, by seed}, for `models` in that order: the
    label is the model; then the models' rows trained with overrides, labelled "model (overrides)": all of them
    with `overrides="*"`, else those whose overrides are one of `overrides`' ";"-separated strings."""
    wanted = set(overrides.split(";")) if overrides and overrides != "*" else None
    chosen = {model: [] for model in models}
    for row in rows:
        if row["model"] in chosen and row["steps"] == steps and row["date"] >= since:
            if not row.get("hparams"):
                chosen[row["model"]].append(row)
            elif overrides and (wanted is None or row["hparams"] in wanted):
                chosen.setdefault(f"{row['model']} ({row['hparams']})", []).append(row)
    return {label: sorted(runs, key=lambda r: r["seed"]) for label, runs in chosen.items() if runs}


def seeds_table(rows, models, steps, since, overrides=""):
    """Per model: parameters, the seeds and each one's BLEU, mean +- std of BLEU and val loss, ponder times."""
    table = []
    for model, runs in seed_rows(rows, models, steps, since, overrides).items():
        ponder = [(r["encoder_ponder_time"], r["decoder_ponder_time"]) for r in runs
                  if r.get("encoder_ponder_time") is not None]
        parameters = next((r["parameters"] for r in runs if r.get("parameters")), None)
        table.append([model, f"{parameters:,}" if parameters else "", ", ".join(str(r["seed"]) for r in runs),
                      ", ".join(f"{r['bleu_13a']:.2f}" for r in runs), common.spread([r["bleu_13a"] for r in runs]),
                      common.spread([r["val_loss"] for r in runs], digits=3),
                      f"{statistics.mean(p[0] for p in ponder):.2f} / {statistics.mean(p[1] for p in ponder):.2f}"
                      if ponder else ""])
    return common.markdown_table(["hparams set", "parameters", "seeds", "BLEU 13a of each", "BLEU 13a", "val loss",
                                  "ponder enc / dec"], table, align="lrrrrrr")


def seeds_report(args):
    """The run log section of every seed recorded since `args.since` for the --hparams_sets at --steps."""
    rows = common.read_results("translate_small")["rows"]
    chosen = [r for runs in seed_rows(rows, args.hparams_sets, args.steps, args.since, args.overrides).values()
              for r in runs]
    if not chosen:
        raise SystemExit(f"no rows of {', '.join(args.hparams_sets)} at {args.steps} steps since {args.since} "
                         "in benchmarks/results/translate_small.json")
    codes = ", ".join(sorted({r["code"] for r in chosen}))
    title = args.title or f"Translation over seeds: Multi30k English->German, {args.steps} steps"
    return f"""## {title}

`{common.command_line()}` — the rows of `benchmarks/results/translate_small.json` recorded from
{min(r["date"] for r in chosen)} to {max(r["date"] for r in chosen)} (code {codes}), each run by
`.venv/bin/python benchmarks/translate_small.py --seed N --record` (with `--hparams_sets` naming the sets; the rows
with overrides by `benchmarks/ablations.py --seed N --record`) on {chosen[0]["machine"]}.

Each row trains the set for {args.steps} steps with `--seed N` (weights and data order), decodes test_2016_flickr
with beam 4, alpha 0.6, and scores it with sacreBLEU (13a); val loss is teacher-forced. Mean +- the sample standard
deviation over the seeds; ponder time: mean recurrent steps per position (encoder / decoder, teacher-forced on
val) of the adaptive models.

{seeds_table(rows, args.hparams_sets, args.steps, args.since, args.overrides)}
"""


def add_shared_flags(parser, log_every):
    """The flags of the Multi30k benchmarks (this one and ablations.py): data, work files, budget, search."""
    parser.add_argument("--multi30k", default=DEFAULT_MULTI30K, help="Folder of the Multi30k .gz files.")
    parser.add_argument("--work_dir", default=os.path.join(_HERE, "runs", "translate_small"))
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=2, help="Chunks the training of each model alternates in.")
    parser.add_argument("--log_every", type=int, default=log_every)
    parser.add_argument("--vocab_size", type=int, default=4000)
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--decode_samples", type=int, default=0, help="Decode only the first N test sentences "
                        "(0: all; BLEU on a prefix is for quick looks only).")
    parser.add_argument("--write", action="store_true", help="Write the section into docs/studies/benchmark_runs.md.")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_shared_flags(parser, log_every=50)
    parser.add_argument("--hparams_sets", default="transformer_cpu_rel,transformer_cpu",
                        help="Comma-separated; the last one is the baseline of the throughput ratio.")
    parser.add_argument("--hparams", default="", help="Overrides for every set, e.g. batch_size=4096.")
    parser.add_argument("--seed", type=int, default=1, help="The trainers' --seed (runs of seeds other than 1 live "
                        "in <work_dir>/<hparams set>_s<seed>).")
    parser.add_argument("--record", action="store_true", help="Append each model's BLEU and figures to "
                        "benchmarks/results/translate_small.json (drawn by benchmarks/plots.py).")
    parser.add_argument("--seeds_table", action="store_true", help="Train nothing: print (and with --write, put in "
                        "the run log) the table over seeds of the rows recorded since --since.")
    parser.add_argument("--since", default="0000-00-00", help="--seeds_table: rows of this date (YYYY-MM-DD) or later.")
    parser.add_argument("--overrides", default="", help="--seeds_table: also the rows trained with overrides "
                        "(ablations.py's), a line per set and overrides: * for all, or the overrides wanted, separated "
                        "by ;")
    parser.add_argument("--section", default="translate_seeds", help="--seeds_table --write: the run log section.")
    parser.add_argument("--title", help="--seeds_table: the section's heading.")
    args = parser.parse_args()
    common.refuse_uncommitted_writes(args)
    args.hparams_sets = [s for s in args.hparams_sets.split(",") if s]
    if args.seeds_table:
        text = seeds_report(args)
        print(text)
        if args.write:
            common.replace_section(args.section, text)
        return 0
    absent = missing_files(args.multi30k)
    if absent:
        print(f"translate_small: skipped, the Multi30k data is not there (missing {', '.join(absent)}); "
              "pass --multi30k=<folder of train/val/test_2016_flickr .en.gz/.de.gz>")
        return 0
    began = time.perf_counter()
    results, log = benchmark(args)
    text = report(args, results, log, time.perf_counter() - began)
    print(text)
    if args.write:
        common.replace_section("translate_small", text)
    if args.record:
        common.record("translate_small", record_rows(args, results), description=RESULTS_DESCRIPTION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
