"""bAbI: continue a trained run on other tasks, parts of the model frozen, and see what the new updates undo.

    .venv/bin/python benchmarks/babi_continue.py --from_run RUN --from_step 4000 --name NAME \
        --data_dir ../shared/data/babi [--subset 10k] [--tasks all | 1,17] [--task_repeats 17:8] \
        [--freeze encoder[,embedding]] [--qa16_hops 2] [--steps 1000] [--work_dir /work/runs/babi_continue] [--write]

A run trained on some tasks (e.g. qa17 alone, through the joint problem with the other tasks at `task_repeats`
0) is copied at `--from_step` into `<work_dir>/<NAME>`: weights, Adam state and step, so the learning-rate
schedule goes on where it was. The copy's `task_repeats` becomes `--tasks` (the others at 0) plus
`--task_repeats`, its `freeze_layers` becomes `--freeze` (the model's top-level layers: `embedding`, `encoder`,
`classifier` for the bAbI models), and the real trainer runs it `--steps` further. The decoder then gives every
task's validation error at both ends. A task learned at the start and lost at the end was undone by the
other tasks' updates, through the layers that were left trainable.

The table lists every continuation in `<work_dir>` (each kept in `<NAME>/continue.json`; rerunning a name
reuses it): the tasks learned at the start (<= 5% validation error), their errors at the end, and the mean over
all 20 tasks at both ends.
"""

import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import babi  # noqa: E402  pylint: disable=wrong-import-position
import babi_hops  # noqa: E402  pylint: disable=wrong-import-position
import common  # noqa: E402  pylint: disable=wrong-import-position

LEARNED = babi.FAILED_ERROR  # % validation error: a task at or below it (not failed) counts as learned.


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
        record = json.load(f)
    trained = babi_text.TASKS if args.tasks == "all" else [int(t) for t in args.tasks.split(",")]
    record["hparams"]["task_repeats"] = [f"{t}:0" for t in babi_text.TASKS if t not in trained] + [
        item for item in args.task_repeats.split(",") if item]
    record["hparams"]["freeze_layers"] = [name for name in args.freeze.split(",") if name]
    with open(os.path.join(out, "hparams.json"), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)


def run(args):
    out = os.path.join(args.work_dir, args.name)
    saved = os.path.join(out, "continue.json")
    end = args.from_step + args.steps
    if os.path.exists(saved):
        with open(saved, encoding="utf-8") as f:
            result = json.load(f)
        args = argparse.Namespace(**{**vars(args), "qa16_hops": result.get("qa16_hops", 3)})  # As it was trained.
    data_dir, _ = babi.complete_data_dir(args) if args.qa16_hops == 3 else _hops_data_dir(args)
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
                  "start": babi.checkpoint_errors(out, args.from_step, data_dir, args.threads),
                  "end": babi.checkpoint_errors(out, end, data_dir, args.threads),
                  "training_minutes": round(minutes, 1)}
    if "test_end" not in result:  # Continuations saved before test errors were kept get them on a rerun.
        result["test_end"] = babi.checkpoint_errors(out, result["from_step"] + result["steps"], data_dir,
                                                    args.threads, split="test")
    with open(saved, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return result


def _hops_data_dir(args):
    """The data directory with qa16 rewritten to `args.qa16_hops` lookups, the other tasks' files linked."""
    root = babi_hops.version_data_dir(args, args.qa16_hops)
    # Training files missing from the subset (10k qa3) are linked in from the 1k copy beside them, in place.
    return babi.complete_data_dir(argparse.Namespace(data_dir=root, subset=args.subset,
                                                     work_dir=os.path.dirname(root)))


def _mean(errors):
    return sum(errors.values()) / max(len(errors), 1)


def report(results):
    """A markdown table of continuations (`run`'s results)."""
    rows = []
    for r in results:
        start = {int(t): e for t, e in r["start"].items()}
        end = {int(t): e for t, e in r["end"].items()}
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from_run", required=True)
    parser.add_argument("--from_step", type=int, required=True)
    parser.add_argument("--name", required=True, help="the continuation's directory in --work_dir")
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--subset", default="10k", choices=("1k", "10k"))
    parser.add_argument("--tasks", default="all", help="'all' or a comma list of the tasks trained")
    parser.add_argument("--task_repeats", default="", help="more task_repeats items, e.g. 17:8")
    parser.add_argument("--freeze", default="", help="comma list of top-level layers left untrained")
    parser.add_argument("--qa16_hops", type=int, default=3, choices=(1, 2, 3),
                        help="qa16 asked with this many lookups (3: as it is; see benchmarks/babi_hops.py)")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow threads per process (0: one per core)")
    parser.add_argument("--work_dir", default="/work/runs/babi_continue")
    parser.add_argument("--write", action="store_true", help="replace the babi_continue section of README.md")
    args = parser.parse_args(argv)
    run(args)
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
        report(results)])
    print(text)
    if args.write:
        common.replace_section("babi_continue", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
