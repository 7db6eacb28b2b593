"""Does a trained bAbI model tell a relational fact from the same fact with its two entities swapped?

    .venv/bin/python benchmarks/babi_fact_order.py --data_dir DIR RUN_DIR[@STEP] [RUN_DIR[@STEP] ...] [--write]

qa17 (positional reasoning), qa18 (size reasoning) and qa19 (path finding) state relations whose direction only
word order carries: "The kitchen is north of the hallway." and "The hallway is north of the kitchen." are the
same bag of words. The facts layout embeds a fact as the sum of its words under learned per-position masks
(`FactEmbedding`); masks that start at ones start as a bag of words and must learn to tell the two apart. For
every distinct relational fact of a task's test stories ("The A <relation> the B."), the table gives the cosine
similarity between the fact's vector and its swapped twin's under the run's embedding, as the mean over the facts:
1.00 means the model cannot tell them apart. `DIR` is the data directory the runs were trained with (for 10k runs
of `benchmarks/babi.py`, `<work_dir>/10k/data`, where it stood in for the missing qa3 file); `@STEP` picks a
checkpoint (default: the newest).
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position

TASKS = {17: "positional reasoning", 18: "size reasoning", 19: "path finding"}
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


def measure(run, data_dir):
    """{task: (mean cosine similarity, facts)} of a run (`RUN_DIR[@STEP]`), and the checkpoint's step."""
    from t2t_relpos.layers.fact_embedding import FactEmbedding  # pylint: disable=import-outside-toplevel
    from t2t_relpos.problems import babi_text  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import runs  # pylint: disable=import-outside-toplevel

    run_dir, _, step = run.partition("@")
    model, problem, _, path = runs.load(run_dir, step and os.path.join(run_dir, f"ckpt-{step}"), data_dir)
    embed = next(layer for layer in model._flatten_layers() if isinstance(layer, FactEmbedding))  # pylint: disable=protected-access
    encoder = problem.feature_encoders(data_dir)["inputs"]
    result = {}
    for task in TASKS:
        facts = relational_facts(babi_text.read_task(data_dir, problem.subset, task, "test"))
        result[task] = (float(np.mean(swap_similarities(embed, encoder, facts))), len(facts))
    return result, path.rsplit("-", 1)[-1]


def labels(runs):
    """Each run's folder name, with its parent's where two runs share a name (`single_task17/<set>_facts_s1`)."""
    paths = [os.path.normpath(run.partition("@")[0]) for run in runs]
    names = [os.path.basename(path) for path in paths]
    return [os.path.join(os.path.basename(os.path.dirname(path)), name) if names.count(name) > 1 else name
            for path, name in zip(paths, names)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("runs", nargs="+", help="run directories, each optionally @STEP")
    parser.add_argument("--data_dir", default=os.path.join("..", "shared", "data", "babi"))
    parser.add_argument("--write", action="store_true", help="write the table into benchmarks/README.md")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.data_dir):
        print(f"bAbI data not found in {args.data_dir} (pass --data_dir); skipping.", file=sys.stderr)
        return 0
    began = time.perf_counter()
    rows = []
    for run, label in zip(args.runs, labels(args.runs)):
        result, step = measure(run, args.data_dir)
        rows.append([f"`{label}`", step]
                    + [f"{result[t][0]:.3f} ({result[t][1]})" for t in TASKS])
    text = "\n".join([
        "## bAbI: do the fact vectors tell a relation from its reverse?", "",
        f"`{common.command_line()}` — {common.today()}, took {time.perf_counter() - began:.0f} s.  ",
        f"Machine: {common.machine_description()}.", "",
        "Cosine similarity between a relational fact's vector and that of the same fact with its two entities "
        "swapped (\"The kitchen is north of the hallway.\" / \"The hallway is north of the kitchen.\"), mean over "
        "the distinct such facts of the task's test stories (their number in brackets); 1.000: indistinguishable.",
        "", common.markdown_table(["run", "step", *(f"qa{t} ({name})" for t, name in TASKS.items())], rows,
                                  align="lr" + "r" * len(TASKS))])
    print(text)
    if args.write:
        common.replace_section("babi_fact_order", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
