"""bAbI qa16 asked with one, two or three lookups: how many reasoning hops a model learns, through the real CLIs.

    .venv/bin/python benchmarks/babi_hops.py --data_dir ../shared/data/babi [--subset 10k]
        [--models universal_transformer_babi_rel:facts] [--hops 1,2,3] [--train_steps 8000] [--jobs 2]
        [--report_only] [--write]

qa16 (basic induction) asks "What color is Greg?" of a story where Greg is a swan and only other swans' colours
are stated: three lookups (Greg -> swan -> another swan -> its colour). Every joint run of `benchmarks/babi.py`
left it near chance, training questions included. This script asks the same stories in two easier ways and
trains each version alone (`benchmarks/babi.py --single_task 16`, so the trainer and decoder are the real ones):

    1 hop    "What color is Julius?" of a person whose colour the story states, which one changing from story to
             story (not the last stated: that could be answered without reading the name)
    2 hops   "What color is swan?" for the queried person's species (answer as in the task: the colour stated
             for another swan; a story states at most one colour per species, except where the task's answer
             is the most recent one)
    3 hops   the task as it is

The rewritten qa16 files go to `<work_dir>/qa16_hops<k>/data`, beside links to every other file (the problems
build their vocabularies from all 20 tasks); the 3-hop runs are `benchmarks/babi.py --single_task 16`'s own runs
in `<work_dir>`. The table has qa16's test and validation error per version and model, and the trainer's validation
accuracy by step: a version a model learns rises, one it cannot learn stays flat.
"""

import argparse
import concurrent.futures
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import babi  # noqa: E402  pylint: disable=wrong-import-position
import common  # noqa: E402  pylint: disable=wrong-import-position

TASK = 16
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
            if name.startswith(f"qa{TASK}_"):
                split = "train" if "_train." in name else "test"
                examples = babi_text.read_task(args.data_dir, subset, TASK, split)
                if len({e.story_index for e in examples}) != len(examples):
                    raise ValueError(f"{name}: a story with several questions; this script expects one each")
                with open(target.removesuffix(".gz"), "w", encoding="utf-8") as f:
                    f.write(task_file_text(rewrite(e, hops) for e in examples))
            elif not os.path.lexists(target):
                os.symlink(os.path.abspath(os.path.join(source, name)), target)
    return root


def train(args, hops, model):
    """Trains and decodes one (version, model) with `benchmarks/babi.py`; its result."""
    data_dir = args.data_dir if hops == 3 else version_data_dir(args, hops)
    work_dir = args.work_dir if hops == 3 else os.path.join(args.work_dir, f"qa16_hops{hops}")
    babi.main(["--data_dir", data_dir, "--subset", args.subset, "--single_task", str(TASK), "--models", model,
               "--train_steps", str(args.train_steps), "--jobs", str(args.jobs), "--work_dir", work_dir]
              + (["--report_only"] if args.report_only else []))
    hparams_set, layout = model.split(":")
    run_dir = os.path.join(babi.runs_dir(work_dir, args.subset, TASK), babi.run_name(hparams_set, layout, 1))
    return run_dir, babi.load_result(os.path.join(run_dir, "result.json"))


def report(done, args, seconds):
    steps = sorted({s for run_dir, _ in done.values() for s in common.event_scalars(run_dir + "/eval", "accuracy")})
    shown = [s for s in steps if s in (500, 1000, 2000, 2500, 3000, 4000, 6000) or s == steps[-1]]
    rows = []
    for (hops, model), (run_dir, result) in sorted(done.items()):
        curve = common.event_scalars(run_dir + "/eval", "accuracy")
        rows.append([VERSIONS[hops], f"`{model.split(':')[0]}`", f"{result['test'][TASK]:.1f}",
                     f"{result['eval'][TASK]:.1f}", *(f"{curve[s]:.2f}" if s in curve else "" for s in shown),
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--data_dir", default=os.path.join("..", "shared", "data", "babi"))
    parser.add_argument("--subset", choices=("1k", "10k"), default="10k")
    parser.add_argument("--models", default="universal_transformer_babi_rel:facts")
    parser.add_argument("--hops", default="1,2,3")
    parser.add_argument("--train_steps", type=int, default=8000)
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (each on one thread if > 1)")
    parser.add_argument("--work_dir", default=os.path.join("benchmarks", "runs", "babi"))
    parser.add_argument("--report_only", action="store_true", help="train nothing: tabulate the finished runs")
    parser.add_argument("--write", action="store_true", help="write the table into benchmarks/README.md")
    args = parser.parse_args(argv)
    if babi.data_missing(args):
        return 0
    began = time.perf_counter()
    plan = [(int(h), m) for h in args.hops.split(",") for m in args.models.split(",")]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        done = dict(zip(plan, pool.map(lambda run: train(args, *run), plan)))
    text = report(done, args, time.perf_counter() - began)
    print(text)
    if args.write:
        common.replace_section(f"babi_qa16_hops_{args.subset}", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
