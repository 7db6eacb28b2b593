"""bAbI 10k through a curriculum: the stages that took the fixed-step UT to 0.57% test error, as one command.

    .venv/bin/python benchmarks/babi_curriculum.py --data_dir ../shared/data/babi [--subset 10k]
        [--hparams_set universal_transformer_babi_rel] [--hparams act_type=basic] [--seed 1]
        [--work_dir /work/runs/babi_curriculum] [--stages N] [--write]

Joint training from scratch leaves qa16, qa17 and qa19 at chance (`benchmarks/babi.py`); a model that learns qa17
alone first, then sees all tasks with the hard ones repeated, and qa16 first with two lookups, learns all 20
(`benchmarks/babi_continue.py`, where the stages were found one at a time). The stages (`STAGES`):

    0  qa17 alone (the joint problem, every other task at `task_repeats` 0), from scratch
    1  all 20 tasks, qa16 x4, qa17 x8, qa19 x8
    2  the same, further
    3  all 20, qa16 asked with two lookups (`benchmarks/babi_hops.py`'s rewrite of its own stories), x8
    4  the same, qa16 x24
    5  all 20, qa16 as it is, x8 (qa17 and qa19 x8)

Stage 0 is a run of the real trainer over facts (`babi_qa_facts_all_tasks_<subset>`); each later stage is a
`babi_continue.py` continuation of the one before, weights and Adam state carried over. Every stage's directory in
`--work_dir` is `<hparams_set>[_<hparams>]_s<seed>_<k>_<stage>`, and rerunning the command resumes a chain where
it stopped (a finished stage is read back, an unfinished one resumes from its last checkpoint). The table gives
each stage's validation error at its end (mean, and the tasks above 5%) and the test error of its last checkpoint.

This is not the paper's protocol (joint training from the start), and the two-lookup questions are knowledge of
the task that the paper's model was not given; the README says so beside every figure.
"""

import argparse
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import babi  # noqa: E402  pylint: disable=wrong-import-position
import babi_continue  # noqa: E402  pylint: disable=wrong-import-position
import common  # noqa: E402  pylint: disable=wrong-import-position

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
    data_dir, _ = babi.complete_data_dir(args)
    repeats = "task_repeats=[" + ",".join(f"{t}:0" for t in babi_text.TASKS if t != 17) + "]"
    began = time.perf_counter()
    common.run_cli("trainer", f"--problem=babi_qa_facts_all_tasks_{args.subset}", f"--hparams_set={args.hparams_set}",
                   "--hparams=" + ",".join([repeats] + ([args.hparams] if args.hparams else [])),
                   f"--data_dir={data_dir}", f"--output_dir={out}", f"--train_steps={steps}", "--eval_steps=20",
                   f"--checkpoint_every={min(steps, 1000)}", "--log_every=500", f"--seed={args.seed}",
                   log=out + ".log", threads=args.threads)
    result = {"name": name, "from_step": 0, "steps": steps, "tasks": "17", "task_repeats": "", "freeze": "",
              "qa16_hops": 3, "training_minutes": round((time.perf_counter() - began) / 60, 1),
              "start": {}, "end": babi.checkpoint_errors(out, steps, data_dir, args.threads),
              "test_end": babi.checkpoint_errors(out, steps, data_dir, args.threads, split="test")}
    with open(saved, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return result


def run(args):
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
        results.append(babi_continue.run(argparse.Namespace(
            from_run=os.path.join(args.work_dir, names[k - 1]), from_step=previous["from_step"] + previous["steps"],
            name=names[k], data_dir=args.data_dir, subset=args.subset, tasks="all", task_repeats=repeats,
            freeze="", qa16_hops=hops, steps=steps[k], seed=args.seed, threads=args.threads,
            work_dir=args.work_dir)))
    return results


def report(args, results, seconds):
    rows = []
    for k, ((_, _, _, _, trains), r) in enumerate(zip(STAGES, results)):
        end = {int(t): e for t, e in r["end"].items()}
        test = {int(t): e for t, e in r["test_end"].items()}
        rows.append([str(k), f"{r['from_step']} -> {r['from_step'] + r['steps']}", trains,
                     f"{sum(end.values()) / len(end):.2f}", babi_continue.failing_text(end),
                     f"{sum(test.values()) / len(test):.2f}", str(sum(e > babi.FAILED_ERROR for e in test.values())),
                     f"{r['training_minutes']:.0f}"])
    last = {int(t): e for t, e in results[-1]["test_end"].items()}
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
        babi.paper_line(args.subset)])


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=os.path.join("..", "shared", "data", "babi"))
    parser.add_argument("--subset", choices=("1k", "10k"), default="10k")
    parser.add_argument("--hparams_set", default="universal_transformer_babi_rel")
    parser.add_argument("--hparams", default="", help="overrides of the set, e.g. act_type=basic")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stage_steps", default="", help=f"{len(STAGES)} comma-separated step counts (default: "
                        + ",".join(str(s[1]) for s in STAGES) + ")")
    parser.add_argument("--stages", type=int, default=0, help="run (and report) only the first N stages, e.g. "
                        "what fits a session; rerunning with more goes on from there")
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow threads per process (0: one per core)")
    parser.add_argument("--work_dir", default=os.path.join("benchmarks", "runs", "babi_curriculum"))
    parser.add_argument("--write", action="store_true", help="write the table into benchmarks/README.md")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if not 0 <= args.stages <= len(STAGES):
        raise SystemExit(f"error: --stages must be 1 to {len(STAGES)} (0: all), got {args.stages}")
    if babi.data_missing(args):
        return 0
    began = time.perf_counter()
    text = report(args, run(args), time.perf_counter() - began)
    print(text)
    if args.write:
        common.replace_section(f"babi_curriculum_{args.subset}_{chain_name(args)}", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
