"""bAbI question answering, the Universal Transformer paper's Table 1 protocol, through the real CLIs.

    .venv/bin/python benchmarks/babi.py --data_dir ../shared/data/babi [--subset 1k]
        [--models adaptive_universal_transformer_babi:facts,...] [--seeds 1,2] [--train_steps 20000]
        [--hparams '' --hparams layer_prepostprocess_dropout=0.3,...] [--single_task N] [--jobs 2]
        [--write]

Each (hparams set, input layout, seed) trains with `t2t-relpos-trainer` on `babi_qa_<layout>_all_tasks_<subset>`
(all 20 tasks jointly; every 10th training story held out for validation; with `--single_task N`,
`babi_qa_<layout>_single_task<N>_<subset>`: task N alone, the paper's single-task setting), then
`t2t-relpos-decoder` answers the validation and the test questions and reports the error of every task. Per
model the seed with the lowest mean validation error is kept, as the paper picked the best of 10 runs on
validation; its test errors are reported with the mean, the failed tasks (error > 5%) and the paper's row. Runs live in `--work_dir` and resume: a run
whose checkpoint has reached `--train_steps` is only decoded again if its results are missing, so raising
`--train_steps` continues every run where it stopped; the table picks the best seed over every run of a model
in `--work_dir` at those steps, those of earlier invocations included. `--hparams` overrides make runs (and table
columns) of their own; repeat the flag to train and compare several variants in one table (`--hparams ''` is the
sets as they are, the default). `--report_only` trains nothing and tabulates the finished runs of the models and
variants named (those missing are left out). `--task_curves` adds, per kept run, the validation error of each task
by checkpoint (when each task is learned in a joint run). `--ponder_plot` draws the ponder time per fact of the first qa3 test story for the
adaptive models (the paper's Figure 3). Without the data the script says where to put it and exits.
"""

import argparse
import concurrent.futures
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_MODELS = "adaptive_universal_transformer_babi:facts,adaptive_universal_transformer_babi_rel:facts"
# Table 1 of Dehghani et al. (2018): average error (%) and failed tasks (> 5% error), best of 10 seeds.
PAPER = {
    "1k": {"Transformer": (26.8, 14), "Universal Transformer": (8.50, 8), "Adaptive UT": (7.85, 5)},
    "10k": {"Transformer": (22.1, 12), "Universal Transformer": (0.47, 0), "Adaptive UT": (0.29, 0)},
}
FAILED_ERROR = 5.0  # % error above which a task counts as failed (the paper's Table 1).
TASK_ERROR = re.compile(r"^\s+qa(\d+)\s+accuracy = [0-9.]+\s+error = ([0-9.]+)%", re.M)
OVERALL_ERROR = re.compile(r"^answer_accuracy = [0-9.]+\s+error = ([0-9.]+)%", re.M)
PONDER = re.compile(r"encoder_ponder_time ([0-9.]+)")


def run_name(hparams_set, layout, seed, hparams=""):
    """The run's directory name; `--hparams` overrides name a run of their own (e.g. `..._facts_dropout_0.3_s1`)."""
    changed = "_" + re.sub(r"[^A-Za-z0-9.]+", "_", hparams).strip("_") if hparams else ""
    return f"{hparams_set}_{layout}{changed}_s{seed}"


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
    from t2t_relpos.problems import babi_text  # pylint: disable=import-outside-toplevel  # No TensorFlow.

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
    """Where `main` keeps the runs of a subset (and of one task alone): `<work_dir>/<subset>[/single_task<N>]`."""
    return os.path.join(work_dir, subset, *([f"single_task{single_task}"] if single_task else []))


def load_result(path):
    """A run's saved `result.json`, its per-task errors keyed by task number again (JSON keys are strings)."""
    with open(path, encoding="utf-8") as f:
        result = json.load(f)
    for split in ("eval", "test"):
        result[split] = {int(task): error for task, error in result.get(split, {}).items()}
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
    missing = [task for task in babi_text.TASKS if babi_text.task_file(args.data_dir, args.subset, task, "train") is None
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


def _mean(errors):
    return sum(errors.values()) / len(errors)


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
    """About `count` evenly spaced steps up to `train_steps` at which `run_dir` keeps a checkpoint, the last included."""
    kept = sorted(int(m.group(1)) for m in (re.fullmatch(r"ckpt-(\d+)\.index", name) for name in os.listdir(run_dir))
                  if m and int(m.group(1)) <= train_steps)
    if not kept:
        return []
    picked = {kept[round(i * (len(kept) - 1) / (count - 1))] for i in range(count)} if len(kept) > count else set(kept)
    return sorted(picked | {kept[-1]})


def checkpoint_errors(run_dir, step, data_dir, threads=0, single_task=0, split="eval"):
    """{task: error %} of the run's checkpoint at `step` on `split` ("eval": validation, or "test"): the decoder,
    greedy."""
    decoded = common.run_cli(
        "decoder", f"--output_dir={run_dir}", f"--checkpoint_path={os.path.join(run_dir, f'ckpt-{step}')}",
        f"--data_dir={data_dir}", f"--decode_split={split}", f"--decode_to_file={os.devnull}",
        "--decode_hparams=beam_size=1,batch_size=64", log=run_dir + ".log", threads=threads)
    return task_errors(decoded, single_task)


def task_curve(run_dir, args, threads=0):
    """{step: {task: validation error %}}: the decoder on the eval split at the run's checkpoints
    (`checkpoint_steps`), kept in `<run_dir>/task_curve.json` so that only new checkpoints are decoded. Every
    step decoded so far up to `train_steps` is returned, those of earlier calls included (their checkpoints may
    be gone)."""
    saved = os.path.join(run_dir, "task_curve.json")
    curve = {}
    if os.path.exists(saved):
        with open(saved, encoding="utf-8") as f:
            curve = {int(step): {int(t): e for t, e in errors.items()} for step, errors in json.load(f).items()}
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


def report(results, args, seconds):
    """The README section: best seed per model by validation, its test errors per task, the paper's rows."""
    best = {}
    for result in results:
        key = model_key(result)
        if key not in best or _mean(result["eval"]) < _mean(best[key]["eval"]):
            best[key] = result
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
            f"collected from runs in `{args.work_dir}` trained by earlier invocations (their training minutes are "
            "in the table).  " if getattr(args, "report_only", False) else
            f"took {seconds / 60:.0f} min (runs kept in `{args.work_dir}` and resumed; {args.jobs} at a time"
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
            "step; the tasks above 5% at some step):", "", *task_curves(best, args)] if getattr(args, "task_curves", False) else [])])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--data_dir", default=os.path.join("..", "shared", "data", "babi"))
    parser.add_argument("--subset", choices=sorted(PAPER), default="1k")
    parser.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated hparams_set:layout pairs")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--hparams", action="append", help="overrides for every model (e.g. layer_prepostprocess_dropout="
                        "0.3): runs of their own, a column of their own; repeat for several variants ('' for the "
                        "sets as they are)")
    parser.add_argument("--single_task", type=int, default=0, choices=range(21), metavar="N",
                        help="train on task N alone (babi_qa_<layout>_single_task<N>_<subset>); 0: all 20 jointly")
    parser.add_argument("--train_steps", type=int, default=20000)
    parser.add_argument("--checkpoint_every", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (each on one thread if > 1)")
    parser.add_argument("--ponder_plot", action="store_true", help="ponder time per fact of a qa3 story")
    parser.add_argument("--work_dir", default=os.path.join("benchmarks", "runs", "babi"))
    parser.add_argument("--report_only", action="store_true", help="train nothing: tabulate the runs of these "
                        "models and variants already in --work_dir at --train_steps (runs trained by separate "
                        "invocations, in one table)")
    parser.add_argument("--task_curves", action="store_true", help="decode the held-out questions at about 8 of each "
                        "kept run's checkpoints (and keep those of earlier calls) and tabulate the error of every "
                        "task above 5%% by step (when each task is learned)")
    parser.add_argument("--write", action="store_true", help="write the table into benchmarks/README.md")
    parser.add_argument("--section", help="README section to write (default babi_<subset>): comparisons of their "
                        "own beside the main table")
    parser.add_argument("--title", help="the section's heading (default: bAbI question answering (<subset>, joint "
                        "training))")
    args = parser.parse_args(argv)
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
    text = report(results, args, time.perf_counter() - began)
    print(text)
    if args.write:
        common.replace_section(args.section or "_".join(["babi", args.subset] + (
            [tasks_name(args)] if args.single_task else [])), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
