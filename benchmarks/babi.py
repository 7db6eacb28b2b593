"""bAbI question answering, the Universal Transformer paper's Table 1 protocol and the studies around it, through
the real CLIs: one command per study.

    .venv/bin/python benchmarks/babi.py train --data_dir ../shared/data/babi [--subset 1k]
        [--models adaptive_universal_transformer_babi:facts,...] [--seeds 1,2] [--train_steps 20000]
        [--hparams '' --hparams layer_prepostprocess_dropout=0.3,...] [--single_task N] [--jobs 2]
        [--write] [--record]
    .venv/bin/python benchmarks/babi.py continue --from_run RUN --from_step 4000 --name NAME \\
        --data_dir ../shared/data/babi [--subset 10k] [--tasks all | 1,17] [--task_repeats 17:8] \\
        [--freeze encoder[,embedding]] [--qa16_hops 2] [--steps 1000] \\
        [--work_dir benchmarks/runs/babi_continue] [--write]
    .venv/bin/python benchmarks/babi.py curriculum --data_dir ../shared/data/babi [--subset 10k]
        [--hparams_set universal_transformer_babi_rel] [--hparams act_type=basic] [--seed 1]
        [--work_dir benchmarks/runs/babi_curriculum] [--stages N] [--write] [--record]
    .venv/bin/python benchmarks/babi.py fact-order --data_dir DIR RUN_DIR[@STEP] [RUN_DIR[@STEP] ...] [--write]
    .venv/bin/python benchmarks/babi.py hops --data_dir ../shared/data/babi [--subset 10k]
        [--models universal_transformer_babi_rel:facts] [--hops 1,2,3] [--train_steps 8000] [--jobs 2]
        [--report_only] [--write]

`train`: each (hparams set, input layout, seed) trains with `t2t-relpos-trainer` on
`babi_qa_<layout>_all_tasks_<subset>` (all 20 tasks jointly; every 10th training story held out for validation;
with `--single_task N`, `babi_qa_<layout>_single_task<N>_<subset>`: task N alone, the paper's single-task setting),
then `t2t-relpos-decoder` answers the validation and the test questions and reports the error of every task. Per
model the seed with the lowest mean validation error is kept, as the paper picked the best of 10 runs on
validation; its test errors are reported with the mean, the failed tasks (error > 5%) and the paper's row. Runs
live in `--work_dir` and resume: a run whose checkpoint has reached `--train_steps` is only decoded again if its
results are missing, so raising `--train_steps` continues every run where it stopped; the table picks the best seed
over every run of a model in `--work_dir` at those steps, those of earlier invocations included. `--hparams`
overrides make runs (and table columns) of their own; repeat the flag to train and compare several variants in one
table (`--hparams ''` is the sets as they are, the default). `--report_only` trains nothing and tabulates the
finished runs of the models and variants named (those missing are left out). `--task_curves` adds, per kept run,
the validation error of each task by checkpoint (when each task is learned in a joint run). `--ponder_plot` draws
the ponder time per fact of the first qa3 test story for the adaptive models (the paper's Figure 3). Without the
data the command says where to put it and exits.

`continue`: a run trained on some tasks (e.g. qa17 alone, through the joint problem with the other tasks at
`task_repeats` 0) is copied at `--from_step` into `<work_dir>/<NAME>`: weights, Adam state and step, so the
learning-rate schedule goes on where it was. The copy's `task_repeats` becomes `--tasks` (the others at 0) plus
`--task_repeats`, its `freeze_layers` becomes `--freeze` (the model's top-level layers: `embedding`, `encoder`,
`classifier` for the bAbI models), and the real trainer runs it `--steps` further. The decoder then gives every
task's validation error at both ends. A task learned at the start and lost at the end was undone by the other
tasks' updates, through the layers that were left trainable. The table lists every continuation in `<work_dir>`
(each kept in `<NAME>/continue.json`; rerunning a name reuses it): the tasks learned at the start (<= 5%
validation error), their errors at the end, and the mean over all 20 tasks at both ends.

`curriculum`: the stages that took the fixed-step UT to 0.57% test error at 10k, as one command. Joint training
from scratch leaves qa16, qa17 and qa19 at chance (`train`); a model that learns qa17 alone first, then sees all
tasks with the hard ones repeated, and qa16 first with two lookups, learns all 20 (`continue`, where the stages
were found one at a time). The stages (`STAGES`):

    0  qa17 alone (the joint problem, every other task at `task_repeats` 0), from scratch
    1  all 20 tasks, qa16 x4, qa17 x8, qa19 x8
    2  the same, further
    3  all 20, qa16 asked with two lookups (`hops`' rewrite of its own stories), x8
    4  the same, qa16 x24
    5  all 20, qa16 as it is, x8 (qa17 and qa19 x8)

Stage 0 is a run of the real trainer over facts (`babi_qa_facts_all_tasks_<subset>`); each later stage is a
`continue` of the one before, weights and Adam state carried over. Every stage's directory in `--work_dir` is
`<hparams_set>[_<hparams>]_s<seed>_<k>_<stage>`, and rerunning the command resumes a chain where it stopped (a
finished stage is read back, an unfinished one resumes from its last checkpoint). The table gives each stage's
validation error at its end (mean, and the tasks above 5%) and the test error of its last checkpoint. This is not
the paper's protocol (joint training from the start), and the two-lookup questions are knowledge of the task that
the paper's model was not given; the report says so beside every figure.

`fact-order`: does a trained model tell a relational fact from the same fact with its two entities swapped? qa17
(positional reasoning), qa18 (size reasoning) and qa19 (path finding) state relations whose direction only word
order carries: "The kitchen is north of the hallway." and "The hallway is north of the kitchen." are the same bag
of words. The facts layout embeds a fact as the sum of its words under learned per-position masks
(`FactEmbedding`); masks that start at ones start as a bag of words and must learn to tell the two apart. For
every distinct relational fact of a task's test stories ("The A <relation> the B."), the table gives the cosine
similarity between the fact's vector and its swapped twin's under the run's embedding, as the mean over the
facts: 1.00 means the model cannot tell them apart. `--data_dir` is the data directory the runs were trained with
(for 10k runs of `train`, `<work_dir>/10k/data`, where it stood in for the missing qa3 file); `@STEP` picks a
checkpoint (default: the newest).

`hops`: qa16 asked with one, two or three lookups: how many reasoning hops a model learns. qa16 (basic induction)
asks "What color is Greg?" of a story where Greg is a swan and only other swans' colours are stated: three lookups
(Greg -> swan -> another swan -> its colour). Every joint run of `train` left it near chance, training questions
included. `hops` asks the same stories in two easier ways and trains each version alone (`train --single_task
16`, so the trainer and decoder are the real ones):

    1 hop    "What color is Julius?" of a person whose colour the story states, which one changing from story to
             story (not the last stated: that could be answered without reading the name)
    2 hops   "What color is swan?" for the queried person's species (answer as in the task: the colour stated
             for another swan; a story states at most one colour per species, except where the task's answer
             is the most recent one)
    3 hops   the task as it is

The rewritten qa16 files go to `<work_dir>/qa16_hops<k>/data`, beside links to every other file (the problems
build their vocabularies from all 20 tasks); the 3-hop runs are `train --single_task 16`'s own runs in
`<work_dir>`. The table has qa16's test and validation error per version and model, and the trainer's validation
accuracy by step: a version a model learns rises, one it cannot learn stays flat.

`--write` puts a command's table into its section of docs/studies/benchmark_runs.md. `--record` (`train`, `curriculum`)
appends the test error per task of each kept run to benchmarks/results/babi.json, which `benchmarks/plots.py`
draws beside the paper's per-task figures. Nothing here imports TensorFlow at module level: the GPU command
(`babi_accelerator.py`) shares the data and paper helpers on a device without it.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_MODELS = "adaptive_universal_transformer_babi:facts,adaptive_universal_transformer_babi_rel:facts"
# Table 1 of Dehghani et al. (2018): average error (%) and failed tasks (> 5% error), best of 10 seeds.
PAPER = {
    "1k": {"Transformer": (26.8, 14), "Universal Transformer": (8.50, 8), "Adaptive UT": (7.85, 5)},
    "10k": {"Transformer": (22.1, 12), "Universal Transformer": (0.47, 0), "Adaptive UT": (0.29, 0)},
}
# Appendix E of Dehghani et al. (2018, arXiv:1807.03819v3): the adaptive UT's test error (%) of qa1 ... qa20 in
# joint training, its best of 10 seeds per task, and the mean printed there (Table 1 gives 7.85 for 1k).
PAPER_TASKS = {
    "10k": (0.0, 0.0, 1.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.2, 0.2, 0.0, 3.1, 0.0),
    "1k": (0.0, 0.5, 5.4, 0.0, 0.5, 0.5, 3.2, 1.6, 0.2, 0.4, 0.1, 0.0, 0.6, 3.8, 5.9, 15.4, 42.9, 4.1, 68.2, 2.4),
}
PAPER_TASKS_MEAN = {"10k": 0.29, "1k": 7.78}
FAILED_ERROR = 5.0  # % error above which a task counts as failed (the paper's Table 1).
LEARNED = FAILED_ERROR  # % validation error: a task at or below it (not failed) counts as learned.
TASK_ERROR = re.compile(r"^\s+qa(\d+)\s+accuracy = [0-9.]+\s+error = ([0-9.]+)%", re.M)
OVERALL_ERROR = re.compile(r"^answer_accuracy = [0-9.]+\s+error = ([0-9.]+)%", re.M)
PONDER = re.compile(r"encoder_ponder_time ([0-9.]+)")
RESULTS_DESCRIPTION = (
    "bAbI v1.2, test error (%) per task of the kept run (the seed with the lowest mean validation error), "
    "recorded by `benchmarks/babi.py train|curriculum --record` and `benchmarks/babi_accelerator.py report "
    "--record`; protocol `joint`: all 20 tasks from scratch (with the run's task_repeats), `curriculum`: "
    "`babi.py curriculum`'s stages, `single_task<N>`: task N alone. Rows copied from the tables of "
    "benchmarks/README.md (2026-11-24 to 2026-11-26) say `code as of <date>` for the code they ran on.")


# -- shared by the commands (and by babi_accelerator.py: no TensorFlow) ---------------------------------------
def _mean(errors):
    return sum(errors.values()) / max(len(errors), 1)


def _int_keys(errors):
    """{task: error} with the task numbers as ints again (JSON keys are strings)."""
    return {int(task): error for task, error in errors.items()}


def run_name(hparams_set, layout, seed, hparams=""):
    """The run's directory name; `--hparams` overrides name a run of their own (e.g. `..._facts_dropout_0.3_s1`)."""
    changed = "_" + re.sub(r"[^A-Za-z0-9.]+", "_", hparams).strip("_") if hparams else ""
    return f"{hparams_set}_{layout}{changed}_s{seed}"


def task_errors(decoded, single_task=0):
    """{task: error %} from the decoder's report; for one task alone (`single_task`), its overall line."""
    errors = {int(task): float(error) for task, error in TASK_ERROR.findall(decoded)}
    if single_task and not errors:  # The decoder breaks errors down by task only where there are several.
        errors = {single_task: float(OVERALL_ERROR.findall(decoded)[-1])}
    return errors


def tasks_name(args):
    """What the problem's name says it trains on: `all_tasks` (joint) or `single_task<N>`."""
    single = getattr(args, "single_task", 0)
    return f"single_task{single}" if single else "all_tasks"


def story_facts(layout, args):
    """How many of a story's last facts the run's problem keeps (None: all)."""
    from t2t_relpos.problems import babi_text  # pylint: disable=import-outside-toplevel  # No TensorFlow.

    single = getattr(args, "single_task", 0)
    return babi_text.story_facts(layout, single, joint=not single)


def runs_dir(work_dir, subset, single_task=0):
    """Where `train` keeps the runs of a subset (and of one task alone): `<work_dir>/<subset>[/single_task<N>]`."""
    return os.path.join(work_dir, subset, *([f"single_task{single_task}"] if single_task else []))


def load_result(path):
    """A run's saved `result.json`, its per-task errors keyed by task number again (JSON keys are strings)."""
    with open(path, encoding="utf-8") as f:
        result = json.load(f)
    for split in ("eval", "test"):
        result[split] = _int_keys(result.get(split, {}))
    return result


def paper_line(subset):
    """One sentence: the paper's Table 1 row for `subset` (mean error and failed tasks of each model)."""
    return (f"The paper ({subset} joint, best of 10 seeds): "
            + "; ".join(f"{model} {mean} ({failed} failed)" for model, (mean, failed) in PAPER[subset].items()) + ".")


def data_missing(args):
    """True, after saying where the files go, when `args.data_dir` has no folder for `args.subset`."""
    first = os.path.join(args.data_dir, "en" if args.subset == "1k" else "en-10k")
    if os.path.isdir(first):
        return False
    print(f"bAbI data not found: put the bAbI v1.2 tasks in {first}/qaN_<name>_{{train,test}}.txt[.gz] "
          "(or pass --data_dir); skipping.", file=sys.stderr)
    return True


def complete_data_dir(args):
    """A data directory with every task file of `args.subset`, where the given one lacks some training files.

    The public copy of bAbI v1.2 in `../shared/data/babi` has no `en-10k/qa3_three-supporting-facts_train.txt`.
    For the 10k subset, each training file missing there is taken from the 1k set instead (a directory of links in
    `--work_dir`, so the problems read the real files). Returns (data_dir, [tasks whose 1k file stands in]).
    """
    from t2t_relpos.problems import babi_text  # pylint: disable=import-outside-toplevel  # No TensorFlow.

    if args.subset == "1k":
        return args.data_dir, []
    missing = [task for task in babi_text.TASKS
               if babi_text.task_file(args.data_dir, args.subset, task, "train") is None
               and babi_text.task_file(args.data_dir, "1k", task, "train") is not None]
    if not missing:
        return args.data_dir, []
    linked = os.path.join(args.work_dir, "data")
    folder = os.path.join(linked, babi_text.SUBSETS[args.subset])
    os.makedirs(folder, exist_ok=True)
    sources = [os.path.join(args.data_dir, babi_text.SUBSETS[args.subset], name)
               for name in os.listdir(os.path.join(args.data_dir, babi_text.SUBSETS[args.subset]))]
    sources += [babi_text.task_file(args.data_dir, "1k", task, "train") for task in missing]
    for source in sources:
        target = os.path.join(folder, os.path.basename(source))
        if not os.path.lexists(target):
            os.symlink(os.path.abspath(source), target)
    return linked, missing


def checkpoint_errors(run_dir, step, data_dir, threads=0, single_task=0, split="eval"):
    """{task: error %} of the run's checkpoint at `step` on `split` ("eval": validation, or "test"): the decoder,
    greedy."""
    decoded = common.run_cli(
        "decoder", f"--output_dir={run_dir}", f"--checkpoint_path={os.path.join(run_dir, f'ckpt-{step}')}",
        f"--data_dir={data_dir}", f"--decode_split={split}", f"--decode_to_file={os.devnull}",
        "--decode_hparams=beam_size=1,batch_size=64", log=run_dir + ".log", threads=threads)
    return task_errors(decoded, single_task)


def result_row(subset, protocol, hparams_set, hparams, test, **more):
    """A row of benchmarks/results/babi.json: the run, its test error per task ({task or "qa<task>": %}), mean and
    failed tasks, and where it came from (`common.provenance`), with `more` fields (layout, train_steps, seed, ...)."""
    test = {int(str(task).removeprefix("qa")): error for task, error in test.items()}
    return {"subset": subset, "protocol": protocol, "model": hparams_set, "hparams": hparams, **more,
            "test_error": {f"qa{task}": test[task] for task in sorted(test)},
            "mean_error": round(_mean(test), 2), "failed": sum(e > FAILED_ERROR for e in test.values()),
            **common.provenance(more.get("seed"))}


def record(rows, results_dir=None):
    """Appends `result_row`s to the bAbI results file (`benchmarks/results/babi.json`)."""
    return common.record("babi", rows, results_dir, RESULTS_DESCRIPTION)


# -- train: joint (or single-task) training, best seed per model ----------------------------------------------
def planned_runs(models, variants, seeds):
    """(hparams_set, layout, seed, overrides) of every run: each model, `--hparams` variant ([''] if none), seed."""
    return [(*pair.split(":"), int(seed), hparams) for pair in models.split(",") for hparams in variants or [""]
            for seed in seeds.split(",")]


def model_key(result):
    """What the table compares: the hparams set, the input layout and the `--hparams` overrides of a run."""
    return result["hparams_set"], result["layout"], result.get("hparams", "")


def run_one(hparams_set, layout, seed, hparams, args):
    """Trains (or resumes) one run and decodes validation and test: {"eval": {task: error}, "test": ..., ...}."""
    run_dir = os.path.join(args.work_dir, run_name(hparams_set, layout, seed, hparams))
    log = run_dir + ".log"
    saved = os.path.join(run_dir, "result.json")
    if os.path.exists(saved):
        previous = load_result(saved)
        if previous["train_steps"] == args.train_steps:
            return previous
    threads = 1 if args.jobs > 1 else 0
    problem = f"babi_qa_{layout}_{tasks_name(args)}_{args.subset}"
    # The sets read the answer at the last position, the question of the facts layout; concat puts it first.
    readout = ["classifier_readout=first"] if layout == "concat" else []
    overrides = [f"--hparams={','.join(readout + ([hparams] if hparams else []))}"] if readout or hparams else []
    began = time.perf_counter()
    with common.RunClock(run_dir) as clock:  # Resumed runs report their total, killed invocations included.
        trained = common.run_cli(
            "trainer", f"--problem={problem}", f"--hparams_set={hparams_set}", *overrides,
            f"--data_dir={args.data_dir}", f"--output_dir={run_dir}", f"--train_steps={args.train_steps}",
            "--eval_steps=20", f"--checkpoint_every={args.checkpoint_every}", "--log_every=500", f"--seed={seed}",
            log=log, threads=threads)
    train_seconds = clock.total
    with open(os.path.join(run_dir, "hparams.json"), encoding="utf-8") as f:
        stored = json.load(f)
    stored = stored.get("hparams", stored)
    result = {"train_steps": args.train_steps, "hparams_set": hparams_set, "layout": layout, "seed": seed,
              "hparams": hparams, "story_facts": story_facts(layout, args),
              "train_seconds": train_seconds,
              "readout": stored.get("classifier_readout", "mean"), "batch_size": stored.get("batch_size")}
    ponder = PONDER.findall(trained)
    result["ponder_time"] = float(ponder[-1]) if ponder else None
    for split in ("eval", "test"):
        decoded = common.run_cli(
            "decoder", f"--output_dir={run_dir}", f"--data_dir={args.data_dir}", f"--decode_split={split}",
            f"--decode_to_file={os.path.join(run_dir, split + '.txt')}", "--decode_hparams=beam_size=1,batch_size=64",
            log=log, threads=threads)
        result[split] = task_errors(decoded, args.single_task)
    if args.ponder_plot and "adaptive" in hparams_set:
        result["ponder_plot"] = ponder_plot(run_dir, args, log, threads)
    result["seconds"] = time.perf_counter() - began
    with open(saved, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return result


def finished_runs(args, models):
    """Results in `--work_dir` of the given (hparams_set, layout) pairs trained to `--train_steps`, any seed."""
    found = []
    for name in sorted(os.listdir(args.work_dir)):
        saved = os.path.join(args.work_dir, name, "result.json")
        if os.path.exists(saved):
            result = load_result(saved)
            if model_key(result) in models and result["train_steps"] == args.train_steps:
                found.append(result)
    return found


def ponder_plot(run_dir, args, log, threads):
    """The ponder time per fact of the first qa3 test story (the paper's Figure 3), as a PNG in `run_dir`."""
    from t2t_relpos.problems import babi_text  # pylint: disable=import-outside-toplevel  # No TensorFlow.

    story = os.path.join(run_dir, "qa3_story.txt")
    with open(story, "w", encoding="utf-8") as f:
        f.write(babi_text.example_text(babi_text.read_task(args.data_dir, args.subset, 3, "test")[0]) + "\n")
    path = os.path.join(run_dir, "ponder_qa3.png")
    common.run_cli("decoder", f"--output_dir={run_dir}", f"--data_dir={args.data_dir}", f"--decode_from_file={story}",
                   f"--decode_to_file={story}.answer", f"--decode_ponder_plot={path}", log=log, threads=threads)
    return path


def validation_curves(best, args):
    """Mean validation accuracy (the trainer's evaluations: `--eval_steps` batches of held-out questions, all
    tasks) and, for ACT, mean ponder time by step of each model's kept run, from its TensorBoard events."""
    train_steps = args.train_steps
    every = max(500, train_steps // 8 // 500 * 500)
    steps = list(range(every, train_steps + 1, every))
    rows = []
    for (hparams_set, layout, hparams), result in best.items():
        folder = os.path.join(args.work_dir, run_name(hparams_set, layout, result["seed"], hparams), "eval")
        name = f"`{hparams_set}` ({layout}{', ' + hparams if hparams else ''}), seed {result['seed']}"
        for tag, label in (("accuracy", "accuracy"), ("encoder_ponder_time", "ponder time")):
            curve = common.event_scalars(folder, tag)
            if curve or tag == "accuracy":
                rows.append([name, label] + [f"{curve[s]:.3f}" if s in curve else "" for s in steps])
    return common.markdown_table(["model", "", *(f"step {s}" for s in steps)], rows, align="ll" + "r" * len(steps))


def checkpoint_steps(run_dir, train_steps, count=8):
    """About `count` evenly spaced steps up to `train_steps` at which `run_dir` keeps a checkpoint, the last
    included."""
    kept = sorted(int(m.group(1)) for m in (re.fullmatch(r"ckpt-(\d+)\.index", name) for name in os.listdir(run_dir))
                  if m and int(m.group(1)) <= train_steps)
    if not kept:
        return []
    picked = {kept[round(i * (len(kept) - 1) / (count - 1))] for i in range(count)} if len(kept) > count else set(kept)
    return sorted(picked | {kept[-1]})


def task_curve(run_dir, args, threads=0):
    """{step: {task: validation error %}}: the decoder on the eval split at the run's checkpoints
    (`checkpoint_steps`), kept in `<run_dir>/task_curve.json` so that only new checkpoints are decoded. Every
    step decoded so far up to `train_steps` is returned, those of earlier calls included (their checkpoints may
    be gone)."""
    saved = os.path.join(run_dir, "task_curve.json")
    curve = {}
    if os.path.exists(saved):
        with open(saved, encoding="utf-8") as f:
            curve = {int(step): _int_keys(errors) for step, errors in json.load(f).items()}
    for step in checkpoint_steps(run_dir, args.train_steps):
        if step not in curve:
            curve[step] = checkpoint_errors(run_dir, step, args.data_dir, threads, args.single_task)
            with open(saved, "w", encoding="utf-8") as f:
                json.dump(curve, f, indent=1)
    return {step: curve[step] for step in sorted(curve) if step <= args.train_steps}


def task_curves(best, args):
    """Validation error by checkpoint of each task that is above 5% at any of them, per kept run (`task_curve`)."""
    tables = []
    for (hparams_set, layout, hparams), result in best.items():
        curve = task_curve(os.path.join(args.work_dir, run_name(hparams_set, layout, result["seed"], hparams)), args)
        steps = list(curve)
        tasks = sorted({task for errors in curve.values() for task, error in errors.items() if error > FAILED_ERROR})
        rows = [[f"qa{task}"] + [f"{curve[s].get(task, float('nan')):.1f}" for s in steps] for task in tasks]
        rows.append(["mean"] + [f"{_mean(curve[s]):.2f}" for s in steps])
        tables += [f"`{hparams_set}` ({layout}{', ' + hparams if hparams else ''}), seed {result['seed']}:", "",
                   common.markdown_table(["task", *(f"step {s}" for s in steps)], rows, align="l" + "r" * len(steps)),
                   ""]
    return tables


def best_runs(results):
    """{model_key: the result of its seed with the lowest mean validation error}, in the order first met."""
    best = {}
    for result in results:
        key = model_key(result)
        if key not in best or _mean(result["eval"]) < _mean(best[key]["eval"]):
            best[key] = result
    return best


def train_rows(results, args):
    """`result_row`s of the kept run of each model (`best_runs`), for `--record`."""
    single = getattr(args, "single_task", 0)
    return [result_row(args.subset, f"single_task{single}" if single else "joint", hparams_set, hparams, r["test"],
                       layout=layout, train_steps=args.train_steps, seed=r["seed"],
                       seeds_tried=sum(1 for x in results if model_key(x) == (hparams_set, layout, hparams)),
                       validation_mean_error=round(_mean(r["eval"]), 2),
                       training_minutes=round(r["train_seconds"] / 60, 1))
            for (hparams_set, layout, hparams), r in best_runs(results).items()]


def train_report(results, args, seconds):
    """The run log's section: best seed per model by validation, its test errors per task, the paper's rows."""
    best = best_runs(results)
    headers = ["task"] + [f"`{s}` ({layout}{', ' + hparams if hparams else ''})" for s, layout, hparams in best]
    tasks = sorted({task for r in best.values() for task in r["test"]})
    rows = [[f"qa{task}"] + [f"{r['test'].get(task, float('nan')):.1f}" for r in best.values()]
            for task in tasks]
    rows.append(["**mean error**"] + [f"**{_mean(r['test']):.2f}**" for r in best.values()])
    rows.append(["failed (> 5%)"] + [str(sum(e > FAILED_ERROR for e in r["test"].values())) for r in best.values()])
    rows.append(["validation mean error"] + [f"{_mean(r['eval']):.2f}" for r in best.values()])
    rows.append(["seeds tried (best)"] + [
        f"{sum(1 for x in results if model_key(x) == k)} ({r['seed']})" for k, r in best.items()])
    rows.append(["mean ponder time (eval)"] + [
        "" if r.get("ponder_time") is None else f"{r['ponder_time']:.2f}" for r in best.values()])
    rows.append(["training minutes"] + [f"{r['train_seconds'] / 60:.0f}" for r in best.values()])
    rows.append(["answer read from"] + [r.get("readout", "mean") for r in best.values()])
    rows.append(["input ids per batch"] + [str(r.get("batch_size", "")) for r in best.values()])
    # Results saved before the facts layout kept only the last facts have no "story_facts": whole stories.
    rows.append(["story facts kept"] + [f"last {r['story_facts']}" if r.get("story_facts") else "all"
                                        for r in best.values()])
    paper = PAPER[args.subset]
    paper_rows = [[name, f"{error:.2f}", str(failed)] for name, (error, failed) in paper.items()]
    single = getattr(args, "single_task", 0)
    training = f"qa{single} alone" if single else "joint training"
    paper_lines = [] if single else [
        f"The paper (Table 1, {args.subset} joint, best of 10 seeds): mean error (%) and failed tasks.", "",
        common.markdown_table(["model", "mean error", "failed"], paper_rows, align="lrr"), ""]
    return "\n".join([
        f"## {getattr(args, 'title', None) or f'bAbI question answering ({args.subset}, {training})'}", "",
        f"`{common.command_line()}` — {common.today()}, " + (
            f"collected from runs in `{common.shown_path(args.work_dir)}` trained by earlier invocations (their "
            "training minutes are in the table).  " if getattr(args, "report_only", False) else
            f"took {seconds / 60:.0f} min (runs kept in `{common.shown_path(args.work_dir)}` and resumed; "
            f"{args.jobs} at a time"
            f"{', each on one TensorFlow thread' if args.jobs > 1 else ''}).  "),
        f"Machine: {common.machine_description()}.", "",
        f"Test error (%) per task after {args.train_steps} steps of "
        + (f"training on qa{single} alone" if single else "joint training on all 20 tasks")
        + f" (`babi_qa_<layout>_{tasks_name(args)}_{args.subset}`; every 10th training "
        "story held out for validation), the seed with the lowest mean validation error per model. `facts`: each "
        "sentence is one position, its words summed under a learned positional mask, the story's last "
        f"{story_facts('facts', args)} facts (the paper's input); `concat`: "
        "tensor2tensor's question + story tokens." + (
            " Training files missing from the data and taken from the 1k set instead: "
            + ", ".join(f"qa{task}" for task in getattr(args, "stand_ins", [])) + "."
            if getattr(args, "stand_ins", []) else ""), "",
        common.markdown_table(headers, rows, align="l" + "r" * len(best)), "", *paper_lines,
        f"Validation accuracy (the trainer's evaluations, 20 batches of held-out questions"
        f"{'' if single else ' over all tasks'}) and, "
        "with ACT, mean ponder time by step, of the runs above:", "",
        validation_curves(best, args), *([
            "", "Validation error (%) per task by checkpoint (the decoder on the held-out questions at each saved "
            "step; the tasks above 5% at some step):", "", *task_curves(best, args)]
            if getattr(args, "task_curves", False) else [])])


def train_command(args):
    if data_missing(args):
        return 0
    args.work_dir = runs_dir(args.work_dir, args.subset, args.single_task)
    os.makedirs(args.work_dir, exist_ok=True)
    args.data_dir, args.stand_ins = complete_data_dir(args)
    began = time.perf_counter()
    plan = planned_runs(args.models, args.hparams, args.seeds)
    runs = [] if args.report_only else plan
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_one, *run, args) for run in runs]
        results = []
        for run, future in zip(runs, futures):
            results.append(future.result())
            print(run_name(*run), f"validation {_mean(results[-1]['eval']):.2f}%",
                  f"test {_mean(results[-1]['test']):.2f}%", flush=True)
    # Seeds trained earlier to the same steps (by another invocation) count too: the best is picked over all.
    done = {(*model_key(r), r["seed"]) for r in results}
    results += [r for r in finished_runs(args, {(*run[:2], run[3]) for run in plan})
                if (*model_key(r), r["seed"]) not in done]
    text = train_report(results, args, time.perf_counter() - began)
    print(text)
    if args.write:
        common.replace_section(args.section or "_".join(["babi", args.subset] + (
            [tasks_name(args)] if args.single_task else [])), text)
    if args.record and results:
        record(train_rows(results, args))
    return 0


# -- continue: a trained run continued on other tasks, layers frozen -----------------------------------------
def copy_run(args, out):
    """`<out>`: the run's stored settings and its checkpoint at `--from_step`, with this continuation's tasks."""
    from t2t_relpos.problems import babi_text  # pylint: disable=import-outside-toplevel  # No TensorFlow.

    prefix = f"ckpt-{args.from_step}"
    files = [name for name in os.listdir(args.from_run) if name.startswith(prefix + ".")]
    if not files:
        raise SystemExit(f"error: {args.from_run} has no checkpoint of step {args.from_step} ({prefix}.index)")
    os.makedirs(out)
    for name in files + ["hparams.json"]:
        shutil.copy(os.path.join(args.from_run, name), out)
    with open(os.path.join(out, "checkpoint"), "w", encoding="utf-8") as f:
        f.write(f'model_checkpoint_path: "{prefix}"\nall_model_checkpoint_paths: "{prefix}"\n')
    with open(os.path.join(out, "hparams.json"), encoding="utf-8") as f:
        stored = json.load(f)
    trained = babi_text.TASKS if args.tasks == "all" else [int(t) for t in args.tasks.split(",")]
    stored["hparams"]["task_repeats"] = [f"{t}:0" for t in babi_text.TASKS if t not in trained] + [
        item for item in args.task_repeats.split(",") if item]
    stored["hparams"]["freeze_layers"] = [name for name in args.freeze.split(",") if name]
    with open(os.path.join(out, "hparams.json"), "w", encoding="utf-8") as f:
        json.dump(stored, f, indent=1)


def _save_continuation(result, saved):
    with open(saved, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return result


def continue_run(args):
    """Copies the run (`copy_run`), trains it `--steps` further, decodes both ends; its `continue.json` result."""
    out = os.path.join(args.work_dir, args.name)
    saved = os.path.join(out, "continue.json")
    end = args.from_step + args.steps
    if os.path.exists(saved):
        with open(saved, encoding="utf-8") as f:
            result = json.load(f)
        args = argparse.Namespace(**{**vars(args), "qa16_hops": result.get("qa16_hops", 3)})  # As it was trained.
    data_dir, _ = complete_data_dir(args) if args.qa16_hops == 3 else _hops_data_dir(args)
    if not os.path.exists(saved):
        if not os.path.exists(out):
            copy_run(args, out)
        began = time.perf_counter()
        # Checkpoints every 1000 steps at most: rerunning the same command resumes a long continuation.
        common.run_cli("trainer", f"--output_dir={out}", f"--data_dir={data_dir}", f"--train_steps={end}",
                       "--eval_steps=20", f"--checkpoint_every={min(args.steps, 1000)}", "--log_every=500",
                       f"--seed={args.seed}", log=out + ".log", threads=args.threads)
        minutes = (time.perf_counter() - began) / 60
        result = {"name": args.name, "from_run": args.from_run, "from_step": args.from_step, "steps": args.steps,
                  "tasks": args.tasks, "task_repeats": args.task_repeats, "freeze": args.freeze,
                  "qa16_hops": args.qa16_hops,
                  "start": checkpoint_errors(out, args.from_step, data_dir, args.threads),
                  "end": checkpoint_errors(out, end, data_dir, args.threads),
                  "training_minutes": round(minutes, 1)}
    if "test_end" not in result:  # Continuations saved before test errors were kept get them on a rerun.
        result["test_end"] = checkpoint_errors(out, result["from_step"] + result["steps"], data_dir,
                                               args.threads, split="test")
    return _save_continuation(result, saved)


def _hops_data_dir(args):
    """The data directory with qa16 rewritten to `args.qa16_hops` lookups, the other tasks' files linked."""
    root = version_data_dir(args, args.qa16_hops)
    # Training files missing from the subset (10k qa3) are linked in from the 1k copy beside them, in place.
    return complete_data_dir(argparse.Namespace(data_dir=root, subset=args.subset, work_dir=os.path.dirname(root)))


def continue_report(results):
    """A markdown table of continuations (`continue_run`'s results)."""
    rows = []
    for r in results:
        start, end = _int_keys(r["start"]), _int_keys(r["end"])
        learned = [t for t in sorted(start) if start[t] <= LEARNED]
        hops = r.get("qa16_hops", 3)
        rows.append([r["name"], r["tasks"] + (f" ({r['task_repeats']})" if r["task_repeats"] else "")
                     + (f"; qa16 asked with {hops} lookup{'s' * (hops > 1)}" if hops != 3 else ""),
                     r["freeze"] or "nothing", f"{r['from_step']} -> {r['from_step'] + r['steps']}",
                     _learned_text(learned, start, end),
                     failing_text(end),
                     f"{_mean(start):.1f} -> {_mean(end):.1f}", _test_text(r.get("test_end")),
                     f"{r['training_minutes']:.0f}"])
    return common.markdown_table(
        ["continuation", "tasks trained", "frozen", "steps", "tasks learned at the start: validation error %",
         "failing at the end: validation error %", "mean validation error %",
         "test error % at the end (failed tasks)", "training minutes"], rows, align="llllllrrr")


def _learned_text(learned, start, end):
    """Each task learned at the start with its error at both ends; beyond three, only those lost."""
    if len(learned) <= 3:
        return ", ".join(f"qa{t} {start[t]:.1f} -> {end.get(t, float('nan')):.1f}" for t in learned) or "none"
    lost = [t for t in learned if end.get(t, 100.0) > LEARNED]
    return f"{len(learned)} tasks; " + (", ".join(f"qa{t} {start[t]:.1f} -> {end[t]:.1f}" for t in lost)
                                        if lost else "none lost")


def failing_text(errors):
    failing = [t for t in sorted(errors) if errors[t] > LEARNED]
    if len(failing) > 4:
        return f"{len(failing)} tasks"
    return ", ".join(f"qa{t} {errors[t]:.1f}" for t in failing) or "none"


def _test_text(errors):
    if not errors:
        return ""
    return f"{_mean(errors):.2f} ({sum(e > LEARNED for e in errors.values())})"


def continue_command(args):
    continue_run(args)
    results = []
    for name in sorted(os.listdir(args.work_dir)):
        path = os.path.join(args.work_dir, name, "continue.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                results.append(json.load(f))
    results.sort(key=lambda r: (r["from_step"], r["name"]))  # A chain of continuations in the order it ran.
    text = "\n".join([
        "## bAbI: a trained run continued on other tasks, layers frozen, a curriculum", "",
        f"`{common.command_line()}` (the last continuation; the others were run the same way) — {common.today()}.  ",
        f"Machine: {common.machine_description()}.", "",
        "Validation error (%) of each continuation's first and last checkpoint (the decoder on the held-out "
        "stories): of the tasks learned at the start (<= 5%), of those failing at the end (> 5%), and the mean "
        "over all 20 tasks, those left out of training included; test error of the last checkpoint (kept since "
        "2026-11-26). Ordered by first step: a chain of continuations reads from top to bottom.", "",
        continue_report(results)])
    print(text)
    if args.write:
        common.replace_section("babi_continue", text)
    return 0


# -- curriculum: the stages that took the 10k fixed-step UT to 0.57%, as one command --------------------------
# (name, steps, task_repeats, qa16 lookups, what it trains); stage 0 trains qa17 alone from scratch.
STAGES = (
    ("qa17_alone", 4000, "", 3, "qa17 alone"),
    ("all_repeats", 8000, "16:4,17:8,19:8", 3, "all 20; qa16 x4, qa17 x8, qa19 x8"),
    ("all_repeats_more", 4000, "16:4,17:8,19:8", 3, "the same"),
    ("qa16_two_lookups", 3000, "16:8,17:8,19:8", 2, "qa16 asked with two lookups, x8"),
    ("qa16_two_lookups_x24", 4000, "16:24,17:8,19:8", 2, "the same, qa16 x24"),
    ("qa16", 4000, "16:8,17:8,19:8", 3, "qa16 as it is, x8"),
)


def chain_name(args):
    variant = "_" + re.sub(r"[^A-Za-z0-9.]+", "_", args.hparams).strip("_") if args.hparams else ""
    return f"{args.hparams_set}{variant}_s{args.seed}"


def first_stage(args, steps, name):
    """Stage 0: the joint problem with every task but qa17 at `task_repeats` 0, from scratch; its result."""
    from t2t_relpos.problems import babi_text  # pylint: disable=import-outside-toplevel  # No TensorFlow.

    out = os.path.join(args.work_dir, name)
    saved = os.path.join(out, "continue.json")
    if os.path.exists(saved):
        with open(saved, encoding="utf-8") as f:
            return json.load(f)
    data_dir, _ = complete_data_dir(args)
    repeats = "task_repeats=[" + ",".join(f"{t}:0" for t in babi_text.TASKS if t != 17) + "]"
    began = time.perf_counter()
    common.run_cli("trainer", f"--problem=babi_qa_facts_all_tasks_{args.subset}", f"--hparams_set={args.hparams_set}",
                   "--hparams=" + ",".join([repeats] + ([args.hparams] if args.hparams else [])),
                   f"--data_dir={data_dir}", f"--output_dir={out}", f"--train_steps={steps}", "--eval_steps=20",
                   f"--checkpoint_every={min(steps, 1000)}", "--log_every=500", f"--seed={args.seed}",
                   log=out + ".log", threads=args.threads)
    result = {"name": name, "from_step": 0, "steps": steps, "tasks": "17", "task_repeats": "", "freeze": "",
              "qa16_hops": 3, "training_minutes": round((time.perf_counter() - began) / 60, 1),
              "start": {}, "end": checkpoint_errors(out, steps, data_dir, args.threads),
              "test_end": checkpoint_errors(out, steps, data_dir, args.threads, split="test")}
    return _save_continuation(result, saved)


def curriculum_run(args):
    """Trains (or resumes) every stage in order; their results."""
    steps = [int(s) for s in args.stage_steps.split(",")] if args.stage_steps else [s[1] for s in STAGES]
    if len(steps) != len(STAGES):
        raise SystemExit(f"error: --stage_steps needs {len(STAGES)} numbers, got {len(steps)}")
    prefix = chain_name(args)
    names = [f"{prefix}_{k}_{stage[0]}" for k, stage in enumerate(STAGES)]
    results = [first_stage(args, steps[0], names[0])]
    for k in range(1, args.stages or len(STAGES)):
        _, _, repeats, hops, _ = STAGES[k]
        previous = results[-1]
        results.append(continue_run(argparse.Namespace(
            from_run=os.path.join(args.work_dir, names[k - 1]), from_step=previous["from_step"] + previous["steps"],
            name=names[k], data_dir=args.data_dir, subset=args.subset, tasks="all", task_repeats=repeats,
            freeze="", qa16_hops=hops, steps=steps[k], seed=args.seed, threads=args.threads,
            work_dir=args.work_dir)))
    return results


def curriculum_report(args, results, seconds):
    rows = []
    for k, ((_, _, _, _, trains), r) in enumerate(zip(STAGES, results)):
        end, test = _int_keys(r["end"]), _int_keys(r["test_end"])
        rows.append([str(k), f"{r['from_step']} -> {r['from_step'] + r['steps']}", trains,
                     f"{_mean(end):.2f}", failing_text(end),
                     f"{_mean(test):.2f}", str(sum(e > FAILED_ERROR for e in test.values())),
                     f"{r['training_minutes']:.0f}"])
    last = _int_keys(results[-1]["test_end"])
    return "\n".join([
        f"## bAbI {args.subset} through a curriculum: `{args.hparams_set}`"
        + (f" ({args.hparams})" if args.hparams else "") + f", seed {args.seed}"
        + (f", the first {len(results)} of {len(STAGES)} stages" if len(results) < len(STAGES) else ""), "",
        f"`{common.command_line()}` — {common.today()}, this invocation {seconds / 60:.0f} min (stages finished "
        "by earlier invocations are read back).  ", f"Machine: {common.machine_description()}.", "",
        "Each stage continues the one before (weights and Adam state); validation error (%) at its end, the test "
        "error of its last checkpoint, training minutes of a core.", "",
        common.markdown_table(["stage", "steps", "trains", "validation mean", "failing (validation)", "test mean",
                               "failed (test)", "minutes"], rows, align="lllrlrrr"), "",
        "Test error of the last stage, per task: " + ", ".join(f"qa{t} {last[t]:.1f}" for t in sorted(last)) + ".",
        paper_line(args.subset)])


def curriculum_row(args, results):
    """The `result_row` of a chain: its last stage's test error (a chain cut short by `--stages` is marked)."""
    last = results[-1]
    return result_row(args.subset, "curriculum", args.hparams_set, args.hparams, last["test_end"], layout="facts",
                      train_steps=last["from_step"] + last["steps"], seed=args.seed,
                      stages=f"{len(results)} of {len(STAGES)}",
                      training_minutes=round(sum(r["training_minutes"] for r in results), 1))


def curriculum_command(args):
    if not 0 <= args.stages <= len(STAGES):
        raise SystemExit(f"error: --stages must be 1 to {len(STAGES)} (0: all), got {args.stages}")
    if data_missing(args):
        return 0
    began = time.perf_counter()
    results = curriculum_run(args)
    text = curriculum_report(args, results, time.perf_counter() - began)
    print(text)
    if args.write:
        common.replace_section(f"babi_curriculum_{args.subset}_{chain_name(args)}", text)
    if args.record:
        record([curriculum_row(args, results)])
    return 0


# -- fact-order: do the fact vectors tell a relation from its reverse? ----------------------------------------
RELATION_TASKS = {17: "positional reasoning", 18: "size reasoning", 19: "path finding"}
VERBS = ("is", "fits")


def swapped(sentence):
    """The fact `sentence` (tokens, "." last) with its two entities exchanged, or None if it is not of the form
    "The A <relation> the B ." (A and B may be several words: "the pink rectangle")."""
    words = list(sentence)
    if len(words) < 6 or words[0] != "The" or words[-1] != "." or "the" not in words[2:]:
        return None
    verb = next((i for i, w in enumerate(words) if w in VERBS), None)
    last_the = len(words) - 1 - words[::-1].index("the")
    if verb is None or not 1 < verb < last_the:
        return None
    first, relation, second = words[1:verb], words[verb:last_the], words[last_the + 1:-1]
    return tuple(["The"] + second + relation + ["the"] + first + ["."])


def relational_facts(examples):
    """The distinct facts of `examples`' stories that `swapped` can turn round, in order of first appearance."""
    facts = {}
    for example in examples:
        for sentence in example.story:
            if swapped(sentence) is not None:
                facts.setdefault(tuple(sentence), None)
    return list(facts)


def swap_similarities(embed, encoder, facts):
    """Cosine similarity of each fact's vector and its swapped twin's under `embed` (a `FactEmbedding`), with
    `encoder` the problem's facts-layout input encoder."""

    def vectors(sentences):
        ids = np.array([encoder.encode(" ".join(s) + " Where is Mary ?")[:encoder.fact_width] for s in sentences])
        return np.asarray(embed(ids)[0])[:, 0]

    a, b = vectors(facts), vectors([swapped(f) for f in facts])
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def fact_order_measure(run, data_dir):
    """{task: (mean cosine similarity, facts)} of a run (`RUN_DIR[@STEP]`), and the checkpoint's step."""
    from t2t_relpos.layers.fact_embedding import FactEmbedding  # pylint: disable=import-outside-toplevel
    from t2t_relpos.problems import babi_text  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import runs  # pylint: disable=import-outside-toplevel

    run_dir, _, step = run.partition("@")
    model, problem, _, path = runs.load(run_dir, step and os.path.join(run_dir, f"ckpt-{step}"), data_dir)
    embed = next(layer for layer in model._flatten_layers()  # pylint: disable=protected-access
                 if isinstance(layer, FactEmbedding))
    encoder = problem.feature_encoders(data_dir)["inputs"]
    result = {}
    for task in RELATION_TASKS:
        facts = relational_facts(babi_text.read_task(data_dir, problem.subset, task, "test"))
        result[task] = (float(np.mean(swap_similarities(embed, encoder, facts))), len(facts))
    return result, path.rsplit("-", 1)[-1]


def run_labels(runs):
    """Each run's folder name, with its parent's where two runs share a name (`single_task17/<set>_facts_s1`)."""
    paths = [os.path.normpath(run.partition("@")[0]) for run in runs]
    names = [os.path.basename(path) for path in paths]
    return [os.path.join(os.path.basename(os.path.dirname(path)), name) if names.count(name) > 1 else name
            for path, name in zip(paths, names)]


def fact_order_command(args):
    if not os.path.isdir(args.data_dir):
        print(f"bAbI data not found in {args.data_dir} (pass --data_dir); skipping.", file=sys.stderr)
        return 0
    began = time.perf_counter()
    rows = []
    for run, label in zip(args.runs, run_labels(args.runs)):
        result, step = fact_order_measure(run, args.data_dir)
        rows.append([f"`{label}`", step]
                    + [f"{result[t][0]:.3f} ({result[t][1]})" for t in RELATION_TASKS])
    text = "\n".join([
        "## bAbI: do the fact vectors tell a relation from its reverse?", "",
        f"`{common.command_line()}` — {common.today()}, took {time.perf_counter() - began:.0f} s.  ",
        f"Machine: {common.machine_description()}.", "",
        "Cosine similarity between a relational fact's vector and that of the same fact with its two entities "
        "swapped (\"The kitchen is north of the hallway.\" / \"The hallway is north of the kitchen.\"), mean over "
        "the distinct such facts of the task's test stories (their number in brackets); 1.000: indistinguishable.",
        "", common.markdown_table(["run", "step", *(f"qa{t} ({name})" for t, name in RELATION_TASKS.items())], rows,
                                  align="lr" + "r" * len(RELATION_TASKS))])
    print(text)
    if args.write:
        common.replace_section("babi_fact_order", text)
    return 0


# -- hops: qa16 asked with one, two or three lookups -----------------------------------------------------------
HOPS_TASK = 16
VERSIONS = {1: "1 hop: the colour of a person whose colour is stated", 2: "2 hops: the colour of a species",
            3: "3 hops: qa16 as it is (person -> species -> another member -> colour)"}


def rewrite(example, hops):
    """A qa16 `Example` asked with `hops` lookups (3: unchanged); see the module docstring."""
    if hops == 3:
        return example
    words = [[w for w in sentence if w != "."] for sentence in example.story]
    species = {w[0]: w[3] for w in words if len(w) == 4 and w[1:3] == ["is", "a"]}
    coloured = [w for w in words if len(w) == 3 and w[1] == "is"]
    if hops == 1:
        person, _, colour = coloured[example.story_index % len(coloured)]
        return example._replace(question=("What", "color", "is", person, "?"), answer=colour)
    queried = example.question[-2]
    return example._replace(question=("What", "color", "is", species[queried], "?"))


def task_file_text(examples):
    """bAbI file text of `examples`, each question its own story (qa16 has one question per story)."""
    lines = []
    for example in examples:
        lines += [f"{i} {' '.join(sentence)}" for i, sentence in enumerate(example.story, 1)]
        lines.append(f"{len(example.story) + 1} {' '.join(example.question)}\t{example.answer}\t")
    return "\n".join(lines) + "\n"


def version_data_dir(args, hops):
    """A data directory whose qa16 files ask `hops` lookups; the other files are links to the real ones."""
    from t2t_relpos.problems import babi_text  # pylint: disable=import-outside-toplevel  # No TensorFlow.

    root = os.path.join(args.work_dir, f"qa16_hops{hops}", "data")
    for subset, folder in babi_text.SUBSETS.items():
        source = os.path.join(args.data_dir, folder)
        if not os.path.isdir(source):
            continue
        os.makedirs(os.path.join(root, folder), exist_ok=True)
        for name in os.listdir(source):
            target = os.path.join(root, folder, name)
            if name.startswith(f"qa{HOPS_TASK}_"):
                split = "train" if "_train." in name else "test"
                examples = babi_text.read_task(args.data_dir, subset, HOPS_TASK, split)
                if len({e.story_index for e in examples}) != len(examples):
                    raise ValueError(f"{name}: a story with several questions; this command expects one each")
                with open(target.removesuffix(".gz"), "w", encoding="utf-8") as f:
                    f.write(task_file_text(rewrite(e, hops) for e in examples))
            elif not os.path.lexists(target):
                os.symlink(os.path.abspath(os.path.join(source, name)), target)
    return root


def hops_train(args, hops, model):
    """Trains and decodes one (version, model) with `train --single_task 16`; its run directory and result."""
    data_dir = args.data_dir if hops == 3 else version_data_dir(args, hops)
    work_dir = args.work_dir if hops == 3 else os.path.join(args.work_dir, f"qa16_hops{hops}")
    main(["train", "--data_dir", data_dir, "--subset", args.subset, "--single_task", str(HOPS_TASK),
          "--models", model, "--train_steps", str(args.train_steps), "--jobs", str(args.jobs), "--work_dir", work_dir]
         + (["--report_only"] if args.report_only else []))
    hparams_set, layout = model.split(":")
    run_dir = os.path.join(runs_dir(work_dir, args.subset, HOPS_TASK), run_name(hparams_set, layout, 1))
    return run_dir, load_result(os.path.join(run_dir, "result.json"))


def hops_report(done, args, seconds):
    steps = sorted({s for run_dir, _ in done.values() for s in common.event_scalars(run_dir + "/eval", "accuracy")})
    shown = [s for s in steps if s in (500, 1000, 2000, 2500, 3000, 4000, 6000) or s == steps[-1]]
    rows = []
    for (hops, model), (run_dir, result) in sorted(done.items()):
        curve = common.event_scalars(run_dir + "/eval", "accuracy")
        rows.append([VERSIONS[hops], f"`{model.split(':')[0]}`", f"{result['test'][HOPS_TASK]:.1f}",
                     f"{result['eval'][HOPS_TASK]:.1f}", *(f"{curve[s]:.2f}" if s in curve else "" for s in shown),
                     f"{result['train_seconds'] / 60:.0f}"])
    headers = ["question", "model", "test error %", "validation error %", *(f"acc. step {s}" for s in shown),
               "training minutes"]
    return "\n".join([
        f"## bAbI qa16 by reasoning hops ({args.subset}, the task alone)", "",
        f"`{common.command_line()}` — {common.today()}, " + (
            "collected from runs trained by earlier invocations (their training minutes are in the table).  "
            if args.report_only else f"took {seconds / 60:.0f} min ({args.jobs} run(s) at a time).  "),
        f"Machine: {common.machine_description()}.", "",
        f"Each version of qa16 trained alone for {args.train_steps} steps (`babi_qa_<layout>_single_task16_"
        f"{args.subset}` on rewritten files), seed 1; accuracy: the trainer's validation accuracy (held-out "
        "stories) by step.", "",
        common.markdown_table(headers, rows, align="ll" + "r" * (len(headers) - 2))])


def hops_command(args):
    if data_missing(args):
        return 0
    began = time.perf_counter()
    plan = [(int(h), m) for h in args.hops.split(",") for m in args.models.split(",")]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        done = dict(zip(plan, pool.map(lambda run: hops_train(args, *run), plan)))
    text = hops_report(done, args, time.perf_counter() - began)
    print(text)
    if args.write:
        common.replace_section(f"babi_qa16_hops_{args.subset}", text)
    return 0


# -- the command line --------------------------------------------------------------------------------------
def _data_flags(p, subset):
    p.add_argument("--data_dir", default=os.path.join("..", "shared", "data", "babi"))
    p.add_argument("--subset", choices=sorted(PAPER), default=subset)


def _output_flags(p, record=None):
    """--write, and --record where the command records rows (`record`: what it records)."""
    p.add_argument("--write", action="store_true", help="write the section into docs/studies/benchmark_runs.md")
    if record:
        p.add_argument("--record", action="store_true", help=f"append {record} to benchmarks/results/babi.json "
                       "(drawn by benchmarks/plots.py)")


def _threads_flag(p):
    p.add_argument("--threads", type=int, default=1, help="TensorFlow threads per process (0: one per core)")


def _add_train(commands):
    p = commands.add_parser("train", help="joint (or single-task) training, the best seed per model")
    _data_flags(p, "1k")
    p.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated hparams_set:layout pairs")
    p.add_argument("--seeds", default="1")
    p.add_argument("--hparams", action="append", help="overrides for every model (e.g. layer_prepostprocess_dropout="
                   "0.3): runs of their own, a column of their own; repeat for several variants ('' for the "
                   "sets as they are)")
    p.add_argument("--single_task", type=int, default=0, choices=range(21), metavar="N",
                   help="train on task N alone (babi_qa_<layout>_single_task<N>_<subset>); 0: all 20 jointly")
    p.add_argument("--train_steps", type=int, default=20000)
    p.add_argument("--checkpoint_every", type=int, default=500)
    p.add_argument("--jobs", type=int, default=1, help="runs at once (each on one thread if > 1)")
    p.add_argument("--ponder_plot", action="store_true", help="ponder time per fact of a qa3 story")
    p.add_argument("--work_dir", default=os.path.join("benchmarks", "runs", "babi"))
    p.add_argument("--report_only", action="store_true", help="train nothing: tabulate the runs of these "
                   "models and variants already in --work_dir at --train_steps (runs trained by separate "
                   "invocations, in one table)")
    p.add_argument("--task_curves", action="store_true", help="decode the held-out questions at about 8 of each "
                   "kept run's checkpoints (and keep those of earlier calls) and tabulate the error of every "
                   "task above 5%% by step (when each task is learned)")
    _output_flags(p, record="each kept run's test error per task")
    p.add_argument("--section", help="run log section to write (default babi_<subset>): comparisons of their "
                   "own beside the main table")
    p.add_argument("--title", help="the section's heading (default: bAbI question answering (<subset>, joint "
                   "training))")
    p.set_defaults(command=train_command)


def _add_continue(commands):
    p = commands.add_parser("continue", help="a trained run continued on other tasks, layers frozen")
    p.add_argument("--from_run", required=True)
    p.add_argument("--from_step", type=int, required=True)
    p.add_argument("--name", required=True, help="the continuation's directory in --work_dir")
    p.add_argument("--data_dir", required=True)
    p.add_argument("--subset", default="10k", choices=("1k", "10k"))
    p.add_argument("--tasks", default="all", help="'all' or a comma list of the tasks trained")
    p.add_argument("--task_repeats", default="", help="more task_repeats items, e.g. 17:8")
    p.add_argument("--freeze", default="", help="comma list of top-level layers left untrained")
    p.add_argument("--qa16_hops", type=int, default=3, choices=(1, 2, 3),
                   help="qa16 asked with this many lookups (3: as it is; see the hops command)")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    _threads_flag(p)
    p.add_argument("--work_dir", default=os.path.join("benchmarks", "runs", "babi_continue"))
    p.add_argument("--write", action="store_true",
                   help="replace the babi_continue section of docs/studies/benchmark_runs.md")
    p.set_defaults(command=continue_command)


def _add_curriculum(commands):
    p = commands.add_parser("curriculum", help="the 10k curriculum's six stages as one resumable chain")
    _data_flags(p, "10k")
    p.add_argument("--hparams_set", default="universal_transformer_babi_rel")
    p.add_argument("--hparams", default="", help="overrides of the set, e.g. act_type=basic")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--stage_steps", default="", help=f"{len(STAGES)} comma-separated step counts (default: "
                   + ",".join(str(s[1]) for s in STAGES) + ")")
    p.add_argument("--stages", type=int, default=0, help="run (and report) only the first N stages, e.g. "
                   "what fits a session; rerunning with more goes on from there")
    _threads_flag(p)
    p.add_argument("--work_dir", default=os.path.join("benchmarks", "runs", "babi_curriculum"))
    _output_flags(p, record="the last stage's test error per task")
    p.set_defaults(command=curriculum_command)


def _add_fact_order(commands):
    p = commands.add_parser("fact-order", help="whether trained runs' fact vectors tell a relation from its reverse")
    p.add_argument("runs", nargs="+", help="run directories, each optionally @STEP")
    p.add_argument("--data_dir", default=os.path.join("..", "shared", "data", "babi"))
    _output_flags(p)
    p.set_defaults(command=fact_order_command)


def _add_hops(commands):
    p = commands.add_parser("hops", help="qa16 asked with one, two or three lookups, each trained alone")
    _data_flags(p, "10k")
    p.add_argument("--models", default="universal_transformer_babi_rel:facts")
    p.add_argument("--hops", default="1,2,3")
    p.add_argument("--train_steps", type=int, default=8000)
    p.add_argument("--jobs", type=int, default=2, help="runs at once (each on one thread if > 1)")
    p.add_argument("--work_dir", default=os.path.join("benchmarks", "runs", "babi"))
    p.add_argument("--report_only", action="store_true", help="train nothing: tabulate the finished runs")
    _output_flags(p)
    p.set_defaults(command=hops_command)


def parse_args(argv=None):
    """The command (`train`, `continue`, `curriculum`, `fact-order` or `hops`) and its flags; `args.command` is
    the function that runs it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                     epilog="`benchmarks/babi.py <command> --help` lists a command's flags.")
    commands = parser.add_subparsers(metavar="command", required=True)
    for add in (_add_train, _add_continue, _add_curriculum, _add_fact_order, _add_hops):
        add(commands)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    common.refuse_uncommitted_writes(args)
    common.stop_tools_on_termination()
    return args.command(args)


if __name__ == "__main__":
    sys.exit(main())
