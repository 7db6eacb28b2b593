"""Input pipeline throughput: target tokens per second after each stage of the training pipeline, WMT-like text.

    .venv/bin/python benchmarks/input_pipeline.py [--newstest ../shared/data/newstest] [--copies 20]
                                                  [--seconds 8] [--reps 3] [--write]

Data: newstest2013 + newstest2014 English->German (6,003 sentence pairs of news, WMT's domain and lengths)
written `--copies` times over as the training text of a `translate_local` data directory, prepared by
`t2t-relpos-datagen` (shuffled TFRecord shards of text, a SentencePiece vocabulary of `--vocab_size`), in
`--work_dir`. Batching: `--hparams_set`'s token budget and bucket settings.

Stages, each the pipeline up to that point (a stage includes the ones above it), first from the text shards:

- read: the training records (TFRecord shards, interleaved, repeated), `translate._training_records`;
- parse: and the records parsed into source and target text, in batches (`shards.parse_pair_batches`);
- tokenize: and both sides tokenized with SentencePiece, EOS appended, 4096 pairs at a time:
  `problem.example_chunks("train")` on a data directory without ids shards (as prepared before they existed);
- pipeline, tokenizing: `pipeline.input_dataset` on that directory: the above, each chunk shuffled, examples
  longer than `max_length` dropped, bucketed by length, batched to the token budget, prefetched;

then from the ids shards that `t2t-relpos-datagen` writes once the vocabulary exists (`data.id_shards`):

- read ids: their records; parse ids: and parsed, 4096 at a time: `problem.example_chunks("train")`;
- pipeline: `pipeline.input_dataset` on the prepared directory, what the trainer consumes;

and the sequential part alone, fed from 50,000 examples held in memory (the most one pipeline can deliver
however many cores feed it):

- tail: `pipeline.batches_of` on chunks (shuffle within each chunk, filter, bucketing, batching);
- tail, one example per element: the same on the examples one at a time, as the pipeline ran before it took
  chunks (2026-11-23; a shuffle buffer of 1024, then chunks made again with `ragged_batch`);
- tail, group_by_window: one example per element, with the batching used before 2026-11-23 (a filter, then
  tf.data's `bucket_by_sequence_length`, which runs a function per example and builds a dataset per batch):
  the same batches (`tests/test_batching.py` checks it).

Each stage is drained by `Dataset.reduce` (counting examples and non-padding target tokens in the TensorFlow
runtime, no Python per element) for about `--seconds`; the stages are timed in interleaved repetitions and the
median is reported with the range. Tokens per second of wall time, and per CPU-second (the process's CPU time
over all its threads: what the work costs whatever the core count). Read and parse see no tokens; their rate
is given in examples and in target tokens at the tokenize stage's mean tokens per example. Without the
newstest files the script says where to put them and exits 0.
"""

import argparse
import gzip
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position

_HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_NEWSTEST = os.path.join(_HERE, "..", "..", "shared", "data", "newstest")
FILES = ("newstest2013", "newstest2014")
STAGES = ("read", "parse", "tokenize", "pipeline, tokenizing", "read ids", "parse ids", "pipeline", "tail",
          "tail, one example per element", "tail, group_by_window")
BATCH_STAGES = ("pipeline, tokenizing", "pipeline", "tail", "tail, one example per element", "tail, group_by_window")
# Tokenized examples held in memory for the "tail" stage.
TAIL_EXAMPLES = 50_000
# The figure: 8 GPUs at 20-60k target tokens/s each.
TARGET_TOKENS_PER_SECOND = 500_000


def missing_files(folder):
    return [f"{name}.{lang}.gz" for name in FILES for lang in ("en", "de")
            if not os.path.isfile(os.path.join(folder, f"{name}.{lang}.gz"))]


def _lines(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def prepare(args):
    """The translate_local data directory (prepared once; a finished one is reused)."""
    data_dir = os.path.join(args.work_dir, f"data_x{args.copies}_v{args.vocab_size}")
    raw = data_dir + "_raw"
    if not os.path.isfile(os.path.join(raw, "dev.tgt")):
        os.makedirs(raw, exist_ok=True)
        sides = {lang: sum((_lines(os.path.join(args.newstest, f"{name}.{lang}.gz")) for name in FILES), [])
                 for lang in ("en", "de")}
        for split, copies in (("train", args.copies), ("dev", 1)):
            for side, lang in (("src", "en"), ("tgt", "de")):
                lines = sides[lang] if split == "train" else sides[lang][:500]
                with open(os.path.join(raw, f"{split}.{side}"), "w", encoding="utf-8") as f:
                    for _ in range(copies):
                        f.write("\n".join(lines) + "\n")
        import json  # pylint: disable=import-outside-toplevel

        with open(os.path.join(raw, "translate_local.json"), "w", encoding="utf-8") as f:
            json.dump({"vocab_size": args.vocab_size}, f)
    log = os.path.join(args.work_dir, "datagen.log")
    common.run_cli("datagen", "--problem=translate_local", f"--data_dir={data_dir}", f"--tmp_dir={raw}", log=log)
    return data_dir


def text_only(data_dir):
    """A view of `data_dir` without its ids shards (symbolic links to the rest): the pipeline tokenizes there."""
    view = data_dir + "_text_only"
    os.makedirs(view, exist_ok=True)
    for name in os.listdir(data_dir):
        link = os.path.join(view, name)
        if ".ids" not in name and not os.path.lexists(link):
            os.symlink(os.path.abspath(os.path.join(data_dir, name)), link)
    return view


def stages(data_dir, hparams_set, seed=1):
    """{stage: dataset} for the STAGES, built from the library's own functions."""
    # pylint: disable=import-outside-toplevel,protected-access
    from t2t_relpos import registry
    from t2t_relpos.data import batching, id_shards, pipeline, shards
    from t2t_relpos.problems import translate

    problem = registry.problem("translate_local")
    hparams = registry.hparams(hparams_set)
    text_dir = text_only(data_dir)
    paths = shards.shard_paths(data_dir, problem.name, "train", "run t2t-relpos-datagen")
    ids = id_shards.usable_paths(data_dir, problem.name, "train", id_shards.vocab_digest(problem.vocab_path(data_dir)))
    if ids is None:
        raise SystemExit(f"input_pipeline: {data_dir} has no ids shards; delete it and run again")
    records = translate._training_records(paths, seed, 1, 0)
    id_records = translate._training_records(ids, seed, 1, 0)
    examples = problem.dataset("train", data_dir=data_dir, seed=seed).take(TAIL_EXAMPLES).cache()
    chunks = problem.example_chunks("train", data_dir=data_dir, seed=seed)
    chunks = chunks.take(-(-TAIL_EXAMPLES // batching.CHUNK_EXAMPLES)).cache()
    for memory in (examples, chunks):  # A whole pass writes a cache (a partial one would be thrown away).
        drain(memory, TAIL_EXAMPLES)
    return {
        "read": records,
        "parse": shards.parse_pair_batches(records),
        "tokenize": problem.example_chunks("train", data_dir=text_dir, seed=seed),
        "pipeline, tokenizing": pipeline.input_dataset(problem, hparams, "train", data_dir=text_dir, seed=seed),
        "read ids": id_records,
        "parse ids": problem.example_chunks("train", data_dir=data_dir, seed=seed),
        "pipeline": pipeline.input_dataset(problem, hparams, "train", data_dir=data_dir, seed=seed),
        "tail": pipeline.batches_of(chunks.repeat(), hparams, training=True, seed=seed, chunked=True),
        "tail, one example per element": pipeline.batches_of(examples.repeat(), hparams, training=True, seed=seed),
        "tail, group_by_window": _group_by_window_tail(examples.repeat(), hparams, seed),
    }, hparams


def _group_by_window_tail(examples, hparams, seed):
    """The tail as `pipeline.batches_of` built it before the vectorised bucketing (2026-11-22)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from t2t_relpos.data import batching, pipeline  # pylint: disable=import-outside-toplevel

    scheme = batching.batching_scheme(hparams.batch_size, hparams.max_length, hparams.min_length_bucket,
                                      hparams.length_bucket_step)
    examples = examples.shuffle(pipeline.DEFAULT_SHUFFLE_BUFFER, seed=seed)
    examples = examples.filter(lambda example: batching.example_length(example) <= hparams.max_length)
    batches = examples.bucket_by_sequence_length(
        batching.example_length, list(scheme.boundaries), list(scheme.batch_sizes),
        padding_values={"inputs": tf.constant(0, tf.int32), "targets": tf.constant(0, tf.int32)})
    return batches.prefetch(tf.data.AUTOTUNE)


def drain(dataset, number):
    """(examples, target tokens) of the first `number` elements, counted in the TensorFlow runtime."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    def count(element):  # (examples, tokens): parsed batches count their rows; records and examples one.
        if isinstance(element, dict) and element["targets"].dtype == tf.string:
            return tf.cast(tf.size(element["targets"]), tf.int64), tf.constant(0, tf.int64)
        if isinstance(element, dict) and isinstance(element["targets"], tf.RaggedTensor):  # Parsed ids.
            targets = element["targets"]
            return tf.cast(targets.nrows(), tf.int64), tf.math.count_nonzero(targets.flat_values, dtype=tf.int64)
        if isinstance(element, dict):
            return tf.constant(1, tf.int64), tf.math.count_nonzero(element["targets"], dtype=tf.int64)
        return tf.constant(1, tf.int64), tf.constant(0, tf.int64)

    total = dataset.take(number).reduce((tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
                                       lambda acc, element: tuple(a + b for a, b in zip(acc, count(element))))
    return int(total[0]), int(total[1])


def measure(datasets, seconds, reps):
    """{stage: [(elements, tokens, wall s, cpu s) per repetition]}, stages interleaved."""
    counts = {}
    for name, dataset in datasets.items():  # Calibrate: elements for about `seconds` (warming the stage up).
        number, took = 16, 0.0
        while took < 1.0:
            number *= 4
            began = time.perf_counter()
            drain(dataset, number)
            took = time.perf_counter() - began
        counts[name] = max(number, int(number * seconds / took))
    samples = {name: [] for name in datasets}
    for rep in range(reps):
        order = list(datasets)[rep % len(datasets):] + list(datasets)[:rep % len(datasets)]
        for name in order:
            wall, cpu = time.perf_counter(), time.process_time()
            elements, tokens = drain(datasets[name], counts[name])
            samples[name].append((elements, tokens, time.perf_counter() - wall, time.process_time() - cpu))
    return samples


def rates(samples):
    """Per stage: median and range of examples (or batches)/s, tokens/s wall, tokens per CPU-second."""
    out = {}
    for name, runs in samples.items():
        per_second = [e / w for e, _, w, _ in runs]
        wall = [t / w for _, t, w, _ in runs]
        cpu = [t / max(c, 1e-9) for _, t, _, c in runs]
        elements_per_cpu = [e / max(c, 1e-9) for e, _, _, c in runs]
        out[name] = {"elements": statistics.median(per_second), "tokens": statistics.median(wall),
                     "tokens_range": (min(wall), max(wall)), "tokens_cpu": statistics.median(cpu),
                     "elements_cpu": statistics.median(elements_per_cpu),
                     "tokens_per_element": sum(t for _, t, _, _ in runs) / max(1, sum(e for e, _, _, _ in runs))}
    return out


def format_table(result):
    per_example = result["tokenize"]["tokens_per_element"]
    rows = []
    for name in STAGES:
        r = result[name]
        if r["tokens"]:
            wall, low, high, cpu = r["tokens"], *r["tokens_range"], r["tokens_cpu"]
            note = ""
        else:  # read / parse: examples, shown in tokenize's tokens per example
            wall, cpu = r["elements"] * per_example, r["elements_cpu"] * per_example
            low = high = None
            note = " (examples x tokens per example)"
        unit = "batches/s" if name in BATCH_STAGES else "examples/s"
        rows.append([name, f"{r['elements']:,.0f} {unit}", f"{wall:,.0f}{note}",
                     "" if low is None else f"{low:,.0f}-{high:,.0f}", f"{cpu:,.0f}",
                     f"{wall / TARGET_TOKENS_PER_SECOND:.2f}"])
    return common.markdown_table(["stage (cumulative)", "elements/s", "target tokens/s, wall", "range",
                                  "target tokens per CPU-second", f"vs {TARGET_TOKENS_PER_SECOND:,}/s"], rows,
                                 align="lrrrrr")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--newstest", default=DEFAULT_NEWSTEST, help="Folder of newstest2013/2014 .en.gz/.de.gz.")
    parser.add_argument("--work_dir", default=os.path.join(_HERE, "runs", "input_pipeline"))
    parser.add_argument("--copies", type=int, default=20, help="Copies of the text in the training split.")
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--hparams_set", default="transformer_base", help="Its batch_size / bucket settings.")
    parser.add_argument("--seconds", type=float, default=8.0, help="About this long per timed drain.")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="Write the section into docs/studies/benchmark_runs.md.")
    args = parser.parse_args()
    common.refuse_uncommitted_writes(args)
    absent = missing_files(args.newstest)
    if absent:
        print(f"input_pipeline: skipped, the newstest files are not there (missing {', '.join(absent)}); pass "
              "--newstest=<folder of newstest2013/2014 .en.gz/.de.gz>")
        return 0
    began = time.perf_counter()
    data_dir = prepare(args)
    datasets, hparams = stages(data_dir, args.hparams_set)
    result = rates(measure(datasets, args.seconds, args.reps))
    table = format_table(result)
    # "\x20\x20" at a line's end: Markdown's line break (two spaces, which editors strip).
    text = f"""## Input pipeline: target tokens per second, stage by stage (WMT newstest text)

`{common.command_line()}` — {common.today()}, took {(time.perf_counter() - began) / 60:.0f} min.\x20\x20
Machine: {common.machine_description()}.

newstest2013 + 2014 English->German written {args.copies} times as `translate_local`'s training text,
SentencePiece vocabulary of {args.vocab_size}; `{args.hparams_set}` batching ({hparams.batch_size} tokens per batch,
max_length {hparams.max_length}). {result['tokenize']['tokens_per_element']:.1f} target tokens per example
(EOS included). Each stage includes those above it; {args.reps} interleaved drains of about {args.seconds:g} s
each, median (and range). Per CPU-second: over all the process's threads.

{table}
"""
    print(text)
    if args.write:
        common.replace_section("input_pipeline", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
