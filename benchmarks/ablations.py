"""The relative-position paper's ablations (Shaw et al. 2018, Tables 2 and 3) on Multi30k English->German.

    .venv/bin/python benchmarks/ablations.py [--steps 1500] [--configs k0,k1,...] [--write]

Each configuration is `transformer_cpu_rel` with one change, trained and decoded through the CLIs exactly as
`translate_small.py` trains its models (same data, vocabulary, steps, chunks, seed 1; beam 4, alpha 0.6;
sacreBLEU on test_2016_flickr):

- Table 2, the clipping distance: k in {0, 1, 2, 4, 16, 64} (`max_relative_position`; k = 0 leaves one edge
  vector for every pair, so no position information at all);
- Table 3, which terms: relative keys a^K and values a^V both (k = 16: the set itself), keys only, values only,
  neither (again no position information).

The work directory is translate_small's (`benchmarks/runs/translate_small`): its prepared data is reused, and so
are its `transformer_cpu_rel` run (the k = 16 / both row) and `transformer_cpu` run (the sinusoid reference
row) when they are there; every run resumes from its checkpoints, so an interrupted benchmark picks up where it
stopped. Without the Multi30k files it prints why and exits 0.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position
import translate_small  # noqa: E402  pylint: disable=wrong-import-position

BASE_SET = "transformer_cpu_rel"
# name -> (run directory, hparams set, overrides, table, label, the paper's BLEU). The paper's figures: EN-DE
# newstest2013, base model, k = 16 unless varied (Shaw et al. 2018, Tables 2 and 3).
CONFIGS = {
    "k0": ("ablation_k0", BASE_SET, "max_relative_position=0", 2, "k = 0", 12.5),
    "k1": ("ablation_k1", BASE_SET, "max_relative_position=1", 2, "k = 1", 25.5),
    "k2": ("ablation_k2", BASE_SET, "max_relative_position=2", 2, "k = 2", 25.8),
    "k4": ("ablation_k4", BASE_SET, "max_relative_position=4", 2, "k = 4", 25.9),
    "k16": (BASE_SET, BASE_SET, "", 2, "k = 16", 25.8),
    "k64": ("ablation_k64", BASE_SET, "max_relative_position=64", 2, "k = 64", 25.9),
    "both": (BASE_SET, BASE_SET, "", 3, "a^K and a^V (k = 16)", 25.8),
    "keys": ("ablation_keys_only", BASE_SET, "relative_values=False", 3, "a^K only", 25.8),
    "values": ("ablation_values_only", BASE_SET, "relative_keys=False", 3, "a^V only", 25.3),
    "neither": ("ablation_neither", BASE_SET, "relative_keys=False,relative_values=False", 3,
                "neither", 12.5),
    "sinusoid": ("transformer_cpu", "transformer_cpu", "", 0, "sinusoid, no relative (reference)", None),
}


def train_and_decode(name, args, data_dir, log):
    """Trains configuration `name` in `args.rounds` chunks (resuming), decodes the test set; returns its figures."""
    run_name, hparams_set, overrides, *_ = CONFIGS[name]
    output_dir = os.path.join(args.work_dir, run_name if args.seed == 1 else f"{run_name}_s{args.seed}")
    chunk = -(-args.steps // args.rounds)
    train_s, evaluation, reused = 0.0, {}, True
    for round_index in range(args.rounds):
        output, seconds = translate_small.run_tool("t2t-relpos-trainer", [
            "--problem=translate_local", f"--hparams_set={hparams_set}", f"--data_dir={data_dir}",
            f"--output_dir={output_dir}", f"--train_steps={min(args.steps, chunk * (round_index + 1))}",
            f"--checkpoint_every={chunk}", f"--eval_every={chunk}", f"--log_every={args.log_every}",
            f"--seed={args.seed}"]
            + ([f"--hparams={overrides}"] if overrides else []), log)
        train_s += seconds
        reused = reused and "Already trained" in output
        evaluation = translate_small.final_eval(output) or evaluation
    bleu, decode_s = translate_small.decode_test(args, output_dir, data_dir, log)
    return {"bleu": bleu, "eval": evaluation,
            "train_s": None if reused else train_s, "decode_s": decode_s}


def format_table(results, table):
    rows = []
    for name, result in results.items():
        *_, in_table, label, paper = CONFIGS[name]
        if in_table not in (table, 0):
            continue
        rows.append([label, f"{result['bleu']['13a'][0]:.2f}", f"{result['bleu']['intl'][0]:.2f}",
                     f"{result['eval'].get('loss', float('nan')):.3f}" if result["eval"] else "",
                     "" if paper is None else f"{paper:.1f}",
                     "translate_small's" if result["train_s"] is None else f"{result['train_s'] / 60:.1f}"])
    return common.markdown_table(["configuration", "BLEU 13a", "BLEU intl", "val loss", "paper BLEU",
                                  "train minutes"], rows, align="lrrrrr")


def report(args, results, log, seconds):
    signature = next(iter(results.values()))["bleu"]["13a"][1]
    commands = "\n".join(f"    {line}" for line in log)
    # "\x20\x20" at a line's end: Markdown's line break (two spaces, which editors strip).
    return f"""## Ablations: clipping distance and relative keys / values (Shaw et al. 2018, Tables 2 and 3)

`{common.command_line()}` — {common.today()}, took {seconds / 60:.0f} min.\x20\x20
Machine: {common.machine_description()}.

`{BASE_SET}` (2+2 layers, width 64, relative positions with per-head tables, no absolute signal) on Multi30k
English->German, each configuration changing one hyperparameter; {args.steps} steps in {args.rounds} chunks,
seed {args.seed}, beam {args.beam_size}, alpha {args.alpha}; sacreBLEU on the 1,000 sentences of test_2016_flickr,
`{signature}` (and tok:intl); val loss: teacher-forced on val. The data, vocabulary and the k = 16 and sinusoid runs are
translate_small's (same commands). The paper's column is its base model on WMT EN-DE newstest2013: the trend to
compare (k = 0 and "neither" collapse, k >= 2 flat, the keys carry the gain), not the level.

Clipping distance k (Table 2):

{format_table(results, 2)}

Relative keys and values (Table 3):

{format_table(results, 3)}

Commands (from the repository root; `benchmarks/runs/` holds the work files):

{commands}
"""


def record_rows(args, results):
    """Rows of benchmarks/results/translate_small.json for the configurations trained here (translate_small records
    the runs it made): the set, its overrides, BLEU and figures, and the seed."""
    rows = []
    for name, result in results.items():
        run_name, hparams_set, overrides, *_ = CONFIGS[name]
        if result["train_s"] is None or run_name == hparams_set:  # Reused, or translate_small's own run.
            continue
        rows.append(translate_small.result_row(hparams_set, overrides, result, args))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    translate_small.add_shared_flags(parser, log_every=250)
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    parser.add_argument("--seed", type=int, default=1, help="The trainers' --seed (runs of seeds other than 1 live "
                        "in <work_dir>/<run>_s<seed>, the k = 16 and sinusoid ones translate_small's of that seed).")
    parser.add_argument("--record", action="store_true", help="Append the rows of the configurations trained here, "
                        "with their overrides and seed, to benchmarks/results/translate_small.json.")
    args = parser.parse_args()
    common.refuse_uncommitted_writes(args)
    names = [n for n in args.configs.split(",") if n]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    absent = translate_small.missing_files(args.multi30k)
    if absent:
        print(f"ablations: skipped, the Multi30k data is not there (missing {', '.join(absent)}); "
              "pass --multi30k=<folder of train/val/test_2016_flickr .en.gz/.de.gz>")
        return 0
    began = time.perf_counter()
    log = []
    data_dir = translate_small.prepare_data(args, log)
    results, done = {}, {}
    for name in names:
        run_name = CONFIGS[name][0]
        if run_name not in done:  # "k16" and "both" are one run.
            done[run_name] = train_and_decode(name, args, data_dir, log)
        results[name] = done[run_name]
        print(f"{name}: BLEU {results[name]['bleu']['13a'][0]:.2f}", flush=True)
    text = report(args, results, log, time.perf_counter() - began)
    print(text)
    if args.write:
        common.replace_section("ablations", text)
    if args.record:
        common.record("translate_small", record_rows(args, results), description=translate_small.RESULTS_DESCRIPTION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
